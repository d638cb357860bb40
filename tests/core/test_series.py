"""Daily recency series (equal to the report's score as of each day) and verdict changes."""

from __future__ import annotations

import tempfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
import sqlite_utils
from history_builder import PATTERN_ATTEMPTS, HistoryBuilder
from hypothesis import given, settings
from hypothesis import strategies as st

from flaketui.core.config import Config
from flaketui.core.history.incidents import add_incident
from flaketui.core.scoring.report import build_report
from flaketui.core.scoring.series import VerdictChange, daily_recency_scores, verdict_changes
from tests.connections import open_history

T0 = datetime(2026, 11, 1, 0, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
TEST = "tests/test_a.py::test_a"


@pytest.fixture
def db(tmp_path: Path) -> sqlite_utils.Database:
    return open_history(tmp_path / "history.db")


def test_hand_computed_scores(db: sqlite_utils.Database) -> None:
    now = T0 + 20 * DAY + 12 * HOUR
    hb = HistoryBuilder(db)
    # A flaky main run exactly one half-life (14 days) old: weight 0.5 * 3 = 1.5.
    hb.run(ts=now - 14 * DAY, branch_kind="main").result(TEST, ["fail", "pass"])
    # A passing PR run at `now`: weight 1.
    hb.run(ts=now, branch_kind="pr").result(TEST, ["pass"])
    series = daily_recency_scores(db, [TEST, "unknown"], now=now, days=3, config=Config())
    # The end of the day before yesterday is 36 h before now: the flaky run is 12.5 days
    # old then, weight 3 * 0.5 ** (12.5 / 14) = 1.6155; the PR run has not happened yet.
    assert series[TEST][0] == pytest.approx(1.6155 / (1.6155 + 2), abs=1e-4)  # 0.4468
    # The end of yesterday, 12 h before now: 13.5 days old.
    weight = 3 * 0.5 ** (13.5 / 14)
    assert series[TEST][1] == pytest.approx(weight / (weight + 2))
    assert series[TEST][2] == pytest.approx(1.5 / (1.5 + 1 + 2))  # 0.3333
    assert series["unknown"] == [0.0, 0.0, 0.0]


def varied_history(db: sqlite_utils.Database) -> None:
    hb = HistoryBuilder(db)
    patterns = {"P": ["pass"], "F": ["fail"], "R": ["fail", "pass"], "E": ["error"]}
    letters = "PPRPFPPPEPRPPPPFPRRP"
    for index in range(130):
        # Every 17 h, so runs land at every hour of the day, some exactly at midnight.
        ts = T0 + index * 17 * HOUR
        kind = "main" if index % 3 else "pr"
        run = hb.run(ts=ts, branch_kind=kind, changed_files=["t.py"] if index == 7 else ())
        run.result(TEST, patterns[letters[index % len(letters)]])
        run.result("t.py::test_p[a]", patterns[letters[(index * 7) % len(letters)]])
        run.result("t.py::test_p[b]", patterns[letters[(index * 3 + 1) % len(letters)]])
        run.result("tests/test_c.py::test_c", ["skipped"] if index % 5 == 0 else ["pass"])


def test_series_matches_the_report_on_every_day(db: sqlite_utils.Database) -> None:
    varied_history(db)
    add_incident(db, "outage", start=T0 + 40 * DAY, end=T0 + 41 * DAY)
    # The window edge (now - 90 days) falls inside the history and inside a day.
    now = T0 + 92 * DAY + 7 * HOUR + 13 * timedelta(minutes=1)
    config = Config()
    days = 5
    tests = daily_recency_scores(db, None, now=now, days=days, config=config)
    families = daily_recency_scores(db, None, now=now, days=days, config=config, family=True)
    assert set(families) == {"t.py::test_p"}
    ends = [datetime(2027, 1, 29, tzinfo=UTC) + k * DAY for k in range(days - 1)] + [now]
    for position, as_of in enumerate(ends):
        report = build_report(db, now=as_of, config=config)
        for test in report.tests:
            assert tests[test.test_id][position] == pytest.approx(
                test.scores.recency_score, rel=1e-9, abs=1e-12
            ), (test.test_id, as_of)
        family = next(f for f in report.families if f.key == "t.py::test_p")
        assert families["t.py::test_p"][position] == pytest.approx(
            family.scores.recency_score, rel=1e-9
        )
    assert tests[TEST][-1] > 0.0


def test_verdict_changes_flaky_then_resolved(db: sqlite_utils.Database) -> None:
    hb = HistoryBuilder(db)
    # 30 runs every 2 h with a flaky run in every 3 (ending at 58 h), then clean runs every 6 h.
    hb.sequence(TEST, "PRPPRP" * 5, start=T0, step=2 * HOUR)
    hb.sequence(TEST, "P" * 20, start=T0 + 60 * HOUR, step=6 * HOUR)
    now = T0 + 8 * DAY + 12 * HOUR
    changes = verdict_changes(db, TEST, now=now, days=10, config=Config())
    # Nov 1: 13 runs by its end, 4 flaky. 10 of 29 runs bad up to the last flaky one (56 h):
    # 10 clean runs are enough at that rate (by 108 h), but resolving also needs 3 days since
    # it (128 h): the run at 132 h, on Nov 6, makes the failures history.
    assert [(c.day, c.before, c.after) for c in changes] == [
        (date(2026, 11, 1), "insufficient", "flaky"),
        (date(2026, 11, 6), "flaky", "healthy"),
    ]
    assert isinstance(changes[1], VerdictChange)
    assert "clean runs since" in changes[1].reason
    # A window that starts after the last change shows none.
    assert verdict_changes(db, TEST, now=now, days=2, config=Config()) == []


@settings(max_examples=15, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=100 * 24),  # hours after T0
            st.sampled_from(["main", "pr", "release"]),
            st.sampled_from(sorted(PATTERN_ATTEMPTS)),
        ),
        min_size=1,
        max_size=30,
    ),
    st.integers(min_value=0, max_value=24 * 60 - 1),
)
def test_last_value_is_the_report_score(
    runs: list[tuple[int, str, str]], minute_of_day: int
) -> None:
    now = T0 + 100 * DAY + minute_of_day * timedelta(minutes=1)
    with tempfile.TemporaryDirectory() as folder:
        db = open_history(Path(folder) / "h.db")
        hb = HistoryBuilder(db)
        for hours, kind, letter in runs:
            hb.run(ts=T0 + hours * HOUR, branch_kind=kind).result(TEST, PATTERN_ATTEMPTS[letter])
        series = daily_recency_scores(db, [TEST], now=now, days=3, config=Config())
        report = build_report(db, now=now, config=Config())
        expected = [t.scores.recency_score for t in report.tests if t.test_id == TEST] or [0.0]
        assert series[TEST][-1] == pytest.approx(expected[0], rel=1e-9, abs=1e-12)
        db.conn.close()


