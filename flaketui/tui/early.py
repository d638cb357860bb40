"""`flaketui [open] HISTORY`: start the app's first load before click and the commands load.

The console script calls start_early first thing. When its arguments are a plain request for
the app, the ranking starts loading (startup.Preload) some 30-50 ms sooner than `open` could
start it: the first ranked screen of a large history waits for that load. Then
open_early runs the app on that load without click, when the history passes `open`'s check;
otherwise (or for anything this cannot parse) click runs `open`, which checks its arguments and
the history as always and takes this load only when it reads exactly what they ask for
(take_early), or reports the problem in one line.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from datetime import datetime
from pathlib import Path

from flaketui.core.config import load_config
from flaketui.core.errors import FlaketuiError
from flaketui.tui.history_access import check_history
from flaketui.tui.loaders import Source
from flaketui.tui.startup import Preload, make_source

OPTIONS = ("--now", "--skip-file", "--codeowners")  # open's options, each taking a value

_early: Preload | None = None


def open_source(
    history: Path, now: datetime | None, skip_file: Path | None, codeowners: Path | None
) -> Source:
    """What `flaketui open` reads and writes, from its arguments (also used by open itself)."""
    config = load_config(Path.cwd())
    return make_source(history, now, skip_file, config=config, codeowners=codeowners)


def open_arguments(
    args: list[str], commands: Collection[str]
) -> tuple[Path, str | None, Path | None, Path | None] | None:
    """HISTORY, --now, --skip-file and --codeowners of a plain `[open] HISTORY [options]`.

    None for anything else (another command, help, an unknown option, a missing value): those
    are click's to handle, and reading early would be wasted.
    """
    if args and args[0] == "open":
        args = args[1:]
    elif not args or args[0].startswith("-") or args[0] in commands:
        return None
    values: dict[str, str] = {}
    positional: list[str] = []
    rest = iter(args)
    for arg in rest:
        name, equals, value = arg.partition("=")
        if name in OPTIONS:
            if not equals:
                value = next(rest, "")
                if not value:
                    return None
            values[name] = value
        elif arg.startswith("-"):
            return None  # --help, an unknown option, `--`: click's job
        else:
            positional.append(arg)
    if len(positional) != 1:
        return None
    skip = values.get("--skip-file")
    owners = values.get("--codeowners")
    return (
        Path(positional[0]),
        values.get("--now"),
        Path(skip) if skip else None,
        Path(owners) if owners else None,
    )


def start_early(args: list[str], commands: Collection[str]) -> None:
    """Start the first load now when `args` plainly ask for the app on an existing file."""
    global _early
    parsed = open_arguments(args, commands)
    if parsed is None:
        return
    history, now_text, skip_file, codeowners = parsed
    if not history.is_file() or (codeowners is not None and not codeowners.is_file()):
        return  # open reports these in one line; nothing to read
    if skip_file is not None and skip_file.is_dir():
        return
    try:
        from flaketui.core.timeutil import parse_iso

        now = parse_iso(now_text) if now_text else None
        source = open_source(history, now, skip_file, codeowners)
    except Exception:  # a bad --now or config: open reports it the usual way
        return
    _early = Preload(source)


def open_early() -> bool:
    """Run the app on the early load, as `open` would (once); False to leave it all to click.

    Click and the command modules cost the first screen some 10 ms of imports and parsing, for
    arguments start_early has parsed already. Any problem before the app runs goes back to
    click's `open`, which reports it in one line as usual (the early load stays for it).
    """
    global _early
    early = _early
    if early is None:
        return False
    try:
        check_history(early.source.path)  # as open does: a bad history never gets a screen
    except Exception:
        return False
    _early = None
    from flaketui.tui.app import FlaketuiApp

    try:
        FlaketuiApp(early.source, preload=early).run()
    except (FlaketuiError, sqlite3.OperationalError, KeyboardInterrupt) as exc:
        from flaketui.cli.group import report_user_error  # click, on this path only

        report_user_error(exc)
    return True


def take_early(source: Source) -> Preload | None:
    """The early load when it reads what `source` says (once); otherwise stop it, None."""
    global _early
    early, _early = _early, None
    if early is None:
        return None
    if early.source == source:
        return early
    early.close()
    return None
