"""Write test results into the history: one run per transaction, idempotent per report file.

Choices made here:
- A run's metadata is fixed by the ingest that creates it; later shards only add results, and
  one giving a suite, branch, commit, timestamp or worker count other than the run's is refused
  (runmeta.check_stored_run; a value one side leaves unknown is no disagreement).
- Repeats of a test id within a run (in one file, across shard files or across recorder batches)
  are numbered on from the run's highest attempt for that test; each attempt records its leg,
  the report file it came from. Repeats within one file (one leg) are retries of each other;
  the same test in two files of a run (matrix legs, shards) ran twice.
- A leg mixing passes and failures in any order is ``flaky``; the run's per-test outcome and
  ``bad`` combine the legs' (flaketui.core.history.derived_rows: any failed leg makes it
  ``fail``), whatever order the files came in.
- Same-named JUnit tests of different files are different tests across the reports of a run as
  within one (_shared_names): each attempt of a case naming its file stores the file (its
  origin), so a later shard tells the run's earlier case under a plain id from its own case of
  another file. Both are then prefixed with their file: the new case as it is parsed, the
  stored attempts moved to their prefixed id in the same transaction
  (derived_rows.separate_stored). The run's tests are the same whether its shards come in one
  ingest or several, in any order, or in histories merged afterwards.
- Reports with no test case create no run (``IngestResult.empty``); a case-less shard of an
  existing run is recorded as ingested.
- Without a run id the run is named ``report-<16 hex>`` from the sha256 of its files' hashes, so
  the same file set always maps to the same run.
- A run's raw rows land whole in its transaction; its rollups are folded later, together with
  other runs' (FOLD_RUNS), and until then readers score the raw rows.
"""

from __future__ import annotations

import hashlib
import sqlite3
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from flaketui.core.config import Config
from flaketui.core.errors import FlaketuiError, ReportError
from flaketui.core.history.derived_rows import refresh_test_runs, separate_stored
from flaketui.core.history.runs import create_run, find_run
from flaketui.core.history.store import foreign_keys_off, transaction
from flaketui.core.ingest.rows import CaseRow, RunWriter, bulk_settings, leg_of
from flaketui.core.ingest.run_journal import RunJournal
from flaketui.core.ingest.runmeta import STORED_COLUMNS, apply_defaults, check_stored_run
from flaketui.core.ingest.scheme import record_scheme
from flaketui.core.models import CaseResult, RunMeta
from flaketui.core.rollups import pending as rollups_pending
from flaketui.core.testids import stored_clashes
from flaketui.core.timeutil import to_iso

if TYPE_CHECKING:
    from flaketui.core.history.dbhandle import Connected
    from flaketui.core.ingest.junit import SharedNames

__all__ = [
    "IngestResult",
    "RunRecorder",
    "content_run_id",
    "file_sha256",
    "ingest_batch",
    "ingest_reports",
    "refresh_test_runs",
]

HASH_CHUNK_BYTES = 1 << 20
# The test ids a copy of a run kept elsewhere (a history server's) holds as another file's,
# of some new cases' ids with their files (see flaketui.core.testids.stored_clashes).
StoredClashes = Callable[[dict[str, str]], set[str]]
# A single-run ingest leaves its run's rollups to a later fold (pending.defer), and folds the
# waiting runs together once FOLD_RUNS of them wait or the run itself is big: a fold rewrites a
# day's rollup pages once for all its runs, where a fold per run rewrote them every run. Readers
# meanwhile fold first or score the raw rows (flaketui.core.history.store.fold_deferred).
FOLD_RUNS = 16
FOLD_RESULTS = 20_000


@dataclass
class IngestResult:
    """What one ingest did to the history."""

    run_id: str
    created: bool  # the run did not exist before
    files_ingested: int
    files_skipped: int  # already ingested into this run
    results: int  # result rows (attempts) added
    tests: int  # distinct tests in the run after the ingest
    empty: bool = False  # no test case at all: no run was created
    # Test ids that files of different reports of the run share (SharedNames): a push applies
    # them to the server's copy of the run (flaketui.core.history.pg.push.push_history).
    shared: frozenset[str] = field(default_factory=frozenset)
    # On a history server: tests its push left untidy after its commit (PushSummary.left_untidy).
    left_untidy: int = 0


