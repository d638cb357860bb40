"""The main screen's view tabs, drawn by a single widget.

Textual's Tabs is nine widgets (containers, one Tab per view, the underline), each styled,
laid out and rendered on the first screen: about 40 ms of a cold start (first ranked
screen). This bar draws the same two lines (labels, then the underline under the active one)
with Textual's own colours and underline renderable, and behaves the same: click a label or
its underline, or focus it and press left or right; activating a view posts `Activated`.
"""

from __future__ import annotations

from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import reactive
from textual.renderables.bar import Bar
from textual.strip import Strip
from textual.widget import Widget

UNDERLINE_SECONDS = 0.3  # as Tabs moves its underline


class ViewTabs(Widget, can_focus=True):
    """One label per view in a row, the active one underlined."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "viewtabs--tab",
        "viewtabs--tab-hover",
        "viewtabs--tab-active",
        "viewtabs--underline",
        "viewtabs--note",
    }
    # The rules of Textual's Tab and Underline, on this widget's components.
    DEFAULT_CSS = """
    ViewTabs {
        width: 100%;
        height: 2;
        pointer: pointer;
        & > .viewtabs--tab {
            color: $foreground 50%;
        }
        & > .viewtabs--tab-hover {
            color: $foreground;
        }
        & > .viewtabs--tab-active {
            color: $foreground;
        }
        & > .viewtabs--underline {
            color: $block-cursor-background;
            background: $foreground 10%;
        }
        & > .viewtabs--note {
            color: $foreground 50%;
        }
        &:focus {
            & > .viewtabs--tab-active {
                text-style: $block-cursor-text-style;
                color: $block-cursor-foreground;
                background: $block-cursor-background;
            }
            & > .viewtabs--underline {
                background: $foreground 30%;
            }
        }
        &:ansi {
            & > .viewtabs--tab, & > .viewtabs--tab-hover {
                text-style: dim;
            }
            & > .viewtabs--tab-active {
                text-style: not dim bold;
            }
            & > .viewtabs--underline {
                color: $block-cursor-background;
                background: $border-blurred;
            }
        }
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "previous_tab", "Previous tab", show=False),
        Binding("right", "next_tab", "Next tab", show=False),
    ]

    active: reactive[str] = reactive("", init=False)
    highlight_start: reactive[float] = reactive(0.0)
    highlight_end: reactive[float] = reactive(0.0)
    hovered: reactive[int | None] = reactive(None)
    # A short line at the right end of the labels' row (what the screen is still reading);
    # `short_note` stands in for it when the labels leave too little room, and neither is
    # drawn when that one does not fit either.
    note: reactive[str] = reactive("")
    short_note: reactive[str] = reactive("")

    class Activated(Message):
        """A view was made active (by the user, or by setting `active`)."""

        def __init__(self, tabs: ViewTabs, view: str) -> None:
            self.tabs = tabs
            self.view = view
            super().__init__()

        @property
        def control(self) -> ViewTabs:
            """The tab bar."""
            return self.tabs

    def __init__(
        self, tabs: list[tuple[str, str]], *, short_note: str = "", id: str | None = None
    ) -> None:
        """`tabs`: (view id, label) pairs, left to right; the first is active. `short_note`:
        what stands in for a note too wide for the room the labels leave."""
        super().__init__(id=id)
        self._tabs = tabs
        self._ids = [view for view, _label in tabs]
        self.set_reactive(ViewTabs.active, self._ids[0] if tabs else "")
        self.set_reactive(ViewTabs.short_note, short_note)

    def on_mount(self) -> None:
        """Underline the first active view at once."""
        self.highlight_start, self.highlight_end = self._label_span(self.active)

    def _spans(self) -> list[tuple[int, int]]:
        """Each tab's cells, padding included (a label with one space either side)."""
        spans, x = [], 0
        for _view, label in self._tabs:
            width = Text(label).cell_len + 2
            spans.append((x, x + width))
            x += width
        return spans

    def _label_span(self, view: str) -> tuple[int, int]:
        if view not in self._ids:
            return (0, 0)
        start, end = self._spans()[self._ids.index(view)]
        return (start + 1, end - 1)

    def _tab_at(self, x: int) -> int | None:
        return next((i for i, (start, end) in enumerate(self._spans()) if start <= x < end), None)

    def validate_active(self, active: str) -> str:
        """Only a known view can be active."""
        if active not in self._ids:
            raise ValueError(f"No tab with id {active!r}")
        return active

    def watch_active(self, previous: str, active: str) -> None:
        """Move the underline and say which view is active."""
        start, end = self._label_span(active)
        if self.is_mounted and previous and self.app.animation_level != "none":
            self.animate("highlight_start", start, duration=UNDERLINE_SECONDS, level="basic")
            self.animate("highlight_end", end, duration=UNDERLINE_SECONDS, level="basic")
        else:
            self.highlight_start, self.highlight_end = start, end
        self.post_message(self.Activated(self, active))

    def render_line(self, y: int) -> Strip:
        """Line 0: the labels; line 1: the underline bar (drawn cell for cell as Tabs draws)."""
        width = self.size.width
        if y == 0:
            return self._labels(width)
        if y == 1:
            bar = self.get_component_rich_style("viewtabs--underline")
            underline = Bar(
                highlight_range=(self.highlight_start, self.highlight_end),
                highlight_style=Style.from_color(bar.color),
                background_style=Style.from_color(bar.bgcolor),
            )
            base = self.rich_style
            segments = self.app.console.render(
                underline, self.app.console.options.update_width(width)
            )
            return Strip(list(Segment.apply_style(segments, base))).crop_extend(0, width, base)
        return Strip.blank(width, self.rich_style)

    def _labels(self, width: int) -> Strip:
        segments: list[Segment] = []
        background = Style(bgcolor=self.rich_style.bgcolor)
        for index, (view, label) in enumerate(self._tabs):
            if view == self.active:
                name = "viewtabs--tab-active"
            elif index == self.hovered:
                name = "viewtabs--tab-hover"
            else:
                name = "viewtabs--tab"
            style = self.get_component_rich_style(name)
            # A label's padding apart from its label, in the tab's background alone, as Textual
            # draws a Tab's padding: the same cells, and the same picture in a screenshot.
            padding = Style(bgcolor=style.bgcolor)
            segments += [
                Segment(" ", padding),
                Segment(label, style + Style.from_meta({"view": view})),
                Segment(" ", padding),
            ]
        labels = Strip(segments)
        for note in (self.note, self.short_note) if self.note else ():
            # Two cells apart from the labels, one from the right edge.
            gap = width - labels.cell_length - cell_len(note) - 1
            if note and gap >= 2:
                style = background + self.get_component_rich_style("viewtabs--note")
                segments += [
                    Segment(" " * gap, background),
                    Segment(note, style),
                    Segment(" ", background),
                ]
                break
        return Strip(segments).crop_extend(0, width, background)

    def action_next_tab(self) -> None:
        """Make the next view active (wrapping)."""
        self._move(+1)

    def action_previous_tab(self) -> None:
        """Make the previous view active (wrapping)."""
        self._move(-1)

    def _move(self, direction: int) -> None:
        if self._ids:
            index = self._ids.index(self.active) if self.active in self._ids else -direction
            self.active = self._ids[(index + direction) % len(self._ids)]

    def on_click(self, event: events.Click) -> None:
        """A click on a label, or on the underline below it, activates that view."""
        index = self._tab_at(event.x)
        if index is not None:
            event.stop()
            self.focus()
            self.active = self._ids[index]

    def on_mouse_move(self, event: events.MouseMove) -> None:
        """Brighten the label under the pointer, as Tab does."""
        self.hovered = self._tab_at(event.x) if event.y == 0 else None

    def on_leave(self, event: events.Leave) -> None:
        """No label is under the pointer any more."""
        self.hovered = None
