"""Worker pivot: per worker count and worker id, families pooled by run."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlite_utils
from history_builder import HistoryBuilder
from hypothesis import given, settings
from hypothesis import strategies as st

from flaketui.core.config import Config
from flaketui.core.history.incidents import add_incident
from flaketui.core.scoring.detail import UnknownTestError
from flaketui.core.scoring.pivot import worker_pivot
from flaketui.core.scoring.statistics import wilson_interval
from tests.connections import open_history

T0 = datetime(2026, 11, 1, 0, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
FAMILY = "tests/test_billing.py::test_rollup"


@pytest.fixture
def db(tmp_path: Path) -> sqlite_utils.Database:
    return open_history(tmp_path / "history.db")


def climbing_family(db: sqlite_utils.Database) -> None:
    """20 runs at each worker count; bad runs 1 (1 worker), 5 (4 workers), 12 (16 workers)."""
    hb = HistoryBuilder(db)
    hour = 0
    for workers, bad_runs in ((1, 1), (4, 5), (16, 12)):
        for index in range(20):
            run = hb.run(ts=T0 + hour * HOUR, worker_count=workers)
            hour += 1
            # One param fails in a bad run; both failing in one run still makes one bad run.
            a = ["fail", "pass"] if index < bad_runs else ["pass"]
            b = ["fail"] if index < 2 and bad_runs > 2 else ["pass"]
            run.result(f"{FAMILY}[EUR]", a, worker_id=f"gw{index % workers}")
            run.result(f"{FAMILY}[USD]", b, worker_id=f"gw{(index + 1) % workers}")


def test_family_failure_rate_climbs_with_workers(db: sqlite_utils.Database) -> None:
    climbing_family(db)
    pivot = worker_pivot(db, FAMILY, now=T0 + 70 * HOUR, config=Config())
    assert (pivot.kind, pivot.runs, pivot.bad_runs) == ("family", 60, 18)
    assert pivot.members == [f"{FAMILY}[EUR]", f"{FAMILY}[USD]"]
    rows = [(r.key, r.runs, r.bad_runs, r.fail_rate) for r in pivot.by_worker_count]
    assert rows == [("1", 20, 1, 0.05), ("4", 20, 5, 0.25), ("16", 20, 12, 0.6)]
    for row in pivot.by_worker_count:
        assert (row.wilson_low, row.wilson_high) == wilson_interval(row.bad_runs, row.runs, 1.96)
    # Hand-computed Wilson interval for 5 of 20 (z = 1.96).
    four = pivot.by_worker_count[1]
    assert four.wilson_low == pytest.approx(0.1119, abs=1e-4)
    assert four.wilson_high == pytest.approx(0.4687, abs=1e-4)
    lows = [r.wilson_low for r in pivot.by_worker_count]
    assert lows == sorted(lows)
    # Worker ids sort naturally; a run whose params ran on two workers counts once for each.
    keys = [r.key for r in pivot.by_worker_id]
    assert keys[:4] == ["gw0", "gw1", "gw2", "gw3"] and keys[-1] == "gw15"
    assert sum(r.runs for r in pivot.by_worker_id) == 20 + 40 + 40


def test_single_test_and_exclusions(db: sqlite_utils.Database) -> None:
    climbing_family(db)
    pivot = worker_pivot(db, f"{FAMILY}[USD]", now=T0 + 70 * HOUR, config=Config())
    assert pivot.kind == "test"
    assert [(r.key, r.runs, r.bad_runs) for r in pivot.by_worker_count] == [
        ("1", 20, 0),
        ("4", 20, 2),
        ("16", 20, 2),
    ]
    # The 16-worker runs are hours 40..59; tagging them removes them from the pivot.
    add_incident(db, "outage", start=T0 + 40 * HOUR, end=T0 + 59 * HOUR)
    pivot = worker_pivot(db, f"{FAMILY}[USD]", now=T0 + 70 * HOUR, config=Config())
    assert [(r.key, r.runs) for r in pivot.by_worker_count] == [("1", 20), ("4", 20)]
    with pytest.raises(UnknownTestError, match="no test or family named"):
        worker_pivot(db, "nope", now=T0, config=Config())


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([1, 2, 4, 16]),
            st.sampled_from(["pass", "fail", "flaky", "skipped"]),
            st.sampled_from(["pass", "fail", "skipped"]),
        ),
        min_size=1,
        max_size=25,
    )
)
def test_pivot_counts_sum_to_counted_runs(runs: list[tuple[int, str, str]]) -> None:
    attempts = {
        "pass": ["pass"],
        "fail": ["fail"],
        "flaky": ["fail", "pass"],
        "skipped": ["skipped"],
    }
    with tempfile.TemporaryDirectory() as folder:
        db = open_history(Path(folder) / "h.db")
        hb = HistoryBuilder(db)
        for index, (workers, a, b) in enumerate(runs):
            run = hb.run(ts=T0 + index * HOUR, worker_count=workers)
            run.result("t.py::test_p[a]", attempts[a], worker_id=f"gw{index % workers}")
            run.result("t.py::test_p[b]", attempts[b], worker_id="gw0")
        pivot = worker_pivot(db, "t.py::test_p", now=T0 + 30 * HOUR, config=Config())
        counted = [(a, b) for _w, a, b in runs if (a, b) != ("skipped", "skipped")]
        bad = [pair for pair in counted if {"fail", "flaky"} & set(pair)]
        assert pivot.runs == len(counted) == sum(r.runs for r in pivot.by_worker_count)
        assert pivot.bad_runs == len(bad) == sum(r.bad_runs for r in pivot.by_worker_count)
        assert sum(r.runs for r in pivot.by_worker_id) >= pivot.runs
        db.conn.close()
