"""The filter box is mounted on the first `/`, not on the first screen."""

from __future__ import annotations

from pathlib import Path

from pilots import app_on, settle
from textual.widgets import Input

from flaketui.tui.widgets.flake_table import FlakeTable


async def test_the_filter_box_appears_on_the_first_slash(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, rounds=1)
        screen = app.main_screen
        table = screen.query_one(FlakeTable)
        everything = table.row_count
        assert not screen.query("#filter")
        await pilot.press("escape")  # nothing to clear yet: the list stays
        assert screen.state.filter_text == "" and table.row_count == everything
        await pilot.press("slash")
        box = screen.query_one("#filter", Input)
        assert app.focused is box and not box.has_class("hidden")
        await pilot.press(*"billing")
        await settle(pilot, rounds=1)
        assert 0 < table.row_count < everything
        await pilot.press("escape")
        await pilot.pause()
        assert box.has_class("hidden") and box.value == "" and app.focused is table
        assert table.row_count == everything
        await pilot.press("slash")
        assert len(screen.query("#filter")) == 1 and app.focused is box
