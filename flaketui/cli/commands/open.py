"""`flaketui open HISTORY` (also `flaketui HISTORY`): the keyboard-driven triage app."""

from __future__ import annotations

from pathlib import Path

import click

from flaketui.cli import cli
from flaketui.cli.history_address import HISTORY_ADDRESS, local_history
from flaketui.core.timeutil import parse_iso
from flaketui.tui.early import open_source, take_early
from flaketui.tui.history_access import check_history
from flaketui.tui.startup import Preload

# Shared by open, report and export: where owners come from.
CODEOWNERS_OPTION = click.option(
    "--codeowners",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="CODEOWNERS file for owners (default: the git root's, else the one beside the history).",
)


def prepare_history(history: Path | str) -> Path:
    """The file to open: a postgresql:// URL opens its replica in the cache, synced first
    (audit rows the app adds there go to the server when the command ends)."""
    return local_history(history, quiet=False)


@cli.command("open")
@click.argument("history", type=HISTORY_ADDRESS)
@click.option("--now", "now_text", metavar="ISO", help="Score as of this UTC time.")
@click.option(
    "--skip-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Skip file to read and write (default: .quarantine.json at the repository root).",
)
@CODEOWNERS_OPTION
def open_command(
    history: Path | str, now_text: str | None, skip_file: Path | None, codeowners: Path | None
) -> None:
    """Open the triage app on HISTORY (a flaketui SQLite history, or a postgresql:// URL: its
    replica in the user's cache directory, synced first)."""
    now = parse_iso(now_text) if now_text else None
    history = prepare_history(history)
    check_history(history)
    source = open_source(history, now, skip_file, codeowners)
    # The ranking is loading already when the console script could start it (tui.early), else
    # it starts now; either way Textual is imported while it reads.
    preload = take_early(source) or Preload(source)
    from flaketui.tui.app import FlaketuiApp

    FlaketuiApp(source, preload=preload).run()
