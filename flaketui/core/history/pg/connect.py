"""Connect to the server named by a `postgresql://` URL, with one-line errors that never
show its password.

Credentials come from the URL, libpq's environment variables (PGPASSWORD, PGUSER, ...) or its
password file (~/.pgpass, PGPASSFILE): the URL is handed to libpq as it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from flaketui.core.errors import HistoryError
from flaketui.core.history.address import mask_url, scrub

if TYPE_CHECKING:
    import psycopg

CONNECT_TIMEOUT_S = 10
EXTRA_HINT = "install the PostgreSQL extra: pip install 'flaketui[postgres]'"


class ServerError(HistoryError):
    """A history server that cannot be reached or used; the message masks the password.
    transient: whether a retry may succeed (see `transient`)."""

    def __init__(self, message: str, *, transient: bool = True) -> None:
        super().__init__(message)
        self.transient = transient


def driver() -> Any:
    """The psycopg module; a one-line error naming the extra when it is not installed."""
    try:
        import psycopg
    except ImportError:
        raise ServerError(f"a postgresql:// history needs psycopg 3: {EXTRA_HINT}") from None
    return psycopg


def _first_line(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else "unknown error"


def server_error(url: str, exc: BaseException, doing: str) -> ServerError:
    """The one-line error for a driver exception met while `doing` something on the server."""
    return ServerError(
        f"{mask_url(url)}: {doing} failed ({scrub(_first_line(str(exc)), url)})",
        transient=transient(exc),
    )


# SQLSTATE classes a retry may get past: the connection (08), a conflict with another
# transaction (40: serialization failure, deadlock), resources (53), an operator or a shutdown
# (57); and a lock not available (55P03). Any other error (a constraint, a limit such as an
# index row too large, a missing table) comes back the same on every retry.
TRANSIENT_CLASSES = ("08", "40", "53", "57")
TRANSIENT_STATES = ("55P03",)


def transient(exc: BaseException) -> bool:
    """Whether a retry may succeed: no SQLSTATE (the connection was lost) or a transient one."""
    state = getattr(exc, "sqlstate", None)
    return state is None or state[:2] in TRANSIENT_CLASSES or state in TRANSIENT_STATES


@contextmanager
def server_errors(url: str, doing: str, *, note: str | None = None) -> Iterator[None]:
    """Turn driver exceptions raised inside into ServerError (password masked). note: what the
    failure left as it was ("nothing was recorded"), said in brackets after `doing`, with
    "retry" when a retry may succeed."""
    psycopg = driver()
    try:
        yield
    except psycopg.Error as exc:
        if note is not None:
            doing = f"{doing} ({note}; retry)" if transient(exc) else f"{doing} ({note})"
        raise server_error(url, exc, doing) from None


def connect(url: str, *, migrate: bool = True) -> psycopg.Connection[Any]:
    """Open a connection (autocommit: writes go through `conn.transaction()`) and bring the
    server's schema up to date."""
    pg_driver = driver()
    try:
        conn: psycopg.Connection[Any] = pg_driver.connect(
            url, connect_timeout=CONNECT_TIMEOUT_S, application_name="flaketui", autocommit=True
        )
    except pg_driver.Error as exc:
        raise server_error(url, exc, "connecting") from None
    except Exception as exc:  # a malformed URL: psycopg.ProgrammingError or ValueError
        raise ServerError(
            f"{mask_url(url)}: not a usable PostgreSQL URL ({scrub(_first_line(str(exc)), url)})"
        ) from None
    if migrate:
        from flaketui.core.history.pg.schema import migrate as migrate_schema

        try:
            with server_errors(url, "preparing the schema"):
                migrate_schema(conn)
        except BaseException:
            conn.close()
            raise
    return conn
