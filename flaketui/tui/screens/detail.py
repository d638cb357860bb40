"""The detail screen of one test or family: reason, outcome strip, pivot, trend, verdict
changes, signatures, runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, LoadingIndicator, Static

from flaketui.core.errors import FlaketuiError
from flaketui.core.scoring.results import GroupVerdict, Report, TestVerdict
from flaketui.core.timeutil import to_iso
from flaketui.tui.loaders import DetailData, load_detail, load_verdict_changes
from flaketui.tui.messages import DetailLoaded, LoadFailed, VerdictChangesLoaded
from flaketui.tui.viewmodel import relative_time, short_id
from flaketui.tui.widgets.keybar import KeyBar
from flaketui.tui.widgets.outcome_strip import OutcomeStrip, outcome_kind
from flaketui.tui.widgets.palette import OUTCOME_STYLES, VERDICT_STYLES
from flaketui.tui.widgets.plots import PivotPlot, TrendPlot

if TYPE_CHECKING:
    from flaketui.tui.app import FlaketuiApp

RUNS_SHOWN = 500  # newest runs listed; the strip and the pivot use them all
MESSAGE_WIDTH = 70


def verdict_changes_text(changes: Sequence[Any], verdict: str) -> Text:
    """One line per verdict change (day, before → after, the new verdict's reason)."""
    text = Text()
    if not changes:
        text.append(f"none: {verdict} throughout", "dim")
    for number, change in enumerate(changes):
        if number:
            text.append("\n")
        text.append(f"{change.day.isoformat()}  ")
        text.append(change.before, VERDICT_STYLES.get(change.before, ""))
        text.append(" → ")
        text.append(change.after, VERDICT_STYLES.get(change.after, "") + " bold")
        text.append(f"  {change.reason}", "dim")
    return text


class DetailScreen(Screen[None]):
    """Everything behind one row of the list."""

    # Loaded when the screen is first shown: the first screen need not parse it.
    CSS_PATH = "../detail.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", tooltip="Back to the list"),
        Binding("c", "copy_repro", "Copy repro", tooltip="Copy the reproduction command"),
        Binding("q", "app.quarantine", "Quarantine", tooltip="Quarantine this test"),
        Binding("u", "app.release", "Release", tooltip="Remove this test from the skip file"),
        Binding("r", "reload", "Reload"),
        Binding("question_mark", "app.help", "Help", key_display="?"),
    ]

    def __init__(self, item: TestVerdict | GroupVerdict, report: Report) -> None:
        super().__init__()
        self.item = item
        self.report = report
        self.data: DetailData | None = None

    @property
    def key(self) -> str:
        """The test id or family parent shown."""
        return self.item.test_id if isinstance(self.item, TestVerdict) else self.item.key

    def compose(self) -> ComposeResult:
        """Sections top to bottom, filled when the worker returns."""
        with VerticalScroll(id="detail"):
            yield Static(id="title")
            yield Static(id="reason", classes="section")
            yield Static("Outcome sequence", classes="heading")
            yield OutcomeStrip(id="strip")
            with Horizontal(id="pivot-row"):
                yield DataTable(id="pivot", cursor_type="none", zebra_stripes=True)
                yield PivotPlot(id="pivot-plot")
            yield TrendPlot(id="trend")
            yield Static(id="changes-heading", classes="heading")
            yield Static(Text("reading…", "dim"), id="changes")
            yield Static("Reproduce", classes="heading")
            yield Static(id="repro")
            yield Static("Failure signatures", classes="heading")
            yield Static(id="signatures")
            yield Static("Params ranked", classes="heading family-only")
            yield DataTable(id="members", cursor_type="row", classes="family-only")
            yield Static("Runs (newest first)", classes="heading", id="runs-heading")
            yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
            yield LoadingIndicator(id="detail-loading")
        yield KeyBar()

    def on_mount(self) -> None:
        """Show the title at once, then load the rest."""
        kind = "family" if isinstance(self.item, GroupVerdict) else "test"
        title = Text.assemble(
            (f"{kind} ", "dim"),
            (self.key, "bold"),
            "   ",
            (self.item.verdict, VERDICT_STYLES.get(self.item.verdict, "")),
        )
        flags = getattr(self.item, "flags", [])
        if flags:
            title.append("   " + " ".join(f"[{flag}]" for flag in flags), "yellow")
        self.query_one("#title", Static).update(title)
        self.query_one("#reason", Static).update(self.item.reason)
        for table in self.query(".family-only"):
            table.display = isinstance(self.item, GroupVerdict)
        days = int(self.flaketui.source.config.window_days)
        self.query_one("#changes-heading", Static).update(f"Verdict changes, last {days} days")
        self._load()
        self._load_changes()

    @property
    def flaketui(self) -> FlaketuiApp:
        """The app, typed."""
        return self.app  # type: ignore[return-value]

    @work(thread=True, exclusive=True, group="detail", exit_on_error=False)
    def _load(self) -> None:
        try:
            data = load_detail(self.flaketui.source, self.item, self.report)
        except FlaketuiError as exc:
            self.post_message(LoadFailed(exc.message))
            return
        self.post_message(DetailLoaded(data))

    @work(thread=True, exclusive=True, group="detail-changes", exit_on_error=False)
    def _load_changes(self) -> None:
        try:
            changes = load_verdict_changes(self.flaketui.source, self.key, self.report)
        except FlaketuiError as exc:
            self.post_message(LoadFailed(exc.message))
            return
        self.post_message(VerdictChangesLoaded(self.key, changes))

    @on(VerdictChangesLoaded)
    def _changes_loaded(self, event: VerdictChangesLoaded) -> None:
        if event.key == self.key:
            text = verdict_changes_text(event.changes, self.item.verdict)
            self.query_one("#changes", Static).update(text)

    @on(LoadFailed)
    def _failed(self, event: LoadFailed) -> None:
        self.query_one("#detail-loading").display = False
        self.notify(event.message, title="Cannot read the detail", severity="error")

    @on(DetailLoaded)
    def _loaded(self, event: DetailLoaded) -> None:
        data = self.data = event.data
        self.query_one("#detail-loading").display = False
        self.query_one(OutcomeStrip).set_outcomes(data.outcomes)
        self._fill_pivot(data)
        threshold = self.flaketui.source.config.quarantine_threshold
        self.query_one(TrendPlot).show(data.daily_scores, threshold=threshold)
        self.query_one("#repro", Static).update(
            Text.assemble((data.repro, "bold"), ("   c: copy", "dim"))
        )
        self._fill_signatures(data)
        self._fill_members(data)
        self._fill_runs(data)

    def _fill_pivot(self, data: DetailData) -> None:
        table = self.query_one("#pivot", DataTable)
        table.clear(columns=True)
        table.add_columns("workers", "runs", "bad", "fail rate", "Wilson 95 %")
        rows = list(data.pivot.by_worker_count)
        for row in rows:
            table.add_row(
                row.key,
                str(row.runs),
                str(row.bad_runs),
                f"{row.fail_rate:.2f}",
                f"{row.wilson_low:.2f}–{row.wilson_high:.2f}",
            )
        self.query_one(PivotPlot).show(rows)

    def _fill_signatures(self, data: DetailData) -> None:
        text = Text()
        if not data.signatures:
            text.append("no failure in the window", "dim")
        for signature in data.signatures:
            text.append(f"{signature.runs:>5} runs  ", "bold")
            text.append(signature.text.splitlines()[0] if signature.text else "", "bold red")
            text.append(f"  [{signature.hash[:10]}]", "dim")
            if signature.incident_runs:
                share = (
                    "all"
                    if signature.incident_runs == signature.runs
                    else f"{signature.incident_runs} of them"
                )
                text.append(f"  {share} in incidents (not scored)", "magenta")
            text.append("\n")
            example = " ".join(signature.example.split())[:150]
            text.append(f"            e.g. {example}\n", "dim")
        self.query_one("#signatures", Static).update(text)

    def _fill_members(self, data: DetailData) -> None:
        if data.kind != "family":
            return
        table = self.query_one("#members", DataTable)
        table.clear(columns=True)
        table.add_columns("param", "verdict", "damage", "fail rate", "Wilson", "runs")
        for member in data.members:
            scores = member.scores
            table.add_row(
                short_id(member.test_id, 80),
                Text(member.verdict, VERDICT_STYLES.get(member.verdict, "")),
                f"{scores.damage:.2f}",
                f"{scores.fail_rate:.2f}",
                f"{scores.wilson_low:.2f}–{scores.wilson_high:.2f}",
                str(scores.runs),
            )

    def _fill_runs(self, data: DetailData) -> None:
        table = self.query_one("#runs", DataTable)
        table.clear(columns=True)
        columns = ["time", "branch", "commit", "workers", "worker", "attempts", "outcome"]
        if data.kind == "family":
            columns.insert(1, "param")
        table.add_columns(*columns, "message")
        now = self.report.now
        for outcome in reversed(data.outcomes[-RUNS_SHOWN:]):
            kind = outcome_kind(outcome)
            label = outcome.outcome if kind == outcome.outcome else f"{outcome.outcome} ({kind})"
            cells: list[str | Text] = [
                f"{to_iso(outcome.ts)[:16]} ({relative_time(outcome.ts, now)})",
                outcome.branch or outcome.branch_kind,
                (outcome.commit or "—")[:10],
                str(outcome.worker_count),
                outcome.worker_id or "—",
                str(outcome.attempts),
                Text(label, OUTCOME_STYLES.get(kind, "")),
            ]
            if data.kind == "family":
                cells.insert(1, outcome.test_id[len(self.key) :] or outcome.test_id)
            message = " ".join((outcome.message or "").split())[:MESSAGE_WIDTH]
            table.add_row(*cells, message)
        if data.kind == "family":
            heading = "Runs (newest first; params pooled per run, the worst one shown)"
            self.query_one("#runs-heading", Static).update(heading)

    def action_copy_repro(self) -> None:
        """Copy the reproduction command to the clipboard."""
        if self.data is None:
            return
        self.app.copy_to_clipboard(self.data.repro)
        self.notify(self.data.repro, title="Copied to the clipboard")

    def action_reload(self) -> None:
        """Read this test's detail again."""
        self._load()
        self._load_changes()
