"""The lines under the list: the selected test's id, and its verdict's reason."""

from __future__ import annotations

import re

from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

from flaketui.core.output.text import visible

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


def fold_id_end(test_id: str, width: int, rows: int) -> list[str]:
    """The id folded as `fold_id` does, on `rows` lines at most: whole when it fits, else its
    longest end that fits after an ellipsis, so that the test's name stays readable."""
    lines = fold_id(test_id, width)
    if len(lines) <= rows:
        return lines
    for start in range(1, len(test_id)):
        lines = fold_id(ELLIPSIS + test_id[start:], width)
        if len(lines) <= rows:
            return lines
    return fold_id(test_id, width)[-rows:]  # a width too narrow for even one character


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
    """Text laid out for the width the widget gets: a test id folded at its separators on
    `rows` lines (`fold`), or one line cut at a word with an ellipsis. Its height never depends
    on the text shown, so the list above it keeps its rows as the cursor moves: a folded one
    keeps `rows` lines, or one when the longest text it will be given fits one (fit_to)."""

    DEFAULT_CSS = """
    FittedText {
        height: auto;
    }
    """

    def __init__(self, *, fold: bool, rows: int = 1, id: str | None = None) -> None:
        super().__init__(id=id)
        self.fold = fold
        self.rows = rows if fold else 1
        self.text = ""
        self.shown_style = ""
        self.longest: int | None = None  # the longest text it will be given, when known

    def show(self, text: str, style: str = "") -> None:
        """Show `text` in `style` (a Rich style), its control characters as escapes."""
        text = visible(text)
        if (text, style) != (self.text, self.shown_style):
            self.text = text
            self.shown_style = style
            self.refresh()

    def fit_to(self, longest: int) -> None:
        """Keep the rows the longest text it will be given needs: at a width where every text
        fits one row, the list above gets the others back."""
        if longest != self.longest:
            self.longest = longest
            self.refresh(layout=True)

    def rows_at(self, width: int) -> int:
        """The rows kept for the text at `width` columns, whatever the text."""
        if self.longest is not None and self.longest <= width:
            return 1
        return self.rows

    def lines(self, width: int) -> list[str]:
        """The lines the text takes at `width` columns."""
        if self.fold:
            return fold_id_end(self.text, width, self.rows_at(width))
        return [fit_line(self.text, width)]

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """The rows kept for the text, whatever the text."""
        return self.rows_at(width)

    def render(self) -> Text:
        """The text, fitted to the widget's width."""
        return Text("\n".join(self.lines(self.content_size.width)), style=self.shown_style)
