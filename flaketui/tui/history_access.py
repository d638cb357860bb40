"""How the app opens the history: readers that leave the file untouched, writers only to write."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from flaketui.core.errors import FlaketuiError, HistoryError
from flaketui.core.history import journal, store
from flaketui.core.history.dbhandle import Reader
from flaketui.core.history.store import (
    SCHEMA_VERSION,
    SQLITE_MAGIC,
    history_file,
    is_read_only,
    open_connection,
    open_error,
    read_header,
    reads_in_place,
    schema_version,
    uses_wal,
)
from flaketui.core.rollups.pending import waiting_rows


def _pending_wal(path: Path) -> bool:
    """A non-empty -wal beside the file: commits that live only there until a checkpoint."""
    try:
        return path.with_name(path.name + "-wal").stat().st_size > 0
    except OSError:
        return False


def _check_file(path: Path) -> None:
    """The core's one-line refusals of a missing, empty, directory, pipe, device or non-SQLite
    path."""
    if path.is_dir():
        raise HistoryError(f"{path}: is a directory, not a history file")
    store.refuse_special_file(path)
    try:
        head = read_header(path, len(SQLITE_MAGIC))  # never closes a descriptor of the file
    except FileNotFoundError:
        message = f"{path}: does not exist; ingest a report first (flaketui ingest)"
        raise HistoryError(message) from None
    except OSError as exc:
        raise HistoryError(f"{path}: cannot read ({exc.strerror})") from exc
    if not head:
        raise HistoryError(f"{path}: is empty; ingest a report first (flaketui ingest)")
    if head != SQLITE_MAGIC:
        raise HistoryError(f"{path}: not a SQLite database")


def _connect(path: Path, how: str) -> Reader:
    """A connection in one of three ways (see open_reader), refusing other schema versions."""
    conn: sqlite3.Connection | None = None
    try:
        if how == "plain":
            conn = sqlite3.connect(
                str(path), timeout=store.BUSY_TIMEOUT_MS / 1000, isolation_level=None
            )
            conn.execute("PRAGMA query_only = ON")
        else:
            query = "mode=ro&immutable=1" if how == "immutable" else "mode=ro"
            conn = sqlite3.connect(
                f"{path.resolve().as_uri()}?{query}",
                uri=True,
                timeout=store.BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
            )
        conn.execute(f"PRAGMA busy_timeout = {store.BUSY_TIMEOUT_MS}")
        version = schema_version(conn)
    except sqlite3.DatabaseError as exc:
        # Closed at once: while a connection that failed (one that met another process's
        # write half done, say) stays open, every later reader in this process fails alike.
        if conn is not None:
            conn.close()
        raise open_error(path, exc) from exc
    if version < SCHEMA_VERSION:
        conn.close()
        store.upgrade_older(path)  # an older history keeps working once upgraded in place
        return _connect(path, how)
    if version != SCHEMA_VERSION:
        conn.close()
        newer = version > SCHEMA_VERSION
        raise HistoryError(
            f"{path}: history schema version {version} is newer than this flaketui supports "
            f"({SCHEMA_VERSION}); upgrade flaketui"
            if newer
            else f"{path}: history needs an upgrade; run any writing command (e.g. flaketui ingest)"
        )
    # No sqlite-utils here: it imports pandas and numpy when installed, 0.1-1 s a reader
    # does not need (scoring only queries the connection).
    return Reader(conn)


def check_history(path: Path) -> None:
    """Refuse a missing, non-SQLite, newer-schema or unreadable history before any screen.

    Attempts a pytest recorder journaled are stored here (open_reader), where a history this
    process may not write is refused in one line. Runs an ingest left waiting are not: the
    app's first read files and folds them in its own thread, after the ranking kept from the
    last opening is on screen (at 10 M results a fold of a few runs takes over a second).
    """
    # The app's own readers: they leave a WAL-mode history without stray -wal/-shm files.
    _check_file(path)
    db = _open_reader(path)
    try:
        attempts = journal.waiting(db.conn)
    finally:
        db.conn.close()
    if attempts:
        open_reader(path).conn.close()


def tidy_sidecars(path: Path) -> None:
    """Remove a WAL-mode history's -wal and -shm files that no connection needs any more.

    A `mode=ro` reader opened while the file still used a rollback journal (the app's first
    read of a copied sample, say) goes on reading after a write switched the file to WAL, and
    if it is the last to close it cannot remove the sidecar files. An ordinary connection
    opened and closed once all of the app's readers are done removes them, as the last
    connection to close does; one another process still holds open keeps them, as it must.
    """
    if not (uses_wal(path) and (path.with_name(path.name + "-wal")).exists()):
        return
    if is_read_only(path):
        return
    with contextlib.suppress(FlaketuiError, sqlite3.Error):
        _connect(path, "plain").conn.close()


def open_reader(path: Path) -> Reader:
    """A connection that only reads, consistent with writers, leaving no trace when it can.

    - a WAL-mode file we may write: an ordinary connection with `query_only`, otherwise
      `mode=ro`, as the commands read (store.reads_in_place says why);
    - `immutable=1` only when `mode=ro` cannot open a file nobody may write (a WAL-mode file
      whose -shm cannot be created): then there is nothing to coordinate with.
    """
    _check_file(path)
    db = _open_reader(path)
    try:
        attempts = journal.waiting(db.conn)
        waiting = bool(attempts) or waiting_rows(db.conn)
    except BaseException:
        db.conn.close()  # a damaged page, say: the error goes on, the connection does not
        raise
    if not waiting:
        return db
    # Attempts a pytest recorder journaled, and the per-test rows of runs an ingest left
    # waiting, are in no table a reader reads yet: a writer stores and files them first. A
    # history this process may not write is read from a filed private copy, or refused while
    # recorded attempts wait (store.fold_deferred), and so is one git tracks while only runs
    # wait: opening a committed history leaves the work tree as it is (flaketui.tui.trial).
    # The connection that folds is the last to close, so the fold's pages are in the file and
    # the WAL gone before the reader opens: a watch that notes the history's state then sees
    # no change of the reader's own making (loaders.history_stamp).
    from flaketui.tui.trial import tracked_by_git  # it reads through this module

    in_place = bool(attempts) or not tracked_by_git(path)
    db.conn.close()
    conn = open_connection(path, create=False, readonly=True, fold_in_place=in_place)
    if store.is_filed_copy(conn):
        return Reader(conn)
    conn.close()
    return _open_reader(path)


def _open_reader(path: Path) -> Reader:
    if reads_in_place(path):
        return _connect(path, "plain")
    try:
        return _connect(path, "ro")
    except HistoryError:
        if not is_read_only(path) or _pending_wal(path):
            raise
        return _connect(path, "immutable")


@contextmanager
def reading(path: Path) -> Iterator[Reader]:
    """A reader owned by the calling thread, closed on exit (see one_line_problems)."""
    with one_line_problems(path):
        db = open_reader(path)
        try:
            yield db
        finally:
            db.conn.close()


@contextmanager
def writing(path: Path) -> Iterator[Reader]:
    """A writable connection owned by the calling thread, closed on exit (writes only; see
    one_line_problems)."""
    with one_line_problems(path), history_file(path, create=False) as db:
        yield db


@contextmanager
def one_line_problems(path: Path) -> Iterator[None]:
    """A SQLite error met in the block that is the environment's (a damaged page, a lock held
    past the busy timeout, an I/O error) leaves as the one-line HistoryError every screen
    shows: a screen's worker would otherwise end with it, and the screen wait for its data."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        problem = store.history_problem(path, exc)
        if problem is None:
            raise
        raise problem from exc
