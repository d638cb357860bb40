"""Cause analysis: Fisher's exact test, Benjamini-Hochberg, pivots on every dimension, suspects."""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from cause_history import (
    BAD_HOST,
    HOST_TEST,
    NOW,
    ORDER_TEST,
    POLLUTER,
    TIMING_TEST,
    WORKERS_TEST,
    Kinds,
    build,
    random_test,
)
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from flaketui.cli.group import cli
from flaketui.core.config import Config
from flaketui.core.scoring.causes import DIMENSIONS, analyse, dimension_rows, duration_band
from flaketui.core.scoring.statistics import benjamini_hochberg, fisher_exact
from tests.connections import connected, open_history

NOW_FLAG = ["--now", "2026-11-30T00:00:00Z"]


# ---- the statistics ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        # R: fisher.test(matrix(c(bad_in, runs_in - bad_in, bad_rest, ...), 2))$p.value
        ((3, 4, 1, 4), 0.4857142857),
        ((8, 10, 2, 10), 0.0230141376),
        ((1, 10, 11, 14), 0.0027594562),  # Fisher's lady tasting tea, as a 2x2 of counts
        ((0, 5, 0, 5), 1.0),
        ((5, 5, 0, 5), 0.0079365079),
    ],
)
def test_fisher_exact_matches_published_values(
    table: tuple[int, int, int, int], expected: float
) -> None:
    assert math.isclose(fisher_exact(*table), expected, rel_tol=1e-8)


@given(
    st.integers(0, 40)
    .flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n), st.integers(0, 40)))
    .flatmap(lambda t: st.tuples(st.just(t[0]), st.just(t[1]), st.integers(0, t[2]), st.just(t[2])))
)
def test_fisher_is_a_probability_and_symmetric(table: tuple[int, int, int, int]) -> None:
    bad_in, runs_in, bad_rest, runs_rest = table
    p = fisher_exact(bad_in, runs_in, bad_rest, runs_rest)
    assert 0.0 <= p <= 1.0
    assert math.isclose(p, fisher_exact(bad_rest, runs_rest, bad_in, runs_in), rel_tol=1e-9)


def _fisher_by_definition(bad_in: int, runs_in: int, bad_rest: int, runs_rest: int) -> float:
    """The two-sided p-value term by term, each from lgamma (the reference for FisherExact)."""

    def log_choose(n: int, k: int) -> float:
        return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)

    total, bad = runs_in + runs_rest, bad_in + bad_rest
    if total == 0 or runs_in == 0 or runs_rest == 0 or bad in (0, total):
        return 1.0
    base = log_choose(total, runs_in)
    terms = [
        log_choose(bad, k) + log_choose(total - bad, runs_in - k) - base
        for k in range(max(0, runs_in - (total - bad)), min(runs_in, bad) + 1)
    ]
    cutoff = log_choose(bad, bad_in) + log_choose(total - bad, runs_in - bad_in) - base + 1e-7
    return min(1.0, sum(math.exp(lp) for lp in terms if lp <= cutoff))


@st.composite
def _tables_sharing_margins(draw: st.DrawFn) -> list[tuple[int, int, int, int]]:
    """Tables as one analysis makes them: the same runs and bad runs split many ways."""
    total = draw(st.integers(2, 80))
    bad = draw(st.integers(0, total))
    tables = []
    for runs_in in draw(st.lists(st.integers(1, total - 1), min_size=1, max_size=12)):
        low, high = max(0, runs_in - (total - bad)), min(runs_in, bad)
        bad_in = draw(st.integers(low, high))
        tables.append((bad_in, runs_in, bad - bad_in, total - runs_in))
    return tables


@given(st.lists(_tables_sharing_margins(), min_size=1, max_size=4))
def test_a_shared_fisher_gives_each_table_its_own_p_value(
    analyses: list[list[tuple[int, int, int, int]]],
) -> None:
    # One FisherExact serves a whole analysis, keeping the terms of the margins it has met:
    # every table still gets exactly the p-value of its own terms, summed in the same order.
    from flaketui.core.scoring.statistics import FisherExact

    shared = FisherExact()
    tables = [table for tables in analyses for table in tables]
    for table in [*tables, *reversed(tables)]:
        assert shared(*table) == _fisher_by_definition(*table) == fisher_exact(*table)


