"""The main screen's header: the history, its window, the clock and the counts per verdict."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from flaketui.core.timeutil import to_iso
from flaketui.tui.loaders import MainData, Source
from flaketui.tui.viewmodel import verdict_counts
from flaketui.tui.widgets.palette import VERDICT_STYLES


class HistoryHeader(Static):
    """Two lines: which history as of when, then what it holds."""

    def show_loading(self, source: Source) -> None:
        """Before the first report arrives."""
        self.update(
            Text.assemble(("flaketui ", "bold"), source.display or str(source.path), "  loading…")
        )

    def show(
        self, data: MainData, source: Source, *, suite: str | None, branch_kind: str | None
    ) -> None:
        """Render the header for a freshly loaded report."""
        report = data.report
        line1 = Text.assemble(
            ("flaketui ", "bold"), (source.display or str(source.path), "bold cyan")
        )
        if source.readonly:
            line1.append("  [read-only]", style="bold yellow")
        line1.append(f"   window {report.window_days} d", style="")
        line1.append("   as of ")
        line1.append(to_iso(report.now), style="bold")
        if report.now_was_clamped:
            line1.append(" (the history's newest run: it is older than the window)", "yellow")
        if data.provisional:
            line1.append("   ranking of the last opening, refreshing…", "yellow")
        line2 = Text()
        for verdict, count in verdict_counts(report).items():
            line2.append(f"{verdict} ", style=VERDICT_STYLES.get(verdict, ""))
            line2.append(f"{count}   ", style="bold")
        line2.append(f"suite: {suite or 'all'}   branch: {branch_kind or 'all'}   ", "dim")
        line2.append(f"skip file: {source.skip_path.name}", "dim")
        line2.append(f"   owners: {source.owners_display or 'no CODEOWNERS'}", "dim")
        if data.skip_problem:
            line2.append(f"   ⚠ {data.skip_problem}", "bold red")
        self.update(Text("\n").join([line1, line2]))
