"""Open, create and migrate the SQLite history (schema versioned by `PRAGMA user_version`)."""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from flaketui.core.errors import HistoryError, HistoryLockedError
from flaketui.core.history import journal
from flaketui.core.history.dbhandle import Connected, Reader
from flaketui.core.words import plural

# Says when an upgrade of an existing history starts: on a big one it takes a while, once. The
# command line shows the "flaketui" logger's records on stderr; elsewhere they are the host's.
_log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import sqlite_utils

BUSY_TIMEOUT_MS = 30_000
FOLD_WAIT_S = 1.0  # how long a reader waits for the write lock to fold deferred rollups
SQLITE_MAGIC = b"SQLite format 3\x00"
# Bytes 18 and 19 of a SQLite file: 1 for a rollback journal, 2 for write-ahead logging.
JOURNAL_MODE_OFFSET = 18
WAL_FORMAT = 2
LOCKED_HINT = "another process is writing to it; retry"

# Histories opened in this process, resolved path -> the path as the user gave it: a locked
# error met later (on a bare connection, or past the core) still names the file as typed.
_opened: dict[str, Path] = {}

# Each migration takes the history from version i to i + 1; never edit a released one.
SCHEMA_V1 = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE runs (
    id            INTEGER PRIMARY KEY,
    run_id        TEXT NOT NULL UNIQUE,
    suite         TEXT NOT NULL DEFAULT 'default',
    branch        TEXT,
    branch_kind   TEXT NOT NULL DEFAULT 'pr' CHECK (branch_kind IN ('main', 'pr', 'release')),
    commit_sha    TEXT,
    ts            TEXT NOT NULL,            -- ISO 8601 UTC, 'YYYY-MM-DDTHH:MM:SSZ'
    worker_count  INTEGER NOT NULL DEFAULT 1,
    runner_host   TEXT,
    ci_url        TEXT,
    incident      TEXT,                     -- incident tag, or NULL
    source        TEXT NOT NULL,            -- 'junit' | 'pytest' | 'merge'
    finished      INTEGER NOT NULL DEFAULT 1 -- 0 while recording or when interrupted
);
CREATE INDEX runs_ts ON runs (ts);
CREATE TABLE run_files (
    run           INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    content_hash  TEXT NOT NULL,            -- sha256 of a report file ingested into this run
    PRIMARY KEY (run, content_hash)
) WITHOUT ROWID;
CREATE TABLE run_changed_files (
    run   INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    path  TEXT NOT NULL,
    PRIMARY KEY (run, path)
) WITHOUT ROWID;
CREATE TABLE tests (
    id          INTEGER PRIMARY KEY,
    test_id     TEXT NOT NULL UNIQUE,       -- pytest node id, else 'classname::name'
    parent      TEXT NOT NULL,              -- test_id with its trailing [params] stripped
    test_file   TEXT,
    first_seen  TEXT NOT NULL
);
CREATE INDEX tests_parent ON tests (parent);
CREATE TABLE signatures (
    id       INTEGER PRIMARY KEY,
    hash     TEXT NOT NULL UNIQUE,
    text     TEXT NOT NULL,                 -- normalised message with <NUM>, <HEX>, <PATH>, ...
    example  TEXT NOT NULL                  -- one raw (masked, capped) message
);
CREATE TABLE results (
    run          INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    test         INTEGER NOT NULL REFERENCES tests (id),
    attempt      INTEGER NOT NULL,          -- 1 = first attempt
    outcome      TEXT NOT NULL CHECK (outcome IN ('pass', 'fail', 'error', 'skipped')),
    worker_id    TEXT,
    duration_ms  INTEGER,
    message      TEXT,                      -- capped, secrets masked
    signature    INTEGER REFERENCES signatures (id),
    PRIMARY KEY (run, test, attempt)
) WITHOUT ROWID;
CREATE INDEX results_test ON results (test);
-- One row per (test, run): the run-level outcome of its attempts, maintained with the results.
CREATE TABLE test_runs (
    test        INTEGER NOT NULL REFERENCES tests (id),
    run         INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    ts          TEXT NOT NULL,              -- copy of runs.ts, for (test, ts) ordered scans
    outcome     TEXT NOT NULL CHECK (outcome IN ('pass', 'fail', 'flaky', 'skipped')),
    bad         INTEGER NOT NULL,           -- first attempt failed or errored
    attempts    INTEGER NOT NULL,
    failed_attempts INTEGER NOT NULL,
    worker_id   TEXT,                       -- worker of the first attempt
    signature   INTEGER REFERENCES signatures (id), -- first failure's signature
    edited      INTEGER NOT NULL DEFAULT 0, -- the run's commit changed this test's file
    PRIMARY KEY (test, run)
) WITHOUT ROWID;
CREATE INDEX test_runs_run ON test_runs (run);
CREATE INDEX test_runs_test_ts ON test_runs (test, ts);
CREATE TABLE incidents (
    id          INTEGER PRIMARY KEY,
    tag         TEXT NOT NULL,
    start_ts    TEXT,                       -- window incidents: [start_ts, end_ts]
    end_ts      TEXT,
    signature   TEXT,                       -- signature incidents: a signature hash
    created_at  TEXT NOT NULL,
    note        TEXT
);
CREATE TABLE audit_log (
    id          INTEGER PRIMARY KEY,
    ts          TEXT NOT NULL,
    who         TEXT NOT NULL,
    action      TEXT NOT NULL,              -- quarantine | release | lifecycle:<from>-><to> | ...
    test_id     TEXT NOT NULL,
    mode        TEXT,
    reason      TEXT,
    ticket      TEXT,
    scores      TEXT,                       -- JSON of the scores at that moment
    source      TEXT NOT NULL DEFAULT 'cli' -- cli | app | lifecycle
);
CREATE INDEX audit_log_test ON audit_log (test_id, ts);
"""


def _execute_script(conn: sqlite3.Connection, script: str) -> None:
    """Run statements one by one (executescript would commit the open transaction)."""
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            conn.execute(statement)
            statement = ""


# What cause analysis needs: the run's environment and order seed, and per attempt the test
# that ran just before it on the same worker (a tests.id of the same run), its position on that
# worker and the timeout in force. NULL wherever the producer did not say. From this version
# runs.source may also be 'diagnose': experiment runs of `flaketui diagnose`, never scored.
SCHEMA_V2 = """
ALTER TABLE runs ADD COLUMN os TEXT;
ALTER TABLE runs ADD COLUMN python TEXT;
ALTER TABLE runs ADD COLUMN platform TEXT;
ALTER TABLE runs ADD COLUMN order_seed TEXT;
ALTER TABLE results ADD COLUMN predecessor INTEGER;
ALTER TABLE results ADD COLUMN position INTEGER;
ALTER TABLE results ADD COLUMN timeout_ms INTEGER;
"""


# test_runs kept in (test, ts) order by its own key. Its (test, ts) index was a second
# test-major tree: every run's commit wrote a page per test into it, and readers in test order
# went from it back to the table. The key now is that order; (test, run) stays unique because a
# run has one ts. Lookups by run go through test_runs_run, as before.
SCHEMA_V3 = """
CREATE TABLE test_runs_by_ts (
    test        INTEGER NOT NULL REFERENCES tests (id),
    run         INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    ts          TEXT NOT NULL,              -- copy of runs.ts, which never changes
    outcome     TEXT NOT NULL CHECK (outcome IN ('pass', 'fail', 'flaky', 'skipped')),
    bad         INTEGER NOT NULL,
    attempts    INTEGER NOT NULL,
    failed_attempts INTEGER NOT NULL,
    worker_id   TEXT,
    signature   INTEGER REFERENCES signatures (id),
    edited      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (test, ts, run)
) WITHOUT ROWID;
INSERT INTO test_runs_by_ts (test, run, ts, outcome, bad, attempts, failed_attempts, worker_id,
    signature, edited)
    SELECT test, run, ts, outcome, bad, attempts, failed_attempts, worker_id, signature, edited
    FROM test_runs ORDER BY test, ts, run;
