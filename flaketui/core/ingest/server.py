"""Ingest into a history server: the ordinary writer fills a staging history, one push lands it.

Parsing, redaction, signatures and attempt numbering are the SQLite ingest's own; the push
(flaketui.core.history.pg.push) makes the run whole-or-absent on the server and idempotent by
run id.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flaketui.core.config import Config
from flaketui.core.errors import ReportError
from flaketui.core.history.pg.connect import connect, server_errors
from flaketui.core.history.pg.push import push_history
from flaketui.core.history.pg.staging import staging_history
from flaketui.core.ingest.runmeta import apply_defaults
from flaketui.core.ingest.writer import (
    IngestResult,
    content_run_id,
    file_sha256,
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
                    " WHERE r.run_id = %s",
                    (full.run_id,),
                ).fetchall()
            }
        new = [path for digest, path in hashes.items() if digest not in known]
        if not new:
            return IngestResult(str(full.run_id), False, 0, len(hashes), 0, _tests(pg, url, full))
        with staging_history() as staged:
            result = ingest_reports(
                staged, new, full, config=config, source=source, report_format=report_format
            )
            if result.empty:
                return result
            with server_errors(url, "writing the run (nothing was recorded; retry)"):
                summary = push_history(pg, staged, append=True)
            tests = _tests(pg, url, full)
    finally:
        pg.close()
    return IngestResult(
        run_id=result.run_id,
        created=summary.runs_added > 0,
        files_ingested=len(new),
        files_skipped=len(hashes) - len(new),
        results=summary.results_added,
        tests=tests,
    )


def _tests(pg: Any, url: str, meta: RunMeta) -> int:
    """How many tests the server's copy of the run holds."""
    with server_errors(url, "counting the run's tests"):
        row = pg.execute(
            "SELECT count(DISTINCT test) FROM results"
            " WHERE run = (SELECT id FROM runs WHERE run_id = %s)",
            (meta.run_id,),
        ).fetchone()
    return int(row[0])
