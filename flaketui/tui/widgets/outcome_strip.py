"""The outcome sequence as a coloured strip, newest at the right, with a legend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

from flaketui.core.words import plural
from flaketui.tui.widgets.palette import OUTCOME_GLYPHS, OUTCOME_STYLES


def outcome_kind(outcome: Any) -> str:
    """How one run is drawn: an incident or an edited run is greyed whatever its outcome."""
    if outcome.incident:
        return "incident"
    if outcome.edited:
        return "edited"
    return str(outcome.outcome)


def render_strip(outcomes: Sequence[Any], width: int) -> Text:
    """The newest `width` outcomes, oldest first, one cell each."""
    strip = Text()
    shown = list(outcomes)[-width:] if width > 0 else []
    for outcome in shown:
        kind = outcome_kind(outcome)
        strip.append(OUTCOME_GLYPHS.get(kind, "?"), style=OUTCOME_STYLES.get(kind, ""))
    return strip


def legend(outcomes: Sequence[Any], width: int | None = None) -> Text:
    """Counts per kind, each in its colour; lines break between kinds to fit width, never
    inside one (a kind's glyph, name and count stay together). The kinds stand three spaces
    apart, two when that keeps them on one line."""
    counts: dict[str, int] = {}
    for outcome in outcomes:
        kind = outcome_kind(outcome)
        counts[kind] = counts.get(kind, 0) + 1
    items = [
        (f"{OUTCOME_GLYPHS[kind]} {kind} {counts.get(kind, 0)}", kind) for kind in OUTCOME_STYLES
    ]
    gap = 3
    one_line = sum(len(item) for item, _ in items) + 2 * (len(items) - 1)
    if width is not None and one_line + len(items) - 1 > width >= one_line:
        gap = 2
    text = Text()
    used = 0
    for item, kind in items:
        if width is not None and used and used + gap + len(item) > width:
            text.append("\n")
            used = 0
        elif used:
            text.append(" " * gap)
            used += gap
        text.append(item, OUTCOME_STYLES[kind])
        used += len(item)
    return text


class OutcomeStrip(Widget):
    """Drawn for the width it is laid out at, so the newest runs are always visible at the right.

    Its height follows from that width too (the legend wraps when narrow), so the layout and the
    drawing always agree: nothing is drawn for one width and shown at another.
    """

    DEFAULT_CSS = """
    OutcomeStrip {
        height: auto;
    }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.outcomes: list[Any] = []

    def set_outcomes(self, outcomes: Sequence[Any]) -> None:
        """Show a new sequence."""
        self.outcomes = list(outcomes)
        self.refresh(layout=True)

    def text(self, width: int) -> Text:
        """The strip, its legend and a caption saying how many runs it shows, at `width`."""
        width = max(width, 1)
        shown = min(len(self.outcomes), width)
        note = Text(
            f"{shown} of {plural(len(self.outcomes), 'run')}, oldest left, newest right",
            style="dim",
        )
        return Text("\n").join(
            [render_strip(self.outcomes, width), legend(self.outcomes, width), note]
        )

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """As many lines as the text has at `width`."""
        return len(self.text(width).plain.split("\n"))

    def render(self) -> Text:
        """The text at the widget's own width."""
        return self.text(self.content_region.width)
