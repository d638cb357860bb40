"""Co-failure groups: flaky tests failing in the same runs are one problem; independent ones
are not, however often they fail."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from flaketui.cli.group import cli
from flaketui.core.config import Config
from flaketui.core.history import store
from flaketui.core.history.store import transaction
from flaketui.core.ingest.writer import RunRecorder
from flaketui.core.models import Attempt, CaseResult, RunMeta
from flaketui.core.output.formats import COFAILURE_KEYS
from flaketui.core.rollups import build as rollups
from flaketui.core.scoring.causes import attach_causes
from flaketui.core.scoring.cofailure import (
    COFAILURE_MIN_SHARED,
    MAX_BAD_TESTS_PER_RUN,
    cofailure_groups,
    group_key,
    group_label,
)
from flaketui.core.scoring.report import build_report
from flaketui.core.scoring.statistics import fisher_exact
from tests.connections import open_history

NOW = datetime(2026, 11, 30, tzinfo=UTC)
LEAKER = "tests/test_clock.py::test_freezes_time"
VICTIMS = [f"tests/test_dates.py::test_victim_{n}" for n in range(3)]
# Independent flakes failing often: they share many runs by chance, never a cause.
COINS = {"tests/test_net.py::test_coin_a": 0.45, "tests/test_net.py::test_coin_b": 0.5}
STEADY = [f"tests/test_fill.py::test_{n:02d}" for n in range(12)]


def build(path: Path, *, seed: int, runs: int = 160) -> Path:
    """Serial runs in a random order: in half the runs the leaker leaves time frozen, and then
    every victim that runs after it fails."""
    rng = random.Random(seed)
    db = store.open_history(path)  # closed below: a module's fixture builds it
    for number in range(runs):
        order = [LEAKER, *VICTIMS, *COINS, *STEADY]
        rng.shuffle(order)
        leaks = rng.random() < 0.5
        cases = []
        for position, test in enumerate(order, start=1):
            if test in VICTIMS:
                fails = leaks and order.index(LEAKER) < position - 1
            elif test in COINS:
                fails = rng.random() < COINS[test]
            else:
                fails = False
            previous = order[position - 2] if position > 1 else None
            attempts = [Attempt("fail" if fails else "pass", 5, "boom", None, previous, position)]
            if fails:
                attempts.append(Attempt("pass", 5, None, None, test, position))
            cases.append(CaseResult(test, test.split("::")[0], attempts))
        meta = RunMeta(
            run_id=f"run-{number:03d}",
            suite="unit",
            branch_kind="main" if number % 2 else "pr",
            ts=NOW - timedelta(days=28) + timedelta(hours=4 * number),
            worker_count=1,
        )
        recorder = RunRecorder(db, meta)
        recorder.add(cases)
        recorder.finish()
    db.conn.close()
    return path


@pytest.fixture(scope="module", params=[1, 2, 3])
def history(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("cofail") / "history.db", seed=request.param)


def test_the_victims_of_one_leak_are_one_group_with_the_leak_as_cause(history: Path) -> None:
    db = open_history(history, readonly=True)
    ranked = build_report(db, now=NOW, config=Config())
    flaky = {t.test_id for t in ranked.tests if t.verdict == "flaky"}
    assert set(VICTIMS) | set(COINS) <= flaky
    assert len(ranked.cofailures) == 1
    # The ranking names the group by its tests; the causes, read from the raw rows, come after.
    assert ranked.cofailures[0].causes == ()
    assert ranked.cofailures[0].label == "fail together: test_victim_0, test_victim_1, …"
    report = attach_causes(db, ranked, Config())
    group = report.cofailures[0]
    assert group.members == sorted(VICTIMS)
    assert group.key == group_key(VICTIMS)
    assert group.verdict == "flaky" and group.rank == 1
    assert group.scores == ranked.cofailures[0].scores
    top = group.causes[0]
    assert (top.dimension, top.value) == ("predecessor", LEAKER)
    assert group.label == "fail together after test_freezes_time"
    # Pooled by run: the group is bad in a run when any victim failed in it.
    assert group.scores.failed_runs >= max(
        t.scores.failed_runs for t in report.tests if t.test_id in VICTIMS
    )
    assert len(group.daily_scores) == 30
    # Co-failure groups alone (a table or Markdown report): the same group and name, and no
    # test or family read for causes of its own.
    named = attach_causes(db, ranked, Config(), cofailures_only=True)
    assert named.cofailures == report.cofailures
    assert all(t.causes == () for t in named.tests)
    assert all(g.causes == () for g in named.families)
    assert any(t.causes for t in report.tests)


def test_independent_flakes_are_never_grouped(history: Path) -> None:
    report = build_report(open_history(history, readonly=True), now=NOW, config=Config())
    grouped = {test for group in report.cofailures for test in group.members}
    assert not grouped & set(COINS)


def _record_run(db: Any, number: int, outcomes: dict[str, bool], suite: str = "unit") -> None:
    """Run r<number>, an hour apart from the next: each test failing or passing once."""
    meta = RunMeta(run_id=f"r{number}", suite=suite, ts=NOW - timedelta(hours=number + 1))
    recorder = RunRecorder(db, meta)
    recorder.add(
        CaseResult(test, "t.py", [Attempt("fail" if bad else "pass")])
        for test, bad in outcomes.items()
    )
    recorder.finish()


def test_the_pairing_rule(tmp_path: Path) -> None:
    """Two tests failing in exactly the same runs are linked once they share enough runs."""
    path = tmp_path / "history.db"
    db = open_history(path)
    first, second, other = "t.py::test_a", "t.py::test_b", "t.py::test_c"
    for number in range(40):
        together = number % 4 == 0 and number < 4 * COFAILURE_MIN_SHARED
        outcomes = {first: together, second: together, other: number % 5 == 1}
        _record_run(db, number, outcomes)
    pks = dict(db.conn.execute("SELECT id, test_id FROM tests").fetchall())
    groups = cofailure_groups(db, pks, NOW, Config())
    by_id = {test: pk for pk, test in pks.items()}
    assert groups == [[by_id[first], by_id[second]]]
    # One shared run fewer than the minimum, and the pair is not linked (the rows are edited
    # in place, so the rollups are rebuilt from them).
    db.conn.execute(
        "UPDATE results SET outcome = 'pass' WHERE run = (SELECT id FROM runs WHERE run_id = 'r0')"
    )
    db.conn.execute("UPDATE test_runs SET bad = 0, outcome = 'pass' WHERE run = "
                    "(SELECT id FROM runs WHERE run_id = 'r0')")  # fmt: skip
    with transaction(db.conn):
        rollups.rebuild(db.conn)
    assert cofailure_groups(db, pks, NOW, Config()) == []


def test_labels() -> None:
    assert group_label(VICTIMS, "after test_x") == "fail together after test_x"
    assert group_label(VICTIMS, "host ci-7") == "fail together: host ci-7"
    assert group_label(VICTIMS, None) == "fail together: test_victim_0, test_victim_1, …"
    assert group_label(VICTIMS[:2], None) == "fail together: test_victim_0, test_victim_1"


def test_report_json_lists_the_groups(history: Path) -> None:
    result = CliRunner().invoke(
        cli, ["report", str(history), "--now", "2026-11-30T00:00:00Z", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    [entry] = data["cofailures"]
    assert set(entry) == set(COFAILURE_KEYS)
    assert entry["tests"] == sorted(VICTIMS)
    assert entry["key"] == group_key(VICTIMS)
    assert entry["label"] == "fail together after test_freezes_time"
    assert entry["causes"][0]["dimension"] == "predecessor"
    assert entry["causes"][0]["value"] == LEAKER
    assert entry["verdict"] == "flaky" and entry["rank"] == 1


def test_report_lists_the_groups_with_group_by(history: Path) -> None:
    base = ["report", str(history), "--now", "2026-11-30T00:00:00Z", "--group-by", "cofailure"]
    table = CliRunner().invoke(cli, base)
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert lines[2].endswith("FAIL TOGETHER")
    assert lines[3].startswith("1 ")
    assert lines[3].endswith("fail together after test_freezes_time (3 tests)")
    assert len(lines) == 4
    rows = list(csv.reader(io.StringIO(CliRunner().invoke(cli, [*base, "--format", "csv"]).output)))
    assert rows[0] == list(COFAILURE_KEYS)
    assert rows[1][rows[0].index("tests")] == ";".join(sorted(VICTIMS))
    assert rows[1][rows[0].index("causes")] == "after test_freezes_time"
    markdown = CliRunner().invoke(cli, [*base, "--format", "markdown"]).output
    assert "| Rank | Fail together |" in markdown
    assert "`fail together after test_freezes_time (3 tests)`" in markdown


def _pair_history(path: Path, runs: int, bad: dict[str, set[int]]) -> dict[int, str]:
    """Serial runs where each test fails in the runs given; tests.id -> test id."""
    db = open_history(path)
    for number in range(runs):
        meta = RunMeta(run_id=f"r{number}", suite="unit", ts=NOW - timedelta(minutes=number + 1))
        recorder = RunRecorder(db, meta)
        recorder.add(
            [
                CaseResult(test, "t.py", [Attempt("fail" if number in fails else "pass")])
                for test, fails in bad.items()
            ]
        )
        recorder.finish()
    return dict(db.conn.execute("SELECT id, test_id FROM tests").fetchall())


@pytest.mark.parametrize(("shared", "linked"), [(19, False), (20, True)])
def test_the_overlap_threshold(tmp_path: Path, shared: int, linked: bool) -> None:
    """40 bad runs each: sharing 19 (under half) is not enough, however significant."""
    first = list(range(0, 400, 10))  # 40 runs
    second = first[:shared] + list(range(5, 400, 10))[: 40 - shared]
    assert len(set(second)) == 40 and len(set(first) & set(second)) == shared
    pks = _pair_history(
        tmp_path / "h.db", 400, {"t.py::test_a": set(first), "t.py::test_b": set(second)}
    )
    groups = cofailure_groups(open_history(tmp_path / "h.db"), pks, NOW, Config())
    assert (groups != []) is linked


@pytest.mark.parametrize("reader", ["rollups", "raw rows"])
def test_tests_failing_only_in_one_suite_are_linked_only_within_it(
    tmp_path: Path, reader: str
) -> None:
    """Two tests that fail independently, both only in the nightly suite, share its runs: over
    every run that looks like a link, within the nightly runs it is chance. A third test that
    fails in the same nightly runs as the first is linked to it."""
    path = tmp_path / "h.db"
    db = open_history(path)
    first, second, third = "t.py::test_a", "t.py::test_b", "t.py::test_c"
    for number in range(200):
        nightly = number % 5 == 0  # 40 nightly runs among 160 unit runs
        night = number // 5
        bad = {
            first: nightly and night % 2 == 0,  # half the nightly runs
            second: nightly and night % 5 in (0, 1),  # two fifths of them, independently
            third: nightly and night % 2 == 0 and night % 10 != 0,
        }
        _record_run(db, number, bad, suite="nightly" if nightly else "unit")
    pks = dict(db.conn.execute("SELECT id, test_id FROM tests").fetchall())
    config = Config()
    if reader == "raw rows":  # rollups kept for another half-life answer nothing
        config = dataclasses.replace(config, half_life_days=config.half_life_days + 1)
    assert rollups.answers(db.conn, config) is (reader == "rollups")
    by_id = {test: pk for pk, test in pks.items()}
    assert cofailure_groups(db, pks, NOW, config) == [[by_id[first], by_id[third]]]
    # Pooled over every run, the first two would be linked: 8 shared bad runs where 40 * 16 /
    # 200 = 3.2 are expected.
    assert fisher_exact(8, 16, 12, 184) < 1e-3


def test_a_run_where_too_many_tests_failed_links_none_of_them(tmp_path: Path) -> None:
    crowd = {f"t.py::test_{n:03d}": {0, 4, 8, 12} for n in range(MAX_BAD_TESTS_PER_RUN + 1)}
    pks = _pair_history(tmp_path / "h.db", 30, crowd)
    db = open_history(tmp_path / "h.db")
    assert cofailure_groups(db, pks, NOW, Config()) == []
    # One test fewer among the flaky ones, and the same runs are no longer crowded.
    fewer = dict(sorted(pks.items())[:MAX_BAD_TESTS_PER_RUN])
    [group] = cofailure_groups(db, fewer, NOW, Config())
    assert sorted(group) == sorted(fewer)


@pytest.mark.parametrize("hours", [0, 7, 13])
def test_the_rollups_pair_as_the_raw_rows_do_edge_days_included(history: Path, hours: int) -> None:
    """The pairing's tables (each candidate pair's strata) read from the rollups' run lists
    equal those read from the raw rows, for windows whose first and last days are partial and
    read raw, with runs of two suites among them."""
    from flaketui.core.rollups.read import Window
    from flaketui.core.scoring.cofailure import _tables_from_rollups, _tables_from_rows

    db = open_history(history)
    pks = dict(db.conn.execute("SELECT id, test_id FROM tests").fetchall())
    flaky = {pk: test for pk, test in pks.items() if test not in STEADY}
    # Half the runs of another suite, so that the strata differ from one pooled table.
    with transaction(db.conn):
        db.conn.execute("UPDATE runs SET suite = 'nightly' WHERE id % 3 = 0")
        rollups.rebuild(db.conn)
    config = Config(window_days=14)
    for now in (NOW - timedelta(days=3, hours=hours), NOW - timedelta(days=9, hours=hours)):
        window = Window.of(db.conn, now, config)
        assert rollups.answers(db.conn, config)
        from_rollups = _tables_from_rollups(db, window, config, flaky, None, None)
        from_rows = _tables_from_rows(db, now, config, flaky, None, None)
        assert from_rollups[1] and sorted(from_rollups[1]) == sorted(from_rows[1])
        assert from_rollups[0] == from_rows[0]
        for suite in ("unit", "nightly"):
            assert sorted(_tables_from_rollups(db, window, config, flaky, suite, None)[1]) == (
                sorted(_tables_from_rows(db, now, config, flaky, suite, None)[1])
            )