def file_sha256(path: Path) -> str:
    """The sha256 of a report file; ReportError when it is missing or not a regular file.

    A pipe or a device (`<(gunzip -c r.xml.gz)`, /dev/stdin) is refused: a report is read
    twice, for this hash and then for its cases, and a stream gives its bytes only once (the
    parser would find it empty) or never ends.
    """
    try:
        mode = path.stat().st_mode  # not open(): opening a named pipe waits for a writer
    except FileNotFoundError:
        name = "-: no such file (reports are files; standard input is not read)"
        raise ReportError(name if str(path) == "-" else f"{path}: no such file") from None
    except OSError as exc:
        raise ReportError(f"{path}: cannot read ({exc.strerror})") from None
    if stat.S_ISDIR(mode):
        raise ReportError(
            f"{path}: is a directory, not a report file; name the reports in it ({path / '*.xml'})"
        )
    if not stat.S_ISREG(mode):
        raise ReportError(
            f"{path}: not a regular file (a pipe or a device); a report is read twice,"
            " so write it to a file first"
        )
    digest = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(HASH_CHUNK_BYTES):
                digest.update(chunk)
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file") from None
    except OSError as exc:
        raise ReportError(f"{path}: cannot read ({exc.strerror})") from None
    return digest.hexdigest()


def content_run_id(hashes: Iterable[str]) -> str:
    """A run id derived from the content hashes of a run's report files."""
    joined = "\n".join(sorted(set(hashes)))
    return "report-" + hashlib.sha256(joined.encode("ascii")).hexdigest()[:16]


# ---- public API -------------------------------------------------------------------------------


def ingest_reports(
    db: Connected | sqlite3.Connection,
    paths: Sequence[Path],
    meta: RunMeta,
    *,
    config: Config = Config(),  # noqa: B008 - frozen dataclass, safe as a default
    source: str = "junit",
    report_format: str | None = None,
    elsewhere: StoredClashes | None = None,
    stage: bool = False,
) -> IngestResult:
    """Ingest report files as ONE run, atomically and idempotently; ReportError on bad input.

    report_format: junit, ctrf, trx or tap for every file; None tells each file's by content.
    elsewhere: what the run's copy on a history server holds (StoredClashes), for an ingest
    staged to be pushed there.
    stage: a new run's per-test rows wait, keyed by run, for the fold to file them into
    test_runs with the other waiting runs' (flaketui.core.rollups.pending; `flaketui ingest`,
    which leaves its run to the next fold). Until then the only readers that see them are those
    that file or fold first: a caller reading test_runs on this connection afterwards calls
    pending.file_waiting first.
    """
    from flaketui.core.rollups import build as rollups  # see RunRecorder.add

    hashes, full = _prepare(paths, meta, config)
    conn = db if isinstance(db, sqlite3.Connection) else db.conn
    with bulk_settings(conn):
        with transaction(conn):
            result = _ingest_run(
                conn, hashes, full, config, source, report_format, elsewhere, stage=stage
            )
        if result.results >= FOLD_RESULTS or rollups_pending.pending_runs(conn) >= FOLD_RUNS:
            # After the run's commit: its rows stand whatever becomes of the fold.
            with transaction(conn):
                rollups.fold_pending(conn)
    return result


