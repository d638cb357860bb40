"""Ingest into a history server: the ordinary writer fills a staging history, one push lands it.

Parsing, redaction, signatures and attempt numbering are the SQLite ingest's own; the push
(flaketui.core.history.pg.push) makes the run whole-or-absent on the server and idempotent by
run id. A report appended to a run the server holds is read against the server's copy of the
run (_server_clashes), so a same-named JUnit test of another file is told apart there as in a
history file, and the push moves the server's attempts of a plain id that the run's files turn
out to share to their file's id.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from flaketui.core.config import Config
from flaketui.core.errors import FlaketuiError, ReportError
from flaketui.core.history.pg.connect import connect, server_errors
from flaketui.core.history.pg.push import push_history
from flaketui.core.history.pg.schema import run_among, same_run
from flaketui.core.history.pg.staging import staging_history
from flaketui.core.ingest.manifest import ManifestSummary, land_manifest
from flaketui.core.ingest.runmeta import STORED_COLUMNS, apply_defaults, check_stored_run
from flaketui.core.ingest.writer import (
    IngestResult,
    StoredClashes,
    content_run_id,
    file_sha256,
    ingest_batch,
    ingest_reports,
)
from flaketui.core.models import RunMeta


def ingest_to_server(
    url: str,
    paths: Sequence[Path],
    meta: RunMeta,
    *,
    config: Config = Config(),  # noqa: B008 - frozen dataclass, safe as a default
    source: str = "junit",
    report_format: str | None = None,
) -> IngestResult:
    """Ingest report files as ONE run into the server at url (see ingest_reports)."""
    hashes = {file_sha256(Path(path)): Path(path) for path in paths}
    if not hashes:
        raise ReportError("no report file given")
    full = apply_defaults(meta, config, fallback_run_id=content_run_id(hashes))
    pg = connect(url)  # a bad address fails before any report is parsed
    try:
        with server_errors(url, "reading the run's report files"):
            known = {
                str(row[0])
                for row in pg.execute(
                    "SELECT f.content_hash FROM run_files AS f JOIN runs AS r ON r.id = f.run"
                    f" WHERE {same_run('r.run_id', '%s')}",
                    (full.run_id, full.run_id),
                ).fetchall()
            }
        new = [path for digest, path in hashes.items() if digest not in known]
        if not new:
            return IngestResult(str(full.run_id), False, 0, len(hashes), 0, _tests(pg, url, full))
        with server_errors(url, "reading the run"):
            stored = pg.execute(
                f"SELECT {STORED_COLUMNS} FROM runs WHERE {same_run('run_id', '%s')}",
                (full.run_id, full.run_id),
            ).fetchone()
        check_stored_run(str(full.run_id), stored, full)
        elsewhere = None if stored is None else _server_clashes(pg, url, str(full.run_id))
        with staging_history() as staged:
            result = ingest_reports(
                staged,
                new,
                full,
                config=config,
                source=source,
                report_format=report_format,
                elsewhere=elsewhere,
            )
            if result.empty:
                return result
            with server_errors(url, "writing the run", note="nothing was recorded"):
                summary = push_history(
                    pg,
                    staged,
                    append=True,
                    shared={result.run_id: result.shared},
                    count_tests=True,  # counted before the commit: nothing is read after it
                )
    finally:
        pg.close()
    return IngestResult(
        run_id=result.run_id,
        created=summary.runs_added > 0,
        files_ingested=len(new),
        files_skipped=len(hashes) - len(new),
        results=summary.results_added,
        tests=summary.tests.get(result.run_id, 0),
        left_untidy=summary.left_untidy,
    )


def ingest_manifest_to_server(
    url: str,
    manifest: Path,
    *,
    config: Config = Config(),  # noqa: B008 - frozen dataclass, safe as a default
    progress: Callable[[int, int], None] | None = None,
) -> ManifestSummary:
    """Backfill a manifest into the server at url (see flaketui.core.ingest.manifest).

    Each batch of runs is ingested into a staging history with the ordinary writer and pushed
    in one server transaction, so a process killed mid-way leaves whole batches only. Report
    files the server's copy of a run already has are skipped, as ingest skips them: running the
    manifest again lands what is missing and adds nothing else. The server is first contacted
    once the manifest has been read (a bad manifest leaves the server untouched).
    """
    connections: list[Any] = []

    def land(
        runs: Sequence[tuple[Sequence[Path], RunMeta]], formats: Sequence[str | None]
    ) -> list[IngestResult | FlaketuiError]:
        if not connections:
            connections.append(connect(url))
        return _land_batch(connections[0], url, runs, formats, config)

    try:
        return land_manifest(manifest, land, progress=progress)
    finally:
        for pg in connections:
            pg.close()


def _land_batch(
    pg: Any,
    url: str,
    runs: Sequence[tuple[Sequence[Path], RunMeta]],
    formats: Sequence[str | None],
    config: Config,
) -> list[IngestResult | FlaketuiError]:
    """One manifest batch: each run's new report files staged, then one push."""
    outcomes: list[IngestResult | FlaketuiError | None] = [None] * len(runs)
    prepared: list[tuple[int, dict[str, Path], RunMeta]] = []
    for index, (paths, meta) in enumerate(runs):
        try:
            hashes = {file_sha256(Path(path)): Path(path) for path in paths}
            if not hashes:
                raise ReportError("no report file given")
            full = apply_defaults(meta, config, fallback_run_id=content_run_id(hashes))
        except FlaketuiError as exc:
            outcomes[index] = exc
            continue
        prepared.append((index, hashes, full))
    run_ids = [str(full.run_id) for _, _, full in prepared]
    known: dict[str, set[str]] = {}
    with server_errors(url, "reading the runs' report files"):
        present = {
            str(row[0]): tuple(row[1:])
            for row in pg.execute(
                f"SELECT run_id, {STORED_COLUMNS} FROM runs WHERE {run_among('run_id')}",
                (run_ids, run_ids),
            ).fetchall()
        }
        for run_id, digest in pg.execute(
            "SELECT r.run_id, f.content_hash FROM run_files AS f JOIN runs AS r ON r.id = f.run"
            f" WHERE {run_among('r.run_id')}",
            (run_ids, run_ids),
        ).fetchall():
            known.setdefault(str(run_id), set()).add(str(digest))
    staged_runs: list[tuple[int, list[Path], RunMeta, int]] = []
    for index, hashes, full in prepared:
        seen = known.get(str(full.run_id), set())
        new = [path for digest, path in hashes.items() if digest not in seen]
        if new:
            try:
                check_stored_run(str(full.run_id), present.get(str(full.run_id)), full)
            except FlaketuiError as exc:
                outcomes[index] = exc
                continue
            staged_runs.append((index, new, full, len(hashes) - len(new)))
        else:  # every report already in the server's run: nothing to add
            outcomes[index] = IngestResult(str(full.run_id), False, 0, len(hashes), 0, 0)
    if staged_runs:
        with staging_history() as staged:
            results = ingest_batch(
                staged,
                [(new, full) for _, new, full, _ in staged_runs],
                config=config,
                report_formats=[formats[index] for index, _, _, _ in staged_runs],
                elsewhere=[
                    _server_clashes(pg, url, str(full.run_id))
                    if str(full.run_id) in present
                    else None
                    for _, _, full, _ in staged_runs
                ],
            )
            shared: dict[str, frozenset[str]] = {}
            for result in results:
                if isinstance(result, IngestResult) and result.shared:
                    shared[result.run_id] = shared.get(result.run_id, frozenset()) | result.shared
            with server_errors(url, "writing a batch of runs", note="it was not recorded"):
                pushed = push_history(pg, staged, append=True, shared=shared)
        untidy = pushed.left_untidy  # the batch's one push: counted once, on its first run
        for (index, _, full, skipped), result in zip(staged_runs, results, strict=True):
            if isinstance(result, IngestResult):
                result = replace(
                    result,
                    created=str(full.run_id) not in present,
                    files_skipped=skipped,
                    left_untidy=untidy,
                )
                untidy = 0
            outcomes[index] = result
    return [outcome for outcome in outcomes if outcome is not None]


