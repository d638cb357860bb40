"""The main screen's header: the history, its window, the clock and the counts per verdict."""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

from flaketui.core.output.text import visible
from flaketui.core.timeutil import to_iso
from flaketui.tui.loaders import MainData, Source
from flaketui.tui.viewmodel import verdict_counts
from flaketui.tui.widgets.palette import VERDICT_STYLES

WIDE_GAP = "   "
NARROW_GAP = "  "  # between the items of a line that would not fit with the wide gaps


def flow(groups: list[list[Text]], width: int) -> list[Text]:
    """The items of each group in lines of `width` cells, each group on a line of its own.

    Items are never split: one that does not fit goes to the next line, as a word would. A
    group that does not fit on one line with wide gaps between its items takes narrow ones.
    """
    lines: list[Text] = []
    for items in groups:
        one_line = sum(i.cell_len for i in items) + len(WIDE_GAP) * (len(items) - 1)
        gap = WIDE_GAP if one_line <= width else NARROW_GAP
        line = Text()
        for item in items:
            if line.cell_len and line.cell_len + len(gap) + item.cell_len > width:
                lines.append(line)
                line = Text()
            if line.cell_len:
                line.append(gap)
            line.append_text(item)
        lines.append(line)
    return lines


class HistoryHeader(Widget):
    """Which history as of when, then what it holds: two lines, more on a narrow screen."""

    DEFAULT_CSS = """
    HistoryHeader {
        height: auto;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.groups: list[list[Text]] = []

    def set_groups(self, groups: list[list[Text]]) -> None:
        """Show these groups of items (each group starts a line)."""
        self.groups = groups
        self.refresh(layout=True)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """The lines the items take at this width."""
        return max(1, len(flow(self.groups, max(width, 1))))

    def render(self) -> Text:
        """The items flowed into the widget's width."""
        lines = flow(self.groups, max(self.content_region.width, 1))
        text = Text("\n").join(lines)
        text.no_wrap = True
        text.overflow = "ellipsis"
        return text

    def show_loading(self, source: Source) -> None:
        """Before the first report arrives."""
        self.set_groups([[_named(source), Text("loading…")]])

    def show_not_read(self, source: Source, why: str) -> None:
        """When the first read failed: no report is coming, and why (the notice that said so
        times out; this stays until a read succeeds)."""
        path = str(source.path)
        why = why.removeprefix(f"{path}: ")  # the header names the history already
        self.set_groups([[_named(source), Text(f"not read: {visible(why)}", "bold red")]])

    def show(
        self, data: MainData, source: Source, *, suite: str | None, branch_kind: str | None
    ) -> None:
        """Render the header for a freshly loaded report."""
        report = data.report
        first = [
            Text.assemble(
                ("flaketui ", "bold"), (visible(source.display or str(source.path)), "bold cyan")
            )
        ]
        if source.readonly:
            first.append(Text("[read-only]", style="bold yellow"))
        first.append(Text(f"window {report.window_days} d"))
        first.append(Text.assemble("as of ", (to_iso(report.now), "bold")))
        if report.now_was_clamped:
            first.append(Text("(the history's newest run: it is older than the window)", "yellow"))
        if data.provisional:
            first.append(Text("ranking of the last opening, refreshing…", "yellow"))
        second = [
            Text.assemble((f"{verdict} ", VERDICT_STYLES.get(verdict, "")), (str(count), "bold"))
            for verdict, count in verdict_counts(report, data.verdicts).items()
        ]
        second.append(Text(f"suite: {visible(suite or 'all')}", "dim"))
        second.append(Text(f"branch: {branch_kind or 'all'}", "dim"))
        second.append(Text(f"skip file: {visible(source.skip_path.name)}", "dim"))
        owners = visible(source.owners_display or "no CODEOWNERS")
        second.append(Text(f"owners: {owners}", "dim"))
        if data.skip_problem:
            second.append(Text(f"⚠ {visible(data.skip_problem)}", "bold red"))
        self.set_groups([first, second])


def _named(source: Source) -> Text:
    """The header's first item before a report is in: flaketui and the history's name."""
    return Text.assemble(("flaketui ", "bold"), visible(source.display or str(source.path)))
