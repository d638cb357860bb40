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

from flaketui.core.output.text import one_line
from flaketui.core.scoring.results import Report
from flaketui.core.words import either, plural

# The default branches are named when they fit in this many characters ("main or master"),
# so the notice keeps to one row at 80 columns; the reports name them all.
NAMES_FIT = 16


def _no_default_branch(report: Report) -> Text:
    """The notice of a window without a run on the default branch."""
    branches = [one_line(name) for name in report.config.get("default_branches", ())]
    if not branches:  # the way out is the default_branches setting, not --branch
        where, remedy = "no default branch is configured", ""
    else:
        names = either(branches)
        where = f"no run on {names}" if len(names) <= NAMES_FIT else "no default-branch run"
        remedy = " (--branch)"
    return Text.assemble(
        ("⚠ ", "bold"), (where, "bold"), f": failing on and off is not judged flaky{remedy}"
    )


def banner_text(report: Report) -> Text | None:
    """The notice for a report, or None when it has nothing to say."""
    parts: list[Text] = []
    if report.no_default_branch_runs:
        parts.append(_no_default_branch(report))
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
