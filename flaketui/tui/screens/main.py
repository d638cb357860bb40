"""The main screen: the header, the view tabs, the filter and the ranked list."""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Input, Sparkline, Static
from textual.worker import get_current_worker

from flaketui.core.errors import FlaketuiError
from flaketui.core.output.text import visible
from flaketui.core.scoring.results import GroupVerdict, TestVerdict
from flaketui.tui.actionmodel import BRANCH_KIND_CYCLE, next_in_cycle
from flaketui.tui.loaders import MainData, history_stamp, load_causes, load_extras, load_main
from flaketui.tui.messages import ExtrasLoaded, LoadFailed, MainLoaded, RowsBuilt
from flaketui.tui.startup import StagedRead
from flaketui.tui.viewmodel import (
    VIEW_TITLES,
    VIEWS,
    Row,
    ViewContext,
    ViewState,
    build_rows,
    columns_for,
    natural_sort,
)
from flaketui.tui.widgets.banner import TrustBanner
from flaketui.tui.widgets.fields import text_input
from flaketui.tui.widgets.flake_table import FlakeTable, PreparedRows, prepare_rows
from flaketui.tui.widgets.header import HistoryHeader
from flaketui.tui.widgets.keybar import KeyBar
from flaketui.tui.widgets.selection import FittedText
from flaketui.tui.widgets.viewtabs import ViewTabs

if TYPE_CHECKING:
    from flaketui.core.scoring.causes_apart import Apart
    from flaketui.tui.app import FlaketuiApp

SYNC_REBUILD_TESTS = 5000  # above this, a changed view's rows are built in a worker
# The first paint waits this long at most for the first load (see _hold_first_paint).
FIRST_PAINT_HOLD_S = 0.25
EXTRAS_AFTER_PAINT_S = 0.03  # the rest of the load starts this long after the rows' paint
PAINT_WAIT_S = 1.0  # a load waits this long at most for a step's paint before the next
CANCEL_CHECK_S = 0.05  # a load waiting to read the rest looks this often whether it was replaced


