"""The scoring rules on simulated histories with known truth (tests/simulate.py).

Each test states what a team must be able to trust on a large, noisy CI: steady flakes are
rarely called resolved, rare noise stays off the list, a test that starts flaking ranks by what
it does now, a flaky test that breaks is a regression, damage follows bad runs whatever kind of
evidence showed them, weekly rates come from honest spans, a resolved test carries no damage.
"""

from __future__ import annotations

import json
import math
from datetime import timedelta
from pathlib import Path

import pytest
import sqlite_utils
from hypothesis import given
from hypothesis import strategies as st

from flaketui.core.config import Config
from flaketui.core.output.formats import render_json, render_table
from flaketui.core.scoring import results
from flaketui.core.scoring.report import build_report
from flaketui.core.scoring.statistics import (
    best_split,
    change_threshold,
    rate_change,
    runs_per_week,
)
from flaketui.core.scoring.verdicts import clean_tail_chance
from tests.connections import open_history
from tests.core.history_builder import HistoryBuilder, utc
from tests.core.test_rollup_scoring import assert_everything_agrees
from tests.simulate import START, Behaviour, Plan, Simulated, Suite, simulate


def _history(tmp_path: Path, plan: Plan, seed: int) -> tuple[sqlite_utils.Database, Simulated]:
    db = open_history(tmp_path / f"sim-{seed}.db")
    return db, simulate(db, plan, seed=seed)


def _by_id(report: results.Report) -> dict[str, results.TestVerdict]:
    return {t.test_id: t for t in report.tests}


def test_steady_flakes_are_rarely_called_resolved(tmp_path: Path) -> None:
    """At every rate from 1 % to 20 %, over 90 days and across seeds, at most 5 % of steady
    flakes are called resolved (the permutation bound of the resolution rule)."""
    resolved = flakes = 0
    for seed in range(3):
        plan = Plan(days=90, suites=(Suite(main_per_day=3, pr_per_day=3, retry_share=0.5),))
        for rate in (0.01, 0.03, 0.08, 0.2):
            plan.add(f"steady{round(rate * 100)}", 25, Behaviour("steady", rate=rate))
        db, sim = _history(tmp_path, plan, seed)
        for test in build_report(db, now=sim.now).tests:
            if test.scores.failed_runs:
                flakes += 1
                resolved += "resolved" in test.flags
    assert flakes >= 280
    assert resolved / flakes <= 0.05


@given(
    bad=st.integers(1, 40),
    extra=st.integers(0, 400),
    tail=st.integers(0, 400),
    more=st.integers(1, 200),
)
def test_the_clean_tail_chance_is_exact_and_falls_with_more_clean_runs(
    bad: int, extra: int, tail: int, more: int
) -> None:
    before = bad + extra
    chance = clean_tail_chance(bad, before, tail)
    assert math.isclose(
        chance, math.comb(before, bad) / math.comb(before + tail, bad), rel_tol=1e-9
    )
    assert clean_tail_chance(bad, before, tail + more) <= chance * (1 + 1e-12)


def test_rare_noise_stays_off_the_flaky_list(tmp_path: Path) -> None:
    """Tests failing 0.2 % of the time (retry-rescued) are healthy with the flag rare-flake,
    while 3 % flakes on the same suite stay flaky and rank above every one of them. (At about
    1100 runs, 5 failures already put the rate's upper bound over 1 %: a few noisy tests in
    20 keep a flaky verdict, at the bottom of the list.)"""
    plan = Plan(days=90, suites=(Suite(main_per_day=6, pr_per_day=6, retry_share=1.0),))
    noise = plan.add("noise", 60, Behaviour("rare", rate=0.002))
    real = plan.add("real", 5, Behaviour("steady", rate=0.03))
    db, sim = _history(tmp_path, plan, 7)
    report = build_report(db, now=sim.now)
    tests = _by_id(report)
    flaky_noise = [t for t in noise if tests[t].verdict == "flaky"]
    assert len(flaky_noise) <= 6
    assert sum("rare-flake" in tests[t].flags for t in noise) >= 40
    # A steady flake may still be called resolved by chance (at most 2.5 % of the time).
    listed = sorted(t for t in real if tests[t].verdict == "flaky")
    assert len(listed) >= 4
    top = [t.test_id for t in report.tests if t.rank is not None and t.rank <= len(listed)]
    assert sorted(top) == listed
    # The header counts them, and the JSON says how many.
    rare = sum("rare-flake" in t.flags for t in report.tests)
    assert f"; {rare} rare flakes below 1% listed as healthy" in render_table(report)
    assert json.loads(render_json(report))["rare_flakes"] == rare