DROP TABLE test_runs;
ALTER TABLE test_runs_by_ts RENAME TO test_runs;
CREATE INDEX test_runs_run ON test_runs (run);
"""


# The attempt journal (flaketui.core.history.journal): the pytest recorder appends attempts there
# during a session, and the next writer or reader stores them.
SCHEMA_V4 = journal.JOURNAL_SCHEMA


# results loses its index on test. It was a third test-major tree: every run's commit wrote a
# page per test into it (about a sixth of storing a run). A test's attempts are found through
# test_runs, which orders them by test and time, and the results key (run, test, attempt).
SCHEMA_V5 = """
DROP INDEX IF EXISTS results_test;
"""


# audit_log gains written_at: when the row was written (ISO 8601 UTC, the writing command's now,
# which --now sets), beside ts, the moment the decision holds for. They differ for the
# lifecycle: `--apply` dates a transition the day it happened in the replay, often days before
# the apply, and the quarantine or release it makes with it. Rows from before this version get
# written_at = ts, the only moment they have. The table is rebuilt (ids kept) so that the column
# is NOT NULL: a writer that leaves it out fails instead of writing a row no reader finds.
SCHEMA_V6 = """
CREATE TABLE audit_log_v6 (
    id          INTEGER PRIMARY KEY,
    ts          TEXT NOT NULL,
    who         TEXT NOT NULL,
    action      TEXT NOT NULL,
    test_id     TEXT NOT NULL,
    mode        TEXT,
    reason      TEXT,
    ticket      TEXT,
    scores      TEXT,
    source      TEXT NOT NULL DEFAULT 'cli',
    written_at  TEXT NOT NULL               -- ISO 8601 UTC, when the row was written
);
INSERT INTO audit_log_v6 (id, ts, who, action, test_id, mode, reason, ticket, scores, source,
    written_at)
    SELECT id, ts, who, action, test_id, mode, reason, ticket, scores, source, ts
    FROM audit_log ORDER BY id;
