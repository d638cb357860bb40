"""The screen's keys on one line at the bottom, drawn by a single widget.

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
from textual.screen import Screen
from textual.widget import Widget


class KeyBar(Widget, can_focus=False):
    """Key and description of each shown binding of the screen, the command palette at right."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {"keybar--key", "keybar--description"}
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
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
        # Cell ranges of the last render and what a click there runs.
        self._spans: list[tuple[int, int, DOMNode, Binding]] = []

    def on_mount(self) -> None:
        """Redraw when the screen's bindings change (a modal, a focus change)."""
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        """Stop listening to the screen."""
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if screen is self.screen:
            self.refresh()

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

    def render(self) -> Text:
        """The keys, left to right, then the command palette's key flush right."""
        key_style = self.get_component_rich_style("keybar--key")
        text_style = self.get_component_rich_style("keybar--description")
        line = Text(no_wrap=True, overflow="crop", end="")
        spans: list[tuple[int, int, DOMNode, Binding]] = []
        for node, binding, enabled in self._shown():
            start = line.cell_len
            dim = Style() if enabled else Style(dim=True)
            line.append(f" {self.app.get_key_display(binding)} ", key_style + dim)
            line.append(f"{binding.description} ", text_style + dim)
            spans.append((start, line.cell_len, node, binding))
        palette = self.screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)
        if palette is not None and self.app.ENABLE_COMMAND_PALETTE:
            node, binding, _enabled, _tooltip = palette
            label = Text.assemble(
                ("▏", "dim"),
                (self.app.get_key_display(binding), key_style),
                (f" {binding.description} ", text_style),
            )
            start = max(line.cell_len, self.size.width - label.cell_len)
            line.append(" " * (start - line.cell_len))
            line.append_text(label)
            spans.append((start, line.cell_len, node, binding))
        self._spans = spans
        return line

    async def _on_click(self, event: events.Click) -> None:
        """Run the action of the key under the pointer, as pressing it would."""
        for start, end, node, binding in self._spans:
            if start <= event.x < end:
                event.stop()
                await self.app.run_action(binding.action, node)
                return
