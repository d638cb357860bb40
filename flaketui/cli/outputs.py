"""The files a command writes (export and report --output, check --summary-file): `-` for
standard output, and never one of the files the same command reads.

`--output history.db` would replace the history with a CSV, `--output q.json` the skip file
with a list of test ids. Such a path is refused before anything is read or written, whatever
name it goes by: a relative or absolute path, a symlink to the file or a hard link of it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from flaketui.cli.params import FilePath
from flaketui.core.errors import FlaketuiError
from flaketui.core.owners import locate_codeowners

STDOUT = "-"  # what an output option takes for standard output


class OutputPath(FilePath):
    """A file to write (FilePath's checks; a directory is refused), or `-`, kept as the str
    STDOUT: standard output. Only `-` itself is: `./-` is a file of that name."""

    def __init__(self, **kwargs: Any):
        super().__init__(dir_okay=False, path_type=Path, **kwargs)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value == STDOUT:
            return STDOUT
        return super().convert(value, param, ctx)


def output_file(output: Path | str | None) -> Path | None:
    """The file an output option names; None for standard output (`-`, or no option)."""
    return output if isinstance(output, Path) else None


def same_file(first: Path, second: Path) -> bool:
    """Whether the two paths name one file: the same path once symlinks are resolved (one that
    does not exist yet included), or the same file on disk (a hard link)."""
    try:
        if first.resolve() == second.resolve():
            return True
    except (OSError, RuntimeError):  # a symlink loop
        pass
    try:
        return os.path.samefile(first, second)
    except OSError:  # either does not exist: no file is both
        return False


def refuse_reading_into(
    output: Path | None,
    option: str,
    *,
    history: Path | str,
    skip_file: Path | None = None,
    codeowners: Path | None = None,
    cwd: Path | None = None,
) -> None:
    """Refuse (FlaketuiError) an output that is one of the files the command reads: the
    history (a server URL's replica in the cache directory), the skip file if it reads one, and
    the CODEOWNERS file (`codeowners`, else the one found from `cwd` or beside the history)."""
    if output is None:
        return
    if isinstance(history, str):
        from flaketui.cli.commands.sync import replica_path

        history = replica_path(history)
    reads = [
        ("history", history),
        ("skip file", skip_file),
        ("CODEOWNERS file", locate_codeowners(history, cwd=cwd, explicit=codeowners)),
    ]
    for what, path in reads:
        if path is not None and same_file(output, path):
            raise FlaketuiError(
                f"{output}: {option} names the {what} this command reads; write to another file"
            )
