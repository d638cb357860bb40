"""The rollup readers never scan a raw table whole: every read of test_runs, results or runs
goes through an index (EXPLAIN QUERY PLAN of each statement they run, on a history with
rollups). A whole scan of test_runs is what the rollups exist to avoid; one creeping back in
(a dropped index, a join order the planner turns around) fails here, not only in a benchmark.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils

from flaketui.core.config import Config
from flaketui.core.history.store import transaction
from flaketui.core.rollups import build as rollups
from flaketui.core.scoring.aggregates import (
    per_family_evidence,
    per_signature_evidence,
    per_test_evidence,
    signature_counts,
)
from flaketui.core.timeutil import parse_iso
from tests.connections import open_history

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data" / "history.db"
# "SCAN tr", "SCAN test_runs USING ... INDEX", "SCAN results": a raw table read whole.
WHOLE_RAW_SCAN = re.compile(r"\bSCAN (tr|test_runs|res|results)\b")


@pytest.fixture
def sample(tmp_path: Path) -> sqlite_utils.Database:
    path = tmp_path / "sample.db"
    shutil.copy(SAMPLE, path)
    db = open_history(path)
    with transaction(db.conn):
        rollups.rebuild(db.conn)
    return db


def plans(db: sqlite_utils.Database, request: Callable[[], Any]) -> list[tuple[str, list[str]]]:
    """(statement, its query plan lines) of every SELECT the request runs."""
    statements: list[str] = []
    db.conn.set_trace_callback(statements.append)
    try:
        request()
    finally:
        db.conn.set_trace_callback(None)
    out = []
    for sql in statements:
        text = sql.strip()
        if not re.match(r"(WITH|SELECT)\b", text, re.IGNORECASE):
            continue
        lines = [str(row[3]) for row in db.conn.execute(f"EXPLAIN QUERY PLAN {text}")]
        out.append((text, lines))
    return out


@pytest.mark.parametrize(
    "where",
    [{}, {"suite": "unit"}, {"branch_kind": "pr"}, {"suite": "unit", "branch_kind": "main"}],
)
def test_rollup_readers_never_scan_raw_tables_whole(
    sample: sqlite_utils.Database, where: dict[str, str]
) -> None:
    now = parse_iso(str(sample.conn.execute("SELECT max(ts) FROM runs").fetchone()[0]))
    now -= timedelta(hours=5)
    config = Config()
    assert rollups.answers(sample.conn, config)
    tests = per_test_evidence(sample, now, config, **where)
    failing = sorted(pk for pk, ev in tests.items() if ev.last_failure_at is not None)
    assert failing

    def request() -> None:
        per_test_evidence(sample, now, config, **where)
        per_family_evidence(sample, now, config, **where, tests=tests)
        per_signature_evidence(
            sample, {pk: "g" for pk in failing}, now, config, **where, tests=tests
        )
        signature_counts(sample, now, config, **where, test_pks=failing)

    seen = plans(sample, request)
    assert len(seen) > 5
    for sql, lines in seen:
        scans = [line for line in lines if WHOLE_RAW_SCAN.search(line)]
        assert not scans, (scans, sql)


def test_the_check_sees_a_whole_scan(sample: sqlite_utils.Database) -> None:
    """The pattern catches a real whole scan of test_runs."""
    seen = plans(
        sample, lambda: sample.conn.execute("SELECT count(*) FROM test_runs tr").fetchall()
    )
    assert any(WHOLE_RAW_SCAN.search(line) for _, lines in seen for line in lines)
