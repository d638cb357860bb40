"""Outage detection: proposals, their exclusion from scoring, accept and reject."""

from __future__ import annotations

import dataclasses
import shlex
from datetime import timedelta
from pathlib import Path

import pytest
import sqlite_utils
from click.testing import CliRunner

from flaketui.cli.commands import cli
from flaketui.core.config import Config
from flaketui.core.errors import FlaketuiError
from flaketui.core.history.derived_rows import refresh_moved
from flaketui.core.history.incidents import propose_incidents
from flaketui.core.history.outages import (
    accept_outage,
    find_outages,
    pending_outages,
    proposed_outages,
    record_outages,
    reject_outage,
)
from flaketui.core.history.prune import prune_history
from flaketui.core.history.store import transaction
from flaketui.core.scoring.report import build_report
from tests.connections import open_history
from tests.core.history_builder import HistoryBuilder, utc
from tests.core.test_rollup_scoring import assert_everything_agrees
from tests.simulate import Behaviour, Outage, Plan, Suite, simulate

T0 = utc(2026, 11, 1)
NOW = utc(2026, 11, 3)


def _outage_history(tmp_path: Path, seed: int = 5) -> tuple[sqlite_utils.Database, object]:
    db = open_history(tmp_path / "outage.db")
    plan = Plan(days=30, suites=(Suite(main_per_day=5, pr_per_day=5, retry_share=0.5),))
    plan.add("ok", 60, Behaviour("healthy"))
    plan.add("flaky", 5, Behaviour("steady", rate=0.1))
    plan.outages = (Outage(8.0), Outage(17.3), Outage(26.6))
    return db, simulate(db, plan, seed=seed)


def test_outages_hitting_a_fifth_of_the_suite_are_proposed_and_excluded(tmp_path: Path) -> None:
    db, sim = _outage_history(tmp_path)
    before = build_report(db, now=sim.now)  # type: ignore[attr-defined]
    # Without the proposals, healthy victims pass and fail on the same commit.
    victims = [t for t in before.tests if "ok" in t.test_id and t.scores.failed_runs]
    assert victims
    found = find_outages(db.conn, now=sim.now, config=Config())  # type: ignore[attr-defined]
    assert sorted(run for o in found for run in o.run_ids) == sorted(sim.outage_runs)  # type: ignore[attr-defined]
    assert all(o.failed_tests == 13 and o.tests == 65 for o in found)
    new = record_outages(db, now=sim.now, config=Config())  # type: ignore[attr-defined]
    assert [o.tag for o in new] == [o.tag for o in found]
    assert record_outages(db, now=sim.now, config=Config()) == []  # type: ignore[attr-defined]
    report = build_report(db, now=sim.now)  # type: ignore[attr-defined]
    tests = {t.test_id: t for t in report.tests}
    # Every healthy victim is clean again; the flaky tests keep their evidence from the other
    # runs (their failures in the outage runs no longer count).
    assert all(tests[t.test_id].scores.failed_runs == 0 for t in victims)
    assert all(t.verdict == "flaky" for t in report.tests if "flaky" in t.test_id)
    assert [p["tag"] for p in report.proposed_incidents] == [o.tag for o in new]
    assert all(p["runs"] == 1 for p in report.proposed_incidents)
    # Tagging went through the rollups: both scoring paths still agree.
    assert assert_everything_agrees(db, sim.now, Config()) > 60  # type: ignore[attr-defined]


def _suite_run(hb: HistoryBuilder, ts: object, tests: int, failing: int, message: str) -> None:
    run = hb.run(ts=ts)  # type: ignore[arg-type]
    for index in range(tests):
        failed = index < failing
        run.result(
            f"tests/test_o.py::test_{index:02d}",
            ["fail"] if failed else ["pass"],
            message=f"{message}\n\ntests/test_o.py:{index + 1}: Error",
        )