DROP TABLE audit_log;
ALTER TABLE audit_log_v6 RENAME TO audit_log;
CREATE INDEX audit_log_test ON audit_log (test_id, ts);
CREATE INDEX audit_log_written ON audit_log (written_at);
"""


# results gains leg: the report file an attempt came from (31 bits of the file's SHA-256,
# flaketui.core.ingest.rows.leg_of), NULL for attempts the pytest recorder wrote and for rows from
# before this version.
# Attempts of one leg are retries of each other; a test that ran in several reports of one run
# (matrix legs, shards) ran once per leg, and its per-run outcome combines the legs' outcomes
# (flaketui.core.history.derived_rows). A hash rather than a counter, so that the legs of a run
# ingested on different machines stay apart when merged or pushed to a server.
SCHEMA_V7 = """
ALTER TABLE results ADD COLUMN leg INTEGER;
"""


# results gains origin: the file a JUnit case named (its ``file`` attribute, or its suite's
# name when that is a path; else the describe block of a karma reporter's ``parentSuites``),
# NULL where the case named none and for rows from before this version. A run's later shard
# reads it to tell a stored case of a plain id from a same-named case of another file
# (flaketui.core.ingest.writer: two such cases are two tests, each prefixed with its file), and
# the rows of the earlier one move to their file-prefixed id in that shard's transaction.
SCHEMA_V8 = """
ALTER TABLE results ADD COLUMN origin TEXT;
"""


# test_runs gains its first attempt's duration, timeout and position (that of the lowest-numbered
# attempt, whose worker_id it already holds), NULL where the attempt has none. Cause analysis
# reads them with each run of a test: through results they were a seek into that table per row,
# a page read each once the history outgrows the page cache. Rows from before this version are
# filled from results.
SCHEMA_V9 = """
ALTER TABLE test_runs ADD COLUMN first_duration_ms INTEGER;
ALTER TABLE test_runs ADD COLUMN first_timeout_ms INTEGER;
ALTER TABLE test_runs ADD COLUMN first_position INTEGER;
UPDATE test_runs SET (first_duration_ms, first_timeout_ms, first_position) = (
    SELECT a.duration_ms, a.timeout_ms, a.position FROM results a
    WHERE a.run = test_runs.run AND a.test = test_runs.test
    ORDER BY a.attempt LIMIT 1
);
"""


# The outage search (flaketui.core.history.outages) runs after every ingest and merge. It read
# every per-run row of the scoring window for the few that failed, through test_runs, keyed by
# test (0.8 s of each ingest into 10 M results): test_runs_failed holds those rows alone, in
# time order, with what the search reads (a partial, covering index; a run's failures are a few
# percent of its rows). runs gains ran_at_least: how many tests the run ran at least (first
# attempt not skipped), which the search compares with a cluster's failures in every run of it
# and counted again after each ingest (1 s at 10 M). The search fills it in; a run only gains
# tests afterwards, so the count stays a lower bound, and moving a run's attempts to other tests
# clears it (derived_rows.refresh_moved). NULL until counted.
SCHEMA_V10 = """
CREATE INDEX test_runs_failed ON test_runs (ts, signature, bad) WHERE bad = 1;
ALTER TABLE runs ADD COLUMN ran_at_least INTEGER;
"""

# A run an ingest leaves waiting for the fold keeps its per-test rows here, keyed by run, until
# the fold files them into test_runs in its order (flaketui.core.rollups.pending): a run's
# commit writes a few pages of them, not one page of test_runs per test it ran.
SCHEMA_V11 = """
CREATE TABLE IF NOT EXISTS test_runs_waiting (
    test        INTEGER NOT NULL REFERENCES tests (id),
    run         INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    ts          TEXT NOT NULL,
    outcome     TEXT NOT NULL CHECK (outcome IN ('pass', 'fail', 'flaky', 'skipped')),
    bad         INTEGER NOT NULL,
    attempts    INTEGER NOT NULL,
    failed_attempts INTEGER NOT NULL,
    worker_id   TEXT,
    signature   INTEGER REFERENCES signatures (id),
    edited      INTEGER NOT NULL DEFAULT 0,
    first_duration_ms INTEGER,
    first_timeout_ms INTEGER,
    first_position INTEGER,
    PRIMARY KEY (run, test)
) WITHOUT ROWID;
"""


def _migrate_to_1(conn: sqlite3.Connection) -> None:
    _execute_script(conn, SCHEMA_V1)


def _migrate_to_2(conn: sqlite3.Connection) -> None:
    _execute_script(conn, SCHEMA_V2)


def _migrate_to_3(conn: sqlite3.Connection) -> None:
    _execute_script(conn, SCHEMA_V3)


def _migrate_to_4(conn: sqlite3.Connection) -> None:
    _execute_script(conn, SCHEMA_V4)


def _migrate_to_5(conn: sqlite3.Connection) -> None:
    _execute_script(conn, SCHEMA_V5)


def _migrate_to_6(conn: sqlite3.Connection) -> None:
    _execute_script(conn, SCHEMA_V6)


def _migrate_to_7(conn: sqlite3.Connection) -> None:
    _execute_script(conn, SCHEMA_V7)


def _migrate_to_8(conn: sqlite3.Connection) -> None:
    _execute_script(conn, SCHEMA_V8)


def _migrate_to_9(conn: sqlite3.Connection) -> None:
    _execute_script(conn, SCHEMA_V9)


def _migrate_to_10(conn: sqlite3.Connection) -> None:
    _execute_script(conn, SCHEMA_V10)


def _migrate_to_11(conn: sqlite3.Connection) -> None:
    _execute_script(conn, SCHEMA_V11)


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    _migrate_to_1,
    _migrate_to_2,
    _migrate_to_3,
    _migrate_to_4,
    _migrate_to_5,
    _migrate_to_6,
    _migrate_to_7,
    _migrate_to_8,
    _migrate_to_9,
    _migrate_to_10,
    _migrate_to_11,
]
SCHEMA_VERSION = len(MIGRATIONS)
# What the migrations above leave, as one script a new history is created from (schema_file).
SCHEMA_FILE = Path(__file__).with_name("schema.sql")


# Descriptors this process keeps open to read history files' headers (read_header), by file.
_header_fds: dict[tuple[int, int], int] = {}
_header_lock = threading.Lock()
HEADER_FDS_KEPT = 16  # the files most recently read; an older one's descriptor is closed


def read_header(path: Path, size: int) -> bytes:
    """The first `size` bytes of the file at `path` (fewer when the file is shorter).

    Read through a descriptor kept open for the file: closing any descriptor of a file drops
    every POSIX lock this process holds on it, its SQLite connections' locks included. A
    connection whose lock is gone no longer stops another process's last connection from
    removing the -wal and -shm files, and this process's connections then go on with a stale
    index of the WAL: a commit made since is missing from what they read, or the file reads
    as malformed.
    """
    info = os.stat(path)
    key = (info.st_dev, info.st_ino)
    with _header_lock:
        fd = _header_fds.pop(key, None)
        if fd is not None and os.fstat(fd).st_nlink == 0:
            fd = None  # a deleted file whose inode a new one took: its descriptor stays open
        if fd is None:
            fd = os.open(path, os.O_RDONLY)
            opened = os.fstat(fd)
            key = (opened.st_dev, opened.st_ino)
            _header_fds.pop(key, None)  # replaced since the stat: that descriptor stays open
        _header_fds[key] = fd  # the most recent last
        while len(_header_fds) > HEADER_FDS_KEPT:
            os.close(_header_fds.pop(next(iter(_header_fds))))
        return os.pread(fd, size, 0)


def refuse_special_file(path: Path) -> None:
    """Refuse a path that exists and is neither a directory nor a regular file: a named pipe
    or a device. Told by stat(), which never waits: opening a named pipe waits for a writer,
    and SQLite cannot keep a history in either."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return  # missing, unreachable or no valid name: opening it says so
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise HistoryError(f"{path}: not a regular file (a pipe or a device), not a history file")


