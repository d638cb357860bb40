"""Histories and connections a test opens, each closed when the test that opened it ends.

A sqlite3 connection sits in a reference cycle (through its statement cache): one left open
holds its file until the garbage collector finds it, at any later moment of the process, and
Python 3.13 warns of each (ResourceWarning: unclosed database). Tests open histories and
connections through these functions, which take the arguments of flaketui's and sqlite3's,
and tests/conftest.py closes what a test opened as it ends. One opened outside a test (by a
fixture of a wider scope, or in a child process, which runs no test) or in another thread is
refused: close it where it is opened (contextlib.closing, or `connected`); a child opens with
flaketui's own functions and leaves its connections to its exit. A test
that opens many (each example of a Hypothesis test) closes them as it goes with
`closed_at_exit`.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flaketui.core.history import store

if TYPE_CHECKING:
    import sqlite_utils

# The connections opened since the innermost `closed_at_exit` began, and its thread.
_opened: tuple[ExitStack, int] | None = None


@contextmanager
def closed_at_exit() -> Iterator[None]:
    """Close every connection opened through this module inside the block as it ends."""
    global _opened
    outer = _opened
    with ExitStack() as stack:
        _opened = (stack, threading.get_ident())
        try:
            yield
        finally:
            _opened = outer


def _kept(conn: sqlite3.Connection) -> None:
    if _opened is None or _opened[1] != threading.get_ident():
        conn.close()
        raise RuntimeError(
            "a connection opened outside a test or in another thread is not closed for it:"
            " close it where it is opened (contextlib.closing)"
        )
    _opened[0].callback(conn.close)


def open_history(path: str | Path, **options: Any) -> sqlite_utils.Database:
    """flaketui's open_history (the same options), closed when the test ends."""
    db = store.open_history(path, **options)
    _kept(db.conn)
    return db


def open_connection(path: str | Path, **options: Any) -> sqlite3.Connection:
    """flaketui's open_connection (the same options), closed when the test ends."""
    conn = store.open_connection(path, **options)
    _kept(conn)
    return conn


def sqlite_connect(database: str | Path, **kwargs: Any) -> sqlite3.Connection:
    """sqlite3.connect, closed when the test ends."""
    conn = sqlite3.connect(database, **kwargs)
    _kept(conn)
    return conn


@contextmanager
def connected(database: str | Path, **kwargs: Any) -> Iterator[sqlite3.Connection]:
    """sqlite3.connect for a `with` block, which commits its transaction (rolls it back on an
    error) and closes the connection on leaving: `with sqlite3.connect(...)` only ends the
    transaction and leaves the connection open."""
    with closing(sqlite3.connect(database, **kwargs)) as conn, conn:
        yield conn