@st.composite
def _small_table(draw: st.DrawFn) -> tuple[int, int, int, int]:
    runs_in, runs_rest = draw(st.integers(0, 7)), draw(st.integers(0, 7))
    return draw(st.integers(0, runs_in)), runs_in, draw(st.integers(0, runs_rest)), runs_rest


@given(st.lists(_small_table(), min_size=1, max_size=3))
def test_the_stratified_fisher_test_is_the_exact_conditional_test(
    tables: list[tuple[int, int, int, int]],
) -> None:
    from flaketui.core.scoring.statistics import stratified_fisher_exact

    # By definition: every way the tables' margins allow, its probability the product of the
    # tables' hypergeometric probabilities, summed by the statistic (the bad runs "in" over
    # all tables); the p-value is the mass of the sums no more likely than the observed one.
    def choose(n: int, k: int) -> float:
        return math.comb(n, k) if 0 <= k <= n else 0

    by_sum: dict[int, float] = {0: 1.0}
    for _bad_in, runs_in, bad_rest, runs_rest in tables:
        bad, total = _bad_in + bad_rest, runs_in + runs_rest
        terms = {
            k: choose(bad, k) * choose(total - bad, runs_in - k) / choose(total, runs_in)
            for k in range(0, min(runs_in, bad) + 1)
            if choose(bad, k) * choose(total - bad, runs_in - k)
        }
        combined: dict[int, float] = {}
        for t, p in by_sum.items():
            for k, q in terms.items():
                combined[t + k] = combined.get(t + k, 0.0) + p * q
        by_sum = combined
    observed = by_sum[sum(table[0] for table in tables)]
    expected = min(1.0, sum(p for p in by_sum.values() if p <= observed * (1 + 1e-7)))
    got = stratified_fisher_exact(tables)
    assert math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-12)
    if len(tables) == 1:
        assert got == fisher_exact(*tables[0])


@given(st.lists(st.lists(_small_table(), min_size=1, max_size=3), min_size=1, max_size=4))
def test_a_shared_fisher_gives_each_stratified_test_its_own_p_value(
    analyses: list[list[tuple[int, int, int, int]]],
) -> None:
    # One FisherExact serves every pair of a co-failure analysis: each stratified test still
    # gets exactly the p-value a fresh one gives it, whatever came before.
    from flaketui.core.scoring.statistics import FisherExact, stratified_fisher_exact

    shared = FisherExact()
    for tables in [*analyses, *reversed(analyses)]:
        assert stratified_fisher_exact(tables, shared) == stratified_fisher_exact(tables)


def test_benjamini_hochberg_matches_r_p_adjust() -> None:
    # R: p.adjust(c(0.01, 0.04, 0.03, 0.005, 0.5), "BH")
    adjusted = benjamini_hochberg([0.01, 0.04, 0.03, 0.005, 0.5])
    assert adjusted == pytest.approx([0.025, 0.05, 0.05, 0.025, 0.5])


@pytest.mark.parametrize(
    ("duration", "median", "timeout", "band"),
    [
        (100, 100.0, None, "near median"),
        (1_500, 1_000.0, None, "near median"),  # 1.5x, but under a second more
        (2_000, 1_000.0, None, "1-2x median"),
        (3_900, 1_000.0, None, "2-4x median"),
        (4_001, 1_000.0, None, ">4x median"),
        (95, 0.0, None, "near median"),  # a failure's report, not a slow test
        (999, 0.0, None, "near median"),
        (1_000, 0.0, None, ">4x median"),
        (27_000, 25_000.0, 30_000, "near timeout"),
        (26_000, 25_000.0, 30_000, "1-2x median"),
        (400, 100.0, 420, "near timeout"),  # a timeout is a timeout at any scale
    ],
)
def test_duration_bands(duration: int, median: float, timeout: int | None, band: str) -> None:
    assert duration_band(duration, median, timeout) == band


# ---- generated histories ------------------------------------------------------------------


