"""The app at 80×24, the classic default: every key on the bar, the header whole, dialogs fit."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from pilots import app_on, settle
from rich.console import Console
from textual.geometry import Region
from textual.widget import Widget

from flaketui.tui.app import FlaketuiApp
from flaketui.tui.screens.detail import DetailScreen
from flaketui.tui.screens.export_modal import ExportModal
from flaketui.tui.screens.help import HelpScreen
from flaketui.tui.screens.quarantine_modal import QuarantineModal
from flaketui.tui.widgets.keybar import KeyBar

SMALL = (80, 24)


def _bar_lines(app: FlaketuiApp) -> list[str]:
    bar = app.screen.query_one(KeyBar)
    return bar.render().plain.split("\n")


def _shown_descriptions(app: FlaketuiApp) -> list[str]:
    """The description of every binding the screen shows (the bar's job to list)."""
    seen = []
    for _node, binding, _enabled, _tip in app.screen.active_bindings.values():
        if binding.show and binding.description not in seen:
            seen.append(binding.description)
    return seen


def _inside(widget: Widget, screen: Region) -> bool:
    return screen.contains_region(widget.region)


async def test_the_key_bar_shows_every_key_on_two_lines_at_80_columns(
    history: Path, tmp_path: Path
) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        lines = _bar_lines(app)
        assert len(lines) == 2 and all(len(line) <= SMALL[0] for line in lines)
        text = " ".join(lines)
        for description in _shown_descriptions(app):
            assert f" {description} " in f"{text} ", description
        assert " ? Help " in text and " ^q Quit " in text and lines[-1].endswith("^p palette ")
        # The bar is two lines high, and a click on its second line runs that line's key.
        bar = app.screen.query_one(KeyBar)
        assert bar.region.height == 2 and bar.region.bottom == SMALL[1]
        start = lines[1].index(" ? Help ")
        await pilot.click(KeyBar, offset=(start + 1, 1))
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape", "enter")
        await settle(pilot)
        assert isinstance(app.screen, DetailScreen)
        lines = _bar_lines(app)
        text = " ".join(lines)
        assert all(len(line) <= SMALL[0] for line in lines)
        for description in _shown_descriptions(app):
            assert f" {description} " in f"{text} ", description


async def test_the_key_bar_keeps_help_and_quit_when_even_two_lines_are_too_few(
    history: Path, tmp_path: Path
) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=(40, 24)) as pilot:
        await settle(pilot)
        lines = _bar_lines(app)
        text = " ".join(lines)
        assert len(lines) == 2 and all(len(line) <= 40 for line in lines)
        assert " ? Help " in text and " ^q Quit " in text and "^p palette" in text
        assert " / Filter " in text  # the screen's first keys stay, its last give way


async def test_one_line_of_keys_where_they_fit(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=(200, 40)) as pilot:
        await settle(pilot)
        assert len(_bar_lines(app)) == 1
        assert app.screen.query_one(KeyBar).region.height == 1


async def test_the_header_wraps_between_its_items_at_80_columns(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app = app_on(Path(history.name), tmp_path)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        header = app.screen.query_one("#header")
        lines = str(header.render()).split("\n")
        assert len(lines) == 3 and header.region.height == 3
        assert all(len(line) <= header.content_region.width for line in lines)
        text = " ".join(lines)
        for item in ("as of 2026-", "healthy ", "suite: all", "branch: all", "skip file: "):
            assert item in text
        assert "owners: " in lines[-1]  # a whole item moves down, never half of one


async def test_the_dialogs_fit_a_24_line_terminal(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        screen = Region(0, 0, *SMALL)
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, QuarantineModal)
        for selector in ("#quarantine-dialog", "#reason", "#ticket", "#ok", "#cancel"):
            assert _inside(app.screen.query_one(selector), screen), selector
        await pilot.press("escape")
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ExportModal)
        for selector in ("#export-dialog", "#path", "#ok"):
            assert _inside(app.screen.query_one(selector), screen), selector
        await pilot.press("escape", "question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert _inside(app.screen.query_one("#help-dialog"), screen)


async def test_an_empty_views_hint_wraps_whole_at_80_columns(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("3")  # nothing quarantined yet
        await settle(pilot)
        hint = app.screen.query_one("#loading")
        text = str(hint.render())
        assert text.startswith("Nothing quarantined in ") and text.endswith("and press q.")
        assert hint.region.height >= 2 and len(text) > hint.content_region.width


async def test_the_notice_line_wraps_whole_at_80_columns(
    sample_history: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "history.db"
    shutil.copyfile(sample_history, copy)
    app = app_on(copy, tmp_path)  # suspected outages and an interrupted run
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        banner = app.screen.query_one("#banner")
        text = str(banner.render())
        assert "suspected outages excluded" in text and text.endswith("recorded")
        assert banner.region.height == 2 and len(text) > banner.content_region.width


@pytest.mark.parametrize("width", range(16, 121))
def test_the_outcome_legend_breaks_between_kinds_never_inside_one(width: int) -> None:
    from types import SimpleNamespace

    from flaketui.tui.widgets.outcome_strip import legend
    from flaketui.tui.widgets.palette import OUTCOME_GLYPHS

    outcomes = [SimpleNamespace(outcome="pass", incident=False, edited=False)] * 235
    outcomes += [SimpleNamespace(outcome="fail", incident=False, edited=True)] * 3
    text = legend(outcomes, width)
    lines = text.plain.split("\n")
    assert all(len(line) <= width for line in lines), lines
    # Each kind whole on one line, in order: glyph, name and count.
    items = [item for line in lines for item in re.split(" {2,}", line)]
    counts = {"pass": 235, "edited": 3}
    assert items == [f"{OUTCOME_GLYPHS[k]} {k} {counts.get(k, 0)}" for k in OUTCOME_GLYPHS]
    wrapped = text.wrap(Console(width=width), width)
    assert [line.plain.rstrip() for line in wrapped] == lines


async def test_the_outcome_strip_keeps_its_caption_at_80_columns(
    sample_history: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "history.db"
    shutil.copyfile(sample_history, copy)
    app = app_on(copy, tmp_path)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("down", "enter")
        await settle(pilot)
        assert isinstance(app.screen, DetailScreen)
        strip = app.screen.query_one("#strip")
        lines = str(strip.render()).split("\n")
        runs = len(strip.outcomes)  # type: ignore[attr-defined]
        assert runs > strip.content_region.width  # the strip shows the newest runs only
        caption = f"{strip.content_region.width} of {runs} runs, oldest left, newest right"
        assert lines[-1] == caption
        # Every line is drawn: the caption is not below the widget's last row.
        assert strip.region.height == len(lines) and _inside(strip, app.screen.region)
        assert len(lines) == 3  # the legend fits one line at this width


async def test_the_outcome_strip_is_as_high_as_its_text_from_its_first_layout() -> None:
    """Outcomes set before the strip has a width: its first layout already fits its text."""
    from types import SimpleNamespace

    from textual.app import App, ComposeResult

    from flaketui.tui.widgets.outcome_strip import OutcomeStrip

    outcomes = [SimpleNamespace(outcome="pass", incident=False, edited=False)] * 100

    class StripApp(App[None]):
        def compose(self) -> ComposeResult:
            yield OutcomeStrip()

        def on_mount(self) -> None:
            self.query_one(OutcomeStrip).set_outcomes(outcomes)

    app = StripApp()
    async with app.run_test(size=SMALL):
        strip = app.query_one(OutcomeStrip)
        lines = str(strip.render()).split("\n")
        assert lines[-1] == "80 of 100 runs, oldest left, newest right"
        assert strip.region.height == len(lines) == 3