def _check_is_sqlite(path: Path) -> None:
    """Refuse a path that is a directory, a pipe or a device, or a non-empty file without the
    SQLite header."""
    if path.is_dir():
        raise HistoryError(f"{path}: is a directory, not a history file")
    if not path.exists():
        return
    refuse_special_file(path)
    try:
        head = read_header(path, len(SQLITE_MAGIC))
    except OSError as exc:
        raise HistoryError(f"{path}: cannot read ({exc.strerror})") from exc
    if head and head != SQLITE_MAGIC:
        raise HistoryError(f"{path}: not a SQLite database")


def check_history_path(path: Path) -> None:
    """Refuse, by its header alone, a path that holds no history to open: missing or empty, a
    directory, a pipe or a device, or a file that is not SQLite. Opening a history that may
    not be created asks this; so does a command that refuses its other arguments before it
    opens the history for writing, so that a wrong history is named before them."""
    _check_is_sqlite(path)
    if not path.exists() or path.stat().st_size == 0:
        reason = "does not exist" if not path.exists() else "is empty"
        raise HistoryError(f"{path}: {reason}; ingest a report first (flaketui ingest)")


def schema_version(conn: sqlite3.Connection) -> int:
    """The schema version stored in the file."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def open_history(
    path: str | Path,
    *,
    create: bool = True,
    readonly: bool = False,
    fold_later: bool = False,
) -> sqlite_utils.Database:
    """Open a history as a sqlite_utils.Database, creating and migrating it as needed; raise
    HistoryError on bad input. `fold_later`: see open_connection.

    For scripts and notebooks that want sqlite-utils' conveniences: flaketui's own commands
    and app open histories through history_file, since sqlite-utils imports pandas and numpy
    where they are installed (~0.3 s), which no command needs to pay.
    """
    import sqlite_utils

    return sqlite_utils.Database(
        open_connection(path, create=create, readonly=readonly, fold_later=fold_later)
    )


@contextmanager
def history_file(
    path: str | Path,
    *,
    create: bool = True,
    readonly: bool = False,
    keep_if_empty: bool = True,
    fold_later: bool = False,
) -> Iterator[Reader]:
    """open_connection for the length of a `with` block, as a handle holding the connection
    (flaketui's commands and app need nothing of sqlite-utils, whose import imports pandas and
    numpy where they are installed: 0.3 s of each command), closed on leaving it (error or
    not): the last connection to a WAL-mode file to close removes its -wal and -shm files, so
    a command leaves the folder as it found it.

    `keep_if_empty=False`: a history this call creates is removed again when it holds no run
    on leaving the block, so a command that recorded nothing leaves no file behind.
    """
    created = create and not readonly and not Path(path).exists()
    conn = open_connection(path, create=create, readonly=readonly, fold_later=fold_later)
    try:
        yield Reader(conn)
    finally:
        drop = created and not keep_if_empty and _holds_no_run(conn)
        conn.close()
        if drop:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)


def _holds_no_run(conn: sqlite3.Connection) -> bool:
    """Whether the history has no run at all (False when that cannot be read)."""
    try:
        return not conn.execute("SELECT EXISTS (SELECT 1 FROM runs)").fetchone()[0]
    except sqlite3.Error:
        return False


def open_connection(
    path: str | Path,
    *,
    create: bool = True,
    readonly: bool = False,
    fold: bool = True,
    fold_later: bool = False,
    fold_in_place: bool = True,
) -> sqlite3.Connection:
    """open_history's plain sqlite3 connection (autocommit; write through `transaction()`).

    `fold`: fold runs whose rollups a recorder deferred (fold_deferred); the recorder itself
    passes False, so that a test session never pays for an earlier one's. `fold_later`: store
    the journaled attempts but leave the waiting runs to the caller, a writer that folds them
    together once enough wait (ingest, see flaketui.core.ingest.writer.FOLD_RUNS).
    `fold_in_place`: False for a reader whose file should stay as it is even though it may
    be written (the app on a history git tracks): runs whose rows wait are read from a filed
    copy, as where the file may not be written; journaled attempts are still stored in it.
    """
    path = Path(path)
    if not create or readonly:
        check_history_path(path)
    else:
        _check_is_sqlite(path)
        if not path.exists() and not path.parent.exists():
            raise HistoryError(f"{path}: directory {path.parent} does not exist")
    by_uri = readonly and not reads_in_place(path)
    try:
        if by_uri:
            conn = sqlite3.connect(
                f"{path.resolve().as_uri()}?mode=ro",
                uri=True,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
            )
        else:
            # Autocommit mode: every write goes through `transaction()` explicitly.
            conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    except sqlite3.DatabaseError as exc:
        raise open_error(path, exc) from exc
    # Closed on any failure: a connection is in a reference cycle (through its statement
    # cache), so one left open would hold the file until the garbage collector found it.
    try:
        if readonly and not by_uri:
            conn.execute("PRAGMA query_only = ON")
        return _prepared(conn, path, readonly, fold, fold_later, fold_in_place)
    except BaseException:
        conn.close()
        raise


def open_error(path: Path, exc: sqlite3.DatabaseError) -> HistoryError:
    """The one-line refusal of a file that could not be opened or read as a history.

    A disk that refuses a write or a read while the history is opened (a full disk where the
    shared-memory file of a WAL history has to grow: SQLITE_IOERR_SHMSIZE) says nothing of the
    file: it is named as the disk's problem, not as a file that is no usable database."""
    if is_locked(exc):
        return locked_error(path, exc)
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL):
        return HistoryError(f"{path}: {exc} while opening it; is its disk full or failing?")
    return HistoryError(f"{path}: not a usable SQLite database ({exc})")


