"""The HISTORY argument of commands that also write to a server: a file path or a
`postgresql://` URL (kept as typed: a Path would fold its `//`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from flaketui.core.history.address import is_server_url, mask_url


class HistoryAddress(click.ParamType):
    """A history file (as a Path) or a server URL (as a str)."""

    name = "HISTORY"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, Path) or (isinstance(value, str) and is_server_url(value)):
            return value
        return Path(value)

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "HISTORY"


HISTORY_ADDRESS = HistoryAddress()


def shown(address: str | Path) -> str:
    """An address as messages show it (a URL's password masked)."""
    return mask_url(address) if isinstance(address, str) else str(address)
