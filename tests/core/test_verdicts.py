"""Each verdict rule on a synthetic history, with hand-checked numbers."""

from __future__ import annotations

import dataclasses
import math
from datetime import timedelta
from pathlib import Path

import pytest
import sqlite_utils
from hypothesis import given
from hypothesis import strategies as st

from flaketui.core.config import Config
from flaketui.core.rollups.evidence import Evidence
from flaketui.core.scoring import results
from flaketui.core.scoring.report import build_report
from flaketui.core.scoring.results import Scores
from flaketui.core.scoring.statistics import wilson_interval
from flaketui.core.scoring.verdicts import Judgement, is_resolved, judge, unlikely_streak
from flaketui.core.timeutil import to_iso
from tests.connections import open_history
from tests.core.history_builder import HistoryBuilder, utc

T0 = utc(2026, 10, 1)
NOW = utc(2026, 11, 1)
A = "tests/test_seed.py::test_a"
B = "tests/test_seed.py::test_b"


@pytest.fixture
def db(tmp_path: Path) -> sqlite_utils.Database:
    return open_history(tmp_path / "history.db")


@pytest.fixture
def hb(db: sqlite_utils.Database) -> HistoryBuilder:
    return HistoryBuilder(db)


def report(db: sqlite_utils.Database, now=NOW, **kwargs) -> results.Report:  # type: ignore[no-untyped-def]
    return build_report(db, now=now, **kwargs)


def verdict(db: sqlite_utils.Database, test_id: str, **kwargs) -> results.TestVerdict:  # type: ignore[no-untyped-def]
    return next(t for t in report(db, **kwargs).tests if t.test_id == test_id)


