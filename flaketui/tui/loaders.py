"""Thin glue run inside the app's thread workers: each function opens its own connection."""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable, Generator
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flaketui.core.config import Config
from flaketui.core.errors import FlaketuiError, SkipFileError
from flaketui.core.quarantine.skipfile import SkipFile, SkipMode, read_skip_file
from flaketui.core.scoring import causes_apart
from flaketui.core.scoring.results import GroupVerdict, Report, TestVerdict, Verdict
from flaketui.core.words import plural
from flaketui.tui.history_access import reading, writing

if TYPE_CHECKING:
    from flaketui.core.history.dbhandle import Connected
    from flaketui.core.scoring.causes_apart import Apart


@dataclass(slots=True)
class QuarantineRow:
    """One skip-file entry as the Quarantined view shows it (viewmodel lists them)."""

    test_id: str
    mode: SkipMode
    reason: str
    owner: str | None
    ticket: str | None
    quarantined_at: datetime | None
    expires: datetime | None
    hand_added: bool


@dataclass(slots=True)
class Source:
    """Where the app reads and writes: the history, the skip file, the clock and the config."""

    path: Path
    skip_path: Path
    display: str = ""  # the history's path as the user typed it, for the header
    skip_display: str = ""  # the skip file, relative to the current directory when inside it
    requested_now: datetime | None = None
    config: Config = field(default_factory=Config)
    readonly: bool = False
    owners_from: Path | None = None  # the CODEOWNERS file (or a folder to search) for owners
    owners_display: str = ""  # that file as the header names it


@dataclass(slots=True, weakref_slot=True)
class MainData:
    """Everything the main screen shows, read in one worker call."""

    report: Report
    lifecycle: dict[str, str]
    quarantine: list[QuarantineRow]
    suites: list[str]
    stamp: tuple[int, ...]
    skip_problem: str | None = None
    skip: SkipFile | None = None
    extras_loaded: bool = False  # lifecycle states and suites arrived (load_extras)
    groups_loaded: bool = True  # False while the report's families and signatures are to come
    causes_loaded: bool = False  # the flaky tests' and families' likely causes are in the report
    provisional: bool = False  # the ranking kept from the last opening, until the new one is in
    # How many tests carry each verdict, when the report holds only some of them (a kept
    # ranking's flaky tests, shown while the rest of it is read); None: count the report's.
    verdicts: dict[str, int] | None = None
    # Why a report that lists no test lists none, when its window holds runs (Extras).
    set_aside: str | None = None


@dataclass(slots=True)
class Extras:
    """What the list shows beside the ranking, read after the first screen is up."""

    lifecycle: dict[str, str]
    suites: list[str]
    set_aside: str | None = None  # see MainData.set_aside


@dataclass(slots=True)
class DetailData:
    """Everything the detail screen shows for one test or family."""

    key: str
    kind: str  # test | family
    verdict: Verdict
    reason: str
    outcomes: list[Any]
    signatures: list[Any]
    pivot: Any
    daily_scores: list[float]
    members: list[TestVerdict]
    repro: str
    repro_note: str = ""  # what the command replays, when it is a recorded run's order


# Held by the app's threads while they import a module first needed late: Python 3.11 may fail
# with "AST constructor recursion depth mismatch" when two threads compile source at once
# (each first import of a module whose cached bytecode is stale or absent does).
IMPORT_LOCK = threading.RLock()


def _core(name: str) -> Any:
    """A core module, imported when first needed (the app starts before heavy modules load)."""
    with IMPORT_LOCK:
        return importlib.import_module(f"flaketui.core.{name}")


def history_stamp(path: Path) -> tuple[int, ...]:
    """Size and mtime of the history and its WAL: changes whenever another process commits."""
    stamp: list[int] = []
    for candidate in (path, path.with_name(path.name + "-wal")):
        try:
            info = candidate.stat()
        except OSError:
            stamp.extend((0, 0))
            continue
        # A reader opening the history may create an empty WAL: that is not a change.
        stamp.extend((info.st_mtime_ns, info.st_size) if info.st_size else (0, 0))
    return tuple(stamp)


PENDING_MARK = "*"  # after a state the lifecycle derived but `lifecycle --apply` has not written


