"""`flaketui ingest`: load test reports (one run) or a backfill manifest into a history."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path

import click

from flaketui.cli import cli
from flaketui.cli.commands.incident import propose_outages
from flaketui.cli.commands.resign import resign_if_stale
from flaketui.cli.echo import echo_line, echo_text
from flaketui.cli.history_address import HISTORY_ADDRESS, shown
from flaketui.core.config import load_config
from flaketui.core.errors import FlaketuiError
from flaketui.core.history.store import history_file
from flaketui.core.ingest.formats import REPORT_FORMATS, reports_date, run_date, sniff_format
from flaketui.core.ingest.junit import reports_run_info
from flaketui.core.ingest.manifest import ManifestSummary, ingest_manifest, manifest_text
from flaketui.core.ingest.report_time import ZONE_STEP
from flaketui.core.ingest.runmeta import AGREED_FIELDS, INCIDENT_VAR, resolve_run_meta
from flaketui.core.ingest.writer import (
    IngestResult,
    content_run_id,
    file_sha256,
    ingest_reports,
)
from flaketui.core.models import BRANCH_KINDS, MAX_WORKER_COUNT, RunMeta
from flaketui.core.timeutil import parse_iso, to_iso, utc_now
from flaketui.core.words import plural

MAX_REFUSED_SHOWN = 50


def _worker_count(text: str | None) -> int | None:
    """Parse --worker-count here so a bad value is a one-line error, not a usage screen."""
    if text is None:
        return None
    try:
        count = int(text)
    except ValueError:
        raise FlaketuiError(f"--worker-count must be a whole number, got {text!r}") from None
    if count < 1:
        raise FlaketuiError(f"--worker-count must be at least 1, got {count}")
    if count > MAX_WORKER_COUNT:
        raise FlaketuiError(f"--worker-count must be at most {MAX_WORKER_COUNT}, got {text}")
    return count


@cli.command("ingest")
@click.argument("db", type=HISTORY_ADDRESS)
@click.argument("reports", nargs=-1, type=click.Path(path_type=Path))
@click.option("--run-id", help="Run identity (default: from CI variables, else content hash).")
@click.option("--suite", help="Suite name (default: from CI, else 'default').")
@click.option("--branch", help="Branch the run tested (default: from CI, else git).")
@click.option("--branch-kind", metavar="|".join(BRANCH_KINDS), help="Default: from the branch.")
@click.option("--commit", "commit_sha", metavar="SHA", help="Commit tested (default: CI/git).")
@click.option(
    "--timestamp", metavar="ISO",
    help="When the run happened (default: the reports' own plausible timestamp, else now).",
)  # fmt: skip
@click.option("--worker-count", metavar="N", help="Parallel workers of the run (default 1).")
@click.option(
    "--changed-file", "changed_files", multiple=True, metavar="PATH",
    help="A file the commit changed (repeatable; default: from git).",
)  # fmt: skip
@click.option(
    "--incident", metavar="TAG",
    help="Tag the run as part of incident TAG, so that scoring leaves it out (default: "
    "$FLAKETUI_INCIDENT).",
)  # fmt: skip
@click.option("--runner-host", metavar="H", help="Machine that ran the tests (default: this).")
@click.option("--ci-url", metavar="URL", help="Link to the CI job.")
@click.option(
    "--manifest", type=click.Path(path_type=Path),
    help="Backfill: a JSON-lines file, one run (or shard) per line; format: docs/ingest.md.",
)  # fmt: skip
@click.option("--no-detect", is_flag=True, help="Do not read CI variables or git.")
@click.option(
    "--format", "report_format", type=click.Choice(REPORT_FORMATS),
    help="Read every report in this format (default: told by content: JUnit XML, CTRF JSON, "
    ".NET TRX or TAP).",
)  # fmt: skip
def ingest_command(
    db: Path | str,
    reports: tuple[Path, ...],
    run_id: str | None,
    suite: str | None,
    branch: str | None,
    branch_kind: str | None,
    commit_sha: str | None,
    timestamp: str | None,
    worker_count: str | None,
    changed_files: tuple[str, ...],
    incident: str | None,
    runner_host: str | None,
    ci_url: str | None,
    manifest: Path | None,
    no_detect: bool,
    report_format: str | None,
) -> None:
    """Ingest REPORTS (JUnit XML, CTRF JSON, .NET TRX or TAP) into history DB as one run
    (shards of one run: give them all, or ingest each with the same --run-id). A report
    already ingested into the run is skipped. DB is a history file or a postgresql:// URL of a
    shared history server.
    """
    if manifest is not None:
        if reports:
            raise FlaketuiError("give report files or --manifest, not both")
        flags = (run_id, suite, branch, branch_kind, commit_sha, timestamp, worker_count,
                 incident, runner_host, ci_url, report_format)  # fmt: skip
        if changed_files or any(flag is not None for flag in flags):
            raise FlaketuiError(
                "with --manifest, run metadata and formats come from the manifest's lines"
            )
        _ingest_manifest(db, manifest)
        return
    if not reports:
        raise FlaketuiError("give at least one report file (or --manifest runs.jsonl)")
    if branch_kind is not None and branch_kind not in BRANCH_KINDS:
        raise FlaketuiError(f"--branch-kind must be one of {', '.join(BRANCH_KINDS)}")
    meta = RunMeta(
        run_id=run_id,
        suite=suite,
        branch=branch,
        branch_kind=branch_kind,
        commit_sha=commit_sha,
        ts=parse_iso(timestamp) if timestamp is not None else None,
        worker_count=_worker_count(worker_count),
        runner_host=runner_host,
        ci_url=ci_url,
        incident=incident,
        changed_files=list(changed_files),
    )
    # What the flags give must agree with a run the reports are added to (AGREED_FIELDS).
    meta.given = frozenset(name for name in AGREED_FIELDS if getattr(meta, name) is not None)
    config = load_config()
    # Check the reports before the history is opened, so a typo never creates an empty file.
    hashes = [file_sha256(path) for path in reports]
    if meta.ts is None:
        # The manifest's rule: an archived report re-ingested later keeps the day it ran.
        meta.ts = _dated_by_reports(reports, report_format)
    elif meta.ts > utc_now():
        echo_text(
            f"warning: --timestamp {to_iso(meta.ts)} is after now: reports, check and the app"
            " leave the run out until then (or when given a later --now)",
            err=True,
        )
    # What JUnit reports say about where they ran beats what this machine would guess.
    junit = [path for path in reports if (report_format or sniff_format(path)) == "junit"]
    for dimension, value in reports_run_info(junit, config.junit_properties).items():
        if getattr(meta, dimension) is None:
            setattr(meta, dimension, value)
    resolved = resolve_run_meta(
        meta,
        env=os.environ,
        cwd=Path.cwd(),
        config=config,
        detect=not no_detect,
        fallback_run_id=content_run_id(hashes),
    )
    if isinstance(db, str):
        from flaketui.core.ingest.server import ingest_to_server

        result = ingest_to_server(
            db, list(reports), resolved, config=config, report_format=report_format
        )
        # A server keeps raw runs; its replicas propose outages.
        _show_ingest(result, len(reports), resolved.incident)
        return
    # The runs waiting for their rollups are left to ingest's own cadence (writer.FOLD_RUNS):
    # folded together there, or by the next reader, not one run per command; so are their
    # per-test rows, kept by run until that fold files them (`stage`).
    with history_file(db, keep_if_empty=False, fold_later=True) as history:
        result = ingest_reports(
            history.conn,
            list(reports),
            resolved,
            config=config,
            report_format=report_format,
            stage=True,
        )
        resign_if_stale(history, config.mask_patterns)
    _show_ingest(result, len(reports), resolved.incident)
    if not result.empty:
        with history_file(db, fold_later=True) as history:
            propose_outages(history, config, shown(db))


def _show_ingest(result: IngestResult, reports: int, incident: str | None) -> None:
    if result.empty:
        echo_text(f"no test cases in {plural(reports, 'report')}: no run recorded")
        return
    state = "new run" if result.created else "existing run"
    if result.created and incident is not None:
        state += f", incident {incident}"  # shown: it may come from FLAKETUI_INCIDENT
    skipped = f", {result.files_skipped} already ingested" if result.files_skipped else ""
    # Files given twice (or with the same content as another) are read once.
    repeats = reports - result.files_ingested - result.files_skipped
    if repeats > 0:
        skipped += f", {plural(repeats, 'duplicate')} skipped"
    echo_line(
        f"run {result.run_id} ({state}): "
        f"{plural(result.files_ingested, 'file')} ingested{skipped}, "
        f"{plural(result.results, 'result')} added, {plural(result.tests, 'test')} in the run"
    )
    if result.left_untidy:  # a push to a server's only
        from flaketui.core.history.pg.push import untidy_line

        echo_text(untidy_line(result.left_untidy))


def _ingest_manifest(db: Path | str, manifest: Path) -> None:
    """Backfill from a manifest with a progress bar on a terminal; exit 1 if a line was refused.
    A server gets each batch of runs in one transaction (see ingest_manifest_to_server)."""
    config = load_config()
    # Read before the history is opened, so a mistyped manifest never creates an empty file.
    manifest_text(manifest)

    def backfill(progress: Callable[[int, int], None] | None) -> ManifestSummary:
        if isinstance(db, str):
            from flaketui.core.ingest.server import ingest_manifest_to_server

            return ingest_manifest_to_server(db, manifest, config=config, progress=progress)
        assert history is not None
        return ingest_manifest(history, manifest, config=config, progress=progress)

    with nullcontext() if isinstance(db, str) else history_file(db, keep_if_empty=False) as history:
        if sys.stderr.isatty():
            with click.progressbar(
                length=1, label="ingesting runs", file=sys.stderr
            ) as bar:  # fmt: skip

                def progress(done: int, total: int) -> None:
                    bar.length = total
                    bar.update(done - bar.pos)

                summary = backfill(progress)
        else:
            summary = backfill(None)
        _print_summary(summary)
        if os.environ.get(INCIDENT_VAR, "").strip():
            echo_text(
                f"{INCIDENT_VAR} is set but tags no manifest run: each line's own "
                '"incident" key does',
                err=True,
            )
        if history is not None:  # a server keeps raw runs; its replicas propose outages
            resign_if_stale(history, config.mask_patterns)
            propose_outages(history, config, shown(db))
    if summary.refused:
        raise SystemExit(1)


def _print_summary(summary: ManifestSummary) -> None:
    line = (
        f"{plural(summary.runs_landed, 'run')} landed with "
        f"{plural(summary.results_landed, 'result')}, "
        f"{summary.runs_already_present} already present"
    )
    if summary.runs_empty:
        line += f", {summary.runs_empty} without test cases"
    line += f", {plural(len(summary.refused), 'line')} refused"
    echo_text(line)
    if summary.left_untidy:  # pushes to a server's only
        from flaketui.core.history.pg.push import untidy_line

        echo_text(untidy_line(summary.left_untidy))
    for number, reason in summary.refused[:MAX_REFUSED_SHOWN]:
        echo_line(f"line {number}: {reason}", err=True)
    if len(summary.refused) > MAX_REFUSED_SHOWN:
        echo_text(f"... and {len(summary.refused) - MAX_REFUSED_SHOWN} more", err=True)


def _dated_by_reports(reports: tuple[Path, ...], report_format: str | None) -> datetime | None:
    """The run's date from its reports' own (formats.run_date: never after now), warning when a
    report is dated a time zone's step or more ahead of this machine's clock."""
    found = reports_date(reports, report_format)
    if found is None:
        return None
    path, stated = found
    now = utc_now()
    if stated - now >= ZONE_STEP:
        minutes = int((stated - now).total_seconds() // 60)
        ahead = f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"
        echo_line(
            f"warning: {path} is dated {to_iso(stated)}, {ahead} ahead of this machine's clock (a"
            " time without a zone reads as UTC); the run is dated now (--timestamp dates it)",
            err=True,
        )
    return run_date(stated, now)