def test_a_broken_test_is_a_regression_and_an_alternating_one_flaky(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    commits_a = [f"a{i:02d}" for i in range(1, 21)]
    hb.sequence(A, "PPPPPPPPPPFFFFFFFFFF", start=T0, step=timedelta(hours=6), commits=commits_a)
    hb.sequence(B, "PFPPFPFPFPPFPFPFPPFF", start=T0, step=timedelta(hours=6))
    a, b = verdict(db, A), verdict(db, B)
    assert a.verdict == "regression"
    assert (a.first_bad_commit, a.last_good_commit) == ("a11", "a10")
    assert a.regression_rank == 1 and a.rank is None
    assert a.scores.fail_rate == 0.5
    assert b.verdict == "flaky" and b.rank == 1
    assert b.scores.flip_rate == pytest.approx(15 / 19)
    assert b.scores.flip_rate_low == pytest.approx(wilson_interval(15, 19)[0])
    # One damage rule: the Wilson lower bound of bad runs / runs (9 of 20, no change in the
    # daily rate), whatever showed the flakiness (flips here: the suite never retries).
    # 20 runs, first seen 31 days before now -> 20 / 31 * 7 runs a week; gating on main -> 4.
    assert (b.scores.current_runs, b.scores.current_bad_runs) == (20, 9)
    expected = wilson_interval(9, 20)[0] * (20 / 31 * 7) * 4
    assert b.scores.damage == pytest.approx(expected, rel=1e-3)
    assert b.scores.damage > 0
    assert "no-retry" in b.flags
    assert "15 flips in 20 main runs" in b.reason


def test_main_regression_not_rescued_by_passing_pr_runs(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    test = "tests/test_pay.py::test_settle"
    for day in range(20):
        ts = T0 + timedelta(days=day)
        main_bad = day >= 12
        hb.run(ts=ts, branch_kind="main", commit=f"m{day:02d}").result(
            test, ["fail"] if main_bad else ["pass"]
        )
        if main_bad:
            # PR runs based on older commits: half still pass.
            outcome = ["pass"] if day % 2 else ["fail"]
            hb.run(ts=ts + timedelta(hours=3), branch_kind="pr", commit=f"p{day:02d}").result(
                test, outcome
            )
    result = verdict(db, test)
    assert result.verdict == "regression"
    assert result.first_bad_commit == "m12"
    assert result.last_good_commit == "m11"
    assert "bad on main for the last 8 runs since commit m12" in result.reason


def test_flaky_40_days_ago_and_clean_for_30_days_is_healthy(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    test = "tests/test_old.py::test_fixed"
    hb.sequence(test, "PRPRRPRP", start=NOW - timedelta(days=45), step=timedelta(days=1))
    hb.sequence(test, "P" * 30, start=NOW - timedelta(days=30), step=timedelta(days=1))
    result = verdict(db, test)
    assert result.verdict == "healthy"
    assert "resolved" in result.flags
    # Up to the last flake: PRPRRPR, 4 bad of 7. The chance that 4 bad runs among 7 + n all
    # miss the last n is C(7, 4) / C(7 + n, 4): under 2.5 % from n = 9, so N_min (10)
    # decides; 31 clean runs from 2026-09-23 to 2026-10-31 = 38 days >= 3.
    assert result.reason == (
        "4 bad runs, the last on 2026-09-23; 31 clean runs since, over 38 days "
        "(>= 10 needed after 4 bad runs in 7)"
    )
    assert result.rank is None


def test_no_failure_in_20_runs_is_healthy_not_flaky(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    hb.sequence(A, "P" * 20, start=T0)
    result = verdict(db, A)
    assert result.verdict == "healthy"
    assert result.reason == "0 bad runs of 20"
    assert result.scores.wilson_high == pytest.approx(0.1611, abs=1e-4)


def test_fewer_than_n_min_runs_is_insufficient(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    hb.sequence(A, "FRFRFRFRF", start=T0)
    result = verdict(db, A)
    assert result.verdict == "insufficient"
    assert result.reason == "9 counted runs; 10 needed"


def test_error_only_flakes_are_flaky(db: sqlite_utils.Database, hb: HistoryBuilder) -> None:
    for day in range(24):
        outcomes = ["error", "pass"] if day % 6 == 0 else ["pass"]
        hb.run(ts=T0 + timedelta(days=day)).result(A, outcomes, message="MemoryError: oom")
    # Same in a suite without retries: errors interleaved with passes on main.
    hb.sequence(B, "PPPEPPPPEPPPPPEPPPP", start=T0, suite="e2e", message="Killed")
    a, b = verdict(db, A), verdict(db, B)
    assert a.verdict == "flaky"
    assert a.scores.flaky_runs == 4
    assert "4 flaky runs of 24 on main" in a.reason
    assert b.verdict == "flaky"
    assert "no-retry" in b.flags


def test_failures_only_in_pr_runs_that_edited_the_test_are_healthy(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    hb.sequence(A, "P" * 15, start=T0, step=timedelta(days=1))
    for day in range(6):
        hb.run(
            ts=T0 + timedelta(days=day, hours=5),
            branch_kind="pr",
            changed_files=["tests/test_seed.py"],
        ).result(A, ["fail"])
    result = verdict(db, A)
    assert result.verdict == "healthy"
    assert result.scores.runs == 15
    assert result.scores.failed_runs == 0


def test_nightly_only_test_ranks_below_main_gating_test(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    nightly, gating = "tests/test_n.py::test_nightly", "tests/test_g.py::test_gating"
    for day in range(30):
        ts = T0 + timedelta(days=day)
        hb.run(ts=ts, suite="nightly").result(
            nightly, ["fail", "pass"] if day % 3 == 0 else ["pass"]
        )
        for run in range(10):
            outcome = ["fail", "pass"] if (day * 10 + run) % 33 == 0 else ["pass"]
            hb.run(ts=ts + timedelta(minutes=30 * run + 1)).result(gating, outcome)
    by_id = {t.test_id: t for t in report(db).tests}
    low_rate, high_rate = by_id[gating], by_id[nightly]
    assert high_rate.scores.fail_rate > 5 * low_rate.scores.fail_rate
    assert (high_rate.verdict, low_rate.verdict) == ("flaky", "flaky")
    assert high_rate.scores.blast_radius == 1.0 and "nightly-only" in high_rate.flags
    assert low_rate.scores.blast_radius == 4.0
    assert low_rate.rank == 1 and high_rate.rank == 2


def test_failing_almost_always_is_a_regression(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    hb.sequence(A, "F" * 12, start=T0)
    result = verdict(db, A)
    assert result.verdict == "regression"
    assert result.reason.startswith("failing almost always: 12 bad runs of 12")


def test_band_between_050_and_070_depends_on_flake_evidence(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    # 17 of 20 bad: Wilson low 0.64. With retries passing it is flaky at a high rate.
    hb.sequence(A, "RRRRPRRRRPRRRRPRRRRR", start=T0)
    # Same count with every attempt failing on PR commits, no flips on main: regression.
    hb.sequence(B, "PPP", start=T0)
    hb.sequence(B, "X" * 17, start=T0 + timedelta(days=1), branch_kind="pr")
    a, b = verdict(db, A), verdict(db, B)
    assert 0.5 <= a.scores.wilson_low < 0.7
    assert a.verdict == "flaky" and "high-rate" in a.flags
    assert 0.5 <= b.scores.wilson_low < 0.7
    assert b.verdict == "regression"
    assert "no flake evidence" in b.reason


def test_very_rare_failure_without_flake_evidence_is_healthy(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    hb.sequence(A, "P" * 55, start=T0)
    hb.sequence(A, "X", start=T0 + timedelta(days=3), branch_kind="pr")
    hb.sequence(A, "P" * 4, start=T0 + timedelta(days=4))
    result = verdict(db, A)
    assert result.scores.wilson_high < 0.10
    assert result.verdict == "healthy"
    assert result.reason.startswith("rare: 1 bad run of 60")


def test_rare_flake_with_evidence_stays_flaky(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    # A 3 % flake on a busy gating test is a standing tax, not noise.
    hb.sequence(A, ("P" * 32 + "R") * 3, start=T0, step=timedelta(minutes=30))
    result = verdict(db, A)
    assert result.scores.wilson_high < 0.10
    assert result.verdict == "flaky"


def test_same_commit_pass_and_fail_is_flake_evidence(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    commits = [f"s{i // 2:02d}" for i in range(20)]  # each commit runs twice
    hb.sequence(A, "PPFPPPPPPFPPPPPPFPPP", start=T0, commits=commits, branch_kind="pr")
    result = verdict(db, A)
    assert result.verdict == "flaky"
    assert result.reason == "same-commit pass and fail 3 times"


def test_pr_only_is_bad_off_the_default_branch_while_it_passes_there(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    c = "tests/test_seed.py::test_c"
    for test_id, main in ((A, "P" * 10), (B, "P" * 9 + "F"), (c, "")):
        hb.sequence(test_id, main, start=T0, step=timedelta(hours=6))
        hb.sequence(test_id, "PPFPPFPPFP", start=T0, branch_kind="pr")
    flags = {test_id: verdict(db, test_id).flags for test_id in (A, B, c)}
    assert "pr-only" in flags[A]
    assert "pr-only" not in flags[B]  # bad on the default branch too
    # Never run on the default branch: nothing says the failures belong to its pull requests.
    assert "pr-only" not in flags[c]


def test_a_history_without_default_branch_runs_flags_nothing_pr_only(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    # Runs with no branch recorded are kept as 'pr'.
    hb.sequence(A, "PPFPPFPPFPPFPPFPPFPP", start=T0, branch_kind="pr")
    hb.sequence(B, "PPPPPPPPPPFFFFFFFFFF", start=T0, branch_kind="pr")
    rep = report(db)
    assert [t.flags for t in rep.tests if "pr-only" in t.flags] == []
    assert {t.test_id for t in rep.tests if t.scores.fail_rate > 0} == {A, B}


def test_alternating_sequence_is_flagged(db: sqlite_utils.Database, hb: HistoryBuilder) -> None:
    hb.sequence(A, "PF" * 8 + "P", start=T0)
    result = verdict(db, A)
    assert result.verdict == "flaky"
    assert result.scores.flip_rate == 1.0
    assert "alternating" in result.flags


def test_short_trailing_break_on_main_is_a_suspected_regression(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    hb.sequence(A, "P" * 20 + "XX", start=T0, commits=[f"k{i}" for i in range(22)])
    result = verdict(db, A)
    assert result.verdict == "regression"
    assert "suspected" in result.flags
    assert result.first_bad_commit == "k20"
    # The caveat ends the reason, after the commits it qualifies.
    assert result.reason == (
        "bad on main for the last 2 runs since commit k20 (last good k19), too few to be sure"
    )


def test_flaky_streak_on_main_is_not_a_change_point(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    hb.sequence(A, "P" * 15 + "RRRR", start=T0)
    result = verdict(db, A)
    assert result.verdict == "flaky"
    assert result.first_bad_commit is None


def test_incident_runs_are_not_counted(db: sqlite_utils.Database, hb: HistoryBuilder) -> None:
    hb.sequence(A, "P" * 12, start=T0)
    for hour in range(3):
        hb.run(ts=T0 + timedelta(days=2, hours=hour), incident="outage").result(A, ["fail"])
    result = verdict(db, A)
    assert result.scores.runs == 12
    assert result.verdict == "healthy"


def test_new_flag_during_grace_period(db: sqlite_utils.Database, hb: HistoryBuilder) -> None:
    hb.sequence(A, "P" * 12, start=NOW - timedelta(days=3), step=timedelta(hours=2))
    assert "new" in verdict(db, A).flags


def test_config_thresholds_are_honoured(db: sqlite_utils.Database, hb: HistoryBuilder) -> None:
    hb.sequence(A, "FRFRFRFR", start=T0)
    assert verdict(db, A).verdict == "insufficient"
    assert verdict(db, A, config=Config(n_min=5)).verdict != "insufficient"


# Rule 4, resolved incidents: the clean streak must be unlikely under the earlier bad rate.


def test_unlikely_streak_hand_computed() -> None:
    # (1 - p) ** n < 0.05  <=>  n > ln 0.05 / ln(1 - p)
    assert unlikely_streak(0.9, 0.05) == pytest.approx(28.433, abs=1e-3)  # a 10 % flake
    assert unlikely_streak(0.98, 0.05) == pytest.approx(148.28, abs=1e-2)  # a 2 % flake
    assert unlikely_streak(0.5, 0.05) == pytest.approx(4.3219, abs=1e-4)
    assert unlikely_streak(1.0, 0.05) == math.inf
    assert unlikely_streak(0.0, 0.05) == 0.0


def _ten_percent_flake_then_clean(hb: HistoryBuilder, test: str, clean_days: int) -> None:
    """80 runs, 4 a day from 70 days before NOW, every 10th flaky; then one clean run a day."""
    start = NOW - timedelta(days=70)
    hb.sequence(test, "PPPPPPPPPR" * 8, start=start, step=timedelta(hours=6))
    hb.sequence(
        test, "P" * clean_days, start=NOW - timedelta(days=clean_days), step=timedelta(days=1)
    )


def test_ten_percent_flake_resolves_after_45_clean_runs(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    # 8 bad runs in the 80 up to the last flake: C(80, 8) / C(80 + n, 8) is 2.63 % at n = 44
    # and 2.46 % at n = 45, the first tail under false_resolution_rate (2.5 %).
    _ten_percent_flake_then_clean(hb, A, 45)
    _ten_percent_flake_then_clean(hb, B, 44)
    a, b = verdict(db, A), verdict(db, B)
    assert a.verdict == "healthy" and "resolved" in a.flags
    assert "45 clean runs since, over 49 days (>= 45 needed after 8 bad runs in 80)" in (a.reason)
    assert b.verdict == "flaky" and "resolved" not in b.flags
    assert b.reason.endswith(
        "; clean for the last 44 runs over 49 days, 45 runs and 3 days needed to call it resolved"
    )


def test_recent_crash_is_not_resolved_by_a_likely_clean_streak(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    # A crash every ~16 runs (6 %) for 20 days, the last 4 days ago, 24 clean runs since.
    # A steady 6 % flake gives 24 clean runs 1 time in 4: not a resolution.
    start = NOW - timedelta(days=24)
    pattern = ("P" * 15 + "E") * 5
    hb.sequence(A, pattern, start=start, step=timedelta(hours=6), message="Worker crashed")
    hb.sequence(A, "P" * 24, start=NOW - timedelta(days=4), step=timedelta(hours=4))
    result = verdict(db, A)
    # 5 bad in 80: C(80, 5) / C(80 + n, 5) < 2.5 % from n = 86.
    assert result.verdict == "flaky"
    assert "86 runs and 3 days needed to call it resolved" in result.reason


def test_clean_runs_in_one_burst_do_not_resolve_without_clean_days(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    # 50 % flaky until 2 days ago, then 40 clean re-runs within 10 hours: the rate says
    # enough (10 runs), the days (2 < 7) do not.
    hb.sequence(A, "RP" * 10, start=NOW - timedelta(days=11), step=timedelta(hours=12))
    hb.sequence(A, "P" * 40, start=NOW - timedelta(hours=11), step=timedelta(minutes=15))
    result = verdict(db, A)
    assert result.verdict == "flaky"
    assert result.reason.endswith(
        "clean for the last 41 runs over 2 days, 10 runs and 3 days needed to call it resolved"
    )
    assert verdict(db, A, config=Config(resolved_min_days=0.0)).verdict == "healthy"


def test_thin_family_is_flaky_as_a_family_through_quiet_spells(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    # A fixture-leak shape: 12 params, one of them flaky in every 11th run (9 %), the last flake
    # 14 runs ago. Each param alone is thin; the family (pooled by run) stays flaky: after 9
    # bad in 99 runs, 14 clean runs after them happen by chance 29 % of the time
    # (C(99, 9) / C(113, 9)); 49 would be needed.
    params = [f"tests/test_bill.py::test_rollup[p{i:02d}]" for i in range(12)]
    runs = 99 + 14
    for index in range(runs):
        run = hb.run(ts=NOW - timedelta(days=28) + index * timedelta(hours=6), worker_count=4)
        flaky_param = index // 11 % 12 if index % 11 == 10 and index < 99 else None
        for number, param in enumerate(params):
            run.result(param, ["fail", "pass"] if number == flaky_param else ["pass"])
    built = report(db)
    family = next(f for f in built.families if f.key == "tests/test_bill.py::test_rollup")
    assert (family.scores.runs, family.scores.flaky_runs) == (113, 9)
    assert family.verdict == "flaky" and family.rank == 1
    assert "49 runs and 3 days needed to call it resolved" in family.reason
    members = [t for t in built.tests if t.parent == family.key]
    assert max(t.scores.flaky_runs for t in members) == 1


def _evidence(failed: int, before_tail: int, tail: int, clean_days: float) -> Evidence:
    """Evidence with `failed` bad runs among `before_tail` runs, then `tail` clean runs."""
    last_failure = NOW - timedelta(days=clean_days)
    return Evidence(
        key=1, runs=before_tail + tail, flaky_runs=failed, failed_runs=failed, flips=0,
        clean_tail=tail, weighted_bad=0.0, weighted_total=0.0, first_ts=to_iso(T0),
        last_ts=to_iso(NOW), last_failure_at=to_iso(last_failure), max_attempts=2,
        gates_main=1, gates_branch=0, mixed_commits=0, main_runs=before_tail + tail,
        main_bad=failed, main_bad_streaks=failed, main_recoveries=failed, main_flips=0,
        good_rn=before_tail + tail, streak=0, streak_flaky=0, first_bad_commit=None,
        first_bad_at=None, last_good_commit=None, last_good_at=None,
    )  # fmt: skip


@given(
    st.integers(min_value=1, max_value=60),
    st.integers(min_value=0, max_value=400),
    st.integers(min_value=0, max_value=400),
    st.integers(min_value=1, max_value=200),
    st.floats(min_value=0.0, max_value=60.0),
)
def test_more_clean_runs_never_undo_a_resolution(
    failed: int, extra_before: int, tail: int, more: int, days: float
) -> None:
    before = failed + extra_before
    resolved = is_resolved(_evidence(failed, before, tail, days))
    later = is_resolved(_evidence(failed, before, tail + more, days + more / 4))
    assert later or not resolved
    # And the rule never resolves a streak the past rate makes likely (>= 5 %).
    if resolved:
        assert (1.0 - failed / before) ** tail < 0.05 and tail >= 10 and days >= 3.0


# The band edges, on the rule itself: Wilson bounds exactly at and just past each threshold.


def _band_evidence(*, flake_evidence: bool) -> Evidence:
    """40 main runs, 12 bad and the latest one bad; flaky on retry or never retried."""
    flaky = 6 if flake_evidence else 0
    return dataclasses.replace(
        _evidence(12, 40, 0, 0.0),
        flaky_runs=flaky, main_bad_streaks=1, main_recoveries=0, good_rn=39, streak=1,
    )  # fmt: skip


def _judge_with(ev: Evidence, low: float, high: float) -> Judgement:
    scores = Scores(runs=ev.runs, failed_runs=ev.failed_runs, wilson_low=low, wilson_high=high)
    config = Config()
    return judge(ev, scores, retries=True, first_seen=T0, now=NOW, config=config)


@pytest.mark.parametrize(
    ("low", "flake_evidence", "expected", "flags"),
    [
        (0.50, True, "flaky", ["high-rate"]),
        (0.4999, True, "flaky", []),
        (0.50, False, "regression", []),
        (0.4999, False, "regression", ["suspected"]),
    ],
)
def test_high_rate_band_starts_at_a_wilson_low_of_050(
    low: float, flake_evidence: bool, expected: str, flags: list[str]
) -> None:
    assert Config().flaky_low_max == 0.50
    result = _judge_with(_band_evidence(flake_evidence=flake_evidence), low, 0.69)
    assert (result.verdict, result.flags) == (expected, flags)
    if expected == "regression":
        in_band = result.reason.startswith("failing mostly, no flake evidence")
        assert in_band == (low >= 0.50)


@pytest.mark.parametrize(
    ("high", "expected", "flags"),
    [(0.0999, "healthy", []), (0.10, "regression", ["suspected"])],
)
def test_rare_without_evidence_is_healthy_only_below_a_wilson_high_of_010(
    high: float, expected: str, flags: list[str]
) -> None:
    assert Config().healthy_high == 0.10
    result = _judge_with(_band_evidence(flake_evidence=False), 0.02, high)
    assert (result.verdict, result.flags) == (expected, flags)
    assert result.reason.startswith("rare: ") == (expected == "healthy")


def test_a_reason_counts_one_run_in_the_singular(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    hb.run(ts=T0 + timedelta(days=20)).result(A, ["pass"])
    assert verdict(db, A).reason == f"1 counted run; {Config().n_min} needed"
