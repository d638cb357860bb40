"""Rollups answer exactly what a scan of the raw rows answers, and stay so under maintenance."""

from __future__ import annotations

import math
import shutil
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils

from flaketui.core.config import Config
from flaketui.core.history.store import transaction
from flaketui.core.rollups import build as rollups
from flaketui.core.scoring.aggregates import per_test_evidence
from flaketui.core.timeutil import parse_iso
from tests.connections import open_history
from tests.core.test_rollup_scoring import raw_scoring

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data" / "history.db"
FIELDS = (
    "runs",
    "flaky_runs",
    "failed_runs",
    "first_ts",
    "last_ts",
    "last_failure_at",
    "max_attempts",
    "gates_main",
    "gates_branch",
    "main_runs",
    "suite_min",
    "suite_max",
)


def _newest(db: sqlite_utils.Database) -> datetime:
    return parse_iso(str(db.conn.execute("SELECT max(ts) FROM runs").fetchone()[0]))


def assert_agrees(
    db: sqlite_utils.Database, now: datetime, config: Config, suite: str | None = None
) -> int:
    """Every stage-1 fact of every test: rollups + raw edge days == the raw scan."""
    with raw_scoring():
        raw = per_test_evidence(db, now, config, suite=suite)
    got = rollups.test_base(db.conn, now, config, suite=suite)
    assert got is not None
    by_key = {row["key"]: row for row in got}
    assert set(by_key) == set(raw)
    for key, ev in raw.items():
        row = by_key[key]
        for field in FIELDS:
            assert row[field] == getattr(ev, field), (key, field)
        for field in ("weighted_bad", "weighted_total"):
            assert math.isclose(row[field], getattr(ev, field), rel_tol=1e-9, abs_tol=1e-12)
        if ev.suites:
            assert row["suites"] == ev.suites
    return len(raw)