def _onset_plan(onset_day: float) -> tuple[Plan, list[str], list[str]]:
    """A busy gating suite: 5 new 35 % flakes among old low-rate and 20 % flakes."""
    plan = Plan(days=90, suites=(Suite(main_per_day=10, pr_per_day=10, retry_share=1.0),))
    plan.add("healthy", 30, Behaviour("healthy"))
    old = []
    for rate in (0.01, 0.02, 0.04, 0.06, 0.1, 0.2):
        old += plan.add(f"old{round(rate * 100):02d}", 2, Behaviour("steady", rate=rate))
    new = plan.add("new", 5, Behaviour("onset", rate=0.35, onset_day=onset_day))
    return plan, new, old


@pytest.mark.parametrize(("days_since", "within"), [(3, 10), (7, None)])
def test_a_new_flake_ranks_by_what_it_does_now(
    tmp_path: Path, days_since: int, within: int | None
) -> None:
    """A test flaking at 35 % since a known day is in the top 10 within 3 days and at its true
    rank (above every older flake, which all fail less often) within 7; the list shows when
    it began."""
    plan, new, old = _onset_plan(90 - days_since)
    db, sim = _history(tmp_path, plan, days_since)
    tests = _by_id(build_report(db, now=sim.now))
    for test_id in new:
        test = tests[test_id]
        assert test.verdict == "flaky", test.reason
        assert test.rank is not None
        assert test.rank <= (within or len(new)), (test_id, test.rank)
        onset = START + timedelta(days=90 - days_since)
        assert test.onset is not None
        assert abs((utc(*map(int, test.onset.split("-"))) - onset).days) <= 1
    # Steady flakes are flaky since their first flake in the window, not since a change.
    steady = [tests[t] for t in old if tests[t].verdict == "flaky"]
    assert steady and all(t.onset is not None and t.onset < "2026-09-21" for t in steady)


def test_a_flaky_test_that_breaks_is_a_regression(tmp_path: Path) -> None:
    """Months of 10-30 % flakes, then every attempt fails on main from a known day."""
    plan = Plan(days=90, suites=(Suite(main_per_day=4, pr_per_day=4, retry_share=1.0),))
    broken = []
    for rate in (0.1, 0.2, 0.3):
        broken += plan.add(f"brk{round(rate * 100)}", 2, Behaviour("x", rate=rate, break_day=88))
    db, sim = _history(tmp_path, plan, 11)
    tests = _by_id(build_report(db, now=sim.now))
    for test_id in broken:
        assert tests[test_id].verdict == "regression", tests[test_id].reason
        assert tests[test_id].first_bad_commit is not None


def test_mixed_retries_do_not_flip_the_order(tmp_path: Path) -> None:
    """13 bad runs of 26 rank above 5 of 26, however few of the 13 a retry rescued."""
    db = open_history(tmp_path / "mixed.db")
    hb = HistoryBuilder(db)
    many, few = "tests/test_m.py::test_many", "tests/test_m.py::test_few"
    start = utc(2026, 11, 1)
    # Retried runs rescue 2 of many's 13 bad runs; its other bad runs failed without retry.
    hb.sequence(many, "RFPFPFPFPFPFPFPFPFPFPFRFPP", start=start, step=timedelta(hours=8))
    hb.sequence(few, "RPPPRPPPRPPPRPPPRPPPPPPPPP", start=start, step=timedelta(hours=8))
    tests = _by_id(build_report(db, now=utc(2026, 11, 10)))
    assert tests[many].verdict == tests[few].verdict == "flaky"
    assert tests[many].scores.damage > tests[few].scores.damage
    assert tests[many].rank == 1


