"""Options that several commands share."""

from __future__ import annotations

from pathlib import Path

import click

from flaketui.cli.params import FilePath

# Where the skip file is when --skip-file is not given (flaketui.core.quarantine.skipfile).
SKIP_FILE_DEFAULT = (
    "(default: FLAKETUI_SKIP_FILE, [tool.flaketui] skip_file, else .quarantine.json at the git "
    "root)."
)

# open, report and export: where owners come from.
CODEOWNERS_OPTION = click.option(
    "--codeowners",
    type=FilePath(what="CODEOWNERS file", path_type=Path, dir_okay=False, exists=True),
    help="CODEOWNERS file for owners (default: the git root's, else the one beside the history).",
)