def _prepared(
    conn: sqlite3.Connection,
    path: Path,
    readonly: bool,
    fold: bool,
    fold_later: bool,
    fold_in_place: bool,
) -> sqlite3.Connection:
    """open_connection's connection checked, migrated and folded as asked (see there); the
    caller closes conn when this raises."""
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        version = schema_version(conn)
    except sqlite3.DatabaseError as exc:
        raise open_error(path, exc) from exc
    if version > SCHEMA_VERSION:
        raise HistoryError(
            f"{path}: history schema version {version} is newer than this flaketui supports "
            f"({SCHEMA_VERSION}); upgrade flaketui"
        )
    conn.execute("PRAGMA foreign_keys = ON")
    if not readonly:
        if path.exists() and is_read_only(path):
            raise HistoryError(f"{path}: read-only; it can be read (report, open) but not written")
        try:
            _switch_to_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
            _migrate(conn, version, path)
        except sqlite3.OperationalError as exc:
            if is_locked(exc):
                raise locked_error(path, exc) from exc
            raise HistoryError(f"{path}: cannot write ({exc})") from exc
    elif version < SCHEMA_VERSION:
        conn.close()
        upgrade_older(path)
        return open_connection(path, create=False, readonly=True)
    _opened[os.path.realpath(path)] = path
    if fold:
        conn = fold_deferred(
            conn, path, readonly, fold_waiting=not fold_later, in_place=fold_in_place
        )
    return conn