@pytest.fixture(scope="module", params=[1, 2])
def mixed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("causes") / "history.db"
    return build(path, seed=request.param)


@pytest.mark.parametrize(
    ("test_id", "dimension", "value"),
    [
        (HOST_TEST, "runner_host", BAD_HOST),
        (WORKERS_TEST, "worker_count", "8"),
        (ORDER_TEST, "predecessor", POLLUTER),
        (TIMING_TEST, "duration", "near timeout"),
    ],
)
def test_each_kind_of_flake_gets_its_own_cause_first(
    mixed: Path, test_id: str, dimension: str, value: str
) -> None:
    analysis = analyse(open_history(mixed, readonly=True), test_id, now=NOW, config=Config())
    assert analysis.suspects, "no suspect found"
    top = analysis.suspects[0]
    assert (top.dimension, top.value) == (dimension, value)
    assert top.rate > top.rest_rate and top.p_value <= 0.05
    # Nothing else is blamed for what the cause explains.
    assert [s.dimension for s in analysis.suspects] == [dimension]


def test_the_timing_cause_names_the_timeout(mixed: Path) -> None:
    """The slow cause's text: the 95th percentile of the failed runs' first attempts, and the
    timeout they ran under."""
    from flaketui.core.rollups.evidence import counted_runs_cte

    db = open_history(mixed, readonly=True)
    analysis = analyse(db, TIMING_TEST, now=NOW, config=Config())
    cte, params = counted_runs_cte(NOW, Config(), test_ids=[TIMING_TEST])
    durations = sorted(
        ms
        for (ms,) in db.conn.execute(
            f"WITH {cte} SELECT first_duration_ms FROM counted"
            " WHERE bad = 1 AND first_duration_ms IS NOT NULL",
            params,
        )
    )
    p95 = durations[int(0.95 * len(durations))]
    assert analysis.suspects[0].label == f"slow: p95 {p95 / 1000:.1f} s of a 30.0 s timeout"


def test_random_flakes_in_the_mixed_history_get_no_suspect(mixed: Path) -> None:
    db = open_history(mixed, readonly=True)
    for index in range(Kinds().random_flakes):
        assert analyse(db, random_test(index), now=NOW, config=Config()).suspects == []


def test_purely_random_flakes_get_a_suspect_at_most_five_percent_of_the_time(
    tmp_path: Path,
) -> None:
    flagged = total = 0
    for seed in (101, 102, 103):
        path = build(
            tmp_path / f"r{seed}.db",
            seed=seed,
            runs=200,
            kinds=Kinds(False, False, False, False, random_flakes=30),
        )
        db = open_history(path, readonly=True)
        for index in range(30):
            total += 1
            flagged += bool(analyse(db, random_test(index), now=NOW, config=Config()).suspects)
    assert flagged <= 0.05 * total, f"{flagged} of {total} random flakes got a suspect"


def test_pivot_rows_cover_every_run_once_per_single_valued_dimension(mixed: Path) -> None:
    analysis = analyse(open_history(mixed, readonly=True), HOST_TEST, now=NOW, config=Config())
    for dimension in ("worker_count", "runner_host", "os", "python", "suite", "hour"):
        rows = dimension_rows(analysis.units, dimension, Config())
        assert sum(row.runs for row in rows) == analysis.runs, dimension
        assert sum(row.bad_runs for row in rows) == analysis.bad_runs, dimension
        assert all(row.wilson_low <= row.fail_rate <= row.wilson_high for row in rows)
    counts = [row.value for row in dimension_rows(analysis.units, "worker_count", Config())]
    assert counts == ["1", "2", "4", "8"]
    hours = [row.value for row in dimension_rows(analysis.units, "hour", Config())]
    assert hours == sorted(hours) and all(len(hour) == 2 for hour in hours)


# ---- commands ---------------------------------------------------------------------------


