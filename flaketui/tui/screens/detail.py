"""The detail screen of one test or family: reason, outcome strip, pivot by any recorded
dimension with the likely causes, diagnose, trend, verdict changes, signatures, runs."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, LoadingIndicator, ProgressBar, Static

from flaketui.core.errors import FlaketuiError
from flaketui.core.output.text import visible
from flaketui.core.scoring.results import GroupVerdict, Report, TestVerdict
from flaketui.core.timeutil import to_iso
from flaketui.core.words import plural
from flaketui.tui.history_access import reading, writing
from flaketui.tui.loaders import DetailData, load_detail, load_verdict_changes
from flaketui.tui.messages import DetailLoaded, DetailProgress, LoadFailed, VerdictChangesLoaded
from flaketui.tui.viewmodel import relative_time, short_id
from flaketui.tui.widgets.causes import (
    CausesLoaded,
    DiagnoseDone,
    DiagnoseProgress,
    SuspectsPanel,
    diagnosis_text,
    suspects_text,
)
from flaketui.tui.widgets.keybar import KeyBar
from flaketui.tui.widgets.outcome_strip import OutcomeStrip, outcome_kind
from flaketui.tui.widgets.palette import OUTCOME_STYLES, VERDICT_STYLES
from flaketui.tui.widgets.pending import PendingNote
from flaketui.tui.widgets.plots import PivotPlot, TrendPlot
from flaketui.tui.widgets.tables import fit_rows

if TYPE_CHECKING:
    from flaketui.tui.app import FlaketuiApp

RUNS_SHOWN = 500  # newest runs listed; the strip and the pivot use them all
# Each panel filled by the detail's main read, and what its loading note says meanwhile.
PANELS = {
    "strip": "the outcome sequence",
    "pivot-row": "the worker pivot",
    "trend": "the score trend",
    "repro": "the reproduction command",
    "signatures": "the failure signatures",
    "members": "the params",
    "runs": "the runs",
}
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
        text.append(f"  {visible(change.reason)}", "dim")
    return text


class DetailScreen(Screen[None]):
    """Everything behind one row of the list."""

    # Loaded when the screen is first shown: the first screen need not parse it.
    CSS_PATH = "../detail.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", tooltip="Back to the list"),
        # A terminal's Escape is told from the start of an escape sequence only after a wait
        # (about 0.1 s); Backspace goes back at once.
        Binding("backspace", "app.pop_screen", "Back", show=False),
        Binding("c", "copy_repro", "Copy repro", tooltip="Copy the reproduction command"),
        Binding("q", "app.quarantine", "Quarantine", tooltip="Quarantine this test"),
        Binding("u", "app.release", "Release", tooltip="Remove this test from the skip file"),
        Binding("r", "reload", "Reload"),
        Binding("d", "next_dimension", "Dimension", tooltip="Pivot by the next dimension"),
        Binding(
            "p",
            "order",
            "Order",
            show=False,
            tooltip="The tests that ran before it: candidate polluters",
        ),
        Binding("D", "diagnose", "Diagnose", tooltip="Re-run this test here under experiments"),
        Binding("x", "cancel_diagnose", "Cancel", tooltip="Stop a running diagnose"),
        Binding("question_mark", "app.help", "Help", key_display="?"),
    ]

    def __init__(self, item: TestVerdict | GroupVerdict, report: Report) -> None:
        super().__init__()
        self.item = item
        self.report = report
        self.data: DetailData | None = None
        self.analysis: Any = None  # flaketui.core.scoring.causes.CauseAnalysis, once loaded
        self.dimension = "worker_count"
        self.diagnosis: Any = None  # the latest diagnose's Diagnosis
        self.cancel_diagnose = threading.Event()
        self.diagnosing = False
        self._pending_timer: Timer | None = None

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
            yield Static("Likely causes", classes="heading")
            yield SuspectsPanel(Text("⏳ reading the likely causes…", "dim"), id="suspects")
            yield Static("Diagnose", classes="heading")
            yield ProgressBar(id="diagnose-progress", show_eta=False)
            yield Static(Text("D: re-run it here under experiments", "dim"), id="diagnosis")
            yield TrendPlot(id="trend")
            yield Static(id="changes-heading", classes="heading")
            yield Static(Text("⏳ reading the verdict changes…", "dim"), id="changes")
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
            (visible(self.key), "bold"),
            "   ",
            (self.item.verdict, VERDICT_STYLES.get(self.item.verdict, "")),
        )
        onset = getattr(self.item, "onset", None)
        if onset:
            title.append(f" since {onset}", VERDICT_STYLES.get(self.item.verdict, ""))
        flags = getattr(self.item, "flags", [])
        if flags:
            title.append("   " + " ".join(f"[{flag}]" for flag in flags), "yellow")
        self.query_one("#title", Static).update(title)
        self.query_one("#reason", Static).update(Text(visible(self.item.reason)))
        for table in self.query(".family-only"):
            table.display = isinstance(self.item, GroupVerdict)
        days = int(self.flaketui.source.config.window_days)
        self.query_one("#changes-heading", Static).update(
            f"Verdict changes, last {plural(days, 'day')}"
        )
        self.query_one("#diagnose-progress").display = False
        self._show_pending()
        self._load()
        self._load_changes()
        self._load_causes()

    @property
    def flaketui(self) -> FlaketuiApp:
        """The app, typed."""
        return self.app  # type: ignore[return-value]

    def _show_pending(self) -> None:
        """A loading note in place of each panel until the detail is read (see PendingNote)."""
        for panel, what in PANELS.items():
            widget = self.query_one(f"#{panel}")
            if widget.display:
                widget.display = False
                self.query_one("#detail").mount(PendingNote(what), before=widget)
        self._pending_timer = self.set_interval(1.0, self._tick_pending)

    def _tick_pending(self, step: str | None = None) -> None:
        for note in self.query(PendingNote):
            note.tick(step)

    def _end_pending(self, problem: str | None = None) -> None:
        """The panels are in (or the read failed: the notes say why)."""
        if self._pending_timer is not None:
            self._pending_timer.stop()
        for note in self.query(PendingNote):
            if problem is None:
                note.remove()
            else:
                note.fail(problem)
        if problem is None:
            for panel in PANELS:
                widget = self.query_one(f"#{panel}")
                widget.display = panel != "members" or isinstance(self.item, GroupVerdict)

    @on(DetailProgress)
    def _progress(self, event: DetailProgress) -> None:
        self._tick_pending(f"step {event.done + 1} of {event.steps}: {event.what}")

    @work(thread=True, exclusive=True, group="detail", exit_on_error=False)
    def _load(self) -> None:
        def progress(done: int, steps: int, what: str) -> None:
            self.post_message(DetailProgress(done, steps, what))

        try:
            data = load_detail(self.flaketui.source, self.item, self.report, progress=progress)
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

    @work(thread=True, exclusive=True, group="detail-causes", exit_on_error=False)
    def _load_causes(self) -> None:
        from flaketui.core.scoring.causes import analyse

        source = self.flaketui.source
        try:
            with reading(source.path) as db:
                analysis = analyse(db, self.key, now=self.report.now, config=source.config)
        except FlaketuiError as exc:
            self.post_message(LoadFailed(exc.message))
            return
        self.post_message(CausesLoaded(self.key, analysis))

    @on(CausesLoaded)
    def _causes_loaded(self, event: CausesLoaded) -> None:
        if event.key != self.key:
            return
        self.analysis = event.analysis
        self.query_one(SuspectsPanel).update(suspects_text(self.analysis, self.dimension))
        if self.dimension != "worker_count":
            self._show_dimension()

    def action_next_dimension(self) -> None:
        """Split the pivot and its interval plot by the next recorded dimension."""
        from flaketui.core.scoring.causes import DIMENSIONS

        if self.analysis is None:
            return
        self.dimension = DIMENSIONS[(DIMENSIONS.index(self.dimension) + 1) % len(DIMENSIONS)]
        self.query_one(SuspectsPanel).update(suspects_text(self.analysis, self.dimension))
        self._show_dimension()

    def action_order(self) -> None:
        """Show the order view: the tests that ran before it, bad runs against good runs."""
        from flaketui.tui.screens.order_modal import OrderModal

        source = self.flaketui.source
        self.app.push_screen(
            OrderModal(self.key, path=source.path, now=self.report.now, config=source.config)
        )

    def _show_dimension(self) -> None:
        from flaketui.core.scoring.causes import dimension_rows

        rows = dimension_rows(self.analysis.units, self.dimension, self.flaketui.source.config)
        table = self.query_one("#pivot", DataTable)
        table.clear(columns=True)
        table.add_columns(self.dimension, "runs", "bad", "fail rate", "Wilson 95 %")
        for row in rows:
            table.add_row(
                Text(visible(short_id(row.value, 28)) or "—"),
                str(row.runs),
                str(row.bad_runs),
                f"{row.fail_rate:.2f}",
                f"{row.wilson_low:.2f}–{row.wilson_high:.2f}",
            )
        plotted = [
            SimpleNamespace(
                key=visible(row.value.rsplit("::", 1)[-1]), runs=row.runs, fail_rate=row.fail_rate,
                wilson_low=row.wilson_low, wilson_high=row.wilson_high,
            )
            for row in rows
        ]  # fmt: skip
        self.query_one(PivotPlot).show(plotted, self.dimension.replace("_", " "), prefix="")

    def action_diagnose(self) -> None:
        """Re-run this test in the current directory's repository under experiments."""
        if self.diagnosing:
            self.notify("diagnose is already running (x: cancel)")
            return
        self.diagnosing = True
        self.cancel_diagnose.clear()
        bar = self.query_one("#diagnose-progress", ProgressBar)
        bar.update(total=None, progress=0)
        bar.display = True
        panel = self.query_one("#diagnosis", Static)
        panel.update(Text("starting…", "dim"))
        # Below the fold on a small terminal: brought into view, or D would seem to do nothing.
        self.call_after_refresh(panel.scroll_visible, animate=False)
        self._run_diagnose(Path.cwd())

    def on_unmount(self) -> None:
        """Leaving the detail, or quitting, cancels its diagnose: the result would have nowhere
        to show, and a session still running would keep the app's process alive after it quit.
        The sessions run so far stay stored."""
        self.cancel_diagnose.set()

    def action_cancel_diagnose(self) -> None:
        """Stop a running diagnose (the sessions run so far are kept)."""
        if self.diagnosing:
            self.cancel_diagnose.set()

    @work(thread=True, exclusive=True, group="detail-diagnose", exit_on_error=False)
    def _run_diagnose(self, repo: Path) -> None:
        from flaketui.core.diagnosis.experiments import Diagnoser
        from flaketui.core.diagnosis.sessions import PytestSessions, check_repository

        source = self.flaketui.source

        def progress(done: int, planned: int, what: str) -> None:
            self.post_message(DiagnoseProgress(done, planned, what))

        try:
            if source.readonly:
                raise FlaketuiError("the history is open read-only: diagnose cannot store runs")
            with writing(source.path) as history:
                diagnoser = Diagnoser(
                    history,
                    PytestSessions(check_repository(repo)),
                    runs=10,
                    minutes=None,
                    config=source.config,
                    now=self.report.now,
                    cancel=self.cancel_diagnose,
                    progress=progress,
                )
                diagnosis = diagnoser.diagnose(self.key)
        except FlaketuiError as exc:
            self.post_message(DiagnoseDone(None, exc.message))
            return
        self.post_message(DiagnoseDone(diagnosis))

    @on(DiagnoseProgress)
    def _diagnose_progress(self, event: DiagnoseProgress) -> None:
        self.query_one("#diagnose-progress", ProgressBar).update(
            total=max(event.planned, event.done, 1), progress=event.done
        )
        self.query_one("#diagnosis", Static).update(
            Text(f"{event.what}: session {event.done} of ~{event.planned}   x: cancel", "dim")
        )

    @on(DiagnoseDone)
    def _diagnose_done(self, event: DiagnoseDone) -> None:
        self.diagnosing = False
        self.query_one("#diagnose-progress").display = False
        panel = self.query_one("#diagnosis", Static)
        if event.diagnosis is None:
            panel.update(Text(event.problem or "diagnose failed", "red"))
            return
        self.diagnosis = event.diagnosis
        text = diagnosis_text(event.diagnosis)
        if event.diagnosis.cancelled:
            text.append("\n  cancelled: classified from the sessions that ran", "yellow")
        panel.update(text)

    @on(VerdictChangesLoaded)
    def _changes_loaded(self, event: VerdictChangesLoaded) -> None:
        if event.key == self.key:
            text = verdict_changes_text(event.changes, self.item.verdict)
            self.query_one("#changes", Static).update(text)

    @on(LoadFailed)
    def _failed(self, event: LoadFailed) -> None:
        self.query_one("#detail-loading").display = False
        if self.data is None:
            self._end_pending(event.message)
        self.notify(
            visible(event.message), title="Cannot read the detail", severity="error", markup=False
        )

    @on(DetailLoaded)
    def _loaded(self, event: DetailLoaded) -> None:
        data = self.data = event.data
        self.query_one("#detail-loading").display = False
        self._end_pending()
        self.query_one(OutcomeStrip).set_outcomes(data.outcomes)
        self._fill_pivot(data)
        threshold = self.flaketui.source.config.quarantine_threshold
        self.query_one(TrendPlot).show(data.daily_scores, threshold=threshold)
        repro = Text.assemble((visible(data.repro), "bold"), ("   c: copy", "dim"))
        if data.repro_note:
            repro.append(f"\n{visible(data.repro_note)}", "dim")
        self.query_one("#repro", Static).update(repro)
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
        """One row per signature: its run count, then its text, hash and an example message.

        A grid, so a line too long for the screen wraps under its own text, not back to the
        left edge beneath the counts.
        """
        box = self.query_one("#signatures", Static)
        if not data.signatures:
            box.update(Text("no failure in the window", "dim"))
            return
        grid = Table.grid(padding=(0, 2))
        grid.add_column(justify="right", no_wrap=True)
        grid.add_column(ratio=1, overflow="fold")
        for signature in data.signatures:
            first = signature.text.splitlines()[0] if signature.text else ""
            line = Text(visible(first), "bold red")
            line.append(f"  [{signature.hash[:10]}]", "dim")
            if signature.incident_runs:
                share = (
                    "all"
                    if signature.incident_runs == signature.runs
                    else f"{signature.incident_runs} of them"
                )
                line.append(f"  {share} in incidents (not scored)", "magenta")
            grid.add_row(Text(plural(signature.runs, "run"), "bold"), line)
            example = " ".join(signature.example.split())[:150]
            grid.add_row("", Text(f"e.g. {visible(example)}", "dim"))
        box.update(grid)

    def _fill_members(self, data: DetailData) -> None:
        if data.kind != "family":
            return
        table = self.query_one("#members", DataTable)
        table.clear(columns=True)
        table.add_columns("param", "verdict", "damage", "fail rate", "Wilson", "runs")
        for member in data.members:
            scores = member.scores
            table.add_row(
                # Text, not a string: a DataTable reads strings as markup, and "[gbp]" is a tag.
                Text(visible(short_id(member.test_id, 80))),
                Text(member.verdict, VERDICT_STYLES.get(member.verdict, "")),
                f"{scores.damage:.2f}",
                f"{scores.fail_rate:.2f}",
                f"{scores.wilson_low:.2f}–{scores.wilson_high:.2f}",
                str(scores.runs),
            )
        fit_rows(table)

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
                Text(visible(outcome.branch or outcome.branch_kind)),
                Text(visible((outcome.commit or "—")[:10])),
                str(outcome.worker_count),
                Text(visible(outcome.worker_id or "—")),
                str(outcome.attempts),
                Text(label, OUTCOME_STYLES.get(kind, "")),
            ]
            if data.kind == "family":
                param = outcome.test_id[len(self.key) :].strip() or outcome.test_id
                cells.insert(1, Text(visible(param)))
            message = " ".join((outcome.message or "").split())[:MESSAGE_WIDTH]
            table.add_row(*cells, Text(visible(message)))
        fit_rows(table)
        if data.kind == "family":
            heading = "Runs (newest first; params pooled per run, the worst one shown)"
            self.query_one("#runs-heading", Static).update(heading)

    def action_copy_repro(self) -> None:
        """Send the reproduction command to the clipboard, and keep it where it surely lands.

        See flaketui.tui.clipboard: the terminal may drop the OSC 52 sequence unseen.
        """
        if self.data is None:
            return
        self.app.copy_to_clipboard(self.data.repro)
        self._save_copy(self.data.repro)

    @work(thread=True, group="copy", exit_on_error=False)
    def _save_copy(self, text: str) -> None:
        from flaketui.tui.clipboard import TITLE, save_copy

        outcome = save_copy(text)
        self.app.call_from_thread(self.notify, outcome.message(text), title=TITLE, timeout=10)

    def action_reload(self) -> None:
        """Read this test's detail again."""
        self._load()
        self._load_changes()
