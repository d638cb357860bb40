"""The `flaketui` console script: the click group of flaketui.cli.group."""

from __future__ import annotations

from flaketui.cli.group import LAZY_COMMANDS, FlaketuiGroup, cli

__all__ = ["LAZY_COMMANDS", "FlaketuiGroup", "cli", "main"]


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="flaketui")
