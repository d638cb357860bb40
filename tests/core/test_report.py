"""build_report: pooling, ranking, filters, the clock rule and the rendered formats."""

from __future__ import annotations

import csv
import gc
import inspect
import io
import json
from datetime import timedelta
from pathlib import Path

import pytest
import sqlite_utils

from flaketui.core.config import Config
from flaketui.core.output.formats import (
    FAMILY_KEYS,
    SIGNATURE_KEYS,
    TEST_KEYS,
    render,
    render_json,
    sparkline,
)
from flaketui.core.scoring import report as report_module
from flaketui.core.scoring.causes import attach_causes
from flaketui.core.scoring.report import (
    DAILY_DAYS,
    build_report,
    effective_now,
    report_stages,
)
from flaketui.core.scoring.statistics import wilson_low
from tests.connections import open_history
from tests.core.history_builder import HistoryBuilder, utc

T0 = utc(2026, 10, 1)
NOW = utc(2026, 11, 1)
FAM = "tests/test_bill.py::test_rollup"


@pytest.fixture
def db(tmp_path: Path) -> sqlite_utils.Database:
    return open_history(tmp_path / "history.db")


@pytest.fixture
def hb(db: sqlite_utils.Database) -> HistoryBuilder:
    return HistoryBuilder(db)


def build_mixed_history(hb: HistoryBuilder) -> None:
    """A family of three params in shared runs, two flaky tests sharing a signature, a
    regression, and a test in another suite."""
    for day in range(30):
        run = hb.run(ts=T0 + timedelta(days=day), commit=f"d{day:02d}")
        for param in ("a", "b", "c"):
            # Each param flakes rarely on its own day; pooled, the family flakes often.
            flaky = (day + "abc".index(param)) % 9 == 0
            run.result(
                f"{FAM}[{param}]",
                ["fail", "pass"] if flaky else ["pass"],
                message=f"KeyError: 'row {day}'",
            )
        run.result(
            "tests/test_db.py::test_one",
            ["fail", "pass"] if day % 4 == 0 else ["pass"],
            message="TimeoutError: pool exhausted after 30s",
        )
        run.result(
            "tests/test_db.py::test_two",
            ["fail", "pass"] if day % 5 == 1 else ["pass"],
            message="TimeoutError: pool exhausted after 31s",
        )
        run.result(
            "tests/test_core.py::test_broken",
            ["fail", "fail"] if day >= 25 else ["pass"],
            message="AssertionError: expected 3",
        )
    for day in range(12):
        hb.run(ts=T0 + timedelta(days=day, hours=2), suite="integration").result(
            "tests/test_api.py::test_api", ["fail", "pass"] if day % 2 else ["pass"]
        )


def test_family_is_pooled_by_run(db: sqlite_utils.Database, hb: HistoryBuilder) -> None:
    build_mixed_history(hb)
    report = build_report(db, now=NOW)
    (family,) = report.families
    assert family.key == FAM
    assert len(family.members) == 3
    # 30 runs, not 90: a family run is a run in which any param ran.
    assert family.scores.runs == 30
    flaky_days = {d for d in range(30) for p in range(3) if (d + p) % 9 == 0}
    assert family.scores.flaky_runs == len(flaky_days)
    assert family.verdict == "flaky" and family.rank == 1


