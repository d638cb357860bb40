"""Click parameter types whose refusals read as the project's one-line errors.

A wrong value is one line and exit status 1 (see FlaketuiGroup.invoke): `PATH: does not
exist`, `PATH: is a directory, not a history file`, as the core says it of a history it
cannot open.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import click

from flaketui.core.history.address import is_server_url, mask_url


class FiniteFloatRange(click.FloatRange):
    """click.FloatRange that refuses NaN and the infinities too: NaN passes every range check
    (it compares false with any bound) and then limits nothing, and `1e999` reads as infinity.

    `unit` ends the refusal: "nan is not a finite number of minutes."
    """

    def __init__(self, *, unit: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.unit = unit

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The number, or a BadParameter when it is in range but not finite."""
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            unit = f" of {self.unit}" if self.unit else ""
            self.fail(f"{number} is not a finite number{unit}.", param, ctx)
        return number


class FilePath(click.Path):
    """click.Path, with its refusals said as `PATH: problem` (what names the expected file).

    A `postgresql://` URL given where a file is expected is refused with its password masked
    and `server_hint` (why this command needs a file) after it.
    """

    def __init__(self, *, what: str = "file", server_hint: str | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.what = what
        self.server_hint = server_hint or (
            f"this command takes a {what}, not a server; sync one first: flaketui sync URL FILE"
        )

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The path, or a BadParameter that names it and says what is wrong in plain words."""
        if isinstance(value, str) and is_server_url(value):
            self.fail(f"{mask_url(value)}: {self.server_hint}", param, ctx)
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            self.fail(self.problem(Path(os.fsdecode(value))), param, ctx)

    def problem(self, path: Path) -> str:
        """Why `path` is refused."""
        if not path.exists():
            return f"{path}: does not exist"
        if path.is_dir() and not self.dir_okay:
            return f"{path}: is a directory, not a {self.what}"
        if not path.is_dir() and not self.file_okay:
            return f"{path}: is a file, not a directory"
        if self.readable and not os.access(path, os.R_OK):
            return f"{path}: cannot be read (permission denied)"
        if self.writable and not os.access(path, os.W_OK):
            return f"{path}: cannot be written (permission denied)"
        return f"{path}: cannot be used"