# ---- verdict changes read the units once: the same verdicts as one raw query per day ------


@pytest.mark.parametrize("seed", range(4))
def test_verdict_changes_judge_each_day_as_the_raw_analysis_does(tmp_path: Path, seed: int) -> None:
    """Every day's (verdict, reason) of every test and family of a random history (shared
    commits, midnight runs, incidents, edits, retries) equals one raw analysis per day."""
    from flaketui.core.scoring.detail import resolve_target
    from flaketui.core.scoring.series import judge_as_of, verdict_days
    from tests.core.test_rollup_scoring import fuzz_history

    db = open_history(tmp_path / "fuzz.db")
    start = fuzz_history(db, seed)
    now = start + timedelta(days=11, hours=17.5)
    names = [
        str(name)
        for (name,) in db.conn.execute(
            "SELECT test_id FROM tests UNION SELECT parent FROM tests ORDER BY 1"
        )
    ]
    for config in (Config(window_days=5, n_min=3), Config(window_days=3, n_min=2), Config()):
        for name in names:
            target = resolve_target(db, name)
            first_seen, ends, judged = verdict_days(db, name, now=now, days=8, config=config)
            assert judged == [
                judge_as_of(db, target, first_seen, as_of, config) for as_of in ends
            ], (name, config.window_days)


