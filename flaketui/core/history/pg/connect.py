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
    """A history server that cannot be reached or used; the message masks the password."""


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
    return ServerError(f"{mask_url(url)}: {doing} failed ({scrub(_first_line(str(exc)), url)})")


@contextmanager
def server_errors(url: str, doing: str) -> Iterator[None]:
    """Turn driver exceptions raised inside into ServerError (password masked)."""
    psycopg = driver()
    try:
        yield
    except psycopg.Error as exc:
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
