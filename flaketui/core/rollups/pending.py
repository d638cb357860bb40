"""The list of runs whose rows are written but not yet folded into the rollups.

Ingest, and the storing of attempts the pytest recorder journaled, defer the fold so that the
runs waiting are folded together, once. While any run is listed, the rollups do not answer:
readers score the raw rows, exactly, until a writer folds them
(flaketui.core.rollups.build.fold_pending, which builds the rollups from every raw row when the
history has none yet).

A run an ingest leaves waiting keeps its per-test rows in WAITING_TABLE, keyed by run, until
they are filed into `test_runs` (`file_waiting`), which the fold does first. `test_runs` is
ordered by test and time, so a run of N tests changes N of its pages, wherever the tests' earlier
runs lie, and its commit writes every one of them: a few pages of rows kept by run instead, filed
in test order for all the waiting runs at once, write each page once per fold rather than once
per run. A run's per-test rows are all in one of the two tables. Only the run's own writer adds
to them there (flaketui.core.ingest.rows.RunWriter); any other writer of a run's per-test rows
files them first, and a reader that cannot fold reads a filed copy
(flaketui.core.history.store.open_connection).
"""

from __future__ import annotations

import sqlite3

PENDING_TABLE = "rollup_pending"
PENDING_SCHEMA = f"CREATE TABLE IF NOT EXISTS {PENDING_TABLE} (run INTEGER PRIMARY KEY)"
WAITING_TABLE = "test_runs_waiting"
TEST_RUN_COLUMNS = (
    "test, run, ts, outcome, bad, attempts, failed_attempts, worker_id, signature, edited,"
    " first_duration_ms, first_timeout_ms, first_position"
)


def defer(conn: sqlite3.Connection, run_pk: int) -> None:
    """Note that a run's new rows still have to be folded (inside the writer's transaction)."""
    try:
        conn.execute(f"INSERT OR IGNORE INTO {PENDING_TABLE} (run) VALUES (?)", (run_pk,))
    except sqlite3.OperationalError:  # a history from before deferred folds
        conn.execute(PENDING_SCHEMA)
        conn.execute(f"INSERT OR IGNORE INTO {PENDING_TABLE} (run) VALUES (?)", (run_pk,))


def pending(conn: sqlite3.Connection) -> bool:
    """Whether some written run is not folded into the rollups yet."""
    try:
        row = conn.execute(f"SELECT EXISTS (SELECT 1 FROM {PENDING_TABLE})").fetchone()
    except sqlite3.OperationalError:  # no such table: nothing was ever deferred
        return False
    return bool(row[0])


def pending_runs(conn: sqlite3.Connection) -> int:
    """How many written runs wait to be folded into the rollups."""
    try:
        row = conn.execute(f"SELECT count(*) FROM {PENDING_TABLE}").fetchone()
    except sqlite3.OperationalError:  # no such table: nothing was ever deferred
        return 0
    return int(row[0])


def waiting_rows(conn: sqlite3.Connection) -> bool:
    """Whether some run's per-test rows wait in WAITING_TABLE to be filed into test_runs."""
    try:
        row = conn.execute(f"SELECT EXISTS (SELECT 1 FROM {WAITING_TABLE})").fetchone()
    except sqlite3.OperationalError:  # no such table: a history from before it
        return False
    return bool(row[0])


def file_waiting(conn: sqlite3.Connection, run_pk: int | None = None) -> int:
    """File the waiting per-test rows (of run_pk, or of every run) into test_runs, in its key
    order, inside the caller's transaction; returns how many. The runs stay listed for the fold.

    OR FAIL: a row test_runs holds already is an error, as with ABORT, without the statement
    journal ABORT keeps of every page a multi-row statement changes (the caller's transaction
    rolls back with the error).
    """
    if not waiting_rows(conn):
        return 0
    where, params = ("", ()) if run_pk is None else (" WHERE run = ?", (run_pk,))
    filed = conn.execute(
        f"INSERT OR FAIL INTO test_runs ({TEST_RUN_COLUMNS}) SELECT {TEST_RUN_COLUMNS}"
        f" FROM {WAITING_TABLE}{where} ORDER BY test, ts, run",
        params,
    ).rowcount
    if filed:
        conn.execute(f"DELETE FROM {WAITING_TABLE}{where}", params)
    return int(filed)
