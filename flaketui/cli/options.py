"""Options that several commands share."""

from __future__ import annotations

from pathlib import Path

import click

from flaketui.cli.params import FilePath

# open, report and export: where owners come from.
CODEOWNERS_OPTION = click.option(
    "--codeowners",
    type=FilePath(what="CODEOWNERS file", path_type=Path, dir_okay=False, exists=True),
    help="CODEOWNERS file for owners (default: the git root's, else the one beside the history).",
)
