"""`flaketui report`: the ranked, explained triage list, headless (table, JSON, CSV, Markdown)."""

from __future__ import annotations

from pathlib import Path

import click

from flaketui.cli import cli
from flaketui.cli.commands.open import CODEOWNERS_OPTION
from flaketui.core.config import load_config
from flaketui.core.history.store import open_history
from flaketui.core.ingest.resign import stale_note
from flaketui.core.models import BRANCH_KINDS
from flaketui.core.output.formats import FORMATS, GROUP_BYS, render
from flaketui.core.owners import locate_codeowners
from flaketui.core.scoring.causes import attach_causes
from flaketui.core.scoring.report import build_report
from flaketui.core.timeutil import parse_iso


@cli.command("report")
@click.argument("db", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--now", metavar="ISO", help="Score as of this time (default: now, see README).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="Show the first N only.")
@click.option("--suite", metavar="S", help="Only runs of this suite (ranks are computed over it).")
@click.option("--branch-kind", type=click.Choice(BRANCH_KINDS), help="Only runs of this kind.")
@click.option("--group-by", type=click.Choice(GROUP_BYS), help="List families or signatures.")
@CODEOWNERS_OPTION
def report_command(
    db: Path,
    now: str | None,
    fmt: str,
    limit: int | None,
    suite: str | None,
    branch_kind: str | None,
    group_by: str | None,
    codeowners: Path | None,
) -> None:
    """Rank the flaky tests of history DB by damage, with verdicts and reasons."""
    config = load_config()
    moment = parse_iso(now) if now is not None else None
    history = open_history(db, create=False, readonly=True)
    try:
        report = build_report(
            history,
            now=moment,
            config=config,
            suite=suite,
            branch_kind=branch_kind,
            repo_root=locate_codeowners(db, explicit=codeowners),
        )
        report = attach_causes(history, report, config)
        note = stale_note(history, config.mask_patterns)
    finally:
        history.conn.close()
    if note is not None:
        click.echo(note, err=True)
    threshold = config.threshold_for(suite) if suite else config.quarantine_threshold
    click.echo(render(report, fmt, group_by=group_by, limit=limit, threshold=threshold), nl=False)