def test_verdict_changes_follow_regime_changes_as_the_raw_analysis_does(tmp_path: Path) -> None:
    """Rates that rise, fall and recover (the change-point rule decides the current regime):
    every day's (verdict, reason) equals one raw analysis per day."""
    import random

    from flaketui.core.scoring.detail import resolve_target
    from flaketui.core.scoring.series import judge_as_of, verdict_days

    rng = random.Random(4)
    db = open_history(tmp_path / "regimes.db")
    hb = HistoryBuilder(db)
    start = datetime(2026, 10, 1, tzinfo=UTC)
    rates = {  # (rate before day 20, rate after)
        "tests/test_r.py::test_rises": (0.0, 0.5),
        "tests/test_r.py::test_fixed": (0.6, 0.0),
        "tests/test_r.py::test_fam[1]": (0.05, 0.4),
        "tests/test_r.py::test_fam[2]": (0.3, 0.3),
        "tests/test_r.py::test_steady": (0.1, 0.1),
        "tests/test_r.py::test_breaks": (0.0, 1.0),  # fails every run from day 20: regression
    }
    for index in range(80):
        day = index / 2
        run = hb.run(
            ts=start + timedelta(hours=12 * index + rng.choice([0, 3, 7])),
            branch_kind=rng.choice(["main", "main", "pr"]),
            commit=f"c{index // 2}",
        )
        for test, (before, after) in rates.items():
            rate = before if day < 20 else after
            attempts = ["fail" if rng.random() < rate else "pass"]
            if attempts[0] == "fail" and rate < 1.0 and rng.random() < 0.5:
                attempts.append("pass")
            run.result(test, attempts, message="E1: boom")
    now = start + timedelta(days=40, hours=3)
    names = [*rates, "tests/test_r.py::test_fam"]
    seen = set()
    for config in (Config(), Config(window_days=14, n_min=5)):
        for name in names:
            target = resolve_target(db, name)
            first_seen, ends, judged = verdict_days(db, name, now=now, days=30, config=config)
            assert judged == [
                judge_as_of(db, target, first_seen, as_of, config) for as_of in ends
            ], (name, config.window_days)
            seen.update(verdict for verdict, _ in judged)
    assert len(seen) >= 3  # the verdicts do move


def test_the_rate_change_of_units_is_the_aggregate_one(tmp_path: Path) -> None:
    """series.rate_change_of equals aggregates.rate_changes field by field (tests and
    families, windows ending every few hours over a history whose rates move)."""
    import random

    from flaketui.core.scoring.aggregates import rate_changes
    from flaketui.core.scoring.detail import resolve_target
    from flaketui.core.scoring.series import rate_change_of, units_between

    rng = random.Random(9)
    db = open_history(tmp_path / "moves.db")
    hb = HistoryBuilder(db)
    start = datetime(2026, 10, 1, tzinfo=UTC)
    for index in range(60):
        run = hb.run(ts=start + timedelta(hours=9 * index), commit=f"c{index}")
        for test, rate in (("t.py::test_a", 0.05 if index < 30 else 0.6), ("t.py::test_p[1]", 0.3),
                           ("t.py::test_p[2]", 0.0 if index < 40 else 0.9)):  # fmt: skip
            run.result(test, ["fail" if rng.random() < rate else "pass"], message="E: x")
    config = Config(window_days=10)
    compared = 0
    for hours in range(48, 60 * 9, 31):
        now = start + timedelta(hours=hours)
        for name in ("t.py::test_a", "t.py::test_p"):
            target = resolve_target(db, name)
            kind = "family" if target.kind == "family" else "test"
            expected = rate_changes(db, now, config, kind, target.test_pks)
            units = units_between(db, target, now - timedelta(days=10), now, config)
            inside = [u for u in units if u.moment > now - timedelta(days=10)]
            if not inside:
                assert not expected
                continue
            (want,) = expected.values()
            assert rate_change_of(inside) == want, (name, now)
            compared += 1
    assert compared > 20