@pytest.fixture
def generated(tmp_path: Path) -> sqlite_utils.Database:
    """A small CI-shaped history from the benchmark generator (runs over 90 days)."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from generate import generate
    finally:
        sys.path.remove(str(ROOT / "bench"))
    path = tmp_path / "gen.db"
    generate(path, 6000, seed=3, tests_count=50)
    db = open_history(path)
    with transaction(db.conn):
        rollups.rebuild(db.conn)
    return db


@pytest.fixture
def sample(tmp_path: Path) -> sqlite_utils.Database:
    """A copy of the committed sample history with rollups built."""
    path = tmp_path / "sample.db"
    shutil.copy(SAMPLE, path)
    db = open_history(path)
    with transaction(db.conn):
        rollups.rebuild(db.conn)
    return db


@pytest.mark.parametrize("hours_back", [0, 7, 30, 24 * 20 + 5])
def test_generated_history_agrees(generated: sqlite_utils.Database, hours_back: int) -> None:
    now = _newest(generated) - timedelta(hours=hours_back)
    assert assert_agrees(generated, now, Config()) > 40


def test_sample_history_agrees(sample: sqlite_utils.Database) -> None:
    now = _newest(sample)
    for config in (Config(), Config(window_days=30), Config(main_weight=5.0)):
        assert assert_agrees(sample, now, config) > 0
    assert_agrees(sample, now - timedelta(days=3, hours=5), Config())


def test_suite_filter_is_left_to_raw_rows(generated: sqlite_utils.Database) -> None:
    """Recency sums are kept across suites: a suite filter is answered from raw rows."""
    now = _newest(generated)
    assert rollups.test_base(generated.conn, now, Config(), suite="nightly") is None
    report_suites = per_test_evidence(generated, now, Config(), suite="nightly")
    assert report_suites and all(ev.suite_min == "nightly" for ev in report_suites.values())


def test_unanswerable_requests_return_none(generated: sqlite_utils.Database) -> None:
    now = _newest(generated)
    assert rollups.test_base(generated.conn, now, Config(half_life_days=7.0)) is None
    assert rollups.test_base(generated.conn, now, Config(), branch_kind="main") is None


def test_refresh_after_new_rows_and_incidents(generated: sqlite_utils.Database) -> None:
    conn = generated.conn
    now = _newest(generated)
    # Change raw rows behind the rollups' back, then refresh the affected runs.
    runs = [r for (r,) in conn.execute("SELECT id FROM runs ORDER BY ts DESC LIMIT 3")]
    with transaction(conn):
        conn.execute(
            "UPDATE test_runs SET outcome = 'fail', bad = 1 WHERE run = ? AND outcome = 'pass'",
            (runs[0],),
        )
        conn.execute("UPDATE runs SET incident = 'late-tag' WHERE id = ?", (runs[1],))
        rollups.refresh_runs(conn, runs[:2])
    assert_agrees(generated, now, Config())
    with transaction(conn):
        conn.execute("UPDATE runs SET incident = NULL WHERE id = ?", (runs[1],))
        rollups.refresh_run(conn, runs[1])
    assert_agrees(generated, now, Config())


def test_stale_rollups_are_caught_by_the_comparison(generated: sqlite_utils.Database) -> None:
    """The agreement check itself fails when a refresh is forgotten (it is a real check)."""
    conn = generated.conn
    (run,) = conn.execute("SELECT id FROM runs ORDER BY ts DESC LIMIT 1 OFFSET 40").fetchone()
    with transaction(conn):
        conn.execute("UPDATE runs SET incident = 'x' WHERE id = ?", (run,))
    with pytest.raises(AssertionError):
        assert_agrees(generated, _newest(generated), Config())


def test_rebuild_is_idempotent(generated: sqlite_utils.Database) -> None:
    conn = generated.conn
    before: list[Any] = conn.execute("SELECT * FROM test_day_rollups ORDER BY 1, 2, 3").fetchall()
    with transaction(conn):
        rollups.rebuild(conn)
    assert conn.execute("SELECT * FROM test_day_rollups ORDER BY 1, 2, 3").fetchall() == before
    assert rollups.enabled(conn)


def _record(
    db: sqlite_utils.Database, run_id: str, ts: datetime, outcomes: dict[str, list[str]]
) -> None:
    from flaketui.core.ingest.writer import RunRecorder
    from flaketui.core.models import Attempt, CaseResult, RunMeta

    meta = RunMeta(run_id=run_id, suite="ci", branch="main", branch_kind="main", ts=ts)
    recorder = RunRecorder(db, meta)
    for test_id, attempts in outcomes.items():  # one batch per test: rows refreshed per batch
        recorder.add([CaseResult(test_id, "tests/test_x.py", [Attempt(o) for o in attempts])])
    recorder.finish()


def test_writer_and_incidents_keep_rollups_exact(tmp_path: Path) -> None:
    """No manual rebuild: the writer's and the incident tagger's transactions maintain them."""
    from flaketui.core.history.incidents import add_incident, remove_incident

    db = open_history(tmp_path / "h.db")
    now = datetime.fromisoformat("2026-11-30T18:00:00+00:00")
    for index in range(40):
        ts = now - timedelta(hours=13 * index + 1)
        _record(
            db,
            f"r{index}",
            ts,
            {
                "tests/test_x.py::test_a": ["fail", "pass"] if index % 3 == 0 else ["pass"],
                "tests/test_x.py::test_b[1]": ["fail"] if index % 7 == 0 else ["pass"],
                "tests/test_x.py::test_c": ["skipped"],
            },
        )
    assert rollups.enabled(db.conn)
    assert_agrees(db, now, Config())
    # A second recorder appending a retry to an existing run and test.
    _record(db, "r0", now - timedelta(hours=1), {"tests/test_x.py::test_b[1]": ["fail"]})
    assert_agrees(db, now, Config())
    add_incident(db, "outage", start=now - timedelta(days=5), end=now - timedelta(days=3))
    tagged = db.conn.execute("SELECT count(*) FROM runs WHERE incident = 'outage'").fetchone()[0]
    assert tagged > 0
    assert_agrees(db, now - timedelta(hours=2), Config())
    remove_incident(db, "outage")
    assert_agrees(db, now - timedelta(hours=2), Config())


@pytest.mark.parametrize("kept", [1, 2])
def test_day_rows_are_the_same_whatever_run_moments_are_kept(
    generated: sqlite_utils.Database, kept: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """iter_day_rows keeps each run's day and weight in a bounded cache; a cache cleared at
    every new run gives the same rows as the rebuild's SQL."""
    from flaketui.core.rollups import sequences
    from flaketui.core.rollups import sql as q

    conn = generated.conn
    units = q.TEST_UNITS.format(source=q.TEST_SOURCE, where="1")
    params = {"ln2_per_h": -math.log(2) / (7 * 24)}
    monkeypatch.setattr(sequences, "MAX_MOMENTS", kept)
    rows = sequences.day_rows(conn, units, params, True)
    expected = conn.execute(q.day_rows(units, True), params).fetchall()
    assert len(rows) > 100
    assert sorted(_rounded(r) for r in rows) == sorted(_rounded(r) for r in expected)


def test_a_rebuilds_day_rows_are_the_sql_aggregates_rows(generated: sqlite_utils.Database) -> None:
    """A rebuild makes the tests' and families' day rows in one ordered pass over the units:
    the rows rollup_sql.day_rows's window functions give, family rows included."""
    from flaketui.core.rollups import sequences
    from flaketui.core.rollups import sql as q

    conn = generated.conn
    ln2_per_h = math.log(2) / rollups.half_life(conn)  # as the fixture's rebuild made them
    params = {"ln2_per_h": ln2_per_h}
    families = q.FAMILY_UNITS.format(
        source=q.FAMILY_SOURCE, where=f"t.parent IN ({sequences.FAMILIES})"
    )
    for table, units, lists in (
        ("test_day_seq", q.TEST_UNITS.format(source=q.TEST_SOURCE, where="1"), True),
        ("family_day_seq", families, False),
    ):
        columns = sequences._TEST_COLS if lists else sequences._FAMILY_COLS
        stored = conn.execute(f"SELECT {columns} FROM {table}").fetchall()
        expected = conn.execute(q.day_rows(units, lists), params).fetchall()
        assert len(stored) > 100, table
        assert len(stored) == len(expected), table
        for ours, theirs in zip(sorted(stored), sorted(expected), strict=True):
            assert all(
                math.isclose(a, b, rel_tol=1e-9) if isinstance(a, float) else a == b
                for a, b in zip(ours, theirs, strict=True)
            ), (table, ours, theirs)


def _rounded(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(round(v, 9) if isinstance(v, float) else v for v in row)
