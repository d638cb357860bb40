"""Suspected outages in the app: the banner, the review screen, accept and reject."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pilots import app_on, notices_stay, settle
from textual.pilot import Pilot
from textual.widgets import OptionList, Static
from tui_history import NOW

from flaketui.core.config import Config
from flaketui.core.history.outages import record_outages
from flaketui.core.ingest.writer import RunRecorder
from flaketui.core.models import Attempt, CaseResult, RunMeta
from flaketui.tui.app import READ_ONLY_REVIEW_REFUSAL, FlaketuiApp, make_app
from flaketui.tui.screens.help import HELP
from flaketui.tui.screens.main import MainScreen
from flaketui.tui.screens.outages import OutagesScreen
from flaketui.tui.widgets.banner import TrustBanner
from flaketui.tui.widgets.keybar import KeyBar
from tests.connections import open_history

SIZE = (160, 48)
TESTS = [f"tests/test_shop.py::test_{name}" for name in ("cart", "pay", "ship", "tax", "user")]
BYSTANDERS = [f"tests/test_misc.py::test_m{index}" for index in range(7)]
OUTAGE_STARTS = (NOW - timedelta(days=5), NOW - timedelta(days=3, hours=2))
DOWN = "requests.exceptions.ConnectionError: payments-{n} unreachable"


def _run(db: Any, run_id: str, ts: datetime, *, failing: bool, finished: bool = True) -> None:
    meta = RunMeta(
        run_id=run_id,
        suite="unit",
        branch="main",
        branch_kind="main",
        commit_sha=hashlib.sha1(run_id.encode()).hexdigest(),
        ts=ts,
        worker_count=1,
        runner_host="ci-1",
    )
    message = DOWN.format(n=run_id[-1])
    cases = [
        CaseResult(
            test_id,
            "tests/test_shop.py",
            [Attempt("fail", 10, message, "master")] if failing else [Attempt("pass", 10)],
        )
        for test_id in TESTS
    ]
    cases += [CaseResult(t, "tests/test_misc.py", [Attempt("pass", 10)]) for t in BYSTANDERS]
    recorder = RunRecorder(db, meta)
    recorder.add(cases)
    if finished:
        recorder.finish()


def add_outages(path: Path, *, interrupted: bool = True) -> Path:
    """Two outages (five tests failing with one message, passing 40 minutes later) proposed as
    of NOW, and one interrupted run."""
    db = open_history(path)
    try:
        for number, start in enumerate(OUTAGE_STARTS, start=1):
            _run(db, f"down-{number}", start, failing=True)
            _run(db, f"back-{number}", start + timedelta(minutes=40), failing=False)
        if interrupted:
            _run(db, "killed", NOW - timedelta(days=1), failing=False, finished=False)
        assert len(record_outages(db, now=NOW, config=Config())) == 2
    finally:
        db.conn.close()
    return path


@pytest.fixture
def outage_history(history: Path) -> Path:
    return add_outages(history)


def _reviews(path: Path) -> dict[str, str]:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'outage_reviews'").fetchone()
        return dict(json.loads(row[0])) if row else {}
    finally:
        conn.close()


def _tagged(path: Path) -> dict[str, str]:
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute("SELECT run_id, incident FROM runs WHERE incident IS NOT NULL"))
    finally:
        conn.close()


def _banner(app: FlaketuiApp) -> str:
    banner = app.main_screen.query_one(TrustBanner)
    return str(banner.render()) if banner.display else ""


def _listed(app: FlaketuiApp) -> list[str]:
    listing = app.screen.query_one(OptionList)
    if not listing.display:
        return []
    return [str(listing.get_option_at_index(i).prompt) for i in range(listing.option_count)]


def _done(app: FlaketuiApp, title: str = "Done") -> list[str]:
    return [n.message for n in app._notifications if n.title == title]


async def test_the_banner_counts_outages_and_interrupted_runs(
    outage_history: Path, tmp_path: Path
) -> None:
    app = app_on(outage_history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = _banner(app)
    assert "2 suspected outages excluded from scoring: press o to review" in text
    assert "1 interrupted run, counted only for the tests it recorded" in text


async def test_no_banner_and_no_key_when_nothing_awaits_review(
    history: Path, tmp_path: Path
) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert _banner(app) == ""
        assert " o Outages " not in str(app.main_screen.query_one(KeyBar).render())
        await pilot.press("o")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)


async def test_the_last_decision_leaves_an_empty_review_and_hides_the_key(
    outage_history: Path, tmp_path: Path
) -> None:
    app = app_on(outage_history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("o")
        await settle(pilot)
        await pilot.press("a")
        await settle(pilot)
        await pilot.press("a")
        await settle(pilot)
        assert _listed(app) == []
        empty = str(app.screen.query_one("#outages-empty", Static).render())
        assert "No suspected outage awaits review" in empty
        await pilot.press("escape")
        await pilot.pause()
        assert " o Outages " not in str(app.main_screen.query_one(KeyBar).render())


async def test_review_lists_the_evidence_then_reject_and_accept_reload_the_ranking(
    outage_history: Path, tmp_path: Path
) -> None:
    app = app_on(outage_history, tmp_path)
    notices_stay(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert len(app.main_screen.data.report.proposed_incidents) == 2
        await pilot.press("o")
        await settle(pilot)
        assert isinstance(app.screen, OutagesScreen)
        first, second = _listed(app)
        # Each proposal with its evidence: tag and span, distinct tests, signature, runs.
        assert first.startswith("outage-20261125-1800-")
        assert "2026-11-25T18:00:00Z" in first
        assert "5 of 12 distinct tests failed with one signature in 1 run (suite unit)" in first
        assert "ConnectionError: payments-<NUM> unreachable" in first
        assert "runs: down-1" in first
        assert "runs: down-2" in second
        first_tag = first.split()[0]
        second_tag = second.split()[0]
        await pilot.press("x")  # reject the first
        await settle(pilot)
        assert _reviews(outage_history) == {first_tag: "rejected", second_tag: "proposed"}
        assert "down-1" not in _tagged(outage_history)
        assert _done(app) == [f"Outage {first_tag} rejected: 1 run counts again"]
        # The ranking reloaded: one proposal left, and the list shows it alone.
        assert [p["tag"] for p in app.main_screen.data.report.proposed_incidents] == [second_tag]
        assert [line.split()[0] for line in _listed(app)] == [second_tag]
        assert "1 suspected outage excluded" in _banner(app)
        await pilot.press("a")  # accept the second
        await settle(pilot)
        assert _reviews(outage_history) == {first_tag: "rejected"}
        assert _tagged(outage_history) == {"down-2": second_tag}
        assert _done(app)[-1] == f"Outage {second_tag} accepted: 1 run stays excluded from scoring"
        assert app.main_screen.data.report.proposed_incidents == []
        assert _listed(app) == []
        assert "suspected outage" not in _banner(app)
        await pilot.press("backspace")  # back, as Esc goes
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)


async def test_a_rejected_outage_counts_in_the_ranking_again(
    outage_history: Path, tmp_path: Path
) -> None:
    app = app_on(outage_history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        runs_before = {t.test_id: t.scores.runs for t in app.main_screen.data.report.tests}
        await pilot.press("o")
        await settle(pilot)
        await pilot.press("x")
        await settle(pilot)
        runs_after = {t.test_id: t.scores.runs for t in app.main_screen.data.report.tests}
    assert all(runs_after[t] == runs_before[t] + 1 for t in TESTS)


async def test_a_read_only_history_refuses_the_decision(
    outage_history: Path, tmp_path: Path
) -> None:
    os.chmod(outage_history, 0o444)
    before = hashlib.sha256(outage_history.read_bytes()).hexdigest()
    app = app_on(outage_history, tmp_path)
    notices_stay(app)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert app.source.readonly
            await pilot.press("o")
            await settle(pilot)
            assert len(_listed(app)) == 2  # the evidence can be read
            await pilot.press("a")
            await settle(pilot)
            assert _done(app, "Not written") == [READ_ONLY_REVIEW_REFUSAL]
            assert len(_listed(app)) == 2
    finally:
        os.chmod(outage_history, 0o644)
    assert hashlib.sha256(outage_history.read_bytes()).hexdigest() == before


async def test_a_history_git_tracks_is_reviewed_in_a_trial_copy(
    outage_history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "clone"
    repo.mkdir()
    shutil.copyfile(outage_history, repo / "history.db")
    for args in (("init", "-q"), ("add", "history.db"), ("commit", "-q", "-m", "history")):
        subprocess.run(
            ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
            cwd=repo,
            check=True,
            capture_output=True,
            timeout=30,
        )
    monkeypatch.chdir(repo)
    before = hashlib.sha256((repo / "history.db").read_bytes()).hexdigest()
    app = app_on("history.db", tmp_path)
    notices_stay(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("o")
        await settle(pilot)
        tag = _listed(app)[0].split()[0]
        await pilot.press("a")
        await settle(pilot)
        done = _done(app)
        assert len(_listed(app)) == 1  # read back from the trial copy
    assert done == [f"Outage {tag} accepted: 1 run stays excluded from scoring (trial copy)"]
    assert hashlib.sha256((repo / "history.db").read_bytes()).hexdigest() == before
    trial = app.source.path
    assert trial.is_relative_to(tmp_path / "cache")
    assert tag not in _reviews(trial) and len(_reviews(trial)) == 1


async def test_the_key_is_in_the_footer_the_help_and_the_palette(
    outage_history: Path, tmp_path: Path
) -> None:
    app = app_on(outage_history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        footer = str(app.main_screen.query_one(KeyBar).render())
        assert " o Outages " in footer
        await pilot.press("o")
        await settle(pilot)
        review_footer = str(app.screen.query_one(KeyBar).render())
    assert " a Accept " in review_footer and " x Reject " in review_footer
    assert "| `o` | review the suspected outages" in HELP
    from flaketui.tui.commands import COMMANDS

    assert any(action == "outages" for _t, _h, action, _s in COMMANDS)


def test_review_screen_snapshot(
    snap_compare: Any, outage_history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLAKETUI_SKIP_FILE", raising=False)
    app = make_app(
        "history.db", now=NOW, skip_file="quarantine.json", cursor_blink=False, watch=False
    )

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("o")
        await settle(pilot)
        pilot.app.clear_notifications()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 30), run_before=run_before)


async def test_the_sample_shows_its_outages_and_its_interrupted_run(
    sample_history: Path, tmp_path: Path
) -> None:
    target = tmp_path / "history.db"
    shutil.copyfile(sample_history, target)
    app = app_on(target, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = _banner(app)
        ranked = [t.test_id for t in app.main_screen.data.report.tests if t.rank][:3]
        await pilot.press("o")
        await settle(pilot)
        listed = _listed(app)
    assert "2 suspected outages excluded from scoring" in text
    assert "1 interrupted run, counted only for the tests it recorded" in text
    assert "tests/search/test_ranking.py::test_rank_ties_stable" in ranked
    assert [line.split()[0][:20] for line in listed] == [
        "outage-20261001-1015",
        "outage-20261124-1153",
    ]
    assert "25 of 31 distinct tests failed with one signature in 1 run" in listed[0]
    assert "20 of 126 distinct tests failed with one signature in 3 runs" in listed[1]