def ingest_batch(
    db: Connected | sqlite3.Connection,
    runs: Sequence[tuple[Sequence[Path], RunMeta]],
    *,
    config: Config = Config(),  # noqa: B008 - frozen dataclass, safe as a default
    source: str = "junit",
    report_formats: Sequence[str | None] | None = None,
    elsewhere: Sequence[StoredClashes | None] | None = None,
) -> list[IngestResult | FlaketuiError]:
    """Ingest several runs in ONE transaction.

    A run refused for its input (a bad report, bad metadata) is rolled back alone and returned
    as its error, in the run's place; any other error rolls the whole batch back and is raised.
    Each run is still whole or absent, and one commit for many runs writes each page the runs
    share once instead of once per run (a backfill's per-run commits were ~30 % of its CPU).
    The batch is first written with no savepoint: SQLite copies every page changed after one
    to a temporary file, as much writing again as the batch's own. Only when a run is refused
    is the batch written again, each run behind its own savepoint.
    report_formats: one per run (see ingest_reports), or None to tell every file by content.
    elsewhere: one per run (see ingest_reports), or None.
    """
    from flaketui.core.rollups import build as rollups  # see RunRecorder.add

    formats = list(report_formats) if report_formats is not None else [None] * len(runs)
    copies = list(elsewhere) if elsewhere is not None else [None] * len(runs)
    outcomes: list[IngestResult | FlaketuiError | None] = [None] * len(runs)
    prepared = []
    for index, (paths, meta) in enumerate(runs):
        try:
            prepared.append((index, *_prepare(paths, meta, config)))
        except FlaketuiError as exc:
            outcomes[index] = exc
    if prepared:
        conn = db if isinstance(db, sqlite3.Connection) else db.conn

        def write(alone: bool) -> None:
            """The batch in one transaction; `alone`: each run behind a savepoint, a refused
            one rolled back to it, else a refused run rolls the whole batch back."""
            with bulk_settings(conn), transaction(conn):
                for index, hashes, full in prepared:
                    if alone:
                        conn.execute("SAVEPOINT flaketui_run")
                    try:
                        outcomes[index] = _ingest_run(
                            conn, hashes, full, config, source, formats[index], copies[index]
                        )
                    except FlaketuiError as exc:
                        if not alone:
                            raise
                        conn.execute("ROLLBACK TO flaketui_run")
                        outcomes[index] = exc
                    if alone:
                        conn.execute("RELEASE flaketui_run")
                rollups.fold_pending(conn)  # the batch's runs together, in its transaction

        try:
            write(alone=False)  # no savepoint: one keeps a copy of every page changed after it
        except FlaketuiError:
            write(alone=True)  # a run was refused: the batch again, each run on its own
    return [outcome for outcome in outcomes if outcome is not None]


def _prepare(
    paths: Sequence[Path], meta: RunMeta, config: Config
) -> tuple[dict[str, Path], RunMeta]:
    """The run's report files by content hash, and its metadata with defaults applied."""
    if not paths:
        raise ReportError("no report file given")
    hashes: dict[str, Path] = {}
    for path in paths:
        hashes.setdefault(file_sha256(Path(path)), Path(path))
    full = apply_defaults(meta, config, fallback_run_id=content_run_id(hashes))
    assert full.run_id is not None and full.ts is not None
    return hashes, full


