"""Read a flaketui history with plain sqlite3, for the plugin's pytester tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from flaketui.core.history.store import open_connection

# Loading only the plugins a test needs keeps each inner session fast (the installed
# entry points include the Textual snapshot plugin, which costs seconds per subprocess).
PLUGIN_ARGS = ("-p", "xdist.plugin", "-p", "pytest_rerunfailures", "-p", "flaketui.pytest_plugin")


def query(db_path: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of one query against a history, read with the plain sqlite3 module once the
    attempts the recorder journaled are stored (as any flaketui command opening it does)."""
    if db_path.exists():
        open_connection(db_path, create=False).close()
    conn = sqlite3.connect(db_path)
    try:
        return [tuple(row) for row in conn.execute(sql, params)]
    finally:
        conn.close()


def attempts(db_path: Path) -> dict[str, list[tuple[int, str, str | None]]]:
    """test_id -> [(attempt, outcome, worker_id)] in attempt order."""
    found: dict[str, list[tuple[int, str, str | None]]] = {}
    for test_id, attempt, outcome, worker_id in query(
        db_path,
        "SELECT t.test_id, r.attempt, r.outcome, r.worker_id FROM results r"
        " JOIN tests t ON t.id = r.test ORDER BY t.test_id, r.attempt",
    ):
        found.setdefault(str(test_id), []).append(
            (int(str(attempt)), str(outcome), None if worker_id is None else str(worker_id))
        )
    return found


def outcomes(db_path: Path) -> dict[str, list[str]]:
    """test_id -> outcomes of its attempts, in order."""
    return {tid: [outcome for _, outcome, _ in rows] for tid, rows in attempts(db_path).items()}


def runs(db_path: Path) -> list[tuple[Any, ...]]:
    """(run_id, suite, worker_count, source, finished) of every run."""
    return query(
        db_path, "SELECT run_id, suite, worker_count, source, finished FROM runs ORDER BY id"
    )
