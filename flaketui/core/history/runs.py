"""A run's own row: found by its CI run id, or created with its changed files and incident tag.

Shared by every writer of runs (ingest, the recorder's journal, experiments); kept apart from
the result writer so that a pytest session recording into the journal loads none of it.
"""

from __future__ import annotations

import sqlite3

from flaketui.core.models import RunMeta
from flaketui.core.testids import normalise_path
from flaketui.core.timeutil import to_iso, utc_now


def find_run(conn: sqlite3.Connection, run_id: str) -> tuple[int, str] | None:
    row = conn.execute("SELECT id, ts FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else (int(row[0]), str(row[1]))


def create_run(conn: sqlite3.Connection, meta: RunMeta, source: str, finished: int) -> int:
    """Insert a run with its changed files and incident tag; meta has its defaults applied."""
    assert meta.run_id is not None and meta.ts is not None
    cursor = conn.execute(
        "INSERT INTO runs (run_id, suite, branch, branch_kind, commit_sha, ts, worker_count,"
        " runner_host, ci_url, incident, source, finished, os, python, platform, order_seed)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            meta.run_id,
            meta.suite,
            meta.branch,
            meta.branch_kind,
            meta.commit_sha,
            to_iso(meta.ts),
            meta.worker_count,
            meta.runner_host,
            meta.ci_url,
            meta.incident,
            source,
            finished,
            meta.os,
            meta.python,
            meta.platform,
            meta.order_seed,
        ),
    )
    run_pk = int(cursor.lastrowid or 0)
    paths = sorted({normalise_path(p) for p in meta.changed_files if p.strip()})
    conn.executemany(
        "INSERT OR IGNORE INTO run_changed_files (run, path) VALUES (?, ?)",
        [(run_pk, p) for p in paths],
    )
    if meta.incident:
        conn.execute(
            "INSERT INTO incidents (tag, created_at, note)"
            " SELECT ?, ?, 'tagged at ingest'"
            " WHERE NOT EXISTS (SELECT 1 FROM incidents WHERE tag = ?)",
            (meta.incident, to_iso(utc_now()), meta.incident),
        )
    return run_pk
