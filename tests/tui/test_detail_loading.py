"""The detail screen while it reads: each panel says so, a long read counts its seconds and
names its step, a failed read says why; the onset of a flaky test is in the title."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest
from pilots import SAFETY_S, app_on, settle, until
from textual.widgets import DataTable, Static
from tui_history import BILLING

from flaketui.core.errors import FlaketuiError
from flaketui.tui.app import FlaketuiApp
from flaketui.tui.loaders import load_detail
from flaketui.tui.screens import detail as detail_screen
from flaketui.tui.screens.detail import PANELS, DetailScreen
from flaketui.tui.widgets.outcome_strip import OutcomeStrip
from flaketui.tui.widgets.pending import PendingNote

SIZE = (120, 60)
RUNS_MAX_HEIGHT = 30  # detail.tcss


class _HeldDetail:
    """load_detail, held at its second step until the test lets it go on."""

    def __init__(self, error: str | None = None) -> None:
        self.started = threading.Event()
        self.step = threading.Event()
        self.finish = threading.Event()
        self.error = error

    def __call__(self, source: Any, item: Any, report: Any, **kwargs: Any) -> Any:
        progress = kwargs["progress"]
        progress(0, 3, "outcomes")
        self.started.set()
        assert self.step.wait(SAFETY_S)
        progress(1, 3, "signatures")
        assert self.finish.wait(SAFETY_S)
        if self.error is not None:
            raise FlaketuiError(self.error)
        return load_detail(source, item, report, **kwargs)


def _notes(screen: DetailScreen) -> list[str]:
    return [str(note.content) for note in screen.query(PendingNote)]


async def _open_first(pilot: Any, app: FlaketuiApp) -> DetailScreen:
    await settle(pilot)
    await pilot.press("enter")  # the list's first row: a flaky billing param
    await until(pilot, lambda: isinstance(app.screen, DetailScreen))
    screen = app.screen
    assert isinstance(screen, DetailScreen) and screen.key.startswith(f"{BILLING}[")
    return screen


async def test_each_panel_says_it_is_loading_until_its_data_is_in(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = _HeldDetail()
    monkeypatch.setattr(detail_screen, "load_detail", held)
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_first(pilot, app)
        await until(pilot, lambda: len(_notes(screen)) == len(PANELS) - 1)  # no params: a test
        # A slow machine may already count the first second: the count is checked below.
        what = [
            re.fullmatch(r"⏳ reading (.+?)…( \d+ s \(step 1 of 3: outcomes\))?", note)
            for note in _notes(screen)
        ]
        assert all(what), _notes(screen)
        assert {"the outcome sequence", "the runs"} <= {match[1] for match in what if match}
        # The panels themselves are hidden: no "pass 0 … 0 of 0 runs", no empty plot.
        assert not screen.query_one(OutcomeStrip).display
        assert not screen.query_one("#pivot-row").display
        # A long read counts its seconds and names the step it is at.
        for note in screen.query(PendingNote):
            note.started -= 5
        held.step.set()
        await until(pilot, lambda: "step 2 of 3: signatures" in " ".join(_notes(screen)))
        for note in _notes(screen):
            seconds = re.search(r"… (\d+) s \(step 2 of 3: signatures\)$", note)
            assert seconds is not None and int(seconds[1]) >= 5, note
        held.finish.set()
        await settle(pilot)
        assert _notes(screen) == []
        assert screen.query_one(OutcomeStrip).display and screen.query_one("#runs").display
        assert not screen.query_one("#members").display  # a test has no params panel
        legend = str(screen.query_one(OutcomeStrip).render())
        assert "of 60 runs" in legend and "0 of 0" not in legend
        for panel in ("#changes", "#suspects"):
            assert "reading" not in str(screen.query_one(panel, Static).content)


async def test_a_failed_read_says_why_in_place_of_the_panels(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = _HeldDetail(error="history.db: database disk image is malformed")
    monkeypatch.setattr(detail_screen, "load_detail", held)
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_first(pilot, app)
        held.step.set()
        held.finish.set()
        await settle(pilot)
        notes = _notes(screen)
        assert notes and all(
            note == "not read: history.db: database disk image is malformed" for note in notes
        )


async def test_the_title_says_since_when_a_test_is_flaky(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_first(pilot, app)
        await settle(pilot)
        title = str(screen.query_one("#title", Static).content)
        assert f"{screen.key}   flaky since 2026-11-01" in title


async def test_the_runs_table_is_as_tall_as_its_rows_each_time_it_opens(
    history: Path, tmp_path: Path
) -> None:
    """Its rows were at times read into a table the screen's layout left no line (the height
    of the empty table kept), one opening in ten or so: opened five times, it shows them."""
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(5):
            screen = await _open_first(pilot, app)
            await until(pilot, lambda: screen.data is not None)  # noqa: B023
            await settle(pilot)
            runs = screen.query_one("#runs", DataTable)
            assert runs.row_count > 0
            assert runs.region.height == min(runs.row_count + 1, RUNS_MAX_HEIGHT)
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, DetailScreen))