def test_pivot_by_all_json_has_every_dimension_and_the_causes(mixed: Path) -> None:
    result = CliRunner().invoke(
        cli, ["pivot", str(mixed), HOST_TEST, "--by", "all", "--format", "json", *NOW_FLAG]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert list(data["by"]) == list(DIMENSIONS)
    host_rows = {row["value"]: row for row in data["by"]["runner_host"]}
    assert set(host_rows[BAD_HOST]) == {
        "value", "runs", "bad_runs", "fail_rate", "wilson_low", "wilson_high"
    }  # fmt: skip
    assert data["causes"][0]["dimension"] == "runner_host"
    assert data["causes"][0]["value"] == BAD_HOST


def test_pivot_by_one_dimension_prints_a_table_and_the_suspects(mixed: Path) -> None:
    result = CliRunner().invoke(
        cli, ["pivot", str(mixed), ORDER_TEST, "--by", "predecessor", *NOW_FLAG]
    )
    assert result.exit_code == 0, result.output
    assert POLLUTER in result.output
    assert "after test_sets_global:" in result.output


def test_pivot_refuses_an_unknown_dimension(mixed: Path) -> None:
    result = CliRunner().invoke(cli, ["pivot", str(mixed), HOST_TEST, "--by", "colour"])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "colour" in result.output
    assert "Traceback" not in result.output


def test_report_json_lists_causes_of_flaky_tests(mixed: Path) -> None:
    result = CliRunner().invoke(cli, ["report", str(mixed), "--format", "json", *NOW_FLAG])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["schema_version"] == 2
    causes = {t["test_id"]: t["causes"] for t in data["tests"]}
    assert [c["value"] for c in causes[HOST_TEST]] == [BAD_HOST]
    assert set(causes[HOST_TEST][0]) == {
        "dimension", "value", "bad", "runs", "rate", "rest_rate", "p_value", "label"
    }  # fmt: skip
    assert causes[HOST_TEST][0]["p_value"] > 0  # significant digits, not rounded to 0
    assert [c["dimension"] for c in causes[WORKERS_TEST]] == ["worker_count"]
    assert [c["value"] for c in causes[ORDER_TEST]] == [POLLUTER]
    assert all(not causes[random_test(n)] for n in range(Kinds().random_flakes))


def test_a_worker_seen_only_at_many_workers_is_explained_by_the_worker_count() -> None:
    from flaketui.core.scoring.causes import Unit, find_suspects

    units = []
    for number in range(120):
        wide = number % 3 == 0  # a third of the runs at 16 workers, every one at 02h
        bad = wide and number % 2 == 0
        workers = {f"gw{n}" for n in range(16)} if wide else {"gw0", "gw1", "gw2", "gw3"}
        if number == 3:
            workers = {"gw0", "gw1", "gw2", "gw3"}  # one good 16-worker run missed gw4..gw15:
            # "worker gw12" then has a smaller p-value than "16 workers", explained by it
        units.append(
            Unit(
                number,
                "2026-11-01T02:00:00Z" if wide else "2026-11-01T10:00:00Z",
                bad,
                {
                    "worker_count": ("16" if wide else "4",),
                    "worker_id": tuple(sorted(workers)),
                    "hour": ("02" if wide else "10",),
                },
            )
        )
    suspects = find_suspects(units, Config())
    assert [(s.dimension, s.value, s.label) for s in suspects] == [
        ("worker_count", "16", "16 workers")
    ]


def test_a_polluter_recorded_in_some_runs_explains_the_runs_it_fails_in() -> None:
    from flaketui.core.scoring.causes import Unit, find_suspects

    # Only the shuffled PR runs record an order; the victim fails in those where the polluter
    # ran before it, and nowhere else. "PR runs" is significant too, and stronger (it is
    # compared over every run), but it holds no longer once the polluter's runs are set aside.
    units = []
    for number in range(240):
        values = {"branch_kind": ("pr" if number % 4 == 0 else "main",), "hour": ("10",)}
        bad = False
        if number % 4 == 0:
            before = number % 8 == 0
            values["predecessor"] = ("tests/a.py::test_other",) + (
                ("tests/a.py::test_polluter",) if before else ()
            )
            bad = before
        units.append(Unit(number, "2026-11-01T10:00:00Z", bad, values))
    suspects = find_suspects(units, Config())
    assert [(s.dimension, s.value) for s in suspects] == [
        ("predecessor", "tests/a.py::test_polluter")
    ]


def test_a_family_run_holds_each_value_once(tmp_path: Path) -> None:
    # Two params of a family on one worker in every run, after test_x: pooled by run, each run
    # is one unit with one worker id, one duration band, one predecessor (the second param's
    # is the first, of the family itself) and a timing per param.
    from datetime import timedelta

    from flaketui.core.ingest.writer import RunRecorder
    from flaketui.core.models import Attempt, CaseResult, RunMeta
    from flaketui.core.scoring.causes import load_units
    from flaketui.core.scoring.detail import Target

    db = open_history(tmp_path / "h.db")
    params = ["t.py::test_p[a]", "t.py::test_p[b]"]
    for number in range(4):
        meta = RunMeta(run_id=f"r{number}", suite="unit", ts=NOW - timedelta(hours=number + 1))
        recorder = RunRecorder(db, meta)
        outcome = "fail" if number % 2 else "pass"
        recorder.add(
            [
                CaseResult("t.py::test_x", "t.py", [Attempt("pass", 5, None, "gw0", None, 1)]),
                *(
                    CaseResult(test_id, "t.py", [Attempt(outcome, 5, None, "gw0", None, 2 + n)])
                    for n, test_id in enumerate(params)
                ),
            ]
        )
        recorder.finish()
    target = Target("t.py::test_p", "family", [], params)
    units = load_units(db, target, now=NOW, config=Config())
    assert len(units) == 4
    for unit in units:
        assert unit.values["worker_id"] == ("gw0",)
        assert unit.values["duration"] == ("near median",)
        assert unit.values["predecessor"] == ("t.py::test_x",)
        assert unit.timings == (5, None, 5, None)  # per param: its duration, no timeout


def _record_orders(path: Path, orders: list[dict[str, list[str]]], fails: set[int]) -> Path:
    """A history whose run i ran each worker's tests in orders[i][worker] order (failing the
    family's params in the runs listed in fails)."""
    from datetime import timedelta

    from flaketui.core.ingest.writer import RunRecorder
    from flaketui.core.models import Attempt, CaseResult, RunMeta

    db = open_history(path)
    for number, order in enumerate(orders):
        meta = RunMeta(
            run_id=f"r{number}", suite="unit", ts=NOW - timedelta(hours=len(orders) - number)
        )
        recorder = RunRecorder(db, meta)
        cases = []
        for worker, tests in order.items():
            for position, test_id in enumerate(tests, start=1):
                outcome = "fail" if number in fails and "[" in test_id else "pass"
                attempt = Attempt(outcome, 5, None, worker, None, position)
                cases.append(CaseResult(test_id, "t.py", [attempt]))
        recorder.add(cases)
        recorder.finish()
    db.close()
    return path


def test_a_family_unit_holds_the_tests_before_any_of_its_params(tmp_path: Path) -> None:
    # Params on two workers: the unit's predecessors are the tests before either param on its
    # own worker (the later param's predecessors include the earlier one's), never a param
    # itself, and never a test that only ran after the params.
    from flaketui.core.scoring.causes import load_units
    from flaketui.core.scoring.detail import Target

    params = ["t.py::test_p[a]", "t.py::test_p[b]", "t.py::test_p[c]"]
    orders = [
        {
            "gw0": ["t.py::test_a", params[0], "t.py::test_b", params[1], "t.py::test_late"],
            "gw1": ["t.py::test_c", params[2], "t.py::test_d"],
        },
        {"gw0": [params[0], "t.py::test_a"], "gw1": ["t.py::test_d", params[1], params[2]]},
    ]
    history = open_history(_record_orders(tmp_path / "h.db", orders, fails={1}))
    target = Target("t.py::test_p", "family", [], params)
    units = {unit.ts: unit for unit in load_units(history, target, now=NOW, config=Config())}
    first, second = (units[ts] for ts in sorted(units))
    assert first.values["predecessor"] == ("t.py::test_a", "t.py::test_b", "t.py::test_c")
    assert second.values["predecessor"] == ("t.py::test_d",)


@pytest.mark.parametrize("kept", [2_000_000, 60, 5])
def test_an_analysis_of_many_targets_reads_the_same_order_as_one_of_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept: int
) -> None:
    # attach_causes shares one RunOrders, reading whole runs (kept: the attempts it may keep;
    # 60 makes it drop runs between targets, 5 read the targets after the first as one target
    # alone); one target's analysis reads its own spots only. Both give every unit the same
    # predecessors.
    import random

    from flaketui.core.scoring import causes
    from flaketui.core.scoring.detail import Target

    monkeypatch.setattr(causes, "MAX_ORDER_ENTRIES", kept)
    rng = random.Random(7)
    tests = [f"t.py::test_{name}" for name in "abcdefg"] + [f"t.py::test_p[{i}]" for i in range(3)]
    orders = []
    for _ in range(12):
        # Not every test in every run: the targets need different runs' orders.
        shuffled = rng.sample(tests, rng.randint(len(tests) // 2, len(tests)))
        workers = rng.choice([1, 2, 3])
        orders.append({f"gw{w}": shuffled[w::workers] for w in range(workers)})
    history = open_history(_record_orders(tmp_path / "h.db", orders, fails={1, 4, 5, 9}))
    targets = [Target(t, "test", [], [t]) for t in tests]
    targets.append(Target("t.py::test_p", "family", [], tests[-3:]))
    shared = causes.RunOrders(history.conn)

    def predecessors(units: list[causes.Unit]) -> dict[int, tuple[str, ...] | None]:
        return {unit.run: unit.values.get("predecessor") for unit in units}

    for target in [*targets, *reversed(targets)]:
        alone = causes.load_units(history, target, now=NOW, config=Config())
        together = causes.load_units(history, target, now=NOW, config=Config(), orders=shared)
        assert predecessors(together) == predecessors(alone)
        assert all(value is not None for value in predecessors(alone).values())


def test_order_is_read_from_the_newest_runs_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the MAX_ORDER_RUNS newest runs with a recorded order know their predecessors; the
    # older ones take no part in that dimension's comparisons.
    from flaketui.core.scoring import causes
    from flaketui.core.scoring.detail import Target

    monkeypatch.setattr(causes, "MAX_ORDER_RUNS", 3)
    orders = [{"gw0": [f"t.py::test_before{number}", "t.py::test_p[a]"]} for number in range(5)]
    history = open_history(_record_orders(tmp_path / "h.db", orders, fails={0, 2, 4}))
    target = Target("t.py::test_p", "family", [], ["t.py::test_p[a]"])
    units = causes.load_units(history, target, now=NOW, config=Config())
    known = {unit.values["predecessor"] for unit in units if "predecessor" in unit.values}
    assert known == {("t.py::test_before2",), ("t.py::test_before3",), ("t.py::test_before4",)}
    assert len(units) == 5


def test_run_values_read_before_a_run_landed_are_read_again(
    mixed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An analysis of many targets reads the values a run's tests share once; each later read
    is a snapshot of its own, so a target may meet a run that landed since: its values are read
    again, and a run pruned since its rows were read counts as gone."""
    from flaketui.core.scoring import causes
    from flaketui.core.scoring.detail import Target

    history = open_history(mixed, readonly=True)
    target = Target(HOST_TEST, "test", [], [HOST_TEST])
    fresh = causes.load_units(history, target, now=NOW, config=Config())
    assert len(fresh) > 10

    def plain(units: list[causes.Unit]) -> list[tuple[object, ...]]:
        return [(u.run, u.ts, u.bad, sorted(u.values.items()), u.timings) for u in units]

    stale: causes.RunValues = {}  # read before any of the target's runs landed
    again = causes.load_units(history, target, now=NOW, config=Config(), runs=stale)
    assert plain(again) == plain(fresh)
    assert fresh[0].run in stale  # kept for the targets after this one

    pruned = fresh[0].run
    read = causes.run_values

    def without_pruned(db: Any, *, now: datetime, config: Config) -> causes.RunValues:
        values = read(db, now=now, config=config)
        del values[pruned]
        return values

    monkeypatch.setattr(causes, "run_values", without_pruned)
    rest = causes.load_units(history, target, now=NOW, config=Config(), runs={})
    assert plain(rest) == plain(fresh[1:])


def test_units_are_the_counted_runs_of_the_target(mixed: Path, tmp_path: Path) -> None:
    """A target's units are its counted runs, as scoring counts them, newest first: none from
    an incident, a diagnose experiment, a skipped or an edited test-run, or before the
    window."""
    import dataclasses
    import sqlite3

    from flaketui.core.rollups.evidence import counted_runs_cte
    from flaketui.core.scoring import causes
    from flaketui.core.scoring.detail import Target

    path = tmp_path / "history.db"
    with connected(mixed) as source, connected(path) as copy:
        source.backup(copy)
    conn = sqlite3.connect(path)
    (test_pk,) = conn.execute("SELECT id FROM tests WHERE test_id = ?", (HOST_TEST,)).fetchone()
    newest = [
        run
        for (run,) in conn.execute(
            "SELECT run FROM test_runs WHERE test = ? ORDER BY ts DESC LIMIT 4", (test_pk,)
        )
    ]
    conn.execute("UPDATE runs SET incident = 'outage' WHERE id = ?", (newest[0],))
    conn.execute("UPDATE runs SET source = 'diagnose' WHERE id = ?", (newest[1],))
    for column, value, run in (("outcome", "'skipped'", newest[2]), ("edited", "1", newest[3])):
        conn.execute(
            f"UPDATE test_runs SET {column} = {value} WHERE test = ? AND run = ?", (test_pk, run)
        )
    conn.commit()
    config = dataclasses.replace(Config(), window_days=20)  # the history spans 30 days
    cte, params = counted_runs_cte(NOW, config, test_ids=[HOST_TEST])
    counted = conn.execute(
        f"WITH {cte} SELECT run FROM counted ORDER BY ts DESC, run DESC", params
    ).fetchall()
    (recorded,) = conn.execute(
        "SELECT count(*) FROM test_runs WHERE test = ?", (test_pk,)
    ).fetchone()
    conn.close()

    history = open_history(path, readonly=True)
    units = causes.load_units(
        history, Target(HOST_TEST, "test", [], [HOST_TEST]), now=NOW, config=config
    )
    assert [unit.run for unit in units] == [run for (run,) in counted]
    assert not set(newest) & {unit.run for unit in units}
    assert 10 < len(units) < recorded - len(newest)  # the window leaves the oldest out


def test_targets_analysed_together_are_each_as_analysed_alone(mixed: Path) -> None:
    """An analysis of many targets shares what it reads and makes (run values, run orders, the
    values units start from, log binomial tables); each target's units and suspects are still
    what analysing it alone gives, whichever targets came before it."""
    from flaketui.core.scoring import causes
    from flaketui.core.scoring.detail import Target

    history = open_history(mixed, readonly=True)
    config = Config()
    targets: list[causes.CauseTarget] = [
        ("test", ORDER_TEST, (ORDER_TEST,)),
        ("cofailure", "pair", (HOST_TEST, WORKERS_TEST)),
        ("test", HOST_TEST, (HOST_TEST,)),
        ("test", TIMING_TEST, (TIMING_TEST,)),
        ("cofailure", "three", (ORDER_TEST, POLLUTER, TIMING_TEST)),
    ]

    def plain(units: list[causes.Unit]) -> list[tuple[object, ...]]:
        return [(u.run, u.ts, u.bad, sorted(u.values.items()), u.timings) for u in units]

    orders, runs = (
        causes.RunOrders(history.conn),
        causes.run_values(history, now=NOW, config=config),
    )
    bases: causes.RunBases = {}
    for kind, key, members in targets:
        target = Target(key, kind, [], list(members))
        alone = causes.load_units(history, target, now=NOW, config=config)
        together = causes.load_units(
            history, target, now=NOW, config=config, orders=orders, runs=runs, bases=bases
        )
        assert plain(together) == plain(alone), key
    found = causes.find_causes(history, targets, now=NOW, config=config)
    for kind, key, members in targets:
        alone = causes.load_units(
            history, Target(key, kind, [], list(members)), now=NOW, config=config
        )
        assert found[(kind, key)] == tuple(causes.find_suspects(alone, config)), key
    assert any(found.values())
