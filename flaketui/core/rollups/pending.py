"""The list of runs whose rows are written but not yet folded into the rollups.

Ingest, and the storing of attempts the pytest recorder journaled, defer the fold so that the
runs waiting are folded together, once. While any run is listed, the rollups do not answer:
readers score the raw rows, exactly, until a writer folds them
(flaketui.core.rollups.build.fold_pending, which builds the rollups from every raw row when the
history has none yet).
"""

from __future__ import annotations

import sqlite3

PENDING_TABLE = "rollup_pending"
PENDING_SCHEMA = f"CREATE TABLE IF NOT EXISTS {PENDING_TABLE} (run INTEGER PRIMARY KEY)"


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
