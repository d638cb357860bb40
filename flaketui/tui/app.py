"""The app shell: screens, the history watcher and the write actions; no I/O on the UI thread."""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import App
from textual.binding import Binding, BindingType

from flaketui.core.config import Config
from flaketui.core.errors import FlaketuiError
from flaketui.core.output.text import visible
from flaketui.core.scoring.causes_apart import Apart
from flaketui.core.timeutil import utc_now
from flaketui.tui.actionmodel import quarantine_reason
from flaketui.tui.cache import export_folder, shown
from flaketui.tui.commands import FlaketuiCommands
from flaketui.tui.loaders import (
    IMPORT_LOCK,
    QuarantineRequest,
    Source,
    export_tests,
    history_stamp,
    quarantine_test,
    release_test,
    review_outage,
)
from flaketui.tui.messages import HistoryChanged, WriteDone
from flaketui.tui.screens.main import MainScreen
from flaketui.tui.startup import StagedRead, make_source

if TYPE_CHECKING:
    from flaketui.tui.trial import Trial

POLL_SECONDS = 2.0
# Quarantine and release refuse on a read-only history rather than write the skip file alone:
# the audit log in the history is what the lifecycle and `flaketui lifecycle` read back.
READ_ONLY_NOTICE = (
    "Opened read-only (no write permission): quarantine, release and outage review are off"
)
READ_ONLY_REFUSAL = (
    "The history is read-only: quarantine and release also write an audit row into it, "
    "so nothing was written (make the file writable, or use a writable copy)"
)
READ_ONLY_REVIEW_REFUSAL = (
    "The history is read-only: accepting or rejecting an outage writes into it, "
    "so nothing was written (make the file writable, or use a writable copy)"
)


