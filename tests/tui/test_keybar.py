"""The key bar follows the screen's bindings, its height included."""

from __future__ import annotations

from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from flaketui.tui.widgets.keybar import KeyBar


class _Screenful(App[None]):
    """Two keys always shown; a third offered only while `extra` (as `o` is while outages
    await review), which needs the bar's second line at 60 columns."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "first", "Alpha alpha alpha"),
        Binding("b", "second", "Bravo bravo bravo"),
        Binding("o", "extra", "Outages to review"),
    ]
    extra = False

    def compose(self) -> ComposeResult:
        yield Static("body")
        yield KeyBar()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.extra if action == "extra" else True

    def action_first(self) -> None:
        """Nothing: only its key matters here."""

    def action_second(self) -> None:
        """Nothing: only its key matters here."""


async def test_the_bar_grows_and_shrinks_as_keys_come_and_go() -> None:
    app = _Screenful()
    async with app.run_test(size=(60, 10)) as pilot:
        bar = app.query_one(KeyBar)
        await pilot.pause()
        assert bar.region.height == 1 and "Outages" not in bar.render().plain
        for extra, lines in ((True, 2), (False, 1)):
            app.extra = extra
            app.refresh_bindings()
            await pilot.pause()
            shown = bar.render().plain.split("\n")
            assert len(shown) == lines and bar.region.height == lines
            assert ("Outages to review" in shown[-1]) is extra
            assert shown[-1].endswith("^p palette ") and bar.region.bottom == 10