def test_a_family_never_scores_below_its_member(tmp_path: Path) -> None:
    """The member failing 27 of 44 runs (9 retry-rescued) outranks its sibling failing 13,
    and the family pooled by run ranks at least as high as its worst member."""
    db = open_history(tmp_path / "family.db")
    hb = HistoryBuilder(db)
    hot, cool = "tests/test_f.py::test_p[hot]", "tests/test_f.py::test_p[cool]"
    hot_bad = [i for i in range(44) if i % 3 != 1][:27]
    rescued = set(hot_bad[::3])  # 9 of the 27 passed on retry
    cool_bad = hot_bad[1::2][:13]  # on runs where hot failed too
    for index in range(44):
        run = hb.run(ts=utc(2026, 11, 1) + timedelta(hours=5 * index))
        if index in hot_bad:
            run.result(hot, ["fail", "pass"] if index in rescued else ["fail"])
        else:
            run.result(hot, ["pass"])
        run.result(cool, ["fail"] if index in cool_bad else ["pass"])
    report = build_report(db, now=utc(2026, 11, 12))
    tests = _by_id(report)
    assert tests[hot].scores.failed_runs == 27 and tests[cool].scores.failed_runs == 13
    assert tests[hot].scores.damage > tests[cool].scores.damage
    (family,) = report.families
    assert family.scores.damage >= tests[hot].scores.damage


def test_weekly_rates_never_extrapolate_from_minutes(tmp_path: Path) -> None:
    """27 runs within 40 minutes are 27 runs a week (the 7-day floor), not 170."""
    db = open_history(tmp_path / "burst.db")
    hb = HistoryBuilder(db)
    test = "tests/test_b.py::test_burst"
    start = utc(2026, 11, 1, 12)
    hb.sequence(test, "RP" * 13 + "R", start=start, step=timedelta(seconds=90))
    tests = _by_id(build_report(db, now=start + timedelta(minutes=40)))
    assert tests[test].scores.runs_per_week == pytest.approx(27.0)
    custom = _by_id(
        build_report(db, now=start + timedelta(minutes=40), config=Config(min_span_days=1.0))
    )
    assert custom[test].scores.runs_per_week == pytest.approx(27.0 * 7)


@given(
    runs=st.integers(1, 5000),
    days=st.floats(0.0, 200.0),
    floor=st.floats(0.5, 30.0),
    window=st.integers(1, 120),
)
def test_runs_per_week_never_divides_by_less_than_the_floor(
    runs: int, days: float, floor: float, window: int
) -> None:
    weekly = runs_per_week(runs, days, window, floor)
    assert weekly <= runs / min(floor, window) * 7 + 1e-9
    assert weekly >= runs / window * 7 - 1e-9


def test_a_resolved_test_carries_no_damage_into_the_all_view(tmp_path: Path) -> None:
    db = open_history(tmp_path / "resolved.db")
    hb = HistoryBuilder(db)
    old, now_flaky = "tests/test_r.py::test_fixed", "tests/test_r.py::test_flaky"
    start = utc(2026, 9, 1)
    hb.sequence(old, "RPRPRRPRPR" * 3 + "P" * 120, start=start, step=timedelta(hours=12))
    hb.sequence(now_flaky, "PPPPPPPPPR" * 15, start=start, step=timedelta(hours=12))
    report = build_report(db, now=start + timedelta(days=76))
    tests = _by_id(report)
    assert tests[old].verdict == "healthy" and "resolved" in tests[old].flags
    assert tests[old].scores.damage == 0.0
    assert tests[now_flaky].verdict == "flaky" and tests[now_flaky].scores.damage > 0
    assert [t.test_id for t in report.tests] == [now_flaky, old]


@given(
    counts=st.lists(
        st.tuples(st.integers(1, 30), st.integers(0, 30)).map(lambda c: (c[0], min(c))),
        min_size=2,
        max_size=40,
    )
)
def test_best_split_finds_a_change_the_test_can_trust(counts: list[tuple[int, int]]) -> None:
    """The split statistic is never negative and a single day never splits."""
    index, statistic = best_split(counts)
    assert 1 <= index < len(counts)
    assert statistic >= -1e-9
    assert best_split(counts[:1]) == (0, 0.0)
    assert change_threshold(len(counts), 0.01) > 6.6  # at least chi-square's 1 % point