class MainScreen(Screen[None]):
    """The ranked triage list with its views, grouping, filter and sort."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "enter", "open_detail", "Detail", tooltip="Open the test or family under the cursor"
        ),
        Binding(
            "slash", "filter", "Filter", key_display="/", tooltip="Filter by test, owner, signature"
        ),
        Binding("1", "view('flaky')", "Flaky", show=False),
        Binding("2", "view('regressions')", "Regressions", show=False),
        Binding("3", "view('quarantined')", "Quarantined", show=False),
        Binding("4", "view('all')", "All", show=False),
        Binding("g", "group('signature')", "Signatures", tooltip="Group by failure signature"),
        Binding("f", "group('family')", "Families", tooltip="Group parametrized families"),
        Binding(
            "w",
            "group('cofailure')",
            "Together",
            show=False,
            tooltip="Group the flaky tests that fail in the same runs",
        ),
        Binding("space", "toggle_group", "Expand", tooltip="Expand or collapse the group"),
        Binding("s", "sort_next", "Sort", tooltip="Sort by the next column (click a header too)"),
        Binding("S", "sort_reverse", "Reverse", show=False),
        Binding("t", "cycle_suite", "Suite", tooltip="Cycle the suite filter"),
        Binding("b", "cycle_branch", "Branch", tooltip="Cycle the branch-kind filter"),
        Binding("q", "app.quarantine", "Quarantine", tooltip="Quarantine the test (skip file)"),
        Binding("u", "app.release", "Release", tooltip="Remove the test from the skip file"),
        Binding("e", "app.export", "Export", tooltip="Export the current view to a file"),
        Binding("o", "outages", "Outages", tooltip="Review the suspected outages excluded"),
        Binding("r", "reload", "Reload", tooltip="Read the history again"),
        Binding("question_mark", "app.help", "Help", key_display="?"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    AUTO_FOCUS = "#table"

    def __init__(self) -> None:
        super().__init__()
        self.data: MainData | None = None
        self.state = ViewState()
        self.suite: str | None = None
        self.branch_kind: str | None = None
        self._loading_since = 0.0
        self._loading_timer: Timer | None = None
        # While the first paint waits for the first load: the loop and future the worker
        # resolves (see _hold_first_paint).
        self._first_waiter: tuple[asyncio.AbstractEventLoop, _Waiter] | None = None
        # The load _loaded showed last, weakly: the posted copy of the first paint's load is
        # skipped, and a shown load (a report and its rows) is not kept alive by it.
        self._shown_load: weakref.ref[MainLoaded] | None = None
        self._fitted_for: weakref.ref[MainData] | None = None  # the data #selected is sized for
        # The number of the latest load (reload counts them): what an earlier one still posts,
        # its worker cancelled but already past its last check, is not shown.
        self._load_number = 0

    @property
    def flaketui(self) -> FlaketuiApp:
        """The app, typed."""
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        """Header, tabs, table, the highlighted test's reason and trend, footer."""
        yield HistoryHeader(id="header")
        yield TrustBanner(id="banner")
        yield ViewTabs(
            [(v, f"{i} {VIEW_TITLES[v]}") for i, v in enumerate(VIEWS, start=1)],
            short_note="⏳ reading…",  # where the parts still read do not fit (80 columns)
            id="views",
        )
        # The filter box is mounted on the first `/` (see _filter_box): hidden until then, it
        # need not be styled and laid out for the first screen.
        yield Static(id="loading")
        yield FlakeTable(id="table")
        # The selected test's id (folded at its separators on two rows, its start cut when it
        # needs more), the trend beside it, and its verdict's reason on a line of its own.
        with Vertical(id="selection"):
            with Horizontal(id="selection-top"):
                yield FittedText(fold=True, rows=2, id="selected")
                yield Sparkline([], id="spark")
            yield FittedText(fold=False, id="reason")
        yield KeyBar()

    async def on_mount(self) -> None:
        """Start the first load, and give it a moment to arrive before the first paint."""
        self.query_one(HistoryHeader).show_loading(self.flaketui.source)
        loop = asyncio.get_running_loop()
        waiter: _Waiter = loop.create_future()
        self._first_waiter = (loop, waiter)
        self.reload()
        await self._hold_first_paint(waiter)

    async def _hold_first_paint(self, waiter: _Waiter) -> None:
        """Show the first load's rows in the first paint when they come within a moment.

        The screen paints once its mount ends. Painting the empty list first, with the ranking
        about to arrive, would cost the rows a second full paint and a frame's wait. The wait
        is bounded: a long read shows the loading line, the rows following it.
        """
        try:
            loaded = await asyncio.wait_for(waiter, FIRST_PAINT_HOLD_S)
        except TimeoutError:
            loaded = None
        finally:
            self._first_waiter = None
        if loaded is not None:
            self._loaded(loaded)  # the same message, posted too, is then skipped

    def _offer_first(self, loaded: MainLoaded | None) -> None:
        """Hand a load's result to a first paint waiting for it (from the worker thread)."""
        first = self._first_waiter
        if first is not None:
            loop, waiter = first
            loop.call_soon_threadsafe(_resolve, waiter, loaded)

    # ---- loading ----------------------------------------------------------------------------

    def reload(self) -> None:
        """Read the history again in a worker; a newer load replaces an older one."""
        self._loading_since = time.monotonic()
        self._show_loading()
        if self._loading_timer is None:
            # A static line updated once a second: an animated spinner would cost the event
            # loop a full repaint per frame while the history is read.
            self._loading_timer = self.set_interval(1.0, self._show_loading)
        self._load(self.suite, self.branch_kind)

    def _show_loading(self) -> None:
        elapsed = time.monotonic() - self._loading_since
        box = self.query_one("#loading", Static)
        box.remove_class("empty")
        box.update(Text(f"⏳ reading {visible(self.flaketui.source.display)} … {elapsed:.0f} s"))
        box.display = True

    def _stop_loading(self) -> None:
        if self._loading_timer is not None:
            self._loading_timer.stop()
            self._loading_timer = None
        self.query_one("#loading", Static).display = False

    def _load(self, suite: str | None, branch_kind: str | None) -> None:
        self._load_number += 1
        read = None
        if suite is None and branch_kind is None:
            # The read `flaketui open` started before the UI, on the first load; else a new one.
            read = self.flaketui.take_first_read() or self.flaketui.start_read()
        else:
            self.flaketui.replace_reads()
        self._load_worker(
            suite,
            branch_kind,
            self.state.copy(),
            threading.Event(),
            read,
            self._load_number,
            self.flaketui.apart,  # this load's: a later load stops it
        )

    # Each worker names itself: Textual's default description is the repr of the arguments,
    # which for a loaded report is megabytes of text made on the UI thread.
    @work(thread=True, exclusive=True, group="load", exit_on_error=False, description="load")
    def _load_worker(
        self,
        suite: str | None,
        branch_kind: str | None,
        state: ViewState,
        rest: threading.Event,
        read: StagedRead | None,
        number: int,
        apart: Apart,
    ) -> None:
        """The ranking first; the rest (groups, lifecycle states) once the UI sets `rest`.

        Without a suite or branch-kind filter, every step comes from one read of the history
        (`read`, startup.StagedRead): the tests ranked without their groups, which is what the
        first screen waits for, then the complete report, then the lifecycle states.
        """
        source = self.flaketui.source
        # The history's stamp as the read began, for a failure (StagedRead takes its own).
        stamp = history_stamp(source.path) if read is None else ()
        try:
            # Each step's data lives in a helper's frame: what a later step replaces (the first
            # ranking, a kept one) is not held by this one through the rest of the load, so the
            # garbage collector does not walk it at every full collection meanwhile.
            data = self._load_first(read, suite, branch_kind, state, rest, number)
            if not _wait_unless_cancelled(rest):
                return
            self.flaketui.warm_up()
            if read is not None:
                data = self._read_complete(read, data, state)
                extras = read.extras()
            else:
                extras = load_extras(source, data, suite, branch_kind)
            data_after = replace(
                data,
                lifecycle=extras.lifecycle,
                suites=extras.suites,
                set_aside=extras.set_aside,
            )
            data_after.extras_loaded = True
            shown = self._show_extras(data, data_after, state, prepare_rows(data_after, state))
            # Last, the likely causes: a pivot of every flaky test's runs, for one column.
            if not shown:
                return
            if read is not None:
                report = read.causes()
            else:
                report = load_causes(source, data_after.report, apart)
            data_causes = replace(data_after, report=report, causes_loaded=True)
            self._show_extras(data_after, data_causes, state, prepare_rows(data_causes, state))
        except FlaketuiError as exc:
            self._offer_first(None)
            failed_on = read.stamp if read is not None else stamp
            self.post_message(LoadFailed(exc.message, stamp=failed_on, load=number))
        finally:
            if read is not None:
                read.stop()  # a cancelled load reads no further; a complete one keeps its ranking

    def _show_extras(
        self, before: MainData, data: MainData, state: ViewState, rows: PreparedRows
    ) -> bool:
        """Post the next step of a load and wait until it is painted (in the load worker);
        False when the load was replaced meanwhile.

        The next step's reading would otherwise take the interpreter from that paint: a busy
        thread makes the UI thread wait at every turn of its event loop. The wait is bounded:
        a step that is never painted (its screen hidden meanwhile) does not hold the load.
        """
        message = ExtrasLoaded(before, data, state, rows)
        self.post_message(message)
        return _wait_unless_cancelled(message.shown, PAINT_WAIT_S)

    def _load_first(
        self,
        read: StagedRead | None,
        suite: str | None,
        branch_kind: str | None,
        state: ViewState,
        rest: threading.Event,
        number: int,
    ) -> MainData:
        """Read and post the ranking (in the load worker)."""
        if read is not None:
            data = read.first()
        else:
            data = load_main(self.flaketui.source, suite=suite, branch_kind=branch_kind)
        loaded = MainLoaded(data, state, prepare_rows(data, state), rest=rest, load=number)
        self._offer_first(loaded)
        self.post_message(loaded)
        return data

    def _read_complete(self, read: StagedRead, data: MainData, state: ViewState) -> MainData:
        """Post the rest of a kept ranking whose flaky tests are shown, if any, then the
        complete report (in the load worker); the data shown last."""
        kept = read.kept_rest()
        if kept is not None:
            whole = replace(data, report=kept.report, groups_loaded=True, verdicts=None)
            self._show_extras(data, whole, state, prepare_rows(whole, state))
            data = whole
        report = read.complete()
        complete = replace(
            data,
            report=report,
            stamp=data.stamp if read.read_stamp is None else read.read_stamp,
            groups_loaded=True,
            causes_loaded=False,  # a kept ranking had them: they come last again
            provisional=False,
            verdicts=None,
        )
        self._show_extras(data, complete, state, prepare_rows(complete, state))
        return complete

    @on(MainLoaded)
    def _loaded(self, event: MainLoaded) -> None:
        if self._shown_load is not None and event is self._shown_load():
            return  # shown already, by the first paint's wait
        if event.load != self._load_number:
            return  # a newer load replaced this one: its later steps follow this data alone
        self._shown_load = weakref.ref(event)
        self.data = event.data
        if not event.data.provisional:
            # The kept ranking arms no watch: the new read's stamp, taken once it has folded
            # what an ingest left waiting, does.
            self.flaketui.last_stamp = event.data.stamp
        self._stop_loading()
        self._show_header()
        self._show_still_reading()
        self._show_rows(event.state, event.rows)
        # The rest (groups, lifecycle states) once these rows are painted and written out: its
        # reading and row building would take the CPU from that paint.
        rest = event.rest
        if rest is not None:
            self.call_after_refresh(self.set_timer, EXTRAS_AFTER_PAINT_S, rest.set)

    def _show_header(self) -> None:
        if self.data is not None:
            self.query_one(HistoryHeader).show(
                self.data, self.flaketui.source, suite=self.suite, branch_kind=self.branch_kind
            )
            self.query_one(TrustBanner).show(self.data.report)
            self.refresh_bindings()  # `o` is offered only while outages await review

    def _show_still_reading(self) -> None:
        """Name the parts of the shown report still to come, beside the view tabs, until the
        load's last step is in: the list works meanwhile, its later columns filling in."""
        data = self.data
        if data is None:
            return
        pending = [
            word
            for word, loaded in (
                ("ranking", not data.provisional),
                ("groups", data.groups_loaded),
                ("states", data.extras_loaded),
                ("causes", data.causes_loaded),
            )
            if not loaded
        ]
        self.query_one(ViewTabs).note = f"⏳ reading {', '.join(pending)}…" if pending else ""

    @on(ExtrasLoaded)
    def _extras_loaded(self, event: ExtrasLoaded) -> None:
        if not event.follows(self.data):
            event.shown.set()
            return  # a newer load replaced the report these states belong to
        if self.data is not None and self.data.provisional and not event.data.provisional:
            self.flaketui.last_stamp = event.data.stamp  # the new ranking arms the watch
        self.data = event.data
        self._show_header()
        self._show_still_reading()
        self._show_rows(event.state, event.rows, in_place=True)
        self.call_after_refresh(event.shown.set)

    @on(LoadFailed)
    def _failed(self, event: LoadFailed) -> None:
        if event.load != self._load_number:
            return  # a newer load replaced this one
        # The watch goes on from what this read found: when the failure came from a write
        # in progress, the end of that write changes the history and reloads it.
        if event.stamp is not None:
            self.flaketui.last_stamp = event.stamp
        self._stop_loading()
        self.query_one(ViewTabs).note = ""  # nothing more comes from this load
        if self.data is None:  # else the header goes on describing the report shown
            self.query_one(HistoryHeader).show_not_read(self.flaketui.source, event.message)
        self.notify(
            visible(event.message),
            title="Cannot read the history",
            severity="error",
            markup=False,
        )

    # ---- rendering --------------------------------------------------------------------------

    def refresh_table(self) -> None:
        """Rebuild the rows from the loaded data and the view state (no I/O).

        At once for a small history; for a big one in a worker, so that sorting or filtering
        50 000 tests never freezes the screen, the old rows staying until then.
        """
        if self.data is None:
            return
        if len(self.data.report.tests) <= SYNC_REBUILD_TESTS:
            self._show_rows(self.state, prepare_rows(self.data, self.state, eager=False))
        else:
            self._rebuild_rows(self.data, self.state.copy())

    @work(thread=True, exclusive=True, group="rows", exit_on_error=False, description="rows")
    def _rebuild_rows(self, data: MainData, state: ViewState) -> None:
        rows = prepare_rows(data, state, eager=False)  # cells as rows are drawn
        self.post_message(RowsBuilt(data, state, rows))

    @on(RowsBuilt)
    def _rows_built(self, event: RowsBuilt) -> None:
        if event.data is self.data:
            self._show_rows(event.state, event.rows)

    def _show_rows(self, state: ViewState, rows: PreparedRows, *, in_place: bool = False) -> None:
        """Show rows built (in a worker) for `state`; rebuild them if the user changed it since.

        in_place: the rows are those shown, with new cell values (lifecycle states arrived).
        """
        if state != self.state and self.data is not None:
            self.refresh_table()
            return
        table = self.query_one(FlakeTable)
        columns = columns_for(self.state.view, self.state.grouping)
        if self.state.sort_column is not None:
            sort_key, descending = self.state.sort_column, self.state.sort_reverse
        else:
            sort_key, natural_descending = natural_sort(self.state.view, self.state.grouping)
            descending = natural_descending != self.state.sort_reverse
        if in_place:
            table.show_changes(rows, columns, sort_key=sort_key, descending=descending)
        else:
            table.show(rows, columns, sort_key=sort_key, descending=descending)
        self._fit_selection()
        self._show_selection(table.current_row)
        self._show_groups_pending()
        self._show_empty(rows)

    def _show_empty(self, rows: PreparedRows) -> None:
        """An empty view says why, and what to do, on the status line (when it is free)."""
        box = self.query_one("#loading", Static)
        if rows.rows or self.data is None or self._loading_timer is not None or box.display:
            return
        box.add_class("empty")
        box.update(Text(self._empty_message()))
        box.display = True

    def _empty_message(self) -> str:
        """Why the view is empty, as text (shown as it is, never read as markup)."""
        needle = visible(self.state.filter_text.strip())
        if needle:
            return f"No row matches “{needle}”: Esc clears the filter."
        if self.state.view == "quarantined":
            if self.data is not None and self.data.skip_problem:
                return f"⚠ The skip file cannot be read: {visible(self.data.skip_problem)}"
            skip = visible(self.flaketui.source.skip_display)
            return f"Nothing quarantined in {skip}: select a test in 1 Flaky and press q."
        if self.data is not None and self.data.set_aside:
            reason = self.data.set_aside
            return f"No test to list: {reason}."
        return {
            "flaky": "No flaky test in the window.",
            "regressions": "No regression in the window.",
        }.get(self.state.view, "No test with counted runs in the window.")

    def _show_groups_pending(self) -> None:
        """Say so while a grouped view waits for the groups (read after the first screen)."""
        if self._loading_timer is not None:
            return  # the reading line is up
        box = self.query_one("#loading", Static)
        box.remove_class("empty")
        pending = self.data is not None and not self.data.groups_loaded
        if pending and self.state.grouping != "none":
            box.update(f"⏳ grouping by {self.state.grouping} … the groups are still being read")
            box.display = True
        else:
            box.display = False

    def _fit_selection(self) -> None:
        """Size the selected id's box for the longest id or group title of the report: one
        height for every row and view of it."""
        if self.data is None:
            return
        if self._fitted_for is None or self._fitted_for() is not self.data:
            self._fitted_for = weakref.ref(self.data)
            report = self.data.report
            titles = [len(t.test_id) for t in report.tests]
            for groups in (report.families, report.signatures, report.cofailures):
                titles += [len(g.label.splitlines()[0]) for g in groups if g.label]
            self.query_one("#selected", FittedText).fit_to(max(titles, default=0))

    def _show_selection(self, row: Row | None) -> None:
        selected = self.query_one("#selected", FittedText)
        reason = self.query_one("#reason", FittedText)
        spark = self.query_one("#spark", Sparkline)
        item = self.item_for(row)
        if item is None:
            selected.show("no test under the cursor" if row is None else row.target, "dim")
            reason.show("")
            spark.data = []
            return
        title = item.test_id if isinstance(item, TestVerdict) else item.label.splitlines()[0]
        selected.show(title, "bold")
        reason.show(item.reason)
        spark.data = list(getattr(item, "daily_scores", [])) or [0.0]

    def item_for(self, row: Row | None) -> TestVerdict | GroupVerdict | None:
        """The report item behind a table row."""
        if row is None or self.data is None:
            return None
        report = self.data.report
        if row.kind == "group":
            groups = report.families if row.family else [*report.signatures, *report.cofailures]
            return next((g for g in groups if g.key == row.target), None)
        return next((t for t in report.tests if t.test_id == row.target), None)

    def current_test_id(self) -> str | None:
        """The test (or family parent) under the cursor, for quarantine and release."""
        row = self.query_one(FlakeTable).current_row
        if row is None:
            return None
        if row.kind == "group" and not row.family:
            return None
        return row.target

    def visible_tests(self) -> list[TestVerdict]:
        """The tests the current view shows (group members included), for export."""
        if self.data is None:
            return []
        wanted: list[str] = []
        expanded_state = ViewState(
            view=self.state.view,
            filter_text=self.state.filter_text,
            grouping="none",
            sort_column=self.state.sort_column,
            sort_reverse=self.state.sort_reverse,
        )
        ctx = ViewContext(now=self.data.report.now, lifecycle=self.data.lifecycle)
        for row in build_rows(self.data.report, expanded_state, ctx, self.data.quarantine):
            wanted.append(row.target)
        by_id = {t.test_id: t for t in self.data.report.tests}
        return [by_id[w] for w in wanted if w in by_id]

    @on(FlakeTable.RowHighlighted)
    def _highlighted(self, event: FlakeTable.RowHighlighted) -> None:
        self._show_selection(self.query_one(FlakeTable).current_row)

    @on(FlakeTable.RowSelected)
    def _selected(self, event: FlakeTable.RowSelected) -> None:
        self.action_open_detail()

    @on(FlakeTable.HeaderSelected)
    def _header(self, event: FlakeTable.HeaderSelected) -> None:
        key = event.column_key
        if self.state.sort_column == key:
            self.state.sort_reverse = not self.state.sort_reverse
        else:
            self.state.sort_column = key
            self.state.sort_reverse = key not in ("rank", "test", "owner")
        self.refresh_table()

    @on(ViewTabs.Activated)
    def _tab(self, event: ViewTabs.Activated) -> None:
        view = event.view
        if view != self.state.view:
            self.state.view = view
            self.state.sort_column = None
            self.state.sort_reverse = False
            self.refresh_table()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.state.filter_text = event.value
        self.refresh_table()

    @on(Input.Submitted, "#filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        if not event.value:
            self.query_one("#filter").add_class("hidden")
        self.query_one(FlakeTable).focus()

    # ---- actions ----------------------------------------------------------------------------

    def action_open_detail(self) -> None:
        """Open the detail screen of the test or family under the cursor."""
        table = self.query_one(FlakeTable)
        row = table.current_row
        if row is None or self.data is None:
            return
        if row.kind == "group" and not row.family:
            self.action_toggle_group()
            return
        item = self.item_for(row)
        if item is None:
            self.notify(
                f"{visible(row.target)} is not scored in this window",
                severity="warning",
                markup=False,
            )
            return
        from flaketui.tui.screens.detail import DetailScreen

        self.app.push_screen(DetailScreen(item, self.data.report))

    async def _filter_box(self) -> Input:
        """The filter box, mounted above the list the first time it is asked for."""
        found = self.query("#filter")
        if found:
            return found.first(Input)
        box = text_input(
            placeholder="filter: test id, owner or signature (Enter keeps it, Esc clears)",
            id="filter",
            classes="hidden",
            blink=self.flaketui.cursor_blink,
        )
        await self.mount(box, before=self.query_one("#loading"))
        return box

    async def action_filter(self) -> None:
        """Show and focus the filter box."""
        box = await self._filter_box()
        box.remove_class("hidden")
        box.focus()

    def action_clear_filter(self) -> None:
        """Clear and hide the filter."""
        found = self.query("#filter")
        if found:  # never shown: nothing to clear in it
            box = found.first(Input)
            box.value = ""
            box.add_class("hidden")
        self.state.filter_text = ""
        self.refresh_table()
        self.query_one(FlakeTable).focus()

    def action_view(self, view: str) -> None:
        """Switch to one of the views."""
        self.query_one(ViewTabs).active = view

    def action_group(self, grouping: str) -> None:
        """Toggle grouping by signature, family or co-failure."""
        self.state.grouping = "none" if self.state.grouping == grouping else grouping
        self.state.expanded.clear()
        self.refresh_table()
        label = {
            "none": "not grouped",
            "signature": "by signature",
            "family": "by family",
            "cofailure": "by co-failure (tests failing in the same runs)",
        }
        self.notify(f"Grouping {label[self.state.grouping]}", timeout=2)

    def action_toggle_group(self) -> None:
        """Expand or collapse the group under (or around) the cursor."""
        row = self.query_one(FlakeTable).current_row
        if row is None or row.kind == "test":
            return
        key = row.target if row.kind == "group" else row.key.split(":", 2)[1]
        if key in self.state.expanded:
            self.state.expanded.discard(key)
        else:
            self.state.expanded.add(key)
        self.refresh_table()
        table = self.query_one(FlakeTable)
        table.move_cursor(row=table.index_of(f"g:{key}"), animate=False)

    def action_sort_next(self) -> None:
        """Sort by the next column the list shows (a narrow screen shows fewer)."""
        table = self.query_one(FlakeTable)
        keys = [table.column_keys[i] for i in table.shown] or [
            c.key for c in columns_for(self.state.view)
        ]
        current = self.state.sort_column
        following = keys.index(current) + 1 if current in keys else 0
        self.state.sort_column = keys[following % len(keys)]
        self.state.sort_reverse = self.state.sort_column not in ("rank", "test", "owner")
        self.refresh_table()

    def action_sort_reverse(self) -> None:
        """Reverse the sort order."""
        self.state.sort_reverse = not self.state.sort_reverse
        self.refresh_table()

    def action_cycle_suite(self) -> None:
        """Show one suite after another, then all."""
        suites: list[Any] = [None, *(self.data.suites if self.data else [])]
        self.suite = next_in_cycle(suites, self.suite)
        self.notify(f"Suite: {visible(self.suite or 'all')}", timeout=2, markup=False)
        self.reload()

    def action_cycle_branch(self) -> None:
        """Show main, pr, release branches in turn, then all."""
        self.branch_kind = next_in_cycle(list(BRANCH_KIND_CYCLE), self.branch_kind)
        self.notify(f"Branch kind: {self.branch_kind or 'all'}", timeout=2)
        self.reload()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Offer `o` (footer, key, palette) only while suspected outages await review."""
        if action == "outages":
            return self.data is not None and bool(self.data.report.proposed_incidents)
        return True

    def action_outages(self) -> None:
        """Review the suspected outages excluded from scoring."""
        from flaketui.tui.screens.outages import OutagesScreen

        self.app.push_screen(OutagesScreen())

    def action_reload(self) -> None:
        """Read the history again."""
        self.notify("Reloading the history", timeout=2)
        self.reload()


_Waiter = asyncio.Future[MainLoaded | None]


def _resolve(waiter: _Waiter, loaded: MainLoaded | None) -> None:
    if not waiter.done():  # not timed out meanwhile
        waiter.set_result(loaded)


def _wait_unless_cancelled(event: threading.Event, most_s: float | None = None) -> bool:
    """Wait in a worker for `event` (`most_s` at most, if given); False when the worker was
    cancelled meanwhile."""
    worker = get_current_worker()
    deadline = None if most_s is None else time.monotonic() + most_s
    while not event.wait(CANCEL_CHECK_S):
        if worker.is_cancelled:
            return False
        if deadline is not None and time.monotonic() >= deadline:
            break
    return not worker.is_cancelled
