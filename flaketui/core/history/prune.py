"""Retention: delete runs older than a cutoff, keeping rollups and the audit log consistent.

Choices made here:
- The cutoff is `now - older_than_days` on the real clock; a run with ts < cutoff goes, with
  its results, test-runs, report hashes and changed files (ON DELETE CASCADE).
- The audit log is append-only and never pruned: a decision stays explained. A test named in it
  keeps its `tests` row even when none of its runs remain; other tests left without any result
  are deleted, and so are signatures no remaining result refers to (as `flaketui resign`
  leaves them).
- Incident rules are kept (they are small, and a late-ingested old run must still match them).
  A signature rule names its signature by hash, so it matches a late run whose ingest signs
  its failure again; only the text beside it in `incident list` waits for that run.
- Rollups: days before the cutoff's day are dropped, the cutoff's own day is recomputed from
  the rows that remain, in the same transaction.
- A cutoff inside the scoring window is allowed (the caller is told); scores then change.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from flaketui.core.errors import FlaketuiError
from flaketui.core.history.store import set_meta, transaction
from flaketui.core.rollups import build as rollups
from flaketui.core.timeutil import MAX_DAYS, to_iso, utc_now

if TYPE_CHECKING:
    from flaketui.core.history.dbhandle import Connected


class PruneError(FlaketuiError):
    """A prune request that cannot be carried out."""


@dataclass
class PruneResult:
    """What a prune removed."""

    cutoff: datetime
    runs: int
    results: int
    tests: int
    signatures: int
    rollup_rows: int
    bytes_before: int = 0
    bytes_after: int = 0


def _file_bytes(db: Connected) -> int:
    page_size = int(db.conn.execute("PRAGMA page_size").fetchone()[0])
    pages = int(db.conn.execute("PRAGMA page_count").fetchone()[0])
    return page_size * pages


def check_older_than(days: float) -> None:
    """Refuse a retention that is not a number of days above 0 and at most MAX_DAYS."""
    if not 0 < days <= MAX_DAYS:  # NaN fails too
        raise PruneError(
            f"--older-than must be a number of days above 0 and at most {MAX_DAYS}, got {days:g}"
        )


def prune_history(
    db: Connected,
    older_than_days: float,
    *,
    now: datetime | None = None,
    vacuum: bool = False,
) -> PruneResult:
    """Delete every run older than `older_than_days` before now; VACUUM afterwards on request."""
    check_older_than(older_than_days)
    cutoff = (now or utc_now()) - timedelta(days=older_than_days)
    cutoff_iso = to_iso(cutoff)
    cutoff_day = cutoff_iso[:10]
    conn = db.conn
    before = _file_bytes(db)
    with transaction(conn):
        old_runs = [
            int(r) for (r,) in conn.execute("SELECT id FROM runs WHERE ts < ?", (cutoff_iso,))
        ]
        if not old_runs:
            return PruneResult(cutoff, 0, 0, 0, 0, 0, before, before)
        runs_json = json.dumps(old_runs)
        (results,) = conn.execute(
            "SELECT count(*) FROM results WHERE run IN (SELECT value FROM json_each(?))",
            (runs_json,),
        ).fetchone()
        # Tests whose rollup row for the cutoff's day loses some runs: recomputed below.
        edge_tests = [
            int(t)
            for (t,) in conn.execute(
                "SELECT DISTINCT tr.test FROM test_runs tr JOIN runs r ON r.id = tr.run"
                " WHERE r.ts >= ? AND r.ts < ?",
                (cutoff_day, cutoff_iso),
            )
        ]
        # Same-commit pairs that lose runs are recounted from the rows that remain.
        commits = [
            c
            for (c,) in conn.execute(
                "SELECT DISTINCT commit_sha FROM runs WHERE id IN (SELECT value FROM json_each(?))",
                (runs_json,),
            )
        ]
        conn.execute("DELETE FROM runs WHERE id IN (SELECT value FROM json_each(?))", (runs_json,))
        rollup_rows = rollups.drop_days_before(conn, cutoff_day)
        if edge_tests:
            rollups.refresh(conn, cutoff_day, edge_tests)
        rollups.refresh_commits(conn, commits)
        tests = conn.execute(
            "DELETE FROM tests"
            " WHERE NOT EXISTS (SELECT 1 FROM test_runs tr WHERE tr.test = tests.id)"
            " AND id NOT IN (SELECT test FROM results)"  # one pass: no index on results.test
            " AND test_id NOT IN (SELECT test_id FROM audit_log)"
        ).rowcount
        signatures = conn.execute(
            "DELETE FROM signatures WHERE NOT EXISTS"
            " (SELECT 1 FROM results r WHERE r.signature = signatures.id)"
            " AND NOT EXISTS (SELECT 1 FROM test_runs tr WHERE tr.signature = signatures.id)"
        ).rowcount
        set_meta(db, "last_prune", json.dumps({"cutoff": cutoff_iso, "runs": len(old_runs)}))
    if vacuum:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
    return PruneResult(
        cutoff, len(old_runs), int(results), tests, signatures, rollup_rows, before, _file_bytes(db)
    )