def test_thresholds_absolute_relative_and_span(tmp_path: Path) -> None:
    db = open_history(tmp_path / "t.db")
    hb = HistoryBuilder(db)
    down = "ConnectionError: db down"
    _suite_run(hb, T0, 40, 4, down)  # 4 tests: under the absolute threshold (5)
    _suite_run(hb, T0 + timedelta(hours=5), 40, 5, down)  # 5 of 40: a proposal
    # Across runs: 3 tests, then 3 others 90 minutes later, one signature: 6 distinct tests.
    hb.run(ts=T0 + timedelta(hours=10)).result("tests/test_o.py::test_a", ["fail"], message=down)
    for name in ("b", "c"):
        hb.run(ts=T0 + timedelta(hours=10, minutes=5)).result(
            f"tests/test_o.py::test_{name}", ["fail"], message=down
        )
    for name in ("d", "e", "f"):
        hb.run(ts=T0 + timedelta(hours=11, minutes=30)).result(
            f"tests/test_o.py::test_{name}", ["fail"], message=down
        )
    # Every test passes again later: outages pass.
    _suite_run(hb, T0 + timedelta(hours=20), 40, 0, down)
    run = hb.run(ts=T0 + timedelta(hours=20))
    for name in "abcdef":
        run.result(f"tests/test_o.py::test_{name}", ["pass"])
    found = find_outages(db.conn, now=NOW, config=Config())
    assert [(o.start, o.failed_tests, len(o.run_ids)) for o in found] == [
        (T0 + timedelta(hours=5), 5, 1),
        (T0 + timedelta(hours=10), 6, 6),
    ]
    # A span too short for the second cluster, a share too high for the first.
    assert [o.failed_tests for o in find_outages(
        db.conn, now=NOW, config=Config(outage_span_hours=1.0)
    )] == [5]  # fmt: skip
    assert [o.failed_tests for o in find_outages(
        db.conn, now=NOW, config=Config(outage_min_share=0.2)
    )] == [6]  # fmt: skip
    assert find_outages(db.conn, now=NOW, config=Config(outage_min_tests=7)) == []


def test_the_share_counts_every_test_the_clusters_runs_ran(tmp_path: Path) -> None:
    """Two shards of 20 tests each, 5 failing with one message: a quarter of either shard,
    an eighth of the 40 tests the cluster's runs ran (skipped tests ran nothing)."""
    db = open_history(tmp_path / "s.db")
    hb = HistoryBuilder(db)
    down = "ConnectionError: db down"
    for shard, failing in ((0, 3), (1, 2)):
        run = hb.run(ts=T0 + timedelta(minutes=10 * shard))
        for index in range(20):
            run.result(
                f"tests/test_s{shard}.py::test_{index:02d}",
                ["fail"] if index < failing else ["pass"],
                message=down,
            )
        for index in range(30 * (1 - shard)):
            run.result(f"tests/test_skip.py::test_{index:02d}", ["skipped"])
    later = hb.run(ts=T0 + timedelta(hours=5))
    for shard in (0, 1):
        for index in range(20):
            later.result(f"tests/test_s{shard}.py::test_{index:02d}", ["pass"])
    share = 0.2  # 5 failed: at least a fifth of one shard, not of both
    found = find_outages(db.conn, now=NOW, config=Config(outage_min_share=share))
    assert found == []
    (outage,) = find_outages(db.conn, now=NOW, config=Config(outage_min_share=0.125))
    assert (outage.failed_tests, outage.tests, len(outage.run_ids)) == (5, 40, 2)


def _counts(db: sqlite_utils.Database) -> dict[str, int | None]:
    return dict(db.conn.execute("SELECT run_id, ran_at_least FROM runs ORDER BY id").fetchall())


def _found(db: sqlite_utils.Database) -> list[tuple[object, ...]]:
    with transaction(db.conn):
        outages = find_outages(db.conn, now=NOW, config=Config(), remember=True)
    return [(o.run_ids, o.failed_tests, o.tests) for o in outages]


