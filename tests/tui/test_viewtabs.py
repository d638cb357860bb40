"""The one-widget view tabs draw what Textual's Tabs draws, and behave the same."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import Static, Tab, Tabs

from flaketui.tui.widgets.viewtabs import ViewTabs

LABELS = [("flaky", "1 Flaky"), ("regressions", "2 Regressions"), ("all", "4 All")]


class _Both(App[None]):
    """Textual's Tabs on lines 0-1, ViewTabs on lines 2-3, something else to focus below."""

    def __init__(self) -> None:
        super().__init__()
        self.activated: list[str] = []

    def compose(self) -> ComposeResult:
        yield Tabs(*(Tab(label, id=view) for view, label in LABELS))
        yield ViewTabs(LABELS)
        yield Static("below", id="below")

    def on_view_tabs_activated(self, event: ViewTabs.Activated) -> None:
        self.activated.append(event.view)


def _lines(app: App[None], first: int) -> list[list[tuple[str, str]]]:
    """The screen's cells on two lines, as (text, style) segments."""
    strips = list(app.screen._compositor.render_strips())
    return [[(s.text, str(s.style)) for s in strips[y]] for y in (first, first + 1)]


async def _same_picture(app: _Both, pilot: object) -> None:
    await pilot.wait_for_scheduled_animations()  # type: ignore[attr-defined]  # underlines
    assert _lines(app, 2) == _lines(app, 0)


async def test_it_draws_what_tabs_draws_idle_hovered_focused_and_moved() -> None:
    app = _Both()
    async with app.run_test(size=(60, 6)) as pilot:
        app.set_focus(None)
        await _same_picture(app, pilot)
        # The pointer over the second label of each.
        await pilot.hover(Tabs, offset=(12, 0))
        hovered_tabs = _lines(app, 0)
        await pilot.hover(ViewTabs, offset=(12, 0))
        assert _lines(app, 2) == hovered_tabs
        await pilot.hover("#below")
        # Focused, then moved right.
        app.query_one(Tabs).focus()
        await pilot.press("right")
        await pilot.wait_for_scheduled_animations()
        focused_tabs = _lines(app, 0)
        app.query_one(ViewTabs).focus()
        await pilot.press("right")
        await pilot.wait_for_scheduled_animations()
        assert _lines(app, 2) == focused_tabs
        assert app.query_one(ViewTabs).active == "regressions"


async def test_keys_clicks_and_setting_active_activate_a_view() -> None:
    app = _Both()
    async with app.run_test(size=(60, 6)) as pilot:
        tabs = app.query_one(ViewTabs)
        tabs.focus()
        await pilot.press("left")  # wraps
        assert tabs.active == "all"
        await pilot.press("right")
        assert tabs.active == "flaky"
        await pilot.click(ViewTabs, offset=(12, 0))  # on "2 Regressions"
        assert tabs.active == "regressions"
        await pilot.click(ViewTabs, offset=(25, 1))  # on the underline below "4 All"
        assert tabs.active == "all"
        await pilot.click(ViewTabs, offset=(50, 0))  # right of every label: nothing
        assert tabs.active == "all"
        tabs.active = "flaky"
        await pilot.pause()
        assert app.activated == ["all", "flaky", "regressions", "all", "flaky"]


async def test_a_note_sits_at_the_right_end_when_the_labels_leave_room_for_it() -> None:
    app = _Both()
    async with app.run_test(size=(60, 6)) as pilot:
        tabs = app.query_one(ViewTabs)
        bare = _lines(app, 2)
        tabs.note = "⏳ reading causes…"
        await pilot.pause()
        line = "".join(text for text, _style in _lines(app, 2)[0])
        assert line.rstrip().endswith("⏳ reading causes…")
        assert line.startswith(" 1 Flaky  2 Regressions  4 All ")
        assert len(line) - len(line.rstrip()) == 1  # one cell from the right edge
        # A note wider than the room left: its short form, else the labels alone.
        tabs.note = "⏳ reading " + "x" * 40
        await pilot.pause()
        assert _lines(app, 2) == bare
        tabs.short_note = "⏳ reading…"
        await pilot.pause()
        line = "".join(text for text, _style in _lines(app, 2)[0])
        assert line.rstrip().endswith("  ⏳ reading…")
        tabs.short_note = "⏳ " + "y" * 40
        await pilot.pause()
        assert _lines(app, 2) == bare
        tabs.note = ""
        await pilot.pause()
        assert _lines(app, 2) == bare