def _lifecycle_states(
    db: Connected, report: Report, source: Source, skip: SkipFile | None
) -> dict[str, str]:
    """Each tracked test's lifecycle state (tests in state `none` are absent), marked with
    PENDING_MARK when it comes from a transition not yet written: such a `quarantined` test
    is not in the skip file yet, and CI still runs it."""
    plan = _core("quarantine.lifecycle").derive(
        db, now=report.now, config=source.config, skip=skip, report=report
    )
    waiting = plan.awaiting_apply()
    return {
        key: str(value.state) + (PENDING_MARK if key in waiting else "")
        for key, value in plan.tracked().items()
    }


def read_skip(skip_path: Path) -> tuple[SkipFile | None, str | None]:
    """The skip file (None when absent), or a one-line problem when it cannot be read."""
    try:
        return read_skip_file(skip_path, explicit=False), None
    except SkipFileError as exc:
        return None, exc.message


def quarantine_rows(skip: SkipFile | None) -> list[QuarantineRow]:
    """The skip file's entries as the Quarantined view lists them."""
    if skip is None:
        return []
    rows = [
        QuarantineRow(
            test_id=entry.test_id,
            mode=entry.mode,
            reason=entry.reason,
            owner=entry.owner,
            ticket=entry.ticket,
            quarantined_at=entry.quarantined_at,
            expires=entry.expires,
            hand_added=entry.added_by != "flaketui",
        )
        for entry in skip.entries.values()
    ]
    return sorted(rows, key=lambda r: r.test_id)


def suites_of(db: Connected) -> list[str]:
    """The suites present in the history."""
    return [str(r[0]) for r in db.conn.execute("SELECT DISTINCT suite FROM runs ORDER BY suite")]


def set_aside_reason(
    db: Connected,
    report: Report,
    source: Source,
    suite: str | None = None,
    branch_kind: str | None = None,
) -> str | None:
    """Why the report lists no test although its window holds runs (an empty view says it);
    None when it lists some. The count reads every test-run of the window: only when empty."""
    if report.tests:
        return None
    uncounted = _core("scoring.uncounted")
    counts = uncounted.set_aside(db, report.now, source.config, suite, branch_kind)
    reason: str | None = uncounted.set_aside_reason(counts)
    return reason


def load_main(source: Source, *, suite: str | None, branch_kind: str | None) -> MainData:
    """What the first screen needs: the ranked report as of the effective now, and the skip file.

    Lifecycle states and the suite list come after, from load_extras: replaying the lifecycle
    is a long pure-Python walk the ranked list need not wait for.
    """
    report_mod = _core("scoring.report")
    skip, problem = read_skip(source.skip_path)
    with reading(source.path) as db:
        # Once the reader is open: opening may fold runs an ingest left waiting, a write of
        # the reader's own that the watch must not take for a change.
        stamp = history_stamp(source.path)
        # build_report applies the report's clock itself (and flags a clamped now).
        report: Report = report_mod.build_report(
            db,
            now=source.requested_now,
            config=source.config,
            suite=suite,
            branch_kind=branch_kind,
            repo_root=source.owners_from,  # build_report reads owners from here only
        )
    return MainData(report, {}, quarantine_rows(skip), [], stamp, problem, skip)


def load_in_stages(
    source: Source, apart: Apart | None = None
) -> Generator[MainData | Report | Extras, None, None]:
    """From one read snapshot (see core.report.report_stages): the first screen's data (tests
    ranked, no groups yet), then the complete report, then the lifecycle states and suites,
    then the complete report with the likely causes of its flaky tests and families."""
    report_mod = _core("scoring.report")
    skip, problem = read_skip(source.skip_path)
    with reading(source.path) as db:
        # Once the reader is open: opening may fold runs an ingest left waiting, a write of
        # the reader's own that the watch must not take for a change.
        stamp = history_stamp(source.path)
        stages = report_mod.report_stages(
            db, now=source.requested_now, config=source.config, repo_root=source.owners_from
        )
        with closing(stages):
            # The first report is not named here: once the complete one replaces it on screen,
            # nothing keeps its objects alive through the later steps.
            yield MainData(
                next(stages), {}, quarantine_rows(skip), [], stamp, problem, skip,
                groups_loaded=False,
            )  # fmt: skip
            report: Report = next(stages)
            yield report
            yield Extras(
                _lifecycle_states(db, report, source, skip),
                suites_of(db),
                set_aside_reason(db, report, source),
            )
            yield _causes_of(db, source, report, apart)


