"""Histories and connections a test opens, each closed when the test that opened it ends.

A sqlite3 connection sits in a reference cycle (through its statement cache): one left open
holds its file until the garbage collector finds it, at any later moment of the process, and
Python 3.13 warns of each (ResourceWarning: unclosed database). Tests open histories and
connections through these functions, which take the arguments of flaketui's and sqlite3's,
and tests/conftest.py closes what a test opened as it ends; a process the test forked leaves
its own to its exit. One opened outside a test (by a fixture of a wider scope) or in another
thread is refused: close it where it is opened (contextlib.closing, or `connected`). A test
that opens many (each example of a Hypothesis test) closes them as it goes with
`closed_at_exit`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flaketui.core.history import store

if TYPE_CHECKING:
    import sqlite_utils

# The connections opened since the innermost `closed_at_exit` began, its process and thread.
_opened: tuple[ExitStack, int, int] | None = None


@contextmanager
def closed_at_exit() -> Iterator[None]:
    """Close every connection opened through this module inside the block as it ends."""
    global _opened
    outer = _opened
    with ExitStack() as stack:
        _opened = (stack, os.getpid(), threading.get_ident())
        try:
            yield
        finally:
            _opened = outer


def _kept(conn: sqlite3.Connection) -> None:
    if _opened is not None and _opened[1] != os.getpid():
        return  # a forked child's: it never runs the test's end
    if _opened is None or _opened[2] != threading.get_ident():
        conn.close()
        raise RuntimeError(
            "a connection opened outside a test or in another thread is not closed for it:"
            " close it where it is opened (contextlib.closing)"
        )
    _opened[0].callback(conn.close)


def open_history(
    path: str | Path, *, create: bool = True, readonly: bool = False, fold_later: bool = False
) -> sqlite_utils.Database:
    """flaketui's open_history, closed when the test ends."""
    db = store.open_history(path, create=create, readonly=readonly, fold_later=fold_later)
    _kept(db.conn)
    return db


def open_connection(
    path: str | Path,
    *,
    create: bool = True,
    readonly: bool = False,
    fold: bool = True,
    fold_later: bool = False,
    fold_in_place: bool = True,
) -> sqlite3.Connection:
    """flaketui's open_connection, closed when the test ends."""
    conn = store.open_connection(
        path,
        create=create,
        readonly=readonly,
        fold=fold,
        fold_later=fold_later,
        fold_in_place=fold_in_place,
    )
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
