"""The lines under the list: the selected test's full id, and its verdict's reason."""

from __future__ import annotations

import re

from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

# Where a test id may break: after a folder's `/`, after `::`, before a parameter's `[`.
ID_BREAKS = re.compile(r"(?<=/)|(?<=::)|(?=\[)")
ELLIPSIS = "…"


def fold_id(test_id: str, width: int) -> list[str]:
    """The id on lines of `width` at most, broken after `/` or `::` or before `[`; a part
    longer than a line is cut where the line ends. The lines joined give the id back."""
    width = max(1, width)
    lines: list[str] = []
    line = ""
    for part in (p for p in ID_BREAKS.split(test_id) if p):
        if line and len(line) + len(part) > width:
            lines.append(line)
            line = ""
        line += part
        while len(line) > width:
            lines.append(line[:width])
            line = line[width:]
    if line or not lines:
        lines.append(line)
    return lines


def fit_line(text: str, width: int) -> str:
    """`text` on one line of `width` at most: whole when it fits, else cut after its last
    whole word that leaves room for an ellipsis."""
    width = max(1, width)
    if len(text) <= width:
        return text
    room = text[: width - len(ELLIPSIS) + 1]
    cut = room.rfind(" ")
    kept = room[:cut] if cut > 0 else room[: width - len(ELLIPSIS)]
    return kept.rstrip(" ,;:") + ELLIPSIS


class FittedText(Widget):
    """Text laid out for the width the widget gets: a test id folded at its separators (`fold`),
    or one line cut at a word with an ellipsis."""

    DEFAULT_CSS = """
    FittedText {
        height: auto;
    }
    """

    def __init__(self, *, fold: bool, id: str | None = None) -> None:
        super().__init__(id=id)
        self.fold = fold
        self.text = ""
        self.shown_style = ""

    def show(self, text: str, style: str = "") -> None:
        """Show `text` in `style` (a Rich style)."""
        if (text, style) != (self.text, self.shown_style):
            self.text = text
            self.shown_style = style
            self.refresh(layout=True)

    def lines(self, width: int) -> list[str]:
        """The lines the text takes at `width` columns."""
        return fold_id(self.text, width) if self.fold else [fit_line(self.text, width)]

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """As many rows as the text takes at that width."""
        return len(self.lines(width))

    def render(self) -> Text:
        """The text, fitted to the widget's width."""
        return Text("\n".join(self.lines(self.content_size.width)), style=self.shown_style)
