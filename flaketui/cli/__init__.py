"""The `flaketui` console script: the click group of flaketui.cli.group."""

from __future__ import annotations

from flaketui.cli.group import LAZY_COMMANDS, FlaketuiGroup, cli
from flaketui.cli.stdout import drop_output_once_unread

__all__ = ["LAZY_COMMANDS", "FlaketuiGroup", "cli", "main"]


def main() -> None:
    """Console-script entry point."""
    drop_output_once_unread()
    cli(prog_name="flaketui")