def uses_wal(path: Path) -> bool:
    """Whether the file's header says write-ahead logging."""
    try:
        head = read_header(path, JOURNAL_MODE_OFFSET + 1)
    except OSError:
        return False
    return head[JOURNAL_MODE_OFFSET:] == bytes([WAL_FORMAT])


def reads_in_place(path: Path) -> bool:
    """Whether a reader opens an ordinary connection with `query_only` rather than `mode=ro`.

    A `mode=ro` connection to a WAL-mode file creates the -wal and -shm files but cannot
    remove them (that needs the write lock), while the last ordinary connection to close
    removes them, as any SQLite client does: a WAL-mode file we may write is read through an
    ordinary connection, so that a command which only read it leaves its folder as it was.
    Anything else is opened `mode=ro`: a rollback-journal file gets no sidecar file at all,
    and a file we may not write shares the writers' -shm, so a read that spans another
    process's write still sees one snapshot.
    """
    return uses_wal(path) and may_write(path)


def fold_deferred(
    conn: sqlite3.Connection,
    path: Path,
    readonly: bool,
    *,
    fold_waiting: bool = True,
    in_place: bool = True,
) -> sqlite3.Connection:
    """Store the attempts a recorder journaled and fold the runs left unfolded into the
    rollups (unless not `fold_waiting`), in one transaction, when the history may be written;
    returns the connection to go on with: conn, or a filed copy (below).

    Unfolded runs only: when the history may not be written (or, for a reader, another writer
    holds it longer than FOLD_WAIT_S) they are left, and readers score the raw rows, with the
    same result; when some of those runs' per-test rows wait to be filed into test_runs
    (flaketui.core.rollups.pending), a reader reads a private copy where they are
    (_filed_copy). Journaled attempts are in no raw row yet: a reader waits for the write lock
    as any writer does, and a history it may not write is refused with a one-line error.
    `in_place`: False for a reader that leaves the file as it is while only runs wait (a
    filed copy, as where it may not write). When this raises, conn is left to the caller to
    close (open_connection does).
    """
    from flaketui.core.rollups.pending import pending, waiting_rows

    waiting = journal.waiting(conn)
    if not waiting and (not fold_waiting or not pending(conn)):
        return conn
    from flaketui.core.rollups import build as rollups

    try:
        if readonly:
            if not may_write(path) or (not in_place and not waiting):
                if waiting:
                    held = plural(waiting, "attempt")
                    raise HistoryError(
                        f"{path}: holds {held} recorded by pytest and not stored yet, and is "
                        "read-only here; open it once where it can be written (any flaketui "
                        "command stores them)"
                    )
                return _filed_copy(conn, path) if waiting_rows(conn) else conn
            # A reader does not queue behind a long write for this: it reads raw rows instead.
            wait_s = BUSY_TIMEOUT_MS / 1000 if waiting else FOLD_WAIT_S
            writer = sqlite3.connect(str(path), timeout=wait_s, isolation_level=None)
            try:
                with transaction(writer):
                    journal.land(writer)
                    if fold_waiting:
                        rollups.fold_pending(writer)
            finally:
                writer.close()
        else:
            # Every row landed names tests, signatures and a run it found or made: unchecked
            # references keep the landing's statements from journaling each page they change
            # (a reader's own connection, above, checks none either).
            with foreign_keys_off(conn, unchecked=False), transaction(conn):
                journal.land(conn)
                if fold_waiting:
                    rollups.fold_pending(conn)
    except sqlite3.DatabaseError as exc:
        if not waiting:
            if isinstance(exc, sqlite3.OperationalError):
                return _filed_copy(conn, path) if readonly and waiting_rows(conn) else conn
            raise
        if is_locked(exc):
            raise locked_error(path, exc) from exc
        raise HistoryError(f"{path}: cannot store the recorded attempts ({exc})") from exc
    return conn


class _FiledCopy(sqlite3.Connection):
    """A connection to a reader's private copy of a history (_filed_copy), which owns the
    temporary folder holding the copy: closing the connection removes the folder (one left
    open keeps it until the garbage collector finds the connection)."""

    folder: tempfile.TemporaryDirectory[str] | None = None

    def close(self) -> None:
        super().close()
        if self.folder is not None:
            self.folder.cleanup()