def _causes_of(db: Connected, source: Source, report: Report, apart: Apart | None) -> Report:
    """The report with the likely causes of its flaky tests and families: worked out in a
    child process when the analysis is big (causes_apart says why), else by this thread.

    apart: the load's handle on its child (a stopped one kills its child as it starts, and
    nothing falls back: the load was replaced, nobody waits for its causes).
    """
    causes = _core("scoring.causes")
    targets = causes.cause_targets(report)
    found = None
    if apart is not None and causes.cause_rows(report, targets) >= causes_apart.CHILD_MIN_ROWS:
        try:
            found = causes_apart.find_causes_apart(
                source.path, targets, now=report.now, config=source.config, started=apart.started
            )
        except causes_apart.ChildFailed:
            if apart.stopped:
                raise FlaketuiError("the history was not read to the end") from None
    if found is None:  # a small analysis, or a child that could not do it
        found = causes.find_causes(db, targets, now=report.now, config=source.config)
    with_found: Report = causes.with_causes(report, found)
    return with_found


def load_extras(
    source: Source, data: MainData, suite: str | None = None, branch_kind: str | None = None
) -> Extras:
    """Lifecycle states of the loaded report's tests, the suites of the history, and why the
    report (of that suite and branch kind) lists no test, if it lists none."""
    with reading(source.path) as db:
        lifecycle = _lifecycle_states(db, data.report, source, data.skip)
        suites = suites_of(db)
        set_aside = set_aside_reason(db, data.report, source, suite, branch_kind)
    return Extras(lifecycle, suites, set_aside)


def load_causes(source: Source, report: Report, apart: Apart | None = None) -> Report:
    """The report with the likely causes of its flaky tests and families (see _causes_of)."""
    with reading(source.path) as db:
        return _causes_of(db, source, report, apart)


def load_detail(
    source: Source,
    item: TestVerdict | GroupVerdict,
    report: Report,
    *,
    progress: Callable[[int, int, str], None] | None = None,
) -> DetailData:
    """The outcome sequence, signatures, worker pivot and trend of one test or family.

    progress(done, steps, what) is called as each of the three reads begins.
    """
    step = progress or (lambda done, steps, what: None)
    # Only here: the first load (read while the UI starts) does not pay for these imports.
    from flaketui.tui.actionmodel import pool_by_run, repro_command, worst_worker_count

    detail = _core("scoring.detail")
    pivot_mod = _core("scoring.pivot")
    is_test = isinstance(item, TestVerdict)
    key = item.test_id if isinstance(item, TestVerdict) else item.key
    config = source.config
    with reading(source.path) as db:
        step(0, 3, "outcomes")
        outcomes = detail.outcome_sequence(db, key, now=report.now, config=config)
        if not is_test:
            outcomes = pool_by_run(outcomes)
        step(1, 3, "signatures")
        signatures = detail.signatures_of(db, key, now=report.now, config=config)
        step(2, 3, "worker pivot")
        pivot = pivot_mod.worker_pivot(db, key, now=report.now, config=config)
        replay = _core("scoring.order").latest_seed_replay(
            db, list(pivot.members), now=report.now, config=config
        )
    # A family's pooled series comes with the report's groups, as a test's does.
    daily = list(item.daily_scores)
    members_tv: list[TestVerdict] = []
    if not is_test:
        wanted = set(item.members)  # type: ignore[union-attr]
        members_tv = sorted(
            (t for t in report.tests if t.test_id in wanted), key=lambda t: -t.scores.damage
        )
    first_bad = getattr(item, "first_bad_commit", None)
    last_good = getattr(item, "last_good_commit", None)
    repro = repro_command(
        key,
        item.verdict,
        first_bad=first_bad,
        last_good=last_good,
        worst_worker_count=worst_worker_count(pivot.by_worker_count),
        seed_replay=replay.command() if replay is not None else None,
    )
    note = ""
    if replay is not None and not repro.startswith("git bisect"):
        note = f"replays the order of run {replay.run_id}, its latest bad run (the whole suite)"
    return DetailData(
        key=key,
        kind="test" if is_test else "family",
        verdict=item.verdict,
        reason=item.reason,
        outcomes=outcomes,
        signatures=signatures,
        pivot=pivot,
        daily_scores=daily,
        members=members_tv,
        repro=repro,
        repro_note=note,
    )


def load_verdict_changes(source: Source, key: str, report: Report) -> list[Any]:
    """The verdict changes of a test or family over the window, oldest first.

    Apart from load_detail: it re-judges the target as of every day's end, a second or two
    for a big family, and the rest of the detail need not wait for it.
    """
    series = _core("scoring.series")
    config = source.config
    with reading(source.path) as db:
        changes: list[Any] = series.verdict_changes(
            db, key, now=report.now, days=int(config.window_days), config=config
        )
    return changes