def test_the_counts_a_search_keeps_only_ever_err_low(tmp_path: Path) -> None:
    """The search keeps each run's count of tests run (a lower bound its share check prunes
    with): a run that gains tests later is still judged on all of them, exactly as a search
    that counts afresh, and a run whose attempts move to other tests is counted again."""
    db = open_history(tmp_path / "c.db")
    hb = HistoryBuilder(db)
    down = "ConnectionError: db down"
    run = hb.run(ts=T0, run_id="outage")
    for index in range(40):
        run.result(f"tests/test_o.py::test_{index:02d}", ["fail"] if index < 5 else ["pass"],
                   message=down)  # fmt: skip
    later = hb.run(ts=T0 + timedelta(hours=5), run_id="later")
    for index in range(5):
        later.result(f"tests/test_o.py::test_{index:02d}", ["pass"])
    assert _found(db) == [(["outage"], 5, 40)]  # 5 of 40: an eighth
    assert _counts(db) == {"outage": 40, "later": None}
    # A second shard of the run lands 20 more tests: 5 of 60 is under a tenth.
    for index in range(20):
        run.result(f"tests/test_p.py::test_{index:02d}", ["pass"])
    assert _counts(db)["outage"] == 40  # kept, and still no more than the run ran
    assert _found(db) == []
    db.conn.execute("UPDATE runs SET ran_at_least = NULL")
    assert _found(db) == []  # as a search counting afresh finds
    assert _counts(db)["outage"] == 60
    # Attempts that move to other tests (shards of one run naming their files) clear it.
    with transaction(db.conn):
        refresh_moved(db.conn, run.run_pk, run.ts, set(), set())
    assert _counts(db)["outage"] is None


def test_a_break_that_stays_is_no_outage(tmp_path: Path) -> None:
    """Six tests failing with one message from a run on, never passing again: a regression."""
    db = open_history(tmp_path / "b.db")
    hb = HistoryBuilder(db)
    for hour in range(6):
        _suite_run(hb, T0 + timedelta(hours=hour), 40, 6 if hour >= 3 else 0, "KeyError: 'id'")
    assert find_outages(db.conn, now=NOW, config=Config()) == []
    # Once five of them pass again, it was an outage after all.
    _suite_run(hb, T0 + timedelta(hours=7), 40, 1, "KeyError: 'id'")
    (found,) = find_outages(db.conn, now=NOW, config=Config())
    assert found.failed_tests == 6


def test_a_flaky_test_failing_often_is_no_outage(tmp_path: Path) -> None:
    db = open_history(tmp_path / "f.db")
    hb = HistoryBuilder(db)
    for hour in range(48):
        run = hb.run(ts=T0 + timedelta(minutes=20 * hour))
        run.result("tests/test_f.py::test_flaky", ["fail", "pass"], message="TimeoutError: slow")
        run.result("tests/test_f.py::test_ok", ["pass"])
    assert find_outages(db.conn, now=NOW, config=Config()) == []


def test_outages_of_one_day_recount_that_day_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runs of every new proposal are tagged first and their days recounted once, after
    all of them: three outages of one day recount it once, not three times; rejecting one
    recounts the day once for its untagging and the rules that take its runs."""
    from flaketui.core.rollups import build as rollups
    from tests.core.test_rollup_scoring import assert_maintained

    db = open_history(tmp_path / "outage.db")
    plan = Plan(days=30, suites=(Suite(main_per_day=8, pr_per_day=4, retry_share=0.5),))
    plan.add("ok", 60, Behaviour("healthy"))
    plan.outages = (Outage(12.1), Outage(12.4), Outage(12.7))
    sim = simulate(db, plan, seed=7)
    now = sim.now  # type: ignore[attr-defined]
    days: list[str] = []
    refresh = rollups.refresh

    def counted(conn: object, day: str, tests: object) -> None:
        days.append(day)
        refresh(conn, day, tests)  # type: ignore[arg-type]

    monkeypatch.setattr(rollups, "refresh", counted)
    new = record_outages(db, now=now, config=Config())
    assert len(new) == 3
    assert len(days) == len(set(days)) == 1
    days.clear()
    assert reject_outage(db, new[0].tag) == 1
    assert len(days) == 1
    monkeypatch.undo()
    assert_maintained(db)
    assert assert_everything_agrees(db, now, Config()) > 50


def test_reject_counts_the_runs_again_and_never_proposes_again(tmp_path: Path) -> None:
    db, sim = _outage_history(tmp_path, seed=6)
    now = sim.now  # type: ignore[attr-defined]
    first, second, third = record_outages(db, now=now, config=Config())
    assert reject_outage(db, first.tag) == 1
    assert accept_outage(db, second.tag) == 1
    assert [p["tag"] for p in proposed_outages(db.conn)] == [third.tag]
    assert record_outages(db, now=now, config=Config()) == []
    states = {o.tag: o.status for o in find_outages(db.conn, now=now, config=Config())}
    assert states == {first.tag: "rejected", third.tag: "proposed"}  # accepted: a plain incident
    tagged = dict(db.conn.execute("SELECT run_id, incident FROM runs WHERE incident IS NOT NULL"))
    assert sorted(tagged.values()) == sorted([second.tag, third.tag])
    with pytest.raises(FlaketuiError, match="no proposed outage tagged 'nope'"):
        reject_outage(db, "nope")
    with pytest.raises(FlaketuiError, match="no proposed outage tagged"):
        accept_outage(db, first.tag)  # already rejected
    assert assert_everything_agrees(db, now, Config()) > 60


def test_exclusion_can_be_turned_off(tmp_path: Path) -> None:
    db, sim = _outage_history(tmp_path, seed=7)
    off = dataclasses.replace(Config(), exclude_proposed_outages=False)
    assert record_outages(db, now=sim.now, config=off) == []  # type: ignore[attr-defined]
    statuses = {o.status for o in find_outages(db.conn, now=sim.now, config=off)}  # type: ignore[attr-defined]
    assert statuses == {"new"}
    assert db.conn.execute("SELECT count(*) FROM runs WHERE incident IS NOT NULL").fetchone() == (
        0,
    )


POD_SUFFIXES = ["x2k4p", "b7z9q", "m4n5d", "q8r2t", "v6w7x", "z9b2c", "d4f5g", "h6j7k", "l8m9n"]
JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuite name="pytest" tests="10">
{cases}
</testsuite>
"""