def is_filed_copy(conn: sqlite3.Connection) -> bool:
    """Whether conn reads a private filed copy of its history (_filed_copy), not the file."""
    return isinstance(conn, _FiledCopy)


def _filed_copy(conn: sqlite3.Connection, path: Path) -> sqlite3.Connection:
    """For a reader that cannot fold (it may not write the history, or a writer holds it) while
    runs' per-test rows wait to be filed: conn's snapshot copied with SQLite's backup API into
    a temporary folder, its waiting rows filed and its runs folded there; conn is closed and
    the copy, read-only, read instead. It costs a copy of the file, once per opening, on
    this path alone; the history itself is left as it is."""
    from flaketui.core.rollups import build as rollups

    try:
        # Removed with the connection; a file still open there (Windows) is left, not an error.
        folder = tempfile.TemporaryDirectory(prefix="flaketui-", ignore_cleanup_errors=True)
    except OSError as exc:
        conn.close()
        raise _copy_error(path, exc.strerror or str(exc)) from exc
    copy = sqlite3.connect(
        str(Path(folder.name) / "history.db"), isolation_level=None, factory=_FiledCopy
    )
    copy.folder = folder
    try:
        conn.backup(copy)
        with transaction(copy):
            rollups.fold_pending(copy)
        copy.execute("PRAGMA query_only = ON")
    except sqlite3.DatabaseError as exc:
        copy.close()
        folder.cleanup()
        raise _copy_error(path, str(exc)) from exc
    finally:
        conn.close()
    return copy


def _copy_error(path: Path, reason: str) -> HistoryError:
    """The one-line refusal of a reader whose filed copy could not be made."""
    return HistoryError(
        f"{path}: holds runs whose rows wait to be filed, which this reader cannot do in"
        f" place, and no private copy could be made in {tempfile.gettempdir()} ({reason});"
        " open it once where it can be written, or point TMPDIR at a folder with room"
    )


def is_read_only(path: Path) -> bool:
    """No write access, or no write bit at all (root may write anyway, but should not)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return True
    return not os.access(path, os.W_OK) or not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


def may_write(path: Path) -> bool:
    """The file is not read-only and its folder takes the -wal and -shm files."""
    return not is_read_only(path) and os.access(path.parent, os.W_OK)


def upgrade_older(path: str | Path) -> None:
    """Bring a history written by an older flaketui to this schema (migrations keep every row).

    A reader meeting an older file upgrades it first when it may write it, so histories from
    before a migration keep working everywhere; a file it may not write is refused.
    """
    path = Path(path)
    if is_read_only(path) or (path.parent.exists() and not os.access(path.parent, os.W_OK)):
        raise HistoryError(
            f"{path}: history written by an older flaketui needs an upgrade, but the file is "
            "read-only; upgrade a writable copy (any writing command, e.g. flaketui prune)"
        )
    open_connection(path, create=False).close()


def _switch_to_wal(conn: sqlite3.Connection) -> None:
    """Put the history in WAL mode, waiting out other processes doing the same.

    Leaving rollback-journal mode needs an exclusive lock, and SQLite may answer "locked" at
    once instead of calling the busy handler (several processes creating one new history at
    the same moment do this): retry with back-off up to the busy timeout.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.005
    while True:
        if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
            return
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            text = str(exc).lower()
            if ("locked" not in text and "busy" not in text) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def _migrate(conn: sqlite3.Connection, version: int, path: Path) -> None:
    """Bring the history to SCHEMA_VERSION: a blank one (a new file) in one transaction
    (_create), an older one through its pending migrations, each in its own transaction."""
    if version == 0:
        with transaction(conn):
            if _is_blank(conn):  # else another process created it since the version was read
                _create(conn)
        version = schema_version(conn)
    elif version < SCHEMA_VERSION:
        _log.info(
            "%s: upgrading the history for this version of flaketui (once; about a minute per"
            " 10 M results)",
            path,
        )
    for target in range(version, SCHEMA_VERSION):
        with transaction(conn):
            if schema_version(conn) > target:
                continue  # another process migrated it since the version was read
            MIGRATIONS[target](conn)
            conn.execute(f"PRAGMA user_version = {target + 1}")


def _is_blank(conn: sqlite3.Connection) -> bool:
    """Version 0 and no schema at all: a new history. A SQLite file with tables of its own and
    no version goes through the migrations, as it always did (and fails as it always did)."""
    if schema_version(conn) != 0:
        return False
    return not conn.execute("SELECT EXISTS (SELECT 1 FROM sqlite_master)").fetchone()[0]


