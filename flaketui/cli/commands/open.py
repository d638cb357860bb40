"""`flaketui open HISTORY` (also `flaketui HISTORY`): the keyboard-driven triage app."""

from __future__ import annotations

from pathlib import Path

import click

from flaketui.cli import cli
from flaketui.cli.history_address import HISTORY_ADDRESS, local_history, shown
from flaketui.cli.options import CODEOWNERS_OPTION, SKIP_FILE_DEFAULT
from flaketui.cli.params import FilePath
from flaketui.core.config import load_config
from flaketui.core.timeutil import parse_iso
from flaketui.tui.history_access import check_history, tidy_sidecars
from flaketui.tui.startup import StagedRead, make_source


def history_display(history: Path | str) -> str | None:
    """How the header names the history: a server by its URL (password masked), its replica
    being what the app reads; a file as given (None)."""
    return None if isinstance(history, Path) else f"{shown(history)} (local replica)"


def prepare_history(history: Path | str) -> Path:
    """The file to open: a postgresql:// URL opens its replica in the cache, synced first
    (audit rows the app adds there go to the server when the command ends)."""
    return local_history(history, quiet=False)


# How long quitting waits for the reading threads to finish the step it is in (a rescore of a
# very large history); past it the app exits anyway.
READER_EXIT_WAIT_S = 5.0


@cli.command("open")
@click.argument("history", type=HISTORY_ADDRESS)
@click.option("--now", "now_text", metavar="ISO", help="Score as of this UTC time.")
@click.option(
    "--skip-file",
    type=FilePath(what="skip file", path_type=Path, dir_okay=False),
    help=f"Skip file to read and write {SKIP_FILE_DEFAULT}",
)
@CODEOWNERS_OPTION
def open_command(
    history: Path | str, now_text: str | None, skip_file: Path | None, codeowners: Path | None
) -> None:
    """Open the triage app on HISTORY (a flaketui SQLite history, or a postgresql:// URL: its
    replica in the user's cache directory, synced first)."""
    now = None if now_text is None else parse_iso(now_text)
    display = history_display(history)
    history = prepare_history(history)
    check_history(history)
    config = load_config(Path.cwd())
    source = make_source(
        history, now, skip_file, config=config, codeowners=codeowners, display=display
    )
    # The history is read while the UI is imported and starts (see startup.StagedRead).
    first_read = StagedRead(source, kept=True)
    from flaketui.tui.app import FlaketuiApp

    app = FlaketuiApp(source, first_read=first_read)
    try:
        app.run()
    finally:
        # Each reading thread (the first read, and one per reload) closes its reader once the
        # step it may be in ends; then no reader of this app needs the -wal and -shm files.
        app.stop_reads(READER_EXIT_WAIT_S)
        tidy_sidecars(source.path)