class FlaketuiApp(App[None]):
    """Triage flaky tests: a ranked list, a detail screen, quarantine and release."""

    CSS_PATH = "app.tcss"
    TITLE = "flaketui"
    COMMANDS = App.COMMANDS | {FlaketuiCommands}
    # Screens carry `-short` below 30 lines: the dialogs fit a 24-line terminal (dialogs.tcss).
    # (Textual annotates it as an attribute of the instance, hence no ClassVar here.)
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]  # noqa: RUF012
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "quit", "Quit", tooltip="Leave flaketui", priority=True)
    ]

    def __init__(
        self,
        source: Source,
        *,
        cursor_blink: bool = True,
        watch: bool = True,
        first_read: StagedRead | None = None,
    ) -> None:
        super().__init__()
        self.source = source
        self.first_read = first_read  # the history, already being read (see startup.py)
        # Every read of the history this app started: each runs in a thread of its own, which
        # quitting stops and waits for (stop_reads), so that no reader outlives the app.
        self.reads: list[StagedRead] = [first_read] if first_read is not None else []
        # The child working out a filtered load's likely causes, if any (see causes_apart).
        self.apart = Apart()
        self.cursor_blink = cursor_blink
        self.poll_history = watch
        self.last_stamp: tuple[int, ...] | None = None
        self.main_screen = MainScreen()
        self._warmed = False
        # Set once known (a worker asks git): writes then go to copies, see flaketui.tui.trial.
        self.trial: Trial | None = None
        self._trial_known = False
        self._trial_lock = threading.Lock()

    def get_default_screen(self) -> MainScreen:
        """The list is the first screen itself, not one pushed over a blank default.

        Pushing it from on_mount composed, styled and laid out a blank screen first, and then
        switched screens: two layouts and a repaint the first ranked screen waited for.
        """
        return self.main_screen

    def take_first_read(self) -> StagedRead | None:
        """The read started before the app (once): the first load shows it."""
        read, self.first_read = self.first_read, None
        return read

    def start_read(self) -> StagedRead:
        """Start reading the history again (a reload), the reads of the loads it replaces
        stopped; stop_reads() ends it with the app."""
        self.replace_reads()
        read = StagedRead(self.source)
        self.reads.append(read)
        return read

    def replace_reads(self) -> None:
        """Stop the reads of earlier loads: a newer load replaces them.

        A load replaced before its worker began never stops its read itself: that read would
        wait for its next step for good, its reader open in a read transaction (which, on a
        rollback-journal history, also keeps every writer out).
        """
        for read in self.reads:
            read.stop()
        self.reads = [read for read in self.reads if read.thread.is_alive()]
        self.apart.stop()
        self.apart = Apart()

    def stop_reads(self, wait_s: float) -> bool:
        """Stop every read this app started and wait, `wait_s` at most in all, for the step
        each may be in to end and close its reader. True when none is left reading.

        A reading thread the process outlived would leave a WAL-mode history's -wal and -shm
        files behind: a connection never closed cannot remove them.
        """
        for read in self.reads:
            read.stop()
        self.apart.stop()
        deadline = time.monotonic() + wait_s
        for read in self.reads:
            read.thread.join(max(0.0, deadline - time.monotonic()))
        return not any(read.thread.is_alive() for read in self.reads)

    def on_mount(self) -> None:
        """Start watching the history file."""
        self.sub_title = self.source.display
        if self.source.readonly:
            self.notify(READ_ONLY_NOTICE, title="Read-only history", timeout=8)
        if self.poll_history:
            self.set_interval(POLL_SECONDS, self.check_history)

    def on_unmount(self) -> None:
        """Quitting: no read goes on to a later step (stop_reads waits for the current ones)."""
        for read in self.reads:
            read.stop()
        self.apart.stop()

    @work(thread=True, exclusive=True, group="trial", exit_on_error=False)
    def _find_trial(self) -> None:
        """Ask git whether the history is a tracked file: then this session is a trial."""
        trial = self._resolve_trial()
        if trial is not None:
            self.call_from_thread(self.notify, trial.notice(), title="Trial copy", timeout=10)

    # ---- the history watcher ----------------------------------------------------------------

    def check_history(self) -> None:
        """Look for a change of the history file, off the UI thread."""
        if self.last_stamp is not None:
            self._stat_history(self.last_stamp)

    @work(thread=True, exclusive=True, group="poll", exit_on_error=False)
    def _stat_history(self, known: tuple[int, ...]) -> None:
        stamp = history_stamp(self.source.path)
        if stamp != known:
            self.post_message(HistoryChanged(stamp))

    @on(HistoryChanged)
    def _history_changed(self, event: HistoryChanged) -> None:
        # The watch goes on while the reload reads: a change meanwhile starts a newer reload,
        # so the list always ends on the history as the last write left it. The reload then
        # records the stamp of what it read (or, failing, of what it tried to read).
        self.last_stamp = event.stamp
        self.notify("The history changed: reloading", timeout=3)
        self.main_screen.reload()

    # ---- writes -----------------------------------------------------------------------------

    def write_now(self) -> datetime:
        """When an action happens: always the wall clock.

        `--now` only sets the moment the scores are computed as of; an entry's quarantined_at,
        its expiry and the audit row record when the user acted.
        """
        return utc_now()

    def scored_at(self) -> datetime | None:
        """The moment the shown scores are as of (a quarantine records them as evidence)."""
        data = self.main_screen.data
        return data.report.now if data is not None else self.source.requested_now

    def write_source(self) -> Source:
        """Where a write goes (called in the write worker): a trial's copies, made at its first."""
        trial = self._resolve_trial()
        if trial is not None:
            trial.start(self.source)
        return self.source

    def _resolve_trial(self) -> Trial | None:
        """Ask git once (from a worker) whether the session is a trial."""
        with self._trial_lock:
            if not self._trial_known:
                with IMPORT_LOCK:  # imported when git is asked, after the first screen
                    from flaketui.tui.trial import trial_for

                self.trial = trial_for(self.source)
                self._trial_known = True
            return self.trial

    def skip_file_shown(self) -> str:
        """The skip file a write changes, as the dialogs name it."""
        if self.trial is not None and not self.trial.started:
            return f"a trial copy of {self.trial.skip_file.name} in {shown(self.trial.home)}"
        return self.source.skip_display or str(self.source.skip_path)

    def _target(self) -> tuple[str, object] | None:
        """The test or family the active screen points at, with its report item."""
        from flaketui.tui.screens.detail import DetailScreen

        screen = self.screen
        if isinstance(screen, DetailScreen):
            return screen.key, screen.item
        if screen is self.main_screen:
            row = self.main_screen.query_one("#table").current_row  # type: ignore[attr-defined]
            test_id = self.main_screen.current_test_id()
            return (test_id, self.main_screen.item_for(row)) if test_id else None
        return None

    def _writable(self, refusal: str = READ_ONLY_REFUSAL) -> bool:
        """Refuse a write on a read-only history: the audit row could not land beside the entry."""
        if self.source.readonly:
            self.notify(refusal, title="Not written", severity="error")
            return False
        return True

    def review_outage(self, tag: str, *, accept: bool) -> None:
        """Accept or reject a proposed outage in a worker; the ranking reloads after it."""
        if not self._writable(READ_ONLY_REVIEW_REFUSAL):
            return

        def job() -> str:
            text = review_outage(self.write_source(), tag, accept=accept)
            return text + (" (trial copy)" if self.trial is not None else "")

        self.run_write(job)

    def action_quarantine(self) -> None:
        """Ask for the entry's details, then write it in a worker."""
        target = self._target()
        if target is None:
            self.notify("Put the cursor on a test or a family first", severity="warning")
            return
        if not self._writable():
            return
        test_id, item = target
        reason = quarantine_reason(item) if item is not None else ""  # type: ignore[arg-type]
        # Imported on first use: its form widgets (TextArea, Select) are not on the first screen.
        from flaketui.tui.screens.quarantine_modal import QuarantineModal

        def done(request: QuarantineRequest | None) -> None:
            if request is not None:
                scored = self.scored_at()
                self.run_write(
                    lambda: quarantine_test(self.write_source(), request, self.write_now(), scored)
                )

        self.push_screen(
            QuarantineModal(
                test_id,
                reason=reason,
                expires_days=self.source.config.skip_expiry_days,
                skip_file=self.skip_file_shown(),
                blink=self.cursor_blink,
            ),
            done,
        )

    def action_release(self) -> None:
        """Remove the entry of the test under the cursor from the skip file."""
        target = self._target()
        if target is None:
            self.notify("Put the cursor on a test or a family first", severity="warning")
            return
        if not self._writable():
            return
        test_id = target[0]
        self.run_write(lambda: release_test(self.write_source(), test_id, self.write_now()))

    def action_export(self) -> None:
        """Ask for format and path, then export the tests of the current view."""
        main = self.main_screen
        if main.data is None:
            return
        tests = main.visible_tests()
        report = main.data.report
        from flaketui.tui.screens.export_modal import ExportModal

        folder = export_folder()

        def done(choice: tuple[str, Path] | None) -> None:
            if choice is not None:
                fmt, path = choice
                self.run_write(
                    lambda: export_tests(tests, report, fmt, path, make_folder=folder),
                    reload=False,
                )

        self.push_screen(
            ExportModal(main.state.view, len(tests), folder, blink=self.cursor_blink), done
        )

    def action_help(self) -> None:
        """Show keys and column meanings."""
        from flaketui.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def warm_up(self) -> None:
        """Once per app, in the first load's worker once the list is painted: ask git about
        the history (in a worker of its own) and import the screens the first one does not
        need (here).

        The detail screen (plotext), the help (Markdown) and the dialogs (TextArea, Select) cost
        about 0.1-0.2 s of imports that the first ranked screen should not wait for, nor the
        first Enter, `?`, `q` or `e` on the UI thread. They are imported between two steps of
        the load, not beside them: an import holds the interpreter, and a thread holding it
        beside the reading one or a paint would make both take turns with it.
        """
        if self._warmed:
            return
        self._warmed = True
        # Whether the history is a trial (git is asked): a write asks itself if it comes
        # first, so the question waits until the list is up, as the imports do.
        self.call_from_thread(self._find_trial)
        for screen in ("detail", "help", "quarantine_modal", "export_modal", "outages"):
            with IMPORT_LOCK:
                importlib.import_module(f"flaketui.tui.screens.{screen}")

    def run_write(self, job: Callable[[], str], *, reload: bool = True) -> None:
        """Run a write in its own worker group, which no load cancels."""
        self._write(job, reload)

    @work(thread=True, group="write", exit_on_error=False)
    def _write(self, job: Callable[[], str], reload: bool) -> None:
        try:
            text = job()
        except FlaketuiError as exc:
            self.post_message(WriteDone(exc.message, ok=False))
            return
        self.post_message(WriteDone(text, reload=reload))

    @on(WriteDone)
    def _written(self, event: WriteDone) -> None:
        if not event.ok:
            self.notify(visible(event.text), title="Not written", severity="error", markup=False)
            return
        # The text names a test id (brackets and all): shown as it is, never read as markup.
        self.notify(visible(event.text), title="Done", markup=False)
        if event.reload:
            self.main_screen.reload()
            after_write = getattr(self.screen, "after_write", None)
            if callable(after_write):
                after_write()  # a screen showing what was written reads it again


def make_app(
    path: str | Path,
    now: datetime | None = None,
    skip_file: str | Path | None = None,
    *,
    config: Config | None = None,
    cursor_blink: bool = True,
    watch: bool = True,
    codeowners: str | Path | None = None,
    display: str | None = None,
) -> FlaketuiApp:
    """Build the app for one history (used by `flaketui open`, the tests and the benchmark)."""
    source = make_source(
        path, now, skip_file, config=config, codeowners=codeowners, display=display
    )
    return FlaketuiApp(source, cursor_blink=cursor_blink, watch=watch)