def _create(conn: sqlite3.Connection) -> None:
    """Lay the current schema into a blank history, in the caller's transaction.

    SCHEMA_FILE holds what the migrations leave, its version included (see schema_file): the
    schema costs one script instead of a replay of every migration. Any migration past the
    script's version runs after it, so a lagging script (or a missing one: version 0, every
    migration) still ends at SCHEMA_VERSION with the migrations' schema.
    """
    try:
        script = SCHEMA_FILE.read_text(encoding="utf-8")
    except OSError:
        script = ""
    _execute_script(conn, script)
    for target in range(schema_version(conn), SCHEMA_VERSION):
        MIGRATIONS[target](conn)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


@contextmanager
def foreign_keys_off(conn: sqlite3.Connection, *, unchecked: bool = True) -> Iterator[None]:
    """Foreign keys and (`unchecked`) CHECK constraints unchecked for one write transaction
    (entered outside it), both restored after.

    Every id the writer stores names a row it resolved or created (tests, signatures in the
    same transaction; its run, which only prune deletes, and not a current one), and the checks
    cost a parent lookup per reference (~10 % of the write); with them, any statement inserting
    many rows also keeps a statement journal (a copy of each page it changes, see
    derived_rows). Every value a CHECK constrains is one the writer validated or chose itself
    (an attempt's outcome against OUTCOMES, a per-run outcome from its counts, a run's branch
    kind in apply_defaults), and SQLite evaluates each such IN list by building a temporary
    index per row: about as much as inserting the row.
    """
    foreign_keys = int(conn.execute("PRAGMA foreign_keys").fetchone()[0])
    checks = unchecked and not int(conn.execute("PRAGMA ignore_check_constraints").fetchone()[0])
    if foreign_keys:
        conn.execute("PRAGMA foreign_keys = OFF")  # a no-op inside a transaction: set before it
    if checks:
        conn.execute("PRAGMA ignore_check_constraints = ON")
    try:
        yield
    finally:
        if checks:
            conn.execute("PRAGMA ignore_check_constraints = OFF")
        if foreign_keys:
            conn.execute("PRAGMA foreign_keys = ON")


@contextmanager
def transaction(
    conn: sqlite3.Connection, *, main_only: bool = False
) -> Iterator[sqlite3.Connection]:
    """An immediate (write-locking) transaction committed on success, rolled back on error.

    `main_only`: the write lock of the main database alone, the attached ones only read (BEGIN
    IMMEDIATE locks every attached database for writing): a write that changes nothing takes
    it before anything is read."""
    try:
        if main_only:
            conn.execute("BEGIN")
            try:
                conn.execute("DELETE FROM main.meta WHERE 0")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        else:
            conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if is_locked(exc):
            raise locked_error(history_path(conn), exc) from exc
        raise
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


def is_locked(exc: BaseException) -> bool:
    """Whether a SQLite error is another connection's lock (SQLITE_BUSY or SQLITE_LOCKED)."""
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def locked_error(path: str | Path | None, exc: BaseException) -> HistoryLockedError:
    """The one-line error for a history locked past the busy timeout, naming its file."""
    return HistoryLockedError(f"{path or 'history'}: {exc} ({LOCKED_HINT})")


def is_damaged(exc: BaseException) -> bool:
    """Whether a SQLite error says the file is damaged: a page that does not read as the
    database (SQLITE_CORRUPT, whatever its extended code) or a file that is no database any more
    (SQLITE_NOTADB)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return (
        isinstance(exc, sqlite3.DatabaseError)
        and code is not None
        and code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
    )


def history_problem(path: str | Path | None, exc: sqlite3.DatabaseError) -> HistoryError | None:
    """The one-line error for a SQLite error met while using a history, naming its file, when
    the error is the environment's, not a bug: another connection's lock, a damaged file, or
    an operation SQLite refused (disk full, an I/O error, a read-only file). None for a bug
    (a broken constraint, a misused statement)."""
    name = path or "history"
    if is_locked(exc):
        return locked_error(name, exc)
    if is_damaged(exc):
        return HistoryError(f"{name}: damaged ({exc}); restore it from a copy")
    if isinstance(exc, sqlite3.OperationalError):
        return HistoryError(" ".join(f"{name}: {exc}".split()))
    return None


def history_path(conn: sqlite3.Connection) -> Path | None:
    """The file behind a connection, as the user gave it when it was opened here."""
    try:
        file = next(row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main")
    except (sqlite3.Error, StopIteration):
        return None
    if not file:
        return None  # an in-memory or temporary database
    return _opened.get(os.path.realpath(file), Path(file))


def opened_histories() -> list[Path]:
    """Histories this process opened, as given, oldest first."""
    return list(_opened.values())


def forget_opened() -> None:
    """Start a new command's record of opened histories."""
    _opened.clear()


def get_meta(db: Connected, key: str) -> str | None:
    """Read one value from the meta table."""
    row = db.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def set_meta(db: Connected, key: str, value: str) -> None:
    """Write one value to the meta table (inside the caller's transaction, if any)."""
    db.conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )
