"""The `flaketui` command line: thin click commands, each calling core functions."""

from __future__ import annotations

import sqlite3
import sys
from typing import Any

import click

from flaketui import __version__
from flaketui.core.errors import FlaketuiError


class FlaketuiGroup(click.Group):
    """A group where `flaketui PATH` means `flaketui open PATH`, and user errors are one line."""

    default_command = "open"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Route a first argument that is not a command name to the default command."""
        if args and not args[0].startswith("-") and args[0] not in self.commands:
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        """Turn user-facing errors into click's one-line 'Error: ...' and exit status."""
        try:
            return super().invoke(ctx)
        except FlaketuiError as exc:
            raise click.ClickException(exc.message) from None
        except sqlite3.OperationalError as exc:
            # Locked or read-only databases are environment problems, not bugs.
            raise click.ClickException(f"history: {exc}") from None
        except KeyboardInterrupt:
            raise click.ClickException("interrupted") from None


@click.group(cls=FlaketuiGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="flaketui")
def cli() -> None:
    """Triage flaky tests from a local SQLite run history.

    `flaketui HISTORY.db` opens the triage app; the commands below work headless.
    """


def main() -> None:
    """Console-script entry point."""
    # Import the command modules for their registration side effect.
    from flaketui import commands  # noqa: F401

    cli(prog_name="flaketui")


if __name__ == "__main__":  # pragma: no cover
    main()
    sys.exit(0)