def _server_clashes(pg: Any, url: str, run_id: str) -> StoredClashes:
    """Which of some new cases' ids the server's copy of a run holds as another file's (testids'
    stored_clashes over its tests and the files their attempts name), read once asked."""

    def stored(origins: dict[str, str]) -> set[str]:
        from flaketui.core.testids import stored_clashes

        with server_errors(url, "reading the run's tests"):
            held = pg.execute(
                "SELECT DISTINCT t.test_id, x.origin FROM results AS x"
                " JOIN tests AS t ON t.id = x.test"
                f" WHERE x.run = (SELECT id FROM runs WHERE {same_run('run_id', '%s')})",
                (run_id, run_id),
            ).fetchall()
        return stored_clashes(((str(t), o) for t, o in held), origins)

    return stored


def _tests(pg: Any, url: str, meta: RunMeta) -> int:
    """How many tests the server's copy of the run holds (a run nothing is pushed to: a push
    counts them itself, before its commit)."""
    with server_errors(url, "counting the run's tests"):
        row = pg.execute(
            "SELECT count(DISTINCT test) FROM results"
            f" WHERE run = (SELECT id FROM runs WHERE {same_run('run_id', '%s')})",
            (meta.run_id, meta.run_id),
        ).fetchone()
    return int(row[0])
