"""Options that several commands share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from flaketui.cli.params import FilePath

# Where the skip file is when --skip-file is not given (flaketui.core.quarantine.skipfile).
SKIP_FILE_DEFAULT = (
    "(default: FLAKETUI_SKIP_FILE, [tool.flaketui] skip_file, else .quarantine.json at the git "
    "root)."
)


class CodeownersPath(FilePath):
    """An existing CODEOWNERS file (FilePath's checks) whose text is UTF-8: a binary file or
    one in another encoding, given by mistake, is refused before anything is read."""

    def __init__(self) -> None:
        super().__init__(what="CODEOWNERS file", path_type=Path, dir_okay=False, exists=True)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        from flaketui.core.owners import CodeownersError, codeowners_text

        try:
            codeowners_text(path)
        except CodeownersError as exc:
            self.fail(exc.message, param, ctx)
        return path


# open, report, export and check: where owners come from.
CODEOWNERS_OPTION = click.option(
    "--codeowners",
    type=CodeownersPath(),
    help="CODEOWNERS file for owners (default: the git root's, else the one beside the history).",
)
