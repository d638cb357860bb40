"""`flaketui report`: the ranked, explained triage list, headless (table, JSON, CSV, Markdown,
HTML)."""

from __future__ import annotations

from pathlib import Path

import click

from flaketui.cli import cli
from flaketui.cli.history_address import READ_ADDRESS, local_history, shown
from flaketui.cli.options import CODEOWNERS_OPTION
from flaketui.cli.outputs import OutputPath, output_file, refuse_reading_into
from flaketui.core.atomic import write_atomically
from flaketui.core.config import load_config
from flaketui.core.history.store import history_file
from flaketui.core.ingest.resign import stale_note
from flaketui.core.models import BRANCH_KINDS
from flaketui.core.output.formats import FORMATS, GROUP_BYS, ReportFormat, render
from flaketui.core.output.html import collect_details, render_html
from flaketui.core.owners import locate_codeowners
from flaketui.core.scoring.causes import attach_causes
from flaketui.core.scoring.report import build_report
from flaketui.core.scoring.uncounted import empty_report_note, set_aside, unmatched_filter_note
from flaketui.core.timeutil import parse_iso


@cli.command("report")
@click.argument("db", type=READ_ADDRESS)
@click.option("--now", metavar="ISO", help="Score as of this time (default: now, see README).")
@click.option(
    "--format", "fmt", type=click.Choice((*FORMATS, "html")), default="table", show_default=True
)
@click.option(
    "-o",
    "--output",
    type=OutputPath(),
    metavar="PATH",
    help="Write the report to PATH (replaced atomically) instead of stdout (`-`: stdout).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    metavar="N",
    help="Show the first N only (tests, or groups with --group-by); an html page shows the first "
    "N of each of its sections.",
)
@click.option("--suite", metavar="S", help="Only runs of this suite (ranks are computed over it).")
@click.option("--branch-kind", type=click.Choice(BRANCH_KINDS), help="Only runs of this kind.")
@click.option(
    "--group-by",
    type=click.Choice(GROUP_BYS),
    help="List families, signature groups or co-failure groups.",
)
@CODEOWNERS_OPTION
def report_command(
    db: Path | str,
    now: str | None,
    fmt: str,
    output: Path | str | None,
    limit: int | None,
    suite: str | None,
    branch_kind: str | None,
    group_by: str | None,
    codeowners: Path | None,
) -> None:
    """Rank the flaky tests of history DB by damage, with verdicts and reasons.
    DB may be a postgresql:// URL: its replica in the cache directory is synced and read.
    """
    config = load_config()
    moment = parse_iso(now) if now is not None else None
    output = output_file(output)
    refuse_reading_into(output, "--output", history=db, codeowners=codeowners)
    address = shown(db)  # as the user named it, for the command the outage notice suggests
    db = local_history(db)
    with history_file(db, create=False, readonly=True) as history:
        report = build_report(
            history,
            now=moment,
            config=config,
            suite=suite,
            branch_kind=branch_kind,
            repo_root=locate_codeowners(db, explicit=codeowners),
        )
        # A table or Markdown report shows no test's or family's causes, only the names
        # co-failure groups take from theirs.
        report = attach_causes(
            history,
            report,
            config,
            cofailures_only=fmt in (ReportFormat.TABLE, ReportFormat.MARKDOWN),
            shared_from=Path(db),  # a big analysis is shared with a child process
        )
        notes = [stale_note(history, config.mask_patterns)]
        if not report.tests:
            notes.append(
                unmatched_filter_note(history, suite, branch_kind)
                or empty_report_note(set_aside(history, report.now, config, suite, branch_kind))
            )
        threshold = config.threshold_for(suite) if suite else config.quarantine_threshold
        if fmt == "html":
            details = collect_details(history, report, config, limit=limit)
            text = render_html(
                report, details, threshold=threshold, limit=limit, history=address, now=now
            )
        else:
            text = render(
                report,
                ReportFormat(fmt),
                group_by=group_by,
                limit=limit,
                threshold=threshold,
                history=address,
                now=now,
            )
    for note in notes:
        if note is not None:
            click.echo(note, err=True)
    if output is not None:
        write_atomically(output, text.encode())
    else:
        click.echo(text, nl=False)
