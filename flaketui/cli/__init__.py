"""The `flaketui` console script: the click group of flaketui.cli.group."""

from __future__ import annotations

import logging
import sys

import click

from flaketui.cli.group import LAZY_COMMANDS, FlaketuiGroup, cli, os_error_line
from flaketui.cli.stdout import UnwritableOutput, drop_output_once_unread
from flaketui.cli.stopping import unwinding_on_stop

__all__ = ["LAZY_COMMANDS", "FlaketuiGroup", "cli", "main"]


def main() -> None:
    """Console-script entry point."""
    drop_output_once_unread()
    show_progress_lines()
    with unwinding_on_stop():
        try:
            cli(prog_name="flaketui")
        except UnwritableOutput as exc:
            # Met outside a command (the group's --help, --version): the commands' one line.
            click.echo(f"Error: {os_error_line(exc)}", err=True)
            sys.exit(1)


def show_progress_lines() -> None:
    """Print what flaketui's modules log (a history's upgrade starting, say) on stderr, one
    plain line each, as the command runs."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("flaketui")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
