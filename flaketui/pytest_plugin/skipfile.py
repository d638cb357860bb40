"""The skip-file half of the pytest plugin: honour the shared quarantine skip file.

`skip` entries are deselected; `run` entries run and keep their real outcome in every report,
only the session's exit status ignores their failures. Under xdist the workers deselect (they
collect) and the controller, which sees every report, reports and sets the exit status; the
workers tell it what they deselected, so pytest's summary line counts it as it does without
xdist ("1 deselected").

PYTEST_DONT_REWRITE: a session that names the plugin with `-p flaketui.pytest_plugin` has
pytest rewrite the asserts of this package's modules as it imports them; this one has none,
and the marker spares that walk where no cached rewrite is found (a fresh CI environment,
PYTHONDONTWRITEBYTECODE). Loaded through pytest-flaketui's entry point, nothing is marked.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flaketui.core.config import Config, find_pyproject, load_config
from flaketui.core.errors import FlaketuiError
from flaketui.core.output.text import visible
from flaketui.core.quarantine.skipfile import (
    ENV_VAR,
    ForeignSkipFile,
    SkipEntry,
    SkipFile,
    SkipMode,
    read_skip_file,
    resolve_skip_file_source,
)
from flaketui.core.timeutil import to_iso, utc_now
from flaketui.core.words import plural

PLUGIN_NAME = "flaketui-skipfile"
WORKER_KEY = "flaketui_skipfile"
SOURCE_LABELS = {
    "flag": "--flaketui-skip-file",
    "env": "FLAKETUI_SKIP_FILE",
    "ini": "ini option flaketui_skip_file",
    "config": "[tool.flaketui] skip_file",
    "default": "discovered",
}


@dataclass(frozen=True)
class WorkerDeselected:
    """A test an xdist worker deselected, as the controller's terminal reporter counts it.

    pytest keeps the deselected items themselves in its statistics, and other plugins read
    attributes of every entry there (Hypothesis reads each one's `__dict__`), so an entry is an
    object with the test's `nodeid`, never a bare string.
    """

    nodeid: str


class FlaketuiSkipFileWarning(pytest.PytestWarning):
    """A skip-file problem that does not stop the session (foreign, missing or expired)."""


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _worker_output(config: pytest.Config) -> dict[str, Any] | None:
    """What an xdist worker sends its controller when it ends; None outside a worker."""
    # xdist sets this attribute on a worker's config; pytest.Config does not declare it.
    output: dict[str, Any] | None = getattr(config, "workeroutput", None)
    return output


def _warn(config: pytest.Config, message: str) -> None:
    """A configuration-time warning, shown once (by the controller, not by every worker); a
    test id or a path in it shows its control characters as escapes."""
    if not _is_worker(config):
        config.issue_config_time_warning(FlaketuiSkipFileWarning(visible(message)), stacklevel=2)


def _locate(config: pytest.Config) -> tuple[Path, str]:
    """The skip file's path and its source, in the order docs/skip-file.md gives."""
    rootdir = Path(config.rootpath)
    ini_value = str(config.getini("flaketui_skip_file") or "").strip()
    ini = None
    if ini_value:
        base = Path(config.inipath).parent if config.inipath is not None else rootdir
        ini = base / Path(ini_value).expanduser()
    flag = config.getoption("flaketui_skip_file")
    try:
        settings = load_config(rootdir)
    except FlaketuiError as exc:
        # A broken [tool.flaketui] only matters when it is where the skip file comes from.
        if not (flag or os.environ.get(ENV_VAR) or ini):
            raise pytest.UsageError(f"flaketui: {exc.message}") from None
        settings = Config()
    pyproject = find_pyproject(rootdir)
    return resolve_skip_file_source(
        flag,
        env=os.environ,
        config=settings,
        root=rootdir,
        ini=ini,
        config_dir=pyproject.parent if pyproject is not None else rootdir,
    )


def register_skip_file(config: pytest.Config) -> None:
    """Register skip-file honouring when a skip file is given or discovered."""
    quarantined_only = bool(config.getoption("flaketui_quarantined_only"))
    if config.getoption("flaketui_no_skip_file"):
        if quarantined_only:
            raise pytest.UsageError(
                "flaketui: --flaketui-quarantined-only needs the skip file; "
                "drop --flaketui-no-skip-file"
            )
        return
    path, source = _locate(config)
    explicit = source != "default"
    if explicit and not path.exists():
        missing = f"flaketui: skip file {path} ({SOURCE_LABELS[source]}): file not found"
        if source in ("flag", "env"):
            raise pytest.UsageError(missing)
        if quarantined_only:
            raise pytest.UsageError(f"{missing}; --flaketui-quarantined-only has nothing to run")
        # Named in the project's configuration, which may predate the first quarantine: the
        # suite runs, with a warning, since a misspelt path otherwise quarantines nothing unseen.
        _warn(config, f"{missing}; no test is quarantined")
        return
    foreign: str | None = None
    try:
        skip = read_skip_file(path, explicit=explicit)
    except ForeignSkipFile as exc:
        _warn(config, f"flaketui: ignoring {exc.message}")
        skip, foreign = None, exc.message
    except FlaketuiError as exc:
        raise pytest.UsageError(f"flaketui skip file: {exc.message}") from None
    if skip is None and not quarantined_only:
        return
    plugin = SkipFilePlugin(
        config,
        skip or SkipFile(path=path),
        source,
        quarantined_only,
        found=path.exists(),
        foreign=foreign,
    )
    config.pluginmanager.register(plugin, PLUGIN_NAME)
    for entry in plugin.expired:
        _warn(
            config,
            f"flaketui: quarantine of {entry.test_id} expired on "
            f"{to_iso(entry.expires) if entry.expires else '?'} (still honoured; "
            f"release or re-quarantine it): {path}",
        )


class SkipFilePlugin:
    """Deselects `skip` entries, forgives `run` entries' failures, and reports what it did."""

    def __init__(
        self,
        config: pytest.Config,
        skip: SkipFile,
        source: str,
        quarantined_only: bool,
        found: bool = True,
        foreign: str | None = None,
    ) -> None:
        self.config = config
        self.skip = skip
        self.source = source
        self.quarantined_only = quarantined_only
        # False for the nightly job in a project with no skip file yet: it runs nothing, and
        # says that the file is missing rather than that it was found with no entry.
        self.found = found
        # Why a file found at the skip file's path is not honoured (another tool's file): the
        # session then reads it as no entry, and says so instead of counting none.
        self.foreign = foreign
        self.entries: dict[str, SkipEntry] = skip.entries
        self.expired = skip.expired(utc_now())
        self.deselected: set[str] = set()  # skip entries deselected in this session
        self.matched: set[str] = set()  # entries matching a collected test
        self.others_deselected = 0  # non-quarantined tests dropped by --flaketui-quarantined-only
        self.dropped: set[str] = set()  # every test this plugin deselected (either way)
        self.counted: set[str] = set()  # xdist controller: dropped tests in pytest's summary
        self.collected = False  # collection happened here or on a worker
        self.collect_failed = False
        self.forgiven: set[str] = set()  # failed tests whose failure the exit status ignores
        self.real_failures: set[str] = set()  # failures that still fail the session
        self.passed: set[str] = set()

    # --- collection (the only process collecting, or each xdist worker) ----------------------

    def _forgivable(self, nodeid: str) -> bool:
        entry = self.entries.get(nodeid)
        return entry is not None and (self.quarantined_only or entry.mode == SkipMode.RUN)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        """Deselect skip entries (or, for the nightly job, everything not quarantined)."""
        # tryfirst: match against everything collected, before -k, -m or --deselect drop items.
        self.collected = True
        self.matched = {item.nodeid for item in items if item.nodeid in self.entries}
        keep: list[pytest.Item] = []
        dropped: list[pytest.Item] = []
        for item in items:
            entry = self.entries.get(item.nodeid)
            if self.quarantined_only:
                (keep if entry is not None else dropped).append(item)
            elif entry is not None and entry.mode == SkipMode.SKIP:
                dropped.append(item)
            else:
                keep.append(item)
        if self.quarantined_only:
            self.others_deselected = len(dropped)
        else:
            self.deselected = {item.nodeid for item in dropped}
        self.dropped = {item.nodeid for item in dropped}
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep
        output = _worker_output(config)
        if output is not None:
            output[WORKER_KEY] = self._worker_state()

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A collection error means some tests were not collected."""
        if report.failed:
            self.collect_failed = True
            output = _worker_output(self.config)
            if output is not None:
                output[WORKER_KEY] = self._worker_state()

    def _worker_state(self) -> dict[str, Any]:
        return {
            "matched": sorted(self.matched),
            "deselected": sorted(self.deselected),
            "others_deselected": self.others_deselected,
            "dropped": sorted(self.dropped),
            "collect_failed": self.collect_failed,
        }

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """xdist controller: gather what each worker matched and deselected."""
        state = getattr(node, "workeroutput", {}).get(WORKER_KEY)
        if not state:
            return
        self.collected = True
        self.matched.update(state["matched"])
        self.deselected.update(state["deselected"])
        # Every worker collects the whole session; one worker's count is the session's.
        self.others_deselected = max(self.others_deselected, state["others_deselected"])
        self.collect_failed = self.collect_failed or state["collect_failed"]
        self._count_deselected(set(state.get("dropped", ())))

    def _count_deselected(self, dropped: set[str]) -> None:
        """Add the tests a worker deselected to pytest's summary line, once each.

        The controller collects nothing, so its terminal reporter never hears of deselection:
        its statistics get the node ids (each worker collects, and drops, the same tests).
        """
        new = dropped - self.counted
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if not new or reporter is None:
            return
        self.counted |= new
        reporter.stats.setdefault("deselected", []).extend(
            WorkerDeselected(nodeid) for nodeid in sorted(new)
        )

    # --- outcomes and exit status (the single process, or the xdist controller) --------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Remember which failures the exit status may ignore."""
        if report.failed:
            if self._forgivable(report.nodeid):
                self.forgiven.add(report.nodeid)
            else:
                self.real_failures.add(report.nodeid)
        elif report.when == "call" and report.passed and report.nodeid in self.entries:
            self.passed.add(report.nodeid)

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(
        self, session: pytest.Session, exitstatus: int
    ) -> Generator[None, object, object]:
        """If every failure belongs to a forgiven (quarantined `run`) test, the session passes.

        A wrapper, applied after every other plugin's sessionfinish: some (syrupy, which
        pytest-textual-snapshot brings) write the status they were handed back into the
        session, which undid a status set earlier.
        """
        result = yield
        if self.collect_failed or self.real_failures:
            return result
        status = session.exitstatus
        if status == pytest.ExitCode.TESTS_FAILED and exitstatus == status and self.forgiven:
            session.exitstatus = pytest.ExitCode.OK
        elif status == pytest.ExitCode.NO_TESTS_COLLECTED and self.quarantined_only:
            # The nightly job with nothing quarantined has nothing to check: that is a success.
            session.exitstatus = pytest.ExitCode.OK
        return result

    # --- reporting ---------------------------------------------------------------------------

    def pytest_report_header(self, config: pytest.Config) -> str:
        """Which skip file is honoured, from where, with how many entries."""
        if not self.found:
            return f"flaketui: no skip file at {self.skip.path}; no test is quarantined"
        if self.foreign is not None:
            return f"flaketui: ignoring {self.foreign}; no test is quarantined"
        modes = [e.mode for e in self.entries.values()]
        what = f"{modes.count(SkipMode.SKIP)} skip, {modes.count(SkipMode.RUN)} run"
        extra = ", quarantined tests only" if self.quarantined_only else ""
        return f"flaketui: skip file {self.skip.path} ({SOURCE_LABELS[self.source]}; {what}{extra})"

    def _whole_suite_collected(self) -> bool:
        """Whether this session collected every test: no paths or node ids were given."""
        args_source = getattr(self.config, "args_source", None)
        return (
            self.collected
            and not self.collect_failed
            and args_source is not None
            and args_source != pytest.Config.ArgsSource.ARGS
        )

    def _describe(self, entry: SkipEntry) -> str:
        parts = [entry.reason or "no reason given"]
        if entry.ticket:
            parts.append(entry.ticket)
        if entry.expires is not None:
            parts.append(f"until {to_iso(entry.expires)[:10]}")
        if entry.hand_added:
            parts.append("hand-added")
        return "; ".join(parts)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """List deselected, forgiven, expired and unmatched entries."""
        tr = terminalreporter
        tr.write_sep("=", "flaketui quarantine")
        if not self.found:
            held = "not found"
        elif self.foreign is not None:
            held = "ignored: not a flaketui skip file"
        else:
            held = plural(len(self.entries), "entry", "entries")
        tr.write_line(visible(f"skip file: {self.skip.path} ({held})"))
        if self.quarantined_only:
            self._summary_quarantined_only(tr)
        if self.deselected:
            count = plural(len(self.deselected), "quarantined test")
            tr.write_line(f"deselected {count} (mode skip):")
            for test_id in sorted(self.deselected):
                tr.write_line(visible(f"  {test_id}  ({self._describe(self.entries[test_id])})"))
        if self.forgiven:
            tr.write_line(
                f"{plural(len(self.forgiven), 'quarantined test')} failed; their failures are "
                "reported but do not fail the session:",
                yellow=True,
            )
            for test_id in sorted(self.forgiven):
                tr.write_line(visible(f"  {test_id}"), yellow=True)
        if self.expired:
            tr.write_line(
                f"EXPIRED: {len(self.expired)} quarantine entr"
                f"{'y' if len(self.expired) == 1 else 'ies'} past the expiry date "
                "(still honoured; release, fix or re-quarantine):",
                red=True,
                bold=True,
            )
            for entry in self.expired:
                tr.write_line(visible(f"  {entry.test_id}  ({self._describe(entry)})"), red=True)
        self._summary_unmatched(tr)

    def _summary_quarantined_only(self, tr: Any) -> None:
        tr.write_line(
            f"quarantined tests only: ran {len(self.matched)}, "
            f"deselected {plural(self.others_deselected, 'other test')}"
        )
        fixed = sorted(self.passed - self.forgiven)
        if fixed:
            tr.write_line(f"passed this session (release candidates): {len(fixed)}", green=True)
            for test_id in fixed:
                tr.write_line(visible(f"  {test_id}"), green=True)
        if self.forgiven:
            tr.write_line(f"still failing: {len(self.forgiven)}")

    def _summary_unmatched(self, tr: Any) -> None:
        unmatched = sorted(set(self.entries) - self.matched)
        if not unmatched or not self.collected:
            return
        if self._whole_suite_collected():
            verb = "entry matches" if len(unmatched) == 1 else "entries match"
            tr.write_line(
                f"{len(unmatched)} skip-file {verb} no collected test "
                "(renamed or deleted? release them):",
                yellow=True,
            )
            for test_id in unmatched:
                tr.write_line(visible(f"  {test_id}"), yellow=True)
        else:
            tr.write_line(
                f"{len(unmatched)} skip-file entr{'y' if len(unmatched) == 1 else 'ies'} "
                "not collected in this session"
            )
