"""The `flaketui` click group: thin click commands, each calling core functions.

Imported by flaketui.cli on first use (`from flaketui.cli import cli` still works): the console
script starts in that light module, so `flaketui HISTORY` can start reading the history before
click and the commands are imported.
"""

from __future__ import annotations

import importlib
import sqlite3
import sys
from typing import Any, ClassVar, NoReturn

import click

from flaketui import __version__
from flaketui.cli import LAZY_COMMANDS
from flaketui.cli.params import FilePath
from flaketui.core.errors import FlaketuiError
from flaketui.core.history import store


class FlaketuiGroup(click.Group):
    """A group where `flaketui PATH` means `flaketui open PATH`, and user errors are one line."""

    default_command = "open"
    # Command name -> module under flaketui.cli.commands, imported only when the command runs (or
    # for --help): a command pays for its own imports only (sqlite-utils may pull in pandas).
    lazy_commands: ClassVar[dict[str, str]] = LAZY_COMMANDS

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command name, registered or still to be imported."""
        return sorted(set(self.commands) | set(self.lazy_commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """A command, importing its module the first time it is asked for."""
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            importlib.import_module(f"flaketui.cli.commands.{self.lazy_commands[cmd_name]}")
        return self.commands.get(cmd_name)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Route a first argument that is not a command name to the default command."""
        if args and not args[0].startswith("-") and args[0] not in self.list_commands(ctx):
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        """Turn user-facing errors into click's one-line 'Error: ...' and exit status 1.

        A wrong value of an argument or option is one too; a command line click cannot parse
        (an unknown option, a missing argument) keeps click's usage message and status 2.
        """
        store.forget_opened()
        try:
            return super().invoke(ctx)
        except click.MissingParameter:
            raise  # the command line's shape: click's usage message, exit status 2
        except click.BadParameter as exc:
            # A wrong value (a missing file, a directory, a number out of range, a choice not
            # offered) is the user's input, as a history that cannot be opened is: one line.
            raise click.ClickException(bad_value(exc)) from None
        except (FlaketuiError, sqlite3.OperationalError, KeyboardInterrupt) as exc:
            raise user_error(exc) from None


def bad_value(exc: click.BadParameter) -> str:
    """One line for a refused value: the path's own problem, else click's `Invalid value ...`."""
    if isinstance(exc.param, click.Parameter) and isinstance(exc.param.type, FilePath):
        return exc.message
    return " ".join(exc.format_message().split())


def user_error(
    exc: FlaketuiError | sqlite3.OperationalError | KeyboardInterrupt,
) -> click.ClickException:
    """The one-line error a user sees for a problem of theirs (not a bug)."""
    if isinstance(exc, FlaketuiError):
        return click.ClickException(exc.message)
    if isinstance(exc, sqlite3.OperationalError):
        # Locked or read-only databases are environment problems, not bugs. Most arrive here
        # as HistoryError naming their file; a raw one names what this command opened.
        paths = " or ".join(map(str, store.opened_histories())) or "history"
        if store.is_locked(exc):
            return click.ClickException(store.locked_error(paths, exc).message)
        return click.ClickException(" ".join(f"{paths}: {exc}".split()))
    return click.ClickException("interrupted")


def report_user_error(
    exc: FlaketuiError | sqlite3.OperationalError | KeyboardInterrupt,
) -> NoReturn:
    """Print the one-line error as click does ('Error: ...' on stderr) and exit with its status."""
    error = user_error(exc)
    error.show()
    sys.exit(error.exit_code)


@click.group(cls=FlaketuiGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="flaketui")
def cli() -> None:
    """Triage flaky tests from a local SQLite run history.

    `flaketui HISTORY.db` opens the triage app; the commands below work headless.
    """