def _ingest_run(
    conn: sqlite3.Connection,
    hashes: dict[str, Path],
    full: RunMeta,
    config: Config,
    source: str,
    report_format: str | None = None,
    elsewhere: StoredClashes | None = None,
    *,
    stage: bool = False,
) -> IngestResult:
    """One run's rows, rollups and files, inside the caller's transaction (`stage`: see
    ingest_reports)."""
    from flaketui.core.rollups import build as rollups  # see RunRecorder.add

    assert full.run_id is not None and full.ts is not None
    found = find_run(conn, full.run_id)
    was_empty = found is None and conn.execute("SELECT 1 FROM runs LIMIT 1").fetchone() is None
    known: set[str] = set()
    if found is not None:
        known = {
            str(row[0])
            for row in conn.execute("SELECT content_hash FROM run_files WHERE run = ?", (found[0],))
        }
    new_files = [(h, p) for h, p in hashes.items() if h not in known]
    skipped = len(hashes) - len(new_files)
    if found is not None and new_files:
        stored = conn.execute(
            f"SELECT {STORED_COLUMNS} FROM runs WHERE id = ?", (found[0],)
        ).fetchone()
        check_stored_run(full.run_id, tuple(stored), full)
    run_pk, ts = found if found is not None else (None, to_iso(full.ts))
    names = _shared_names(conn, run_pk, [path for _, path in new_files], report_format, elsewhere)
    writer: RunWriter | None = None
    added = 0
    for content_hash, path in new_files:
        cases = iter_cases(path, report_format, names)
        first = next(cases, None)
        if first is None:
            continue
        if run_pk is None:
            run_pk = create_run(conn, full, source, finished=1)
        if writer is None:
            if not rollups.enabled(conn):
                # Build them now, before this run's rows exist: the hook then adds the run
                # (bounded by its slices) instead of rebuilding with the run in one go,
                # which held a big report's whole run in memory.
                rollups.rebuild(conn)
            writer = RunWriter(
                conn, run_pk, ts, config, exclusive=True, stage=stage and found is None
            )
        writer.leg = leg_of(content_hash)
        added += writer.write_rows(_chain(first, cases))
    if run_pk is None:
        # No test case anywhere: leave the history untouched.
        return IngestResult(full.run_id, False, 0, skipped, 0, 0, empty=True)
    conn.executemany(
        "INSERT OR IGNORE INTO run_files (run, content_hash) VALUES (?, ?)",
        [(run_pk, h) for h, _ in new_files],
    )
    shared = frozenset(names.decided or ()) if names is not None else frozenset()
    if writer is not None:
        if found is not None and shared:
            separate_stored(conn, run_pk, ts, shared)
        writer.refresh_dirty()
        rollups_pending.defer(conn, run_pk)  # folded with others (see FOLD_RUNS)
    if was_empty:
        # Every stored message was signed just now: record the scheme (see resign).
        record_scheme(conn, config.mask_patterns)
    tests = int(
        conn.execute(
            "SELECT (SELECT count(*) FROM test_runs WHERE run = :run)"
            f" + (SELECT count(*) FROM {rollups_pending.WAITING_TABLE} WHERE run = :run)",
            {"run": run_pk},
        ).fetchone()[0]
    )
    return IngestResult(
        full.run_id, found is None, len(new_files), skipped, added, tests, shared=shared
    )


def iter_cases(
    path: Path, report_format: str | None = None, names: SharedNames | None = None
) -> Iterator[CaseRow]:
    """The parser's case rows of one report, in its format (given, or told by content; the
    parsers are imported on first use: the recorder never parses reports). A module-level name
    so the crash tests can wrap it."""
    from flaketui.core.ingest.formats import iter_report_rows

    return iter_report_rows(path, report_format, names)


def _shared_names(
    conn: sqlite3.Connection,
    run_pk: int | None,
    paths: list[Path],
    report_format: str | None,
    elsewhere: StoredClashes | None = None,
) -> SharedNames | None:
    """The run-wide rule for the JUnit reports among paths (junit.SharedNames).

    Tests of different files sharing a name are different tests wherever the run's reports put
    them: shards of a sharded job (jest --shard, pytest-split, parallel forks) each hold other
    files, and a name two shards' files share gets its file as a prefix in both, as it would in
    one report. A run appended to (a later ingest, a manifest line of a stored run) adds the
    names it holds under a file-prefixed id, and those it holds under the plain id from another
    file: every attempt of a case naming its file stores the file. Its attempts under a plain id
    from an unknown file (the pytest recorder's, or stored before files were) do not say whose
    they are, so a later shard's case of that name joins them as a leg, as a matrix leg of the
    same file does.
    """
    from flaketui.core.ingest.formats import check_format, sniff_format

    junit_paths = [p for p in paths if (check_format(report_format) or sniff_format(p)) == "junit"]
    if not junit_paths or (len(junit_paths) == 1 and run_pk is None and elsewhere is None):
        return None  # one report of a new run decides alone, as before
    from flaketui.core.ingest.junit import SharedNames

    checks = [c for c in (_clashes_in_run(conn, run_pk), elsewhere) if c is not None]
    if not checks:
        return SharedNames(junit_paths)

    def stored(origins: dict[str, str]) -> set[str]:
        found: set[str] = set()
        for check in checks:
            found |= check(origins)
        return found

    return SharedNames(junit_paths, stored)


