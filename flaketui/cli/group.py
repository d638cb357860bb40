"""The `flaketui` click group: thin click commands, each calling core functions."""

from __future__ import annotations

import difflib
import importlib
import os
import sqlite3
from pathlib import Path
from typing import Any, ClassVar

import click

from flaketui import __version__
from flaketui.cli.params import FilePath
from flaketui.core.errors import FlaketuiError
from flaketui.core.history import store
from flaketui.core.output.text import visible

# Command name -> module under flaketui.cli.commands, imported only when the command runs (or
# for --help): a command pays for its own imports only (the app's for `open`, pandas through
# sqlite-utils for others).
LAZY_COMMANDS: dict[str, str] = {
    "changes": "changes",
    "check": "check",
    "diagnose": "diagnose",
    "export": "export",
    "incident": "incident",
    "ingest": "ingest",
    "lifecycle": "lifecycle",
    "merge": "merge",
    "open": "open",
    "order": "order",
    "pivot": "pivot",
    "prune": "prune",
    "quarantine": "quarantine",
    "release": "quarantine",
    "report": "report",
    "resign": "resign",
    "sync": "sync",
}


# Commands whose exit status 1 reports a finding to CI: a wrong value given to one exits with 2,
# but a file it cannot use is an error of its inputs, status 1 as in every command.
GATE_COMMANDS = frozenset({"check"})


class GateValueError(click.ClickException):
    """A wrong value given to a gate: one line, status 2 (its status 1 is a finding or a file
    it cannot use)."""

    exit_code = 2


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

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """A first argument that names no command is the default command's (a history path),
        unless it is a mistyped command (see `close_commands`): a usage error naming those."""
        names = self.list_commands(ctx)
        if args and args[0] not in names and not args[0].startswith("-"):
            close = close_commands(args[0], names)
            if close:
                ctx.fail(f"No such command {args[0]!r}. {did_you_mean(close)}")
            command = self.get_command(ctx, self.default_command)
            if command is not None:
                return self.default_command, command, args
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        """Turn user-facing errors into click's one-line 'Error: ...' and exit status 1.

        A wrong value of an argument or option is one too (status 2 for a CI gate, whose 1 is a
        finding, unless the value names a file the gate cannot use); a command line click cannot
        parse (an unknown option, a missing argument) keeps click's usage message and status 2.
        """
        store.forget_opened()
        try:
            return super().invoke(ctx)
        except click.MissingParameter:
            raise  # the command line's shape: click's usage message, exit status 2
        except click.BadParameter as exc:
            # A wrong value (a missing file, a directory, a number out of range, a choice not
            # offered) is the user's input, as a history that cannot be opened is: one line.
            if ctx.invoked_subcommand in GATE_COMMANDS and not names_a_file(exc):
                raise GateValueError(bad_value(exc)) from None
            raise click.ClickException(bad_value(exc)) from None
        except (FlaketuiError, KeyboardInterrupt) as exc:
            raise user_error(exc) from None
        except sqlite3.DatabaseError as exc:
            # A locked, read-only or damaged history is the environment's problem, met wherever
            # a statement first reaches it: one line naming what this command opened (most
            # arrive as a HistoryError naming their file). Any other database error (a broken
            # constraint) is a bug.
            problem = store.history_problem(opened_paths(), exc)
            if problem is None:
                raise
            raise click.ClickException(visible(problem.message)) from None
        except OSError as exc:
            # A path the system refuses wherever it is first used (a name too long for it, say):
            # the user's input, named with the system's reason. Without a path, it is a bug.
            if exc.filename is None:
                raise
            raise click.ClickException(os_error_line(exc)) from None


def os_error_line(exc: OSError) -> str:
    """A refused path's one line: the path, then the system's reason."""
    name = visible(os.fsdecode(exc.filename))
    return f"{name}: {(exc.strerror or str(exc)).lower()}"


# How alike a word and a command name must be (difflib's ratio) for the word to be a typo of it.
TYPO_LIKENESS = 0.7


def close_commands(word: str, names: list[str]) -> list[str]:
    """The command names `word` is a likely typo of, best first; none when it may be a history.

    A word is a mistyped command when it names no existing file or directory, holds no `.` or
    `/` (a history path usually does, a command never) and is close to a command name
    (`reprot`: report). Anything else is the history to open.
    """
    if "." in word or "/" in word or os.sep in word or Path(word).exists():
        return []
    return difflib.get_close_matches(word, names, n=3, cutoff=TYPO_LIKENESS)


def did_you_mean(names: list[str]) -> str:
    """The suggestion click itself gives for a mistyped subcommand (click 8.4 and later)."""
    quoted = ", ".join(repr(name) for name in sorted(names))
    return f"Did you mean {quoted}?" if len(names) == 1 else f"(Did you mean one of: {quoted}?)"


def names_a_file(exc: click.BadParameter) -> bool:
    """Whether the refused value is a path the command cannot use (a directory, a missing or
    unreadable file): a problem of its input files, as a history that cannot be opened is."""
    return isinstance(exc.param, click.Parameter) and isinstance(exc.param.type, FilePath)


def bad_value(exc: click.BadParameter) -> str:
    """One line for a refused value: the path's own problem, else click's `Invalid value ...`."""
    if names_a_file(exc):
        return exc.message
    return " ".join(exc.format_message().split())


def user_error(exc: FlaketuiError | KeyboardInterrupt) -> click.ClickException:
    """The one-line error a user sees for a problem of theirs (not a bug)."""
    if isinstance(exc, FlaketuiError):
        # It may name a test id or a file from CI: shown inert, on its one line.
        return click.ClickException(visible(exc.message))
    return click.ClickException("interrupted")


def opened_paths() -> str:
    """The histories this command opened, as the user gave them, for an error met past the
    core; '' when it opened none (the error then names 'history')."""
    return " or ".join(map(str, store.opened_histories()))


@click.group(cls=FlaketuiGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="flaketui")
def cli() -> None:
    """Triage flaky tests from a local SQLite run history.

    `flaketui HISTORY.db` opens the triage app; the commands below work headless. A first
    argument that is no command is the history to open, unless it names no file, holds no `.`
    or `/` and is close to a command name: then it is a mistyped command (`flaketui reprot`:
    "No such command 'reprot'. Did you mean 'report'?", status 2).
    """
