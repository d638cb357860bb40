"""`flaketui prune`: retention beyond the scoring window."""

from __future__ import annotations

from pathlib import Path

import click

from flaketui.cli import cli
from flaketui.cli.params import FilePath
from flaketui.core.config import load_config
from flaketui.core.history.prune import prune_history
from flaketui.core.history.store import open_history
from flaketui.core.timeutil import to_iso
from flaketui.core.words import plural


@cli.command("prune")
@click.argument("db", type=FilePath(what="history file", dir_okay=False, path_type=Path))
@click.option(
    "--older-than",
    "days",
    type=float,
    required=True,
    metavar="DAYS",
    help="Delete runs older than this many days (with their results).",
)
@click.option("--vacuum", is_flag=True, help="Rewrite the file afterwards to give space back.")
def prune_command(db: Path, days: float, vacuum: bool) -> None:
    """Delete the runs of history DB older than DAYS; rollups follow, the audit log stays."""
    history = open_history(db, create=False)
    result = prune_history(history, days, vacuum=vacuum)
    click.echo(
        f"pruned {plural(result.runs, 'run')} before {to_iso(result.cutoff)}:"
        f" {plural(result.results, 'result')}, {plural(result.tests, 'test')} and"
        f" {plural(result.signatures, 'signature')} no longer referenced"
    )
    window = load_config().window_days
    if days < window:
        click.echo(
            f"note: {days:g} day{'' if days == 1 else 's'} is inside the scoring window"
            f" ({plural(window, 'day')})"
        )
    if vacuum:
        mb = 1024 * 1024
        click.echo(
            f"vacuumed: {result.bytes_before / mb:.1f} MB -> {result.bytes_after / mb:.1f} MB"
        )
