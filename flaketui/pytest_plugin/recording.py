"""The recording half of the pytest plugin: every attempt of every test, written in batches.

Active only with ``--flaketui-db PATH`` or the ``flaketui_db`` ini value (a file, or a
``postgresql://`` URL: see flaketui.pytest_plugin.server). Decisions:
- An attempt is one setup/call/teardown cycle; pytest-rerunfailures logs one cycle per attempt
  (failed phases of retried attempts have ``outcome == "rerun"``). Its outcome is that of its
  first failing phase (``fail`` for the call, ``error`` for setup, teardown or a crashed xdist
  worker), else ``skipped`` if a phase skipped, else ``pass``. xfail and non-strict xpass are
  ``skipped`` (they do not gate); a strict xpass fails. Subtest reports are not attempts.
- duration_ms runs from the start of the attempt's setup to the end of its teardown, measured
  where the test runs with a monotonic clock taken when this module is imported, so a test that
  freezes or patches time (freezegun, monkeypatch) cannot bend it; a value below zero or above
  MAX_DURATION_MS is refused (None), and an attempt cut short by a crashed worker has None, not 0.
- Per attempt also: the test that ran just before it in the same process (its worker), its
  1-based position there, and the timeout pytest-timeout (2.1 or later) applies to it
  (marker, option, PYTEST_TIMEOUT or ini), in ms, as that plugin's set-timer hook hands it over:
  none when it sets no timer. Per run: OS, Python, platform and the random-order seed of
  pytest-randomly or pytest-random-order when one shuffled the order.
- worker_id is the xdist worker ("gw0", ...) or None in a serial run; worker_count is the number
  of xdist workers, else 1. Only the xdist controller writes; workers only annotate reports
  (an AttemptTracker stamps each report with the attempt's facts, which travel with it).
- The writer inserts the run row (finished = 0) with the first batch, so a session killed before
  it leaves no run; the run is marked finished after the last flush unless the session was
  interrupted or crashed (exit status 2, 3 or 4); attempts still incomplete then are dropped.
  --collect-only, --setup-only and --setup-plan sessions record nothing.
- A failure message is "<ExcType>: <crash message>", a blank line, then pytest's long report
  (its last LONG_REPORT_MAX_CHARS when longer); passes and skips store no message.
- pytest chooses its rootdir and config file before plugins add their options, so it takes a
  word after ``--flaketui-db`` for a test path: a history outside the directory pytest starts in,
  given as ``--flaketui-db PATH``, would move the rootdir (and with it every test id) to a
  common parent and hide the project's config file. Such a command stops with a usage error that
  asks for ``--flaketui-db=PATH``, which pytest reads as one word.
- Writing problems after start-up (locked beyond the busy timeout, disk full) warn once and
  never fail the session; unwritten attempts are retried at session end.
- Each batch is appended to the history's attempt journal (flaketui.core.history.journal): one
  table in arrival order, with no index and no test row to resolve. The next flaketui command
  or app that opens the history stores the attempts as results, test rows and per-run rows.
- Cost (the target: under 2 % more instructions than pytest alone on a 5 000-test suite): the
  history is opened with plain sqlite3 (sqlite-utils would import pandas and numpy) while git
  says the commit, branch and changed files beside it, batches are
  FLUSH_EVERY_ATTEMPTS attempts or FLUSH_EVERY_SECONDS, whichever comes first, and the
  per-report work is a few dict operations; an attempt this process runs reads the clock's facts
  once, on its teardown report; only a failed attempt's message is masked and signed here.
  On a slow machine or disk the time-triggered batches space out so that writing them stays
  under FLUSH_MAX_TIME_SHARE of the session (a batch taking 50 ms waits 2.5 s).

PYTEST_DONT_REWRITE: a session that names the plugin with `-p flaketui.pytest_plugin` has
pytest rewrite the asserts of this package's modules as it imports them; this one has none,
and the marker spares that walk where no cached rewrite is found (a fresh CI environment,
PYTHONDONTWRITEBYTECODE). Loaded through pytest-flaketui's entry point, nothing is marked.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import platform
import shlex
import sqlite3
import sys
import time
import uuid
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

# Plain dataclasses only: the writer and sqlite-utils are imported once recording is asked for.
from flaketui.core.models import RunMeta
from flaketui.core.words import plural

if TYPE_CHECKING:
    from flaketui.core.config import Config
    from flaketui.core.history.journal import JournalRow
    from flaketui.core.ingest.run_journal import RunJournal
    from flaketui.pytest_plugin.server import ServerTarget

# A batch costs one transaction appending to the attempt journal: 1 000 attempts keep that
# fixed cost negligible, the time limit keeps a killed session's loss small.
FLUSH_EVERY_ATTEMPTS = 1_000
FLUSH_EVERY_SECONDS = 1.0
# Each batch also has a fixed cost (its commit): time-triggered batches wait at least last
# write time / this share, but never more than FLUSH_MAX_SECONDS (a write that waited for a
# lock says little).
FLUSH_MAX_TIME_SHARE = 0.02
FLUSH_MAX_SECONDS = 10.0
# The writer keeps the first 8 KiB of a message: keep the end of a long report (where pytest
# prints the failing line and the E lines) rather than its source listing.
LONG_REPORT_MAX_CHARS = 6 * 1024
# Exit statuses of a session that did not run to its end.
UNFINISHED_EXIT_STATUSES = frozenset(
    {pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR}
)
RECORDER_PLUGIN_NAME = "flaketui-recorder"
ANNOTATOR_PLUGIN_NAME = "flaketui-exception-type"
EXC_TYPE_ATTR = "flaketui_exc_type"
TRACKER_PLUGIN_NAME = "flaketui-attempt-tracker"
# (elapsed ns at teardown else None, predecessor node id, position, timeout ms) on each report
ATTEMPT_ATTR = "flaketui_attempt"
MAX_DURATION_MS = 7 * 24 * 3600 * 1000
# Held in a tuple, not as a module attribute: freezegun replaces module attributes that are the
# real clock functions, and monkeypatching time.perf_counter_ns leaves this reference alone.
_CLOCK = (time.perf_counter_ns,)
# Reports of this exact class are never a subtest's (those subclass it).
_TEST_REPORT = pytest.TestReport
CLEAN_STARTED = 1
CLEAN_LOGGED = 2


def register_recorder(config: pytest.Config) -> None:
    """Register the recorder when --flaketui-db or the ini option asks for it."""
    db_path = config.getoption("flaketui_db", None) or config.getini("flaketui_db")
    if not db_path or any(
        config.getoption(name, False) for name in ("help", "collectonly", "setuponly", "setupplan")
    ):
        return  # nothing runs, so nothing to record
    if hasattr(config, "workerinput"):
        # An xdist worker: the controller receives its reports and writes them; the exception
        # type and the attempt's timing and order are only known here, so they travel on the
        # report.
        config.pluginmanager.register(ExceptionTypeAnnotator(), ANNOTATOR_PLUGIN_NAME)
        config.pluginmanager.register(AttemptTracker(), TRACKER_PLUGIN_NAME)
        return
    misread = misread_history_word(config.invocation_params.args, config.invocation_params.dir)
    if misread is not None:
        raise pytest.UsageError(
            f"flaketui: write --flaketui-db={misread} (with '='): given as a separate word, "
            "pytest takes a path outside this directory for a test path and moves its rootdir"
        )
    # A command-line path is relative to where pytest was started, an ini one to the ini file.
    base = config.invocation_params.dir
    if not config.getoption("flaketui_db", None) and config.inipath is not None:
        base = config.inipath.parent
    address: Path | str = str(db_path)
    if not str(db_path).lower().startswith(("postgresql://", "postgres://")):
        address = base / Path(str(db_path)).expanduser()
    conn, settings, meta, target = _open_for_recording(config, address)
    recorder = Recorder(config, conn, settings, meta, target=target)
    # The recorder tracks the attempts this process runs itself (a serial session's; under
    # xdist the controller runs none and the workers' trackers stamp their reports): one
    # plugin, so each report costs one hook call rather than one per plugin.
    config.pluginmanager.register(recorder, RECORDER_PLUGIN_NAME)


def misread_history_word(args: Sequence[str], invocation_dir: Path) -> str | None:
    """The history path written as a separate word after --flaketui-db (in the arguments or
    PYTEST_ADDOPTS) whose directory is not invocation_dir, or None.

    pytest reads such a word as a test path when it looks for its rootdir and config file (only
    when the file exists, so the first recording would go right and the next ones wrong: the
    rule does not wait for the file). A path in the directory itself changes nothing, and a
    server URL is never a path.
    """
    try:
        words = [*shlex.split(os.environ.get("PYTEST_ADDOPTS", "")), *args]
    except ValueError:  # unbalanced quotes: pytest itself stops on them first
        words = list(args)
    for flag, value in itertools.pairwise(words):
        if flag != "--flaketui-db" or value.startswith("-"):
            continue
        if value.lower().startswith(("postgresql://", "postgres://")):
            continue
        here = Path(invocation_dir).resolve()
        if (here / Path(value).expanduser()).resolve().parent != here:
            return value
    return None


@contextmanager
def _upgrades_said() -> Iterator[None]:
    """What flaketui logs meanwhile (an older history's upgrade starting: a minute on a big
    one, before pytest prints anything) printed on stderr, one line each."""
    logger = logging.getLogger("flaketui")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("flaketui: %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _open_for_recording(
    config: pytest.Config, db_path: Path | str
) -> tuple[sqlite3.Connection, Config, RunMeta, ServerTarget | None]:
    """Open the history (a file, or a server URL's staging history) and resolve the run's
    metadata; bad input becomes a usage error."""
    from flaketui.core.ingest.runmeta import GitProbe, resolve_run_meta

    # git runs beside the config's loading and the history's opening, read last.
    git = GitProbe(config.rootpath)
    from flaketui.core.config import load_config
    from flaketui.core.errors import FlaketuiError
    from flaketui.core.history.store import open_connection

    suite = config.getoption("flaketui_suite", None) or config.getini("flaketui_suite") or None
    try:
        settings = load_config(config.rootpath)
        target = None
        if isinstance(db_path, str):
            from flaketui.pytest_plugin.server import ServerTarget

            target = ServerTarget(db_path)
            conn = target.conn
        else:
            # The recorder stamps a new history's scheme; it defers its run's rollups and
            # leaves earlier sessions' deferred runs to the next reader or writer.
            with _upgrades_said():
                conn = open_connection(db_path, fold=False)
        try:
            meta = resolve_run_meta(
                RunMeta(
                    suite=suite,
                    ts=datetime.now(UTC),
                    os=platform.system() or None,
                    python=platform.python_version(),
                    platform=f"{sys.platform}-{platform.machine()}".rstrip("-"),
                    order_seed=_order_seed(config),
                    incident=config.getoption("flaketui_incident", None),
                ),
                env=os.environ,
                cwd=config.rootpath,
                config=settings,
                fallback_run_id=uuid.uuid4().hex,
                git=git,
            )
        except FlaketuiError:
            if target is not None:
                target.close()
            else:
                conn.close()
            raise
    except FlaketuiError as exc:
        raise pytest.UsageError(f"flaketui: {exc.message}") from None
    finally:
        git.close()
    return conn, settings, meta, target


class ExceptionTypeAnnotator:
    """Stamps a failed report with its exception type name (it travels to the xdist controller).

    Only xdist workers need it (their reports leave before pytest_exception_interact): a serial
    session's Recorder notes the type in that hook, called for failed phases only, instead.
    """

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Record call.excinfo's type name on failed reports."""
        report = yield
        if call.excinfo is not None and report.failed:
            setattr(report, EXC_TYPE_ATTR, call.excinfo.typename)
        return report


class _AttemptClock:
    """The attempt this process is running: when it started (the clock no test can bend), the
    attempt before it, its 1-based position and its timeout. `start` at the attempt's setup
    hook; `stamp` gives a report of it (elapsed, predecessor, position, timeout_ms), the
    elapsed time on its teardown report only."""

    __slots__ = ("current", "position", "previous", "started", "timer")

    def __init__(self) -> None:
        self.previous: str | None = None  # node id of the attempt before, in this process
        self.current: str | None = None
        self.position = 0
        self.started = 0
        # The timeout pytest-timeout set last, and the test it set it for: (node id, ms).
        self.timer: tuple[str, int] | None = None

    def start(self, item: pytest.Item) -> None:
        """An attempt of item starts: note the clock, its predecessor and position."""
        self.started = _CLOCK[0]()
        self.previous, self.current = self.current, item.nodeid
        self.position += 1

    def timer_set(self, item: pytest.Item, settings: Any) -> None:
        """pytest-timeout set a timer for item (before its setup, or before its call with
        func_only): its timeout is the one in force for the test's attempts."""
        seconds = getattr(settings, "timeout", None)
        if isinstance(seconds, int | float) and 0 < seconds < MAX_DURATION_MS / 1000:
            self.timer = (item.nodeid, round(seconds * 1000))

    def stamp(self, when: str) -> tuple[int | None, str | None, int, int | None]:
        """The facts of a report of the current attempt (phase `when`)."""
        elapsed = _CLOCK[0]() - self.started if when == "teardown" else None
        timer = self.timer
        timeout_ms = timer[1] if timer is not None and timer[0] == self.current else None
        return elapsed, self.previous, self.position, timeout_ms


class AttemptTracker:
    """Stamps each report of the process that runs the tests with its attempt's facts.

    The attempt starts at its setup hook (tryfirst, before any fixture) and ends when its
    teardown report is logged; pytest-rerunfailures runs each attempt's setup hook again.
    """

    def __init__(self) -> None:
        self.clock = _AttemptClock()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Start an attempt."""
        self.clock.start(item)

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_timeout_set_timer(self, item: pytest.Item, settings: Any) -> None:
        """Note the timeout pytest-timeout applies (None: it still sets its timer)."""
        self.clock.timer_set(item, settings)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Stamp the report; a teardown's carries the attempt's elapsed time."""
        if report.nodeid != self.clock.current:
            return  # not an attempt this tracker started (a collection or subtest report)
        setattr(report, ATTEMPT_ATTR, self.clock.stamp(report.when))


class _OpenAttempt:
    """The phases seen so far of one attempt of one test on one worker."""

    __slots__ = ("elapsed_ns", "failed", "outcome", "position", "predecessor", "skipped",
                 "timeout_ms")  # fmt: skip

    def __init__(self) -> None:
        self.outcome: str | None = None  # the first failing phase's outcome
        self.failed: pytest.TestReport | None = None  # that phase's report (its message)
        self.skipped = False
        self.elapsed_ns: int | None = None
        self.predecessor: str | None = None
        self.position: int | None = None
        self.timeout_ms: int | None = None


class Recorder:
    """Collects attempts from reports and writes them to the history in batches."""

    def __init__(
        self,
        config: pytest.Config,
        conn: sqlite3.Connection,
        settings: Config,
        meta: RunMeta,
        target: ServerTarget | None = None,
    ) -> None:
        self.config = config
        self.conn = conn
        self.target = target  # a server the run is pushed to when the session ends
        self.left_untidy = 0  # tests the push left untidy after its commit (PushSummary)
        self.settings = settings
        self.meta = meta
        self.run: RunJournal | None = None
        self.open_attempts: dict[tuple[str, str | None], _OpenAttempt] = {}
        # An own attempt whose failed teardown waits for its exception type (see logreport).
        self.closing: tuple[str, str | None] | None = None
        self.done: list[JournalRow] = []  # complete attempts not yet written
        self.last_flush = time.monotonic()
        self.flush_interval = FLUSH_EVERY_SECONDS  # for time-triggered batches
        # The last write's error, while it failed: no batch is written until the session end.
        self.write_error: Exception | None = None
        self.finishing = False  # the session's last flush: no retry follows a failure
        # Warnings of the session's end, said in its summary (see _warn).
        self.said_at_end: list[str] = []
        self.warned = False
        # Until sessionstart knows better, reports may come from xdist workers (see _worker_id).
        self.distributed = True
        # This process's own attempts, as AttemptTracker follows them on an xdist worker.
        self.clock = _AttemptClock()
        # The attempt the clock follows while only passing phases come: such an attempt needs
        # no entry in open_attempts (most attempts of most sessions). CLEAN_STARTED: its setup
        # hook ran, no report yet; CLEAN_LOGGED: passing reports came; 0: not clean.
        self.clean = 0

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Start an attempt of this process (as AttemptTracker does on an xdist worker)."""
        if self.closing is not None:
            self._close_waiting()  # no exception type came for the last failed teardown
        if self.clean:
            self._keep_open()  # the clean attempt before never logged its teardown
        if self.open_attempts:
            stale = self.open_attempts.pop((item.nodeid, None), None)
            if stale is not None:
                # An earlier attempt of this test never logged its teardown: it ends here.
                self._close((item.nodeid, None), stale)
        self.clock.start(item)
        self.clean = 0 if self.distributed else CLEAN_STARTED

    def _keep_open(self) -> None:
        """Give the clean attempt an entry in open_attempts, as any other attempt with a logged
        report has (one without any report is no attempt)."""
        if self.clean == CLEAN_LOGGED:
            self.open_attempts[(self.clock.current or "", None)] = _OpenAttempt()
        self.clean = 0

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionstart(self, session: pytest.Session) -> Generator[None, None, None]:
        """Start the run writer once xdist has set up its workers (the worker count is known)."""
        yield
        from flaketui.core.ingest.run_journal import RunJournal

        # Without xdist's controller every report is this process's own: no worker id to look
        # for (three getattr misses per report otherwise).
        self.distributed = self.config.pluginmanager.getplugin("dsession") is not None
        meta = dataclasses.replace(self.meta, worker_count=_worker_count(self.config))
        try:
            self.run = RunJournal(self.conn, meta, source="pytest", config=self.settings)
        except Exception as exc:
            self._warn(f"cannot start recording the run ({exc}); nothing will be recorded")
        self.last_flush = time.monotonic()

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_timeout_set_timer(self, item: pytest.Item, settings: Any) -> None:
        """Note the timeout pytest-timeout applies (None: it still sets its timer)."""
        self.clock.timer_set(item, settings)

    def pytest_exception_interact(self, node: Any, call: pytest.CallInfo[Any], report: Any) -> None:
        """Note the exception type on a failed report of this process (see the annotator).

        pytest calls this hook for a failed phase only, just after logging its report
        (pytest-rerunfailures: before), instead of three makereport calls per test.
        """
        if call.excinfo is not None:
            setattr(report, EXC_TYPE_ATTR, call.excinfo.typename)
        if self.closing is not None:
            self._close_waiting()

    def _close_waiting(self) -> None:
        """Close the attempt whose failed teardown waited for its exception type."""
        key, self.closing = self.closing, None
        attempt = self.open_attempts.pop(key, None) if key is not None else None
        if key is not None and attempt is not None:
            self._close(key, attempt)
            self._flush_if_due()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Fold one phase report into its attempt; flush when the batch is due."""
        # Runs three times per test: the common case (a passing phase of a clean attempt this
        # process runs) takes the fewest steps.
        if report.__class__ is not _TEST_REPORT and "Subtest" in type(report).__name__:
            return  # a subtest's report (pytest-subtests, pytest 9): most reports skip this test
        nodeid = report.nodeid
        if self.clean and nodeid == self.clock.current:
            when = report.when
            if report.outcome == "passed" and not (when == "call" and hasattr(report, "wasxfail")):
                if when != "teardown":
                    self.clean = CLEAN_LOGGED
                    return
                # It ends: queue it with the clock's facts.
                self.clean = 0
                elapsed, predecessor, position, timeout_ms = self.clock.stamp(when)
                # A short journal row: no worker, message or signature (see JournalRow).
                duration = plausible_duration_ms(elapsed)
                self.done.append(
                    (nodeid, "pass", duration, position, predecessor)
                    if timeout_ms is None
                    else (nodeid, "pass", duration, position, predecessor, timeout_ms)
                )
                self._flush_if_due()
                return
            # A failing or skipping phase: from here on followed as any other attempt (it gets
            # its entry in open_attempts just below).
            self.clean = 0
        key = (nodeid, _worker_id(report) if self.distributed else None)
        open_attempts = self.open_attempts
        attempt = open_attempts.get(key)
        when = report.when
        if attempt is None:
            attempt = open_attempts[key] = _OpenAttempt()
        elif when == "setup":
            # A setup after an unclosed attempt (its teardown was never logged): close that one.
            self._close(key, attempt)
            attempt = open_attempts[key] = _OpenAttempt()
        if self.distributed:
            # A worker's report carries its attempt's facts (AttemptTracker).
            stamp = getattr(report, ATTEMPT_ATTR, None)
            if stamp is not None:
                elapsed, attempt.predecessor, attempt.position, attempt.timeout_ms = stamp
                if elapsed is not None:
                    attempt.elapsed_ns = elapsed
        elif when == "teardown" and nodeid == self.clock.current:
            # An attempt this process runs: its facts once, from the clock, as it ends.
            stamp = self.clock.stamp(when)
            attempt.elapsed_ns, attempt.predecessor, attempt.position, attempt.timeout_ms = stamp
        outcome: str = report.outcome  # also "rerun", from pytest-rerunfailures
        if outcome == "passed":
            if when == "call" and hasattr(report, "wasxfail"):  # a non-strict xpass
                attempt.skipped = True
        elif outcome == "failed" or outcome == "rerun":
            if attempt.outcome is None:
                attempt.outcome = "fail" if when == "call" else "error"
                attempt.failed = report  # its message is made when the attempt closes
        else:  # skipped, xfailed
            attempt.skipped = True
        if when == "setup" or when == "call":
            return
        # teardown ends an attempt; an xdist crash report ("???") ends it too.
        if (
            attempt.failed is report
            and nodeid == self.clock.current
            and not hasattr(report, EXC_TYPE_ATTR)
        ):
            # A failed teardown of this process: its exception type arrives next, with
            # pytest_exception_interact, which closes the attempt.
            self.closing = key
            return
        self._close(key, attempt)
        del open_attempts[key]
        self._flush_if_due()

    def _flush_if_due(self) -> None:
        """Write the batch when it is full or its time has come (not after a failed write)."""
        if (
            len(self.done) >= FLUSH_EVERY_ATTEMPTS
            or time.monotonic() - self.last_flush >= self.flush_interval
        ) and self.write_error is None:
            self.flush()

    def _close(self, key: tuple[str, str | None], attempt: _OpenAttempt) -> None:
        """Queue an open attempt for the next batch, as a journal row (see RunJournal.append)."""
        outcome = attempt.outcome
        if outcome is None:
            outcome = "skipped" if attempt.skipped else "pass"
        self.done.append(
            (
                key[0],
                outcome,
                plausible_duration_ms(attempt.elapsed_ns),
                attempt.position,
                attempt.predecessor,
                attempt.timeout_ms,
                key[1],
                None if attempt.failed is None else _failure_message(attempt.failed),
                None,
                None,
            )
        )

    def flush(self) -> None:
        """Write the complete attempts collected so far, one transaction per batch."""
        start = self.last_flush = time.monotonic()
        if self.run is None:
            self.done.clear()  # recording could not start: keep no memory of it
            return
        if not self.done:
            return
        try:
            self.run.append(self.done)
        except Exception as exc:
            self.write_error = exc
            if not self.finishing:
                self._warn(
                    f"cannot write to the history ({exc}); retrying at the end of the session"
                )
        else:
            self.done.clear()
            self.write_error = None
        self.last_flush = time.monotonic()
        spent = self.last_flush - start
        wait = min(spent / FLUSH_MAX_TIME_SHARE, FLUSH_MAX_SECONDS)
        self.flush_interval = max(FLUSH_EVERY_SECONDS, wait)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Flush everything; mark the run finished unless the session was cut short."""
        interrupted = exitstatus in UNFINISHED_EXIT_STATUSES
        self.closing = None  # still open: closed below with the others
        if self.clean:
            self._keep_open()
        for key, attempt in list(self.open_attempts.items()):
            if not interrupted:
                self._close(key, attempt)
        self.open_attempts.clear()
        self.finishing = True
        self.flush()
        if self.run is not None and not interrupted and not self.done:
            try:
                self.run.finish()
            except Exception as exc:
                self._warn(f"cannot mark the run finished ({exc})")
        if self.done:
            # Said even after the warning above: that one promised a retry, this is its end.
            self._warn(
                f"cannot write to the history ({self.write_error}); "
                f"{plural(len(self.done), 'attempt')} not recorded",
                again=True,
            )
        if self.target is not None and self.run is not None and self.run.results:
            self._publish(self.target)

    def _publish(self, target: ServerTarget) -> None:
        """Push the staged run to the server; on failure keep it and say how to send it."""
        try:
            self.left_untidy = target.publish().left_untidy
        except Exception as exc:
            kept = target.keep()
            reason = getattr(exc, "message", None) or type(exc).__name__
            if getattr(exc, "transient", True):
                from flaketui.core.history.address import command_address

                # The URL as the command needs it: a masked password would fail to authenticate.
                address, note = command_address(target.url)
                command = shlex.join(["flaketui", "merge", address, str(kept)])
                self._warn(
                    f"{reason}; the run is kept in {kept}: send it with `{command}`"
                    + (f" ({note})" if note else "")
                )
            else:  # sending it again would meet the same refusal
                self._warn(f"{reason}; the run is kept in {kept}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Say so when the run was recorded as part of an incident (with -q too): a
        FLAKETUI_INCIDENT left set after the outage would otherwise keep every later run out of
        the scores unnoticed. Say what a push to a server left untidy after its commit, as
        `flaketui merge` and `flaketui ingest` do."""
        if self.meta.incident is not None:
            terminalreporter.write_line(
                f"flaketui: recorded this run as part of incident {self.meta.incident}, "
                "which scoring leaves out"
            )
        if self.left_untidy:
            from flaketui.core.history.pg.push import untidy_line

            terminalreporter.write_line(f"flaketui: {untidy_line(self.left_untidy)}")
        for line in self.said_at_end:
            terminalreporter.write_line(line, yellow=True)
        self.said_at_end.clear()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """Close the history; the last connection's close checkpoints the WAL into the file."""
        # That checkpoint is kept on purpose (about 30 ms for 5 000 tests): CI jobs upload
        # history.db alone right after pytest, and a WAL left beside it would hold the run.
        self.conn.close()
        for line in self.said_at_end:  # a session with no summary (an internal error)
            print(line, file=sys.stderr)
        if self.target is not None and self.target.kept is None:
            self.target.close()  # the staging history of a server recording

    def _warn(self, text: str, *, again: bool = False) -> None:
        """Tell the user once about a recording problem (`again`: even after an earlier
        warning), never failing the session."""
        if self.warned and not again:
            return
        self.warned = True
        line = f"flaketui: {text}"
        reporter = self.config.pluginmanager.getplugin("terminalreporter")
        if reporter is None:
            print(line, file=sys.stderr)
        elif self.finishing:
            # At the session's end pytest has not ended its progress line yet (`-q` prints
            # no newline after `[100%]`): said with the summary, on a line of its own.
            self.said_at_end.append(line)
        else:
            reporter.write_line(line, yellow=True)


def plausible_duration_ms(elapsed_ns: int | None) -> int | None:
    """Milliseconds of an elapsed time, or None when unknown or implausible."""
    if not isinstance(elapsed_ns, int) or elapsed_ns < 0:
        return None
    duration = round(elapsed_ns / 1_000_000)
    return duration if duration <= MAX_DURATION_MS else None


def _order_seed(config: pytest.Config) -> str | None:
    """The seed of the plugin that shuffled the test order, as 'plugin:seed' (pytest-random-order:
    'random-order:seed:bucket' for a bucket other than its default 'module'), else None."""
    if _has_plugin(config, "randomly", "pytest_randomly") and config.getoption(
        "randomly_reorganize", True
    ):
        seed = config.getoption("randomly_seed", None)
        if isinstance(seed, int):
            return f"randomly:{seed}"
    if _has_plugin(config, "random_order", "random_order.plugin"):
        bucket = str(config.getoption("random_order_bucket", "default:"))
        seed = str(config.getoption("random_order_seed", "default:"))
        enabled = config.getoption("random_order_enabled", False) or not (
            bucket.startswith("default:") and seed.startswith("default:")
        )
        bucket = bucket.removeprefix("default:")
        if enabled and bucket != "none":
            # The bucket shapes the order as much as the seed: kept unless it is the default.
            where = "" if bucket == "module" else f":{bucket}"
            return f"random-order:{seed.removeprefix('default:')}{where}"
    return None


def _has_plugin(config: pytest.Config, *names: str) -> bool:
    """Whether a plugin is active under its entry-point or its module name (`-p module`)."""
    return any(config.pluginmanager.hasplugin(name) for name in names)


def _worker_id(report: pytest.TestReport) -> str | None:
    """The xdist worker that produced a report, None in a serial run."""
    worker_id = getattr(report, "worker_id", None)
    if worker_id is None:
        node = getattr(report, "node", None)  # xdist's crash reports carry only the node
        gateway = getattr(node, "gateway", None)
        worker_id = getattr(gateway, "id", None)
    return worker_id if isinstance(worker_id, str) else None


def _worker_count(config: pytest.Config) -> int:
    """How many xdist workers this session runs, 1 without xdist."""
    dsession: Any = config.pluginmanager.getplugin("dsession")
    if dsession is None:
        return 1
    nodemanager = getattr(dsession, "nodemanager", None)
    specs = getattr(nodemanager, "specs", None)
    if specs:
        return len(specs)
    count = 0
    for spec in config.getoption("tx", None) or []:
        times, star, _ = str(spec).partition("*")
        count += int(times) if star and times.isdigit() else 1
    return max(count, 1)


def _failure_message(report: pytest.TestReport) -> str:
    """'<ExcType>: <crash message>', then the end of the long report."""
    # str() of the longrepr, not report.longreprtext: the latter opens with xdist's worker line.
    text = "" if report.longrepr is None else str(report.longrepr)
    if len(text) > LONG_REPORT_MAX_CHARS:
        text = "…\n" + text[-LONG_REPORT_MAX_CHARS:]
    crash = getattr(report.longrepr, "reprcrash", None)
    first = getattr(crash, "message", None) or ""
    exc_type = getattr(report, EXC_TYPE_ATTR, None)
    if first and exc_type:
        head = first.split(":", 1)[0]
        if head != exc_type and not head.endswith("." + exc_type):
            first = f"{exc_type}: {first}"
    return f"{first}\n\n{text}" if first else text