def _report_file(path: Path, failing: int) -> Path:
    cases = []
    for index in range(10):
        body = (
            f"<failure message=\"ConnectionError: HTTPConnectionPool(host='10.0.0.{index}', "
            f'port=5432) (pod db-7d9f8b6c5-{POD_SUFFIXES[index]})">boom</failure>'
            if index < failing
            else ""
        )
        cases.append(
            f'<testcase classname="tests.test_c" name="test_{index}" file="tests/test_c.py">'
            f"{body}</testcase>"
        )
    path.write_text(JUNIT.format(cases="\n".join(cases)), encoding="utf-8")
    return path


def test_ingest_proposes_and_the_cli_reviews(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # default config: no pyproject.toml here
    db = str(tmp_path / "h.db")
    runner = CliRunner()
    ts = "2026-11-01T10:00:00Z"
    report = _report_file(tmp_path / "r1.xml", failing=6)
    result = runner.invoke(
        cli, ["ingest", db, str(report), "--timestamp", ts, "--run-id", "r1", "--no-detect"]
    )
    # One red run says nothing yet: an outage passes, a break stays.
    assert result.exit_code == 0 and "suspected" not in result.output, result.output
    rerun = _report_file(tmp_path / "r2.xml", failing=0)
    later = "2026-11-01T10:30:00Z"
    result = runner.invoke(
        cli, ["ingest", db, str(rerun), "--timestamp", later, "--run-id", "r2", "--no-detect"]
    )
    assert result.exit_code == 0, result.output
    assert "1 suspected outage excluded from scoring" in result.output
    listed = runner.invoke(cli, ["incident", "list", db, "--proposed", "--now", later])
    assert listed.exit_code == 0, listed.output
    assert "OUTAGE outage-20261101-1000-" in listed.output
    assert "6 of 10 tests failed with one signature in 1 run" in listed.output
    assert "excluded from scoring, awaiting review" in listed.output
    tag = listed.output.split()[1].rstrip(":")
    everything = runner.invoke(cli, ["incident", "list", db, "--now", later])
    assert f"{tag}: 1 run, suspected outage 2026-11-01T10:00:00Z .. 2026-11-01T10:00:00Z" in (
        everything.output
    ), everything.output
    report_json = runner.invoke(cli, ["report", db, "--now", later, "--format", "json"])
    assert f'"tag": "{tag}"' in report_json.output
    rejected = runner.invoke(cli, ["incident", "reject", db, tag])
    assert rejected.exit_code == 0 and f"outage {tag} rejected: 1 run" in rejected.output
    again = runner.invoke(cli, ["incident", "reject", db, tag])
    assert again.exit_code != 0
    assert (
        again.output.strip()
        .splitlines()[-1]
        .endswith(f"no proposed outage tagged {tag!r} (see flaketui incident list --proposed)")
    )
    assert "Traceback" not in again.output


def ingested_outage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """(history, tag) of an outage the ingest proposed: 6 of 10 tests failed with one
    signature at 10:00, all passed on the 10:30 re-run."""
    monkeypatch.chdir(tmp_path)  # default config: no pyproject.toml here
    db = str(tmp_path / "h.db")
    for run_id, failing, ts in (("r1", 6, "10:00"), ("r2", 0, "10:30")):
        report = _report_file(tmp_path / f"{run_id}.xml", failing=failing)
        result = CliRunner().invoke(
            cli,
            ["ingest", db, str(report), "--run-id", run_id, "--no-detect",
             "--timestamp", f"2026-11-01T{ts}:00Z"],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
    history = open_history(db, create=False, readonly=True)
    found = find_outages(history.conn, now=NOW, config=Config())
    history.conn.close()
    assert [o.status for o in found] == ["proposed"]
    return db, found[0].tag


def test_an_accepted_outage_is_listed_as_an_outage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, tag = ingested_outage(tmp_path, monkeypatch)
    listed = CliRunner().invoke(cli, ["incident", "list", db, "--now", "2026-11-02T00:00:00Z"])
    assert f"{tag}: 1 run, suspected outage 2026-11-01T10:00:00Z .. " in listed.output
    assert CliRunner().invoke(cli, ["incident", "accept", db, tag]).exit_code == 0
    listed = CliRunner().invoke(cli, ["incident", "list", db, "--now", "2026-11-02T00:00:00Z"])
    assert listed.exit_code == 0, listed.output
    assert f"{tag}: 1 run, outage 2026-11-01T10:00:00Z .. 2026-11-01T10:00:00Z" in listed.output
    assert "suspected" not in listed.output


def test_a_rejected_outage_is_not_proposed_again_as_a_bad_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six of ten tests failed in r1: rejected as an outage, its run is not proposed again as a
    run where most tests failed."""
    db, tag = ingested_outage(tmp_path, monkeypatch)
    assert CliRunner().invoke(cli, ["incident", "reject", db, tag]).exit_code == 0
    listed = CliRunner().invoke(cli, ["incident", "list", db, "--now", "2026-11-02T00:00:00Z"])
    assert listed.exit_code == 0, listed.output
    assert "PROPOSED" not in listed.output and "auto-" not in listed.output
    history = open_history(db, create=False, readonly=True)
    assert propose_incidents(history, now=NOW, config=Config()) == []
    # Another run of the window failing most of its tests otherwise is still proposed.
    history.conn.close()
    history = open_history(db)
    hb = HistoryBuilder(history)
    _suite_run(hb, utc(2026, 11, 1, 11), 12, 8, "OSError: disk full")
    assert [[r.run_id for r in p.runs] for p in propose_incidents(
        history, now=NOW, config=Config()
    )] == [["run-00001"]]  # fmt: skip
    history.conn.close()


def _excluded_counts(db: str, now: str) -> tuple[str, str]:
    """What the report's notice and `incident list` say the scores leave out, as of now."""
    report = CliRunner().invoke(cli, ["report", db, "--now", now])
    listed = CliRunner().invoke(cli, ["incident", "list", db, "--now", now])
    assert report.exit_code == 0 and listed.exit_code == 0, report.output + listed.output
    notices = [line for line in report.output.splitlines() if "suspected outage" in line]
    said = [line for line in listed.output.splitlines() if "excluded from scoring" in line]
    return " ".join(notices), " ".join(said)


def test_the_report_counts_the_outages_the_scores_leave_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, _tag = ingested_outage(tmp_path, monkeypatch)
    notice, listed = _excluded_counts(db, "2026-11-02T00:00:00Z")
    assert notice.startswith("1 suspected outage excluded from scoring while it awaits review")
    assert listed.startswith("1 suspected outage excluded from scoring")
    # Both end with the same command.
    assert notice.rpartition(" with ")[2] == listed.rpartition(" with ")[2]
    # Out of the window, the proposal leaves nothing out of the scores.
    assert _excluded_counts(db, "2030-01-01T00:00:00Z") == ("", "")
    # Nor once its run is pruned.
    history = open_history(db, create=False)
    prune_history(history, 1, now=utc(2026, 11, 2, 10) + timedelta(minutes=15))
    history.conn.close()
    assert _excluded_counts(db, "2026-11-02T00:00:00Z") == ("", "")


def test_the_review_hint_is_a_command_to_paste(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hint names the history as given (quoted for a shell) and follows only pending
    outages, never "no proposed incidents"."""
    folder = tmp_path / "ci runs"
    folder.mkdir()
    db, tag = ingested_outage(folder, monkeypatch)
    now = "2026-11-02T00:00:00Z"
    listed = CliRunner().invoke(cli, ["incident", "list", db, "--now", now])
    assert listed.exit_code == 0, listed.output
    last = listed.output.splitlines()[-1]
    assert last == (
        "1 suspected outage excluded from scoring: review with "
        f"`flaketui incident list {shlex.quote(db)} --proposed --now {now}`"
    )
    assert "no proposed incidents" not in listed.output
    pasted = shlex.split(last.split("`")[1])
    assert pasted[0] == "flaketui"
    shown = CliRunner().invoke(cli, pasted[1:])
    assert shown.exit_code == 0 and f"OUTAGE {tag}:" in shown.output, shown.output
    assert f"  reject: flaketui incident reject {shlex.quote(db)} {tag}" in shown.output
    assert CliRunner().invoke(cli, ["incident", "accept", db, tag]).exit_code == 0
    listed = CliRunner().invoke(cli, ["incident", "list", db, "--now", now])
    assert listed.output.splitlines()[-1] == "no proposed incidents"
    assert "review with" not in listed.output


def test_ingest_names_the_history_in_its_review_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for run_id, failing, ts in (("r1", 6, "10:00"), ("r2", 0, "10:30")):
        report = _report_file(tmp_path / f"{run_id}.xml", failing=failing)
        result = CliRunner().invoke(
            cli,
            ["ingest", "ci.db", str(report), "--run-id", run_id, "--no-detect",
             "--timestamp", f"2026-11-01T{ts}:00Z"],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == (
        "1 suspected outage excluded from scoring: review with "
        "`flaketui incident list ci.db --proposed`"
    )


def _as_diagnose(db: sqlite_utils.Database, run_ids: list[str]) -> None:
    db.conn.executemany(
        "UPDATE runs SET source = 'diagnose', suite = 'diagnose' WHERE run_id = ?",
        [(run_id,) for run_id in run_ids],
    )


def test_diagnose_runs_neither_make_nor_end_an_outage(tmp_path: Path) -> None:
    """Experiments fail tests on purpose and pass them at will: they are not CI evidence."""
    db = open_history(tmp_path / "d.db")
    hb = HistoryBuilder(db)
    # Six tests failing with one message in a diagnose run, all passing in CI later.
    _suite_run(hb, T0, 40, 6, "RuntimeError: injected")
    _suite_run(hb, T0 + timedelta(hours=3), 40, 0, "RuntimeError: injected")
    _as_diagnose(db, ["run-00001"])
    assert find_outages(db.conn, now=NOW, config=Config()) == []
    # A CI run failing six tests, seen passing again only in diagnose runs: it has not passed.
    _suite_run(hb, T0 + timedelta(hours=10), 40, 6, "ConnectionError: db down")
    _suite_run(hb, T0 + timedelta(hours=13), 40, 0, "ConnectionError: db down")
    _as_diagnose(db, ["run-00004"])
    assert find_outages(db.conn, now=NOW, config=Config()) == []
    # The same pass from CI ends it.
    _suite_run(hb, T0 + timedelta(hours=14), 40, 0, "ConnectionError: db down")
    (found,) = find_outages(db.conn, now=NOW, config=Config())
    assert found.run_ids == ["run-00003"] and found.failed_tests == 6


def test_pending_outages_carry_the_evidence_of_what_they_exclude(tmp_path: Path) -> None:
    db, sim = _outage_history(tmp_path, seed=8)
    now = sim.now  # type: ignore[attr-defined]
    recorded = record_outages(db, now=now, config=Config())
    pending = pending_outages(db.conn)
    assert [(o.tag, o.run_ids, o.failed_tests, o.tests, o.signature) for o in pending] == [
        (o.tag, o.run_ids, o.failed_tests, o.tests, o.signature) for o in recorded
    ]
    assert all(o.status == "proposed" and o.signature_text for o in pending)
    reject_outage(db, recorded[0].tag)
    accept_outage(db, recorded[1].tag)
    assert [o.tag for o in pending_outages(db.conn)] == [recorded[2].tag]
