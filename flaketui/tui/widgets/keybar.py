"""The screen's keys at the bottom (one line, two on a narrow screen), drawn by one widget.

Textual's Footer mounts one widget per key and recomposes them on every change of the active
bindings (each focus change): on the main screen that was about 0.15 s of a 0.5 s start-up
(first ranked screen). This bar draws the same keys as one line of text, restyles
nothing when focus moves, and still runs a key's action when it is clicked.
"""

from __future__ import annotations

from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.dom import DOMNode
from textual.geometry import Size
from textual.screen import Screen
from textual.widget import Widget

MAX_LINES = 2
ESSENTIAL_ACTIONS = frozenset(
    {"app.help", "help", "quit", "app.quit", "command_palette", "app.command_palette"}
)


def _essential(binding: Binding) -> bool:
    """Help, Quit and the palette: the bar keeps them whatever its width."""
    return binding.action in ESSENTIAL_ACTIONS


def _flow(
    items: list[tuple[Text, DOMNode, Binding]], width: int
) -> list[list[tuple[Text, DOMNode, Binding]]]:
    """Items in lines of `width` cells, in order, a new line where the next does not fit."""
    lines: list[list[tuple[Text, DOMNode, Binding]]] = [[]]
    used = 0
    for item in items:
        size = item[0].cell_len
        if lines[-1] and used + size > width:
            lines.append([])
            used = 0
        lines[-1].append(item)
        used += size
    return lines


class KeyBar(Widget, can_focus=False):
    """Key and description of each shown binding of the screen, the command palette at right."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {"keybar--key", "keybar--description"}
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: auto;
        color: $footer-foreground;
        background: $footer-background;
        .keybar--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        .keybar--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        """A bar for the screen it is mounted on."""
        super().__init__(id=id)
        # Line and cell range of each key in the last render, and what a click there runs.
        self._spans: list[tuple[int, int, int, DOMNode, Binding]] = []

    def on_mount(self) -> None:
        """Redraw when the screen's bindings change (a modal, a focus change)."""
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        """Stop listening to the screen."""
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if screen is self.screen:
            # Other keys may need another number of lines: the bar's height is laid out again.
            self.refresh(layout=True)

    def _shown(self) -> list[tuple[DOMNode, Binding, bool]]:
        """The screen's shown bindings, one per action, in binding order."""
        seen: set[str] = set()
        shown = []
        palette = self.app.COMMAND_PALETTE_BINDING
        for key, (node, binding, enabled, _tooltip) in self.screen.active_bindings.items():
            if not binding.show or binding.action in seen or key == palette:
                continue
            seen.add(binding.action)
            shown.append((node, binding, enabled))
        return shown

    def _items(self) -> list[tuple[Text, DOMNode, Binding]]:
        """Each shown key as its label (key, then description), the command palette's last."""
        key_style = self.get_component_rich_style("keybar--key")
        text_style = self.get_component_rich_style("keybar--description")
        items = []
        for node, binding, enabled in self._shown():
            dim = Style() if enabled else Style(dim=True)
            label = Text.assemble(
                (f" {self.app.get_key_display(binding)} ", key_style + dim),
                (f"{binding.description} ", text_style + dim),
            )
            items.append((label, node, binding))
        palette = self.screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)
        if palette is not None and self.app.ENABLE_COMMAND_PALETTE:
            node, binding, _enabled, _tooltip = palette
            label = Text.assemble(
                ("▏", "dim"),
                (self.app.get_key_display(binding), key_style),
                (f" {binding.description} ", text_style),
            )
            items.append((label, node, binding))
        return items

    def _layout(self, width: int) -> list[list[tuple[Text, DOMNode, Binding]]]:
        """The keys in lines of `width` cells: one line when they fit, else MAX_LINES at most.

        A key that does not fit goes to the next line, as a word would (nano's two-line bar
        at 80 columns). Past MAX_LINES the last keys of the screen's order give way, Help and
        Quit and the palette never: they lead to every other key.
        """
        items = self._items()
        while True:
            lines = _flow(items, max(width, 1))
            droppable = [i for i, item in enumerate(items) if not _essential(item[2])]
            if len(lines) <= MAX_LINES or not droppable:
                return lines[:MAX_LINES]
            del items[droppable[-1]]

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """As many lines as the keys need at this width (MAX_LINES at most)."""
        return max(1, len(self._layout(width)))

    def render(self) -> Text:
        """The keys, left to right, then the command palette's key flush right."""
        width = self.size.width
        lines = self._layout(width)
        out = Text(no_wrap=True, overflow="crop", end="")
        spans: list[tuple[int, int, int, DOMNode, Binding]] = []
        palette_key = self.app.COMMAND_PALETTE_BINDING
        for y, items in enumerate(lines):
            line = Text(no_wrap=True, overflow="crop", end="")
            for label, node, binding in items:
                if binding.key == palette_key and y == len(lines) - 1:
                    line.append(" " * max(0, width - line.cell_len - label.cell_len))
                start = line.cell_len
                line.append_text(label)
                spans.append((y, start, line.cell_len, node, binding))
            if y:
                out.append("\n")
            out.append_text(line)
        self._spans = spans
        return out

    async def on_click(self, event: events.Click) -> None:
        """Run the action of the key under the pointer, as pressing it would."""
        for y, start, end, node, binding in self._spans:
            if y == event.y and start <= event.x < end:
                event.stop()
                await self.app.run_action(binding.action, node)
                return
