"""The detail screen: likely causes, the dimension switch, diagnose with progress and cancel."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pilots import app_on, settle, until
from textual.pilot import Pilot
from textual.widgets import DataTable, ProgressBar, Static
from tui_history import BILLING, NOW

from flaketui.core.ingest.writer import RunRecorder
from flaketui.core.models import Attempt, CaseResult, RunMeta
from flaketui.tui.app import FlaketuiApp
from flaketui.tui.screens.detail import DetailScreen
from flaketui.tui.widgets.causes import SuspectsPanel
from tests.connections import open_history, sqlite_connect
from tests.history_damage import damage
from tests.stopped_sessions import CAN_WAIT_FOR_PROCESSES, still_running, waiting_test

SIZE = (160, 60)
DEADLINE_S = 120.0


def _header(screen: DetailScreen) -> str:
    table = screen.query_one("#pivot", DataTable)
    return str(next(iter(table.columns.values())).label)


async def test_suspects_panel_and_dimension_switch(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("f", "enter")  # the billing family, failing more with more workers
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DetailScreen) and screen.key == BILLING
        assert screen.analysis is not None
        panel = str(screen.query_one(SuspectsPanel).content)
        assert "pivot by worker_count" in panel
        assert screen.analysis.suspects and screen.analysis.suspects[0].dimension in (
            "worker_count",
            "worker_id",
        )
        assert screen.analysis.suspects[0].label in panel
        assert _header(screen) == "workers"
        await pilot.press("d")
        assert screen.dimension == "worker_id" and _header(screen) == "worker_id"
        assert "pivot by worker_id" in str(screen.query_one(SuspectsPanel).content)
        await pilot.press("d", "d")
        assert _header(screen) == "os"
        for _ in range(7):  # ten dimensions in all
            await pilot.press("d")
        assert screen.dimension == "worker_count"  # wrapped around


async def test_diagnose_without_a_usable_test_file_says_so(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no test file of the history lives here
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("f", "enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DetailScreen)
        await pilot.press("D")
        await settle(pilot)
        text = str(screen.query_one("#diagnosis", Static).content)
        assert "is not a file in" in text and "\n" not in text
        assert not screen.diagnosing
        assert not screen.query_one("#diagnose-progress").display


SLOW_TEST = "import time\n\ndef test_wait():\n    time.sleep(0.3)\n\ndef test_other():\n    pass\n"


def _small_history(path: Path) -> None:
    db = open_history(path)
    for number in range(12):
        meta = RunMeta(run_id=f"r{number}", ts=NOW - timedelta(days=number + 1), branch_kind="main")
        recorder = RunRecorder(db, meta)
        outcome = "fail" if number % 3 == 0 else "pass"
        recorder.add(
            [
                CaseResult(
                    "test_wait.py::test_wait",
                    "test_wait.py",
                    [Attempt(outcome, 300, "AssertionError: x" if outcome == "fail" else None)],
                )
            ]
        )
        recorder.finish()
    db.conn.close()


@pytest.fixture
def wait_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository holding test_wait.py, the working directory; its history beside it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_wait.py").write_text(SLOW_TEST)
    _small_history(tmp_path / "history.db")
    monkeypatch.chdir(repo)
    return repo


async def _wait_detail(pilot: Pilot[Any], app: FlaketuiApp) -> DetailScreen:
    """The detail of test_wait.py::test_wait, loaded."""
    await settle(pilot)
    report = app.main_screen.data.report  # type: ignore[union-attr]
    item = next(t for t in report.tests if t.test_id == "test_wait.py::test_wait")
    await app.push_screen(DetailScreen(item, report))
    await settle(pilot)
    screen = app.screen
    assert isinstance(screen, DetailScreen)
    return screen


async def test_diagnose_shows_progress_and_can_be_cancelled(
    tmp_path: Path, wait_repo: Path
) -> None:
    repo = wait_repo
    history = tmp_path / "history.db"
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _wait_detail(pilot, app)
        await pilot.press("D")
        bar = screen.query_one("#diagnose-progress", ProgressBar)
        await until(pilot, lambda: (bar.progress or 0) >= 1, within=DEADLINE_S)  # a session ended
        assert bar.display and screen.diagnosing
        assert "x: cancel" in str(screen.query_one("#diagnosis", Static).content)
        await pilot.press("x")
        await settle(pilot)
        assert not screen.diagnosing and not bar.display
        assert screen.diagnosis is not None and screen.diagnosis.cancelled
        assert "cancelled" in str(screen.query_one("#diagnosis", Static).content)
    stored = (
        sqlite_connect(history)
        .execute("SELECT count(*) FROM runs WHERE source = 'diagnose'")
        .fetchone()[0]
    )
    assert 1 <= stored < screen.diagnosis.experiments[0].sessions + 5
    assert sorted(p.name for p in repo.iterdir()) == ["test_wait.py"]


@pytest.mark.usefixtures("wait_repo")
async def test_diagnose_on_a_history_damaged_meanwhile_says_so(tmp_path: Path) -> None:
    """The diagnosis panel ends with the one line a damaged history gets (it once went on
    saying "diagnosing" with the error left in its worker)."""
    history = tmp_path / "history.db"
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _wait_detail(pilot, app)
        damage(history)
        await pilot.press("D")
        await until(pilot, lambda: not screen.diagnosing, within=DEADLINE_S)
        await settle(pilot)
        text = str(screen.query_one("#diagnosis", Static).content)
        assert "damaged (database disk image is malformed)" in text
        assert not screen.query_one("#diagnose-progress").display


@pytest.mark.skipif(not CAN_WAIT_FOR_PROCESSES, reason="waits for processes by pidfd")
async def test_leaving_the_detail_cancels_its_diagnose(tmp_path: Path, wait_repo: Path) -> None:
    """Back to the list stops the session that runs (it once went on, with nothing to show
    its result and no key to cancel it)."""
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    (wait_repo / "test_wait.py").write_text(waiting_test("wait", fifo))
    app = app_on(tmp_path / "history.db", tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await _wait_detail(pilot, app)
        await pilot.press("D")
        session = int(await asyncio.to_thread(fifo.read_text))  # once the test runs
        await pilot.press("escape")
        await until(pilot, lambda: not still_running(session, within=0), within=DEADLINE_S)


async def test_diagnose_on_a_small_terminal_brings_its_progress_into_view(
    tmp_path: Path, wait_repo: Path
) -> None:
    """At 80x24 the diagnose section lies below the fold: D shows it (it once seemed to do
    nothing while the sessions ran out of sight)."""
    app = app_on(tmp_path / "history.db", tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _wait_detail(pilot, app)
        panel = screen.query_one("#diagnosis", Static)
        view = screen.query_one("#detail").region

        def in_view() -> bool:
            return view.contains_region(panel.region)

        assert not in_view()  # below the fold before D
        await pilot.press("D")
        await until(pilot, in_view)
        await pilot.press("x")
        await until(pilot, lambda: not screen.diagnosing, within=DEADLINE_S)
