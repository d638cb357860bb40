"""Rich styles for cell text that tcss cannot reach (the ranked list's cells, plot colours)."""

from __future__ import annotations

from rich.text import Text

VERDICT_STYLES = {
    "flaky": "bold dark_orange",
    "regression": "bold red",
    "healthy": "green",
    "insufficient": "grey50",
    "skip": "bold magenta",
    "run": "magenta",
}
OUTCOME_STYLES = {
    "pass": "green",
    "flaky": "dark_orange",
    "fail": "red",
    "skipped": "grey50",
    "incident": "blue",
    "edited": "grey35",
}
OUTCOME_GLYPHS = {
    "pass": "█",
    "flaky": "▆",
    "fail": "█",
    "skipped": "▁",
    "incident": "▒",
    "edited": "░",
}


def verdict_text(verdict: str) -> Text:
    """A verdict word in its colour."""
    return Text(verdict, style=VERDICT_STYLES.get(verdict, ""))