def _brute_force_split(counts: list[tuple[int, int]]) -> int:
    """The split index that maximises the two sides' Bernoulli log-likelihood, the earliest of
    ties, 0 with one day: written out, for the searches to agree with (the same arithmetic on
    the same integers, so the same floats)."""

    def loglik(bad: int, runs: int) -> float:
        if bad in (0, runs):
            return 0.0
        return bad * math.log(bad / runs) + (runs - bad) * math.log(1 - bad / runs)

    scores = [
        loglik(sum(k for _, k in counts[:i]), sum(n for n, _ in counts[:i]))
        + loglik(sum(k for _, k in counts[i:]), sum(n for n, _ in counts[i:]))
        for i in range(1, len(counts))
    ]
    if not scores:
        return 0
    return 1 + scores.index(max(scores))


@given(
    counts=st.lists(
        st.tuples(st.integers(1, 30), st.integers(0, 30)).map(lambda c: (c[0], min(c))),
        min_size=1,
        max_size=40,
    )
)
def test_rate_change_reports_the_best_split(counts: list[tuple[int, int]]) -> None:
    """rate_change splits where best_split does, with the counts on each side and the first
    bad day before and after the split."""
    days = [(f"2026-10-{i + 1:02d}", n, k) for i, (n, k) in enumerate(counts)]
    change = rate_change(days)
    index, statistic = best_split(counts)
    # best_split is the same search on bare counts: both against a plain scan of every split.
    assert index == _brute_force_split(counts)
    assert (change.runs, change.bad, change.days) == (
        sum(n for n, _ in counts),
        sum(k for _, k in counts),
        len(days),
    )
    bad_days = [day for day, _, k in days if k]
    assert change.first_bad_day == (bad_days[0] if bad_days else None)
    if index == 0:
        assert change.split_day is None and change.split_ll == change.whole_ll
        return
    assert change.split_day == days[index - 1][0]
    assert change.runs_before == sum(n for n, _ in counts[:index])
    assert change.bad_before == sum(k for _, k in counts[:index])
    assert 2.0 * (change.split_ll - change.whole_ll) == pytest.approx(statistic, abs=1e-9)
    after = [day for day, _, k in days[index:] if k]
    assert change.first_bad_after == (after[0] if after else None)


@pytest.mark.parametrize("seed", range(2))
def test_simulated_histories_score_alike_from_rollups_and_raw_rows(
    tmp_path: Path, seed: int
) -> None:
    plan, _new, _old = _onset_plan(86)
    plan.suites = (Suite(main_per_day=3, pr_per_day=3, retry_share=0.5),)
    plan.add("brk", 2, Behaviour("x", rate=0.2, break_day=87))
    db, sim = _history(tmp_path, plan, seed)
    for hours_back in (0, 30):
        assert assert_everything_agrees(db, sim.now - timedelta(hours=hours_back), Config()) > 40


def test_interrupted_runs_are_shown_and_scored_for_what_they_recorded(tmp_path: Path) -> None:
    db = open_history(tmp_path / "interrupted.db")
    hb = HistoryBuilder(db)
    test = "tests/test_i.py::test_i"
    start = utc(2026, 11, 1)
    hb.sequence(test, "PPPPPPPPPPPP", start=start, step=timedelta(hours=2))
    killed = hb.run(ts=start + timedelta(hours=30), finished=False)
    killed.result(test, ["pass"])
    report = build_report(db, now=start + timedelta(days=2))
    assert report.interrupted_runs == 1
    assert _by_id(report)[test].scores.runs == 13
    header, notice = render_table(report).splitlines()[:2]
    assert "interrupted" not in header
    assert notice == (
        "1 interrupted run: its recording never finished (a session killed by a timeout or "
        "Ctrl-C), so it counts only for the tests it recorded."
    )
    assert json.loads(render_json(report))["interrupted_runs"] == 1