def _clashes_in_run(conn: sqlite3.Connection, run_pk: int | None) -> StoredClashes | None:
    """Which of some new cases' ids the stored run holds as another file's (testids'
    stored_clashes over the run's tests and the files their attempts name)."""
    if run_pk is None:
        return None

    def stored(origins: dict[str, str]) -> set[str]:
        held = conn.execute(
            "SELECT DISTINCT t.test_id, x.origin FROM results AS x JOIN tests AS t"
            " ON t.id = x.test WHERE x.run = ?",
            (run_pk,),
        )
        return stored_clashes(held, origins)

    return stored


def _chain(first: CaseRow, rest: Iterator[CaseRow]) -> Iterator[CaseRow]:
    yield first
    yield from rest


class RunRecorder(RunJournal):
    """Incremental writer for one run (finished=0 until finish()): batches of attempts written
    with add(), or appended to the attempt journal with append() (RunJournal, which the pytest
    plugin uses alone).

    The run row is created by the first add() or append() with attempts (an empty session leaves
    no run); a run id that already exists is appended to (sharded sessions sharing a CI run id)
    and marked unfinished until finish().
    """

    def __init__(
        self,
        db: Connected | sqlite3.Connection,
        meta: RunMeta,
        *,
        source: str = "pytest",
        config: Config = Config(),  # noqa: B008 - frozen dataclass, safe as a default
        defer_rollups: bool = False,
    ) -> None:
        super().__init__(
            db if isinstance(db, sqlite3.Connection) else db.conn,
            meta,
            source=source,
            config=config,
        )
        # Deferred: the batches only list the run in rollup_pending, and the next writer or
        # reader that may write folds it (rollups.fold_pending), off the test session's clock.
        self.defer_rollups = defer_rollups
        self._writer: RunWriter | None = None
        # PRAGMA data_version inside our last transaction: another connection's commit changes
        # it, and then the writer's knowledge of which tests the run holds is re-read.
        self._data_version: int | None = None

    def _start(self, conn: sqlite3.Connection) -> RunWriter:
        run_pk, ts = self._start_run(conn)
        return RunWriter(conn, run_pk, ts, self.config, exclusive=True)

    def add(self, cases: Iterable[CaseResult], *, leg: int | None = None) -> None:
        """Record a batch of attempts in one transaction; later attempts of a test append.

        leg: the report file the attempts came from (rows.leg_of its hash), or None for the
        recorder's own attempts; attempts of one leg are retries of each other.
        """
        batch = list(cases)
        if not batch or not any(case.attempts for case in batch):
            return
        conn = self.conn
        with foreign_keys_off(conn), transaction(conn):
            version = int(conn.execute("PRAGMA data_version").fetchone()[0])
            if self._writer is None:
                # The rollups' code is imported only by a recorder that folds its own runs: one
                # that defers them (defer_rollups) loads none of it.
                if not self.defer_rollups:
                    from flaketui.core.rollups import build as rollups

                    if not rollups.enabled(conn):
                        # Built before this batch's rows exist (cheap on a new history): the
                        # hook then adds the batch instead of rebuilding with it. A deferred run
                        # needs none: its fold builds missing rollups from every raw row.
                        rollups.rebuild(conn)
                writer = self._start(conn)
            else:
                writer = self._writer
                if version != self._data_version:
                    # Someone else committed since our last batch (maybe to this run: sharded
                    # sessions share a CI run id): what the run holds must be read again.
                    writer.track_run()
            try:
                touched: set[int] = set()
                writer.leg = leg
                added = writer.write(batch, touched)
                writer.refresh_dirty(touched)
                if self.defer_rollups:
                    rollups_pending.defer(conn, writer.run_pk)
                else:
                    from flaketui.core.rollups import build as rollups

                    rollups.after_write(conn, writer.run_pk, touched)
            except BaseException:
                writer.forget()  # its cached ids may name rows being rolled back
                raise
        self._writer = writer
        self._data_version = version
        self.results += added