@dataclass(slots=True)
class QuarantineRequest:
    """What the quarantine modal collected."""

    test_id: str
    reason: str
    mode: str = "skip"
    expires_days: int | None = None
    ticket: str | None = None


def who() -> str | None:
    """None lets the core writer pick git's user.name or the login name."""
    return os.environ.get("FLAKETUI_WHO") or None


def quarantine_test(
    source: Source, request: QuarantineRequest, now: datetime, scored_at: datetime | None = None
) -> str:
    """Write the skip-file entry and its audit row; return the notification text.

    now stamps the entry and the audit row; its scores are taken as of scored_at (the moment
    the app's scores are as of; default now).
    """
    quarantine_mod = _core("quarantine.actions")
    with writing(source.path) as db:
        # The dialog is the confirmation: an entry the test already has is replaced, and the
        # notification says so.
        done = quarantine_mod.quarantine(
            db,
            source.skip_path,
            request.test_id,
            reason=request.reason,
            mode=request.mode,
            expires_days=request.expires_days,
            ticket=request.ticket or None,
            now=now,
            who=who(),
            source="app",
            config=source.config,
            replace=True,
            repo_root=source.owners_from,
            scored_at=scored_at,
        )
    count = len(done.entries)
    what = request.test_id if count == 1 else f"{count} params of {request.test_id}"
    where = source.skip_display or source.skip_path
    if not done.replaced:
        return f"Quarantined {what} ({request.mode}) in {where}"
    if count == 1:
        (old,) = done.replaced.values()
        return (
            f"Updated {what} ({request.mode}) in {where}; it was {old.mode}, reason {old.reason!r}"
        )
    replaced = len(done.replaced)
    return (
        f"Quarantined {what} ({request.mode}) in {where}; {replaced} of them had an entry, "
        "now replaced"
    )


def release_test(source: Source, test_id: str, now: datetime) -> str:
    """Remove the skip-file entry and append the audit row; return the notification text."""
    quarantine_mod = _core("quarantine.actions")
    with writing(source.path) as db:
        removed = quarantine_mod.release(
            db, source.skip_path, test_id, reason="released from the app", now=now,
            who=who(), source="app",
        )  # fmt: skip
    what = test_id if len(removed) == 1 else f"{len(removed)} params of {test_id}"
    return f"Released {what} from {source.skip_display or source.skip_path}"


def load_outages(source: Source) -> list[Any]:
    """The suspected outages awaiting review (core.history.outages.Outage), oldest first."""
    outages = _core("history.outages")
    with reading(source.path) as db:
        pending: list[Any] = outages.pending_outages(db.conn)
    return pending


def review_outage(source: Source, tag: str, *, accept: bool) -> str:
    """Accept or reject one proposed outage, as `flaketui incident accept|reject` do.

    Returns the notification text.
    """
    outages = _core("history.outages")
    with writing(source.path) as db:
        if accept:
            runs = outages.accept_outage(db, tag)
            stay = "stays" if runs == 1 else "stay"
            return f"Outage {tag} accepted: {plural(runs, 'run')} {stay} excluded from scoring"
        runs = outages.reject_outage(db, tag)
        counts = "counts" if runs == 1 else "count"
        return f"Outage {tag} rejected: {plural(runs, 'run')} {counts} again"


EXPORT_FORMATS = ("json", "csv", "markdown", "deselect", "list")


def export_tests(
    tests: list[TestVerdict],
    report: Report,
    fmt: str,
    path: Path,
    *,
    make_folder: Path | None = None,
) -> str:
    """Render the listed tests with the core exporter and write them; return the notification.

    make_folder: the default folder, created when the path lies in it (another folder must exist).
    """
    if fmt not in EXPORT_FORMATS:
        raise FlaketuiError(f"unknown export format {fmt!r} (one of {', '.join(EXPORT_FORMATS)})")
    exports = _core("output.exports")
    text = exports.render_tests(tests, fmt, report=report)
    try:
        if make_folder is not None and path.parent == make_folder:
            make_folder.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise FlaketuiError(f"{path}: cannot write ({exc.strerror})") from exc
    return f"Exported {plural(len(tests), 'test')} as {fmt} to {path}"
