"""The main screen's notice line: what the ranking leaves out or counts in part.

Shown only when there is something to say: a window without a run on the default branch, where
bad runs between good ones are no flake evidence (the text report says what to do about it),
suspected outages excluded from scoring while they await review (`o` opens the review, as a
click on the line does), and interrupted runs, which count for the tests they recorded. All
three fit in the line's three rows at 80 columns.
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.widgets import Static

from flaketui.core.scoring.results import Report
from flaketui.core.words import either, plural


def banner_text(report: Report) -> Text | None:
    """The notice for a report, or None when it has nothing to say."""
    parts: list[Text] = []
    if report.no_default_branch_runs:
        names = either(report.config.get("default_branches", ()))
        where = names or "a default branch (none is configured)"
        parts.append(
            Text.assemble(
                ("⚠ ", "bold"),
                (f"no run on {where}", "bold"),
                ": failing on and off is not judged flaky (--branch)",
            )
        )
    outages = len(report.proposed_incidents)
    if outages:
        parts.append(
            Text.assemble(
                ("⚠ ", "bold"),
                (f"{plural(outages, 'suspected outage')} excluded", "bold"),
                " from scoring: press ",
                ("o", "bold reverse"),
                " to review",
            )
        )
    interrupted = report.interrupted_runs
    if interrupted:
        they = "it" if interrupted == 1 else "they"
        parts.append(
            Text(
                f"{plural(interrupted, 'interrupted run')}, counted only for the tests "
                f"{they} recorded"
            )
        )
    if not parts:
        return None
    return Text("   ·   ").join(parts)


class TrustBanner(Static):
    """One line above the list (two on a narrow screen), hidden when there is nothing to flag."""

    DEFAULT_CSS = """
    TrustBanner {
        height: auto;
        max-height: 3;
        padding: 0 1;
        color: $warning;
        display: none;
    }
    """

    def show(self, report: Report) -> None:
        """Show (or hide) the notice of a freshly loaded report."""
        text = banner_text(report)
        self.display = text is not None
        self.update(text or "")

    async def on_click(self, event: events.Click) -> None:
        """A click reviews the outages, as `o` does."""
        event.stop()
        await self.app.run_action("screen.outages")