def test_signature_groups_pool_tests_sharing_their_signature(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    build_mixed_history(hb)
    report = build_report(db, now=NOW)
    by_text = {g.label: g for g in report.signatures}
    pool = by_text["TimeoutError: pool exhausted after <NUM>s"]
    assert pool.members == ["tests/test_db.py::test_one", "tests/test_db.py::test_two"]
    days = {d for d in range(30) if d % 4 == 0 or d % 5 == 1}
    assert pool.scores.flaky_runs == len(days)
    assert pool.verdict == "flaky"
    tests = {t.test_id: t for t in report.tests}
    assert tests["tests/test_db.py::test_one"].signature == pool.key
    assert tests["tests/test_db.py::test_one"].signature_text == pool.label


def test_ranks_follow_damage_and_regressions_rank_apart(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    build_mixed_history(hb)
    report = build_report(db, now=NOW)
    flaky = [t for t in report.tests if t.verdict == "flaky"]
    assert [t.rank for t in flaky] == list(range(1, len(flaky) + 1))
    damages = [t.scores.damage for t in flaky]
    assert damages == sorted(damages, reverse=True)
    broken = next(t for t in report.tests if t.test_id == "tests/test_core.py::test_broken")
    assert broken.verdict == "regression"
    assert (broken.rank, broken.regression_rank) == (None, 1)
    assert broken.first_bad_commit == "d25" and broken.last_good_commit == "d24"
    assert all(t.rank is None for t in report.tests if t.verdict != "flaky")


def test_suite_filter_recomputes_ranks(db: sqlite_utils.Database, hb: HistoryBuilder) -> None:
    build_mixed_history(hb)
    report = build_report(db, now=NOW, suite="integration")
    assert [(t.test_id, t.rank) for t in report.tests] == [("tests/test_api.py::test_api", 1)]
    assert report.families == []
    main_only = build_report(db, now=NOW, branch_kind="pr")
    assert main_only.tests == []


def test_dead_tests_are_not_listed(db: sqlite_utils.Database, hb: HistoryBuilder) -> None:
    hb.sequence("tests/test_gone.py::test_gone", "R" * 12, start=T0 - timedelta(days=200))
    hb.sequence("tests/test_live.py::test_live", "P" * 12, start=T0)
    report = build_report(db, now=NOW)
    assert [t.test_id for t in report.tests] == ["tests/test_live.py::test_live"]


def test_effective_now_clamps_an_old_history(db: sqlite_utils.Database, hb: HistoryBuilder) -> None:
    hb.sequence("tests/test_a.py::test_a", "PPR", start=utc(2020, 1, 1))
    moment, clamped = effective_now(db, None, Config())
    assert (moment, clamped) == (utc(2020, 1, 1, 2), True)
    assert effective_now(db, NOW, Config()) == (NOW, False)
    assert effective_now(db, NOW.replace(tzinfo=None), Config()) == (NOW, False)
    report = build_report(db)
    assert report.now_was_clamped and report.now == utc(2020, 1, 1, 2)
    assert [t.test_id for t in report.tests] == ["tests/test_a.py::test_a"]
    assert "shown as of its newest run" in render(report, "table")


def test_effective_now_keeps_the_clock_for_a_recent_history(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    from flaketui.core.timeutil import utc_now

    hb.sequence("tests/test_a.py::test_a", "P", start=utc_now() - timedelta(days=1))
    assert effective_now(db, None, Config())[1] is False
    empty = open_history(Path(db.conn.execute("PRAGMA database_list").fetchone()[2] + "2"))
    assert effective_now(empty, None, Config())[1] is False


def test_json_is_byte_stable_and_has_exact_keys(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    build_mixed_history(hb)
    first = render_json(build_report(db, now=NOW))
    second = render_json(build_report(db, now=NOW))
    assert first == second
    data = json.loads(first)
    assert list(data) == sorted(
        [
            "schema_version",
            "now",
            "window_days",
            "config",
            "rare_flakes",
            "proposed_incidents",
            "interrupted_runs",
            "no_default_branch_runs",
            "tests",
            "families",
            "signatures",
            "cofailures",
        ]
    )
    assert data["now"] == "2026-11-01T00:00:00Z"
    assert data["schema_version"] == 2 and data["window_days"] == 90
    assert data["rare_flakes"] == 0 and data["proposed_incidents"] == []
    assert data["interrupted_runs"] == 0 and data["no_default_branch_runs"] is False
    assert data["config"]["z"] == 1.96
    assert all(set(t) == set(TEST_KEYS) for t in data["tests"])
    assert all(set(f) == set(FAMILY_KEYS) for f in data["families"])
    assert all(set(s) == set(SIGNATURE_KEYS) for s in data["signatures"])
    assert data["families"][0]["params"] == 3
    for entry in data["tests"]:
        for key in ("damage", "wilson_low", "flip_rate", "runs_per_week", "recency_score"):
            assert entry[key] == round(entry[key], 6)
        assert entry["last_failure_at"] is None or entry["last_failure_at"].endswith("Z")


def test_limit_only_truncates(db: sqlite_utils.Database, hb: HistoryBuilder) -> None:
    build_mixed_history(hb)
    report = build_report(db, now=NOW)
    full = json.loads(render(report, "json"))
    cut = json.loads(render(report, "json", limit=2))
    assert cut["tests"] == full["tests"][:2]
    rows = list(csv.DictReader(io.StringIO(render(report, "csv", limit=1))))
    assert [r["test_id"] for r in rows] == [full["tests"][0]["test_id"]]


def test_group_by_changes_the_listing(db: sqlite_utils.Database, hb: HistoryBuilder) -> None:
    build_mixed_history(hb)
    report = build_report(db, now=NOW)
    rows = list(csv.DictReader(io.StringIO(render(report, "csv", group_by="family"))))
    assert [r["parent"] for r in rows] == [FAM]
    assert rows[0]["params"] == "3"
    table = render(report, "table", group_by="signature")
    assert "TimeoutError: pool exhausted after <NUM>s (2 tests)" in table
    markdown = render(report, "markdown", group_by="family")
    assert f"`{FAM} (3 params)`" in markdown


def test_markdown_has_sparklines_and_escapes_pipes(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    hb.sequence(
        "tests/test_a.py::test_a[x|y]",
        "PRPPRPPRPPRP",
        start=NOW - timedelta(days=12),
        step=timedelta(days=1),
    )
    text = render(build_report(db, now=NOW), "markdown")
    assert "x\\|y" in text
    (row,) = [line for line in text.splitlines() if "test_a" in line]
    trend = row.split(" | ")[5]
    assert len(trend) == 30 and set(trend) <= set("▁▂▃▄▅▆▇█")
    assert trend[0] == "▁" and trend[-1] != "▁"


def test_sparkline_scaling() -> None:
    assert sparkline([]) == ""
    assert sparkline([0.0, 0.0]) == "▁▁"
    assert sparkline([0.0, 0.5, 1.0]) == "▁▅█"
    # A low flat series stays low against the quarantine threshold.
    assert sparkline([0.03, 0.03], floor_max=0.3) == "▂▂"


def test_table_lists_every_entry_aligned(db: sqlite_utils.Database, hb: HistoryBuilder) -> None:
    build_mixed_history(hb)
    report = build_report(db, now=NOW)
    lines = render(report, "table").splitlines()
    assert lines[0].startswith("flaketui report as of 2026-11-01T00:00:00Z")
    header = lines[2]
    assert header.split() == [
        "RANK",
        "VERDICT",
        "DAMAGE",
        "SCORE",
        "RUNS",
        "BAD",
        "FLAKY",
        "FLIP",
        "FLAGS",
        "SINCE",
        "TEST",
    ]
    body = lines[3:]
    assert len(body) == len(report.tests)
    column = header.index("TEST")
    assert {line[column:] for line in body} == {t.test_id for t in report.tests}
    assert "R1" in {line.split()[0] for line in body}
    # A flaky entry shows the day its flaking began; the others a dash.
    since = {line[column:]: line.split()[9] for line in body}
    for test in report.tests:
        assert since[test.test_id] == (test.onset or "-")
    assert any(t.onset for t in report.tests if t.verdict == "flaky")


@pytest.mark.parametrize("suite_columns", [16, 0])
def test_suite_is_the_most_frequent_and_retries_are_per_suite(
    db: sqlite_utils.Database,
    hb: HistoryBuilder,
    monkeypatch: pytest.MonkeyPatch,
    suite_columns: int,
) -> None:
    from flaketui.core.scoring import aggregates

    monkeypatch.setattr(aggregates, "MAX_SUITE_COLUMNS", suite_columns)
    both = "tests/test_x.py::test_both"
    hb.sequence(both, "PPFPPPPFPPPP", start=T0, suite="ci")
    hb.sequence(both, "PPP", start=T0 + timedelta(days=1), suite="nightly")
    hb.sequence("tests/test_y.py::test_retried", "PPRPPPPPPPPP", start=T0, suite="nightly")
    tests = {t.test_id: t for t in build_report(db, now=NOW).tests}
    assert tests[both].suite == "ci"
    # `nightly` retries (another test's flaky run); retries or not, damage uses the Wilson
    # lower bound of bad runs / runs (no change in the daily rate: the whole window).
    assert tests[both].scores.flaky_runs == 0
    scores = tests[both].scores
    assert (scores.current_runs, scores.current_bad_runs) == (scores.runs, scores.failed_runs)
    assert scores.flake_rate_low == pytest.approx(wilson_low(scores.failed_runs, scores.runs))
    assert scores.damage == pytest.approx(
        scores.flake_rate_low * scores.runs_per_week * scores.blast_radius
    )
    assert tests["tests/test_y.py::test_retried"].suite == "nightly"
    assert "no-retry" not in tests["tests/test_y.py::test_retried"].flags
    assert "no-retry" not in tests[both].flags


def test_report_stages_rank_tests_first_then_complete_the_same_report(
    db: sqlite_utils.Database, hb: HistoryBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_mixed_history(hb)
    monkeypatch.setattr(report_module, "FIRST_SERIES", 2)
    first, complete = list(report_stages(db, now=NOW))
    assert complete == build_report(db, now=NOW)
    # The first step: every test ranked exactly as in the complete report, no groups yet.
    assert first.families == [] and first.signatures == []
    assert complete.families and complete.signatures
    strip = [(t.test_id, t.rank, t.regression_rank, t.verdict, t.scores) for t in first.tests]
    assert strip == [
        (t.test_id, t.rank, t.regression_rank, t.verdict, t.scores) for t in complete.tests
    ]
    # Daily scores: the first failing tests in list order have theirs, the other failing ones
    # wait for the second step (an empty series), one that never failed is all zeros.
    by_id = {t.test_id: t for t in first.tests}
    failing = [t.test_id for t in complete.tests if t.scores.last_failure_at is not None]
    assert len(failing) > 2
    for test in complete.tests:
        early = by_id[test.test_id]
        if test.test_id in failing[2:]:
            assert early.daily_scores == ()
        else:
            assert early.daily_scores == test.daily_scores
            assert test.test_id in failing or set(test.daily_scores) == {0.0}


def test_report_stages_hold_one_read_snapshot(
    db: sqlite_utils.Database, hb: HistoryBuilder, tmp_path: Path
) -> None:
    build_mixed_history(hb)
    stages = report_stages(db, now=NOW)
    next(stages)
    assert db.conn.in_transaction  # the second step reads what the first read
    stages.close()
    assert not db.conn.in_transaction


def test_a_report_without_groups_is_the_first_step_and_ends_its_read(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    """What the CI gate reads: the tests of build_report, judged the same, with no groups and
    no read left open."""
    build_mixed_history(hb)
    tests = build_report(db, now=NOW, groups=False)
    assert not db.conn.in_transaction
    stages = report_stages(db, now=NOW)
    assert tests == next(stages)
    stages.close()
    complete = build_report(db, now=NOW)
    assert tests.families == tests.signatures == tests.cofailures == []
    assert complete.families and complete.signatures
    fields = [(t.test_id, t.rank, t.verdict, t.reason, t.flags, t.scores) for t in tests.tests]
    assert fields == [
        (t.test_id, t.rank, t.verdict, t.reason, t.flags, t.scores) for t in complete.tests
    ]
    assert tests.proposed_incidents == complete.proposed_incidents


@pytest.mark.parametrize(("suite_columns", "rolled_up"), [(16, False), (0, False), (16, True)])
def test_a_report_of_some_tests_judges_each_as_the_whole_report(
    db: sqlite_utils.Database,
    hb: HistoryBuilder,
    monkeypatch: pytest.MonkeyPatch,
    suite_columns: int,
    rolled_up: bool,
) -> None:
    """What the CI gate asks of the point before: a few tests' verdicts. Each test named is
    scored and judged exactly as in the whole report, whatever the others hold (a suite
    retries when any of its tests did), and no other test is listed: from the raw rows, and
    from the rollups, which then read the named tests' alone."""
    from flaketui.core.rollups import build as rollups
    from flaketui.core.scoring import aggregates

    monkeypatch.setattr(aggregates, "MAX_SUITE_COLUMNS", suite_columns)
    build_mixed_history(hb)
    both = "tests/test_x.py::test_both"  # runs in `nightly`, which another test's retries make
    hb.sequence(both, "PPFPPPPFPPPP", start=T0, suite="ci")
    hb.sequence(both, "PPP", start=T0 + timedelta(days=1), suite="nightly")
    hb.sequence("tests/test_y.py::test_retried", "PPRPPPPPPPPP", start=T0, suite="nightly")
    if rolled_up:
        # Runs through the whole window and past both its ends: whole weeks, the days around
        # them and the raw edge days all hold some.
        daily = "tests/test_w.py::test_daily"
        hb.sequence(daily, "PPFPRPP" * 6, start=T0 - timedelta(days=2), step=timedelta(hours=22))
        rollups.rebuild(db.conn)
        every = aggregates.per_test_evidence(db, NOW, Config()).values()
        retrying = {name for ev in every for name, (_, most) in ev.suites.items() if most > 1}
        assert "nightly" in retrying
        assert rollups.retry_suites(db.conn, NOW, Config()) == retrying
    whole = {t.test_id: t for t in build_report(db, now=NOW, groups=False).tests}
    judged = [name for name, t in whole.items() if t.verdict in ("flaky", "regression")]
    assert judged and both in whole
    for only in ([both], judged, sorted(whole)[::3], ["tests/test_none.py::test_gone"], []):
        part = build_report(db, now=NOW, groups=False, only=only)
        assert sorted(t.test_id for t in part.tests) == sorted(set(only) & set(whole))
        for test in part.tests:
            same = whole[test.test_id]
            assert (test.verdict, test.reason, test.flags, test.scores, test.suite) == (
                same.verdict,
                same.reason,
                same.flags,
                same.scores,
                same.suite,
            )
            assert (test.signature, test.first_bad_commit) == (
                same.signature,
                same.first_bad_commit,
            )
    with pytest.raises(ValueError, match="groups=False"):
        build_report(db, now=NOW, only=[both])


def test_markdown_group_trend_is_the_pooled_series(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    """A group's trend ends at the group's own score (the Score column), not a member's."""
    build_mixed_history(hb)
    report = build_report(db, now=NOW)
    family = report.families[0]
    assert family.daily_scores[-1] == pytest.approx(family.scores.recency_score)
    family.daily_scores = [0.0] * 29 + [1.0]  # a shape no member has
    line = next(
        row for row in render(report, "markdown", group_by="family").splitlines() if FAM in row
    )
    assert sparkline(family.daily_scores, 0.30) in line


def test_report_stages_let_the_first_report_go_once_complete(
    db: sqlite_utils.Database, hb: HistoryBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the complete report is handed over, the steps hold nothing of the first one: a
    caller that moved on does not keep its objects for every full collection to walk."""
    build_mixed_history(hb)
    monkeypatch.setattr(report_module, "FIRST_SERIES", 2)
    stages = report_stages(db, now=NOW)
    first = next(stages)
    complete = next(stages)
    gc.collect()
    here = inspect.currentframe()
    assert [holder for holder in gc.get_referrers(first) if holder is not here] == []
    assert complete.families
    stages.close()


def test_daily_scores_are_tuples_the_collector_skips(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    """A series per test and group, in a list each, lengthened every full garbage collection
    of a large report (a pause of the whole app) by all its items; a tuple of floats is not
    tracked."""
    build_mixed_history(hb)
    report = build_report(db, now=NOW)
    gc.collect()
    series = [item.daily_scores for item in [*report.tests, *report.families]]
    assert series and all(len(daily) == DAILY_DAYS for daily in series)
    assert not any(gc.is_tracked(daily) for daily in series)


def test_flags_and_causes_are_tuples_the_collector_skips(
    db: sqlite_utils.Database, hb: HistoryBuilder
) -> None:
    """Two lists per test and group (mostly empty) lengthened every full garbage collection of
    a large report; an empty tuple is shared, and a tuple of strings is not tracked."""
    build_mixed_history(hb)
    report = attach_causes(db, build_report(db, now=NOW), Config())
    gc.collect()
    items = [*report.tests, *report.families, *report.signatures, *report.cofailures]
    assert any(item.flags for item in items) and any(not item.causes for item in items)
    assert not any(gc.is_tracked(item.flags) for item in items)
    assert not any(gc.is_tracked(item.causes) for item in items if not item.causes)
