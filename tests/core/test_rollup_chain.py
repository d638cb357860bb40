"""Chaining day rows (rollup_read.sequences) agrees with the raw-row scorer over many days.

Histories of days with and without failures, days with and without default-branch runs and
days without runs, read through windows whose edges cut days on both sides.
"""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import sqlite_utils
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flaketui.core.config import Config
from flaketui.core.history.store import transaction
from flaketui.core.rollups import build as rollups
from flaketui.core.scoring.aggregates import per_family_evidence, per_test_evidence
from tests.connections import open_history
from tests.core.history_builder import PATTERN_ATTEMPTS, HistoryBuilder, utc
from tests.core.test_rollup_scoring import assert_same_evidence, assert_same_onsets, both

T0 = utc(2026, 10, 1)
TESTS = ("tests/test_c.py::test_c", "tests/test_c.py::test_p[1]", "tests/test_c.py::test_p[2]")

# One run: its branch ("?": the day's) and each test's attempts ("-": the test did not run).
run_spec = st.tuples(
    st.sampled_from(["main", "pr", "?"]), st.text("PPFRX-", min_size=3, max_size=3)
)
# One day: the days since the previous one, the branch of its "?" runs, and its runs.
day_spec = st.tuples(
    st.sampled_from([1, 1, 1, 2, 3]),
    st.sampled_from(["main", "pr"]),
    st.lists(run_spec, max_size=4),
)
Day = tuple[int, str, list[tuple[str, str]]]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    days=st.lists(day_spec, min_size=2, max_size=9),
    end_hours=st.integers(-30, 30),
    window_days=st.sampled_from([2, 3, 5]),
)
# A day without a default-branch run between two with one: the default branch's chain skips it.
@example(
    days=[(1, "main", [("?", "FFF")]), (1, "pr", [("?", "PPP")]), (1, "main", [("?", "FFF")])],
    end_hours=20,
    window_days=5,
)
# The same with the day between without a failure, and a day without runs before.
@example(
    days=[(1, "main", [("?", "XRF")]), (2, "pr", [("?", "P-P")]), (1, "pr", [("main", "FFF")])],
    end_hours=20,
    window_days=5,
)
# The window ends inside a day, after good then bad default-branch runs: the raw day's trail.
@example(
    days=[
        (1, "main", [("?", "FFF")]),
        (1, "main", [("?", "PPP"), ("?", "PRP"), ("?", "FFF"), ("?", "PPP")]),
    ],
    end_hours=15,
    window_days=2,
)
def test_chained_days_agree_with_raw_rows(
    days: list[Day], end_hours: int, window_days: int
) -> None:
    """`end_hours`: the window's end, from the last day's start (cutting it, or the first)."""
    with tempfile.TemporaryDirectory() as folder:
        db = open_history(Path(folder) / "h.db")
        now = _write(db, days, end_hours)
        config = Config(window_days=window_days, n_min=2)
        assert rollups.answers(db.conn, config)
        assert_same_evidence(*both(lambda: per_test_evidence(db, now, config)))
        assert_same_evidence(*both(lambda: per_family_evidence(db, now, config)))
        db.conn.close()


def _write(db: sqlite_utils.Database, days: list[Day], end_hours: int) -> datetime:
    """The days' runs (every third run of the "nightly" suite, the others "unit") with their
    rollups; returns the window's end."""
    hb = HistoryBuilder(db)
    day = T0
    for gap, day_branch, runs in days:
        day += timedelta(days=gap)
        for position, (branch, letters) in enumerate(runs):
            kind = day_branch if branch == "?" else branch
            suite = "nightly" if position % 3 == 2 else "unit"
            run = hb.run(ts=day + timedelta(hours=3 + 5 * position), branch_kind=kind, suite=suite)
            for test, letter in zip(TESTS, letters, strict=True):
                if letter != "-":
                    run.result(test, PATTERN_ATTEMPTS[letter])
    with transaction(db.conn):
        rollups.rebuild(db.conn)
    return day + timedelta(hours=end_hours)


FILTERS = ({"suite": "unit"}, {"suite": "nightly"}, {"branch_kind": "main"}, {"branch_kind": "pr"})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    days=st.lists(day_spec, min_size=2, max_size=9),
    end_hours=st.integers(-30, 30),
    window_days=st.sampled_from([2, 3, 5]),
    where=st.sampled_from(FILTERS),
)
# A default-branch day between two pull-request days: the branch-kind filter drops it whole.
@example(
    days=[(1, "pr", [("?", "FPF")]), (1, "main", [("?", "PPP")]), (1, "pr", [("?", "FFX")])],
    end_hours=20,
    window_days=5,
    where={"branch_kind": "pr"},
)
def test_filtered_days_agree_with_raw_rows(
    days: list[Day], end_hours: int, window_days: int, where: dict[str, str]
) -> None:
    """A suite or branch-kind restriction read from the run lists (evidence, daily rate
    changes, co-failure pairs) agrees with the raw rows of the runs it keeps."""
    with tempfile.TemporaryDirectory() as folder:
        db = open_history(Path(folder) / "h.db")
        now = _write(db, days, end_hours)
        config = Config(window_days=window_days, n_min=2)
        assert rollups.answers(db.conn, config)
        tests, raw_tests = both(lambda: per_test_evidence(db, now, config, **where))
        assert_same_evidence(tests, raw_tests)
        assert_same_evidence(*both(lambda: per_family_evidence(db, now, config, **where)))
        members = {pk: "g" + str(pk % 2) for pk in raw_tests}
        assert_same_onsets(db, now, config, raw_tests, members, where)
        db.conn.close()
