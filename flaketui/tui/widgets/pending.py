"""A line that stands in for a panel of the detail screen until its data is read."""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import Static

LONG_S = 1.0  # after this long, the line counts the seconds and names the step being read


class PendingNote(Static):
    """ "reading the runs…", then the seconds and the step of a long read, or its failure."""

    DEFAULT_CSS = """
    PendingNote {
        height: auto;
        color: $text-muted;
    }
    """

    def __init__(self, what: str, *, id: str | None = None) -> None:
        """A note for the panel that shows `what`."""
        super().__init__(id=id, classes="pending")
        self.what = what
        self.started = time.monotonic()
        self.step = ""
        self.update(self.text())

    def text(self) -> Text:
        """What the note says now."""
        elapsed = time.monotonic() - self.started
        text = Text(f"⏳ reading {self.what}…")
        if elapsed >= LONG_S:
            text.append(f" {elapsed:.0f} s")
            if self.step:
                text.append(f" ({self.step})")
        return text

    def tick(self, step: str | None = None) -> None:
        """Show the time spent, and the step the read is at when given."""
        if step is not None:
            self.step = step
        self.update(self.text())

    def fail(self, problem: str) -> None:
        """The read failed: say so instead of waiting on."""
        self.update(Text(f"not read: {problem}", "red"))
