"""`flaketui prune`: retention beyond the scoring window."""

from __future__ import annotations

from pathlib import Path

import click

from flaketui.cli import cli
from flaketui.cli.echo import echo_text
from flaketui.cli.history_address import HISTORY_ADDRESS
from flaketui.core.config import load_config
from flaketui.core.history.prune import prune_history
from flaketui.core.history.store import history_file
from flaketui.core.timeutil import to_iso
from flaketui.core.words import plural


@cli.command("prune")
@click.argument("db", type=HISTORY_ADDRESS)
@click.option(
    "--older-than",
    "days",
    type=float,
    required=True,
    metavar="DAYS",
    help="Delete runs older than this many days (with their results).",
)
@click.option(
    "--vacuum",
    is_flag=True,
    help="Rewrite the file afterwards to give space back (a history file only).",
)
def prune_command(db: Path | str, days: float, vacuum: bool) -> None:
    """Delete the runs of history DB older than DAYS; rollups follow, the audit log stays.
    DB may be a postgresql:// URL: the server's runs are deleted, and replicas drop them at
    their next sync.
    """
    if isinstance(db, str):
        _prune_server(db, days, vacuum)
        return
    with history_file(db, create=False) as history:
        result = prune_history(history, days, vacuum=vacuum)
    echo_text(
        f"pruned {plural(result.runs, 'run')} before {to_iso(result.cutoff)}:"
        f" {plural(result.results, 'result')}, {plural(result.tests, 'test')} and"
        f" {plural(result.signatures, 'signature')} no longer referenced"
    )
    window_note(days)
    if vacuum:
        mb = 1024 * 1024
        echo_text(
            f"vacuumed: {result.bytes_before / mb:.1f} MB -> {result.bytes_after / mb:.1f} MB"
        )


def window_note(days: float) -> None:
    """Say so when the runs pruned may include some the scores still read."""
    window = load_config().window_days
    if days < window:
        echo_text(
            f"note: {days:g} day{'' if days == 1 else 's'} is inside the scoring window"
            f" ({plural(window, 'day')})"
        )


def _prune_server(url: str, days: float, vacuum: bool) -> None:
    """Prune a server history (replicas drop the runs at their next sync)."""
    from flaketui.core.errors import FlaketuiError
    from flaketui.core.history.address import mask_url
    from flaketui.core.history.pg.admin import prune_server
    from flaketui.core.history.pg.connect import connect, server_errors

    if vacuum:
        raise FlaketuiError(
            "--vacuum applies to a history file: a server's autovacuum makes pruned rows' space"
            " reusable, and VACUUM FULL (which locks writers out) is its administrator's call"
        )
    pg = connect(url)
    try:
        with server_errors(url, "pruning"):
            cutoff, runs, results = prune_server(pg, days)
    finally:
        pg.close()
    echo_text(
        f"pruned {plural(runs, 'run')} before {to_iso(cutoff)} from {mask_url(url)}: "
        f"{plural(results, 'result')}; replicas drop them at their next sync"
    )
    window_note(days)
