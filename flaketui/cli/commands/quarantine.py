"""`flaketui quarantine` and `flaketui release`: write the shared skip file and the audit log."""

from __future__ import annotations

import os
from pathlib import Path

import click

from flaketui.cli import cli
from flaketui.cli.echo import echo_line
from flaketui.cli.history_address import HISTORY_ADDRESS, local_history
from flaketui.cli.options import SKIP_FILE_DEFAULT
from flaketui.core.config import Config, load_config
from flaketui.core.errors import SkipFileError
from flaketui.core.history.store import check_history_path, history_file
from flaketui.core.owners import locate_codeowners
from flaketui.core.quarantine.skipfile import (
    ForeignSkipFile,
    SkipEntry,
    SkipFile,
    SkipMode,
    read_skip_file,
    repo_root,
    resolve_skip_file,
    resolve_skip_file_source,
)
from flaketui.core.timeutil import MAX_EXPIRY_DAYS, parse_iso, to_iso, utc_now
from flaketui.core.words import plural

SKIP_FILE_OPTION = click.option(
    "--skip-file", "skip_file", metavar="PATH", help=f"Skip file to write {SKIP_FILE_DEFAULT}"
)
# For commands that only read the skip file (check, export).
SKIP_FILE_READ_OPTION = click.option(
    "--skip-file", "skip_file", metavar="PATH", help=f"Skip file to read {SKIP_FILE_DEFAULT}"
)
NOW_OPTION = click.option("--now", metavar="ISO", help="Act as of this time (default: now).")


def skip_path_for(flag: str | None) -> tuple[Path, Config]:
    """The skip file the CLI works on, and the configuration found from the current directory."""
    root = repo_root()
    config = load_config(Path.cwd())
    return resolve_skip_file(flag, env=os.environ, config=config, root=root), config


# Where a named skip file came from, as the error for a missing one says it.
NAMED_BY = {
    "flag": "--skip-file",
    "env": "FLAKETUI_SKIP_FILE",
    "config": "[tool.flaketui] skip_file",
}


def read_skip_for(
    flag: str | None, *, creating: bool = False
) -> tuple[Path, SkipFile | None, Config]:
    """The skip file a command reads, its entries and the configuration found from the cwd.

    A skip file named by --skip-file, FLAKETUI_SKIP_FILE or `[tool.flaketui] skip_file` must
    exist (SkipFileError) unless the command is creating it; the default, `.quarantine.json` at
    the git root, may be absent: then nothing is quarantined (None). A named file that is not
    flaketui's is an error; a default one is ignored with a warning.
    """
    root = repo_root()
    config = load_config(Path.cwd())
    path, source = resolve_skip_file_source(flag, env=os.environ, config=config, root=root)
    named = source != "default"
    if named and not creating and not path.exists():
        raise SkipFileError(f"{path} ({NAMED_BY[source]}): file not found")
    try:
        return path, read_skip_file(path, explicit=named), config
    except ForeignSkipFile as exc:
        echo_line(f"warning: {exc.message}; ignored", err=True)
        return path, None, config


def refuse_before_writing(db: Path | str) -> None:
    """Refuse a history file that holds no history, by its header alone. Opening a history for
    writing changes it (its journal mode, a schema upgrade, the waiting runs it files), so
    quarantine and release refuse what they can without it (this, then the skip file and the
    other values) before they open it; a server's replica is synced only then."""
    if isinstance(db, Path):
        check_history_path(db)


def _display(path: Path) -> str:
    """A path relative to the current directory when it is inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _until(entry: SkipEntry) -> str:
    return to_iso(entry.expires) if entry.expires is not None else "never"


def _changes(old: SkipEntry, new: SkipEntry) -> list[str]:
    """What replacing old by new changes of what the command gives: `field: old -> new`."""

    def ticket(entry: SkipEntry) -> str:
        return repr(entry.ticket) if entry.ticket else "none"

    lines = [
        f"{name}: {shown(old)} -> {shown(new)}"
        for name, shown in (
            ("mode", lambda e: str(e.mode)),
            ("reason", lambda e: repr(e.reason)),
            ("expires", _until),
            ("ticket", ticket),
        )
        if shown(old) != shown(new)
    ]
    return lines or ["mode, reason, expiry and ticket as they were"]


@cli.command("quarantine")
@click.argument("db", type=HISTORY_ADDRESS)
@click.argument("test_id")
@click.option("--reason", required=True, help="Why (kept in the skip file and the audit log).")
@click.option(
    "--mode",
    type=click.Choice([mode.value for mode in SkipMode]),
    default=SkipMode.SKIP.value,
    show_default=True,
    help="skip: deselected in CI; run: runs, but its failures do not fail the session.",
)
@click.option(
    "--expires",
    "expires_days",
    type=click.IntRange(min=1, max=MAX_EXPIRY_DAYS),
    metavar="DAYS",
    help="Days until the entry expires (default: skip_expiry_days, 30).",
)
@click.option("--ticket", metavar="URL", help="Link to the tracking issue.")
@click.option("--force", is_flag=True, help="Quarantine a test id the history has never seen.")
@click.option(
    "--update",
    is_flag=True,
    help="Replace the entry of a test already quarantined with this one (mode, reason, expiry, "
    "ticket; the date it was first quarantined is kept) and print what changed. Without it such "
    "a test is refused.",
)
@SKIP_FILE_OPTION
@NOW_OPTION
def quarantine_command(
    db: Path | str,
    test_id: str,
    reason: str,
    mode: str,
    expires_days: int | None,
    ticket: str | None,
    force: bool,
    update: bool,
    skip_file: str | None,
    now: str | None,
) -> None:
    """Quarantine TEST_ID (a family parent quarantines every param) in the skip file.

    Prints each entry written, then how many tests this quarantined and how many the skip file
    lists in all.
    """
    from flaketui.core.quarantine.actions import check_quarantine, quarantine
    from flaketui.core.scoring.report import effective_now

    path, config = skip_path_for(skip_file)
    requested = parse_iso(now) if now else None
    refuse_before_writing(db)
    check_quarantine(
        path, reason=reason, mode=mode, expires_days=expires_days, source="cli", config=config
    )
    history_path = local_history(db)
    with history_file(history_path, create=False) as history:
        scored_at, _clamped = effective_now(history, requested, config)
        done = quarantine(
            history,
            path,
            test_id,
            reason=reason,
            mode=SkipMode(mode),
            expires_days=expires_days,
            ticket=ticket,
            now=requested or utc_now(),
            scored_at=scored_at,
            config=config,
            force=force,
            replace=update,
            source="cli",
            # The owner report and export show: the git root's CODEOWNERS, else the history's.
            repo_root=locate_codeowners(history_path),
        )
    for entry in done.entries:
        previous = done.replaced.get(entry.test_id)
        verb = "quarantined" if previous is None else "updated"
        echo_line(f"{verb} ({entry.mode}, until {_until(entry)}): {entry.test_id}")
        for line in _changes(previous, entry) if previous is not None else []:
            echo_line(f"  {line}")
    added = len(done.entries) - len(done.replaced)
    what = [f"quarantined {plural(added, 'test')}"] if added else []
    what += [f"updated {plural(len(done.replaced), 'entry', 'entries')}"] if done.replaced else []
    echo_line(f"{', '.join(what)}; {_display(path)} now lists {plural(done.listed, 'test')}")


@cli.command("release")
@click.argument("db", type=HISTORY_ADDRESS)
@click.argument("test_id")
@click.option("--reason", help="Why (kept in the audit log).")
@SKIP_FILE_OPTION
@NOW_OPTION
def release_command(
    db: Path | str, test_id: str, reason: str | None, skip_file: str | None, now: str | None
) -> None:
    """Release TEST_ID (a family parent releases every quarantined param) from the skip file."""
    from flaketui.core.quarantine.actions import check_release, release

    path, _config = skip_path_for(skip_file)
    moment = parse_iso(now) if now else utc_now()
    refuse_before_writing(db)
    check_release(path, test_id)
    with history_file(local_history(db), create=False) as history:
        released = release(history, path, test_id, reason=reason, now=moment, source="cli")
    for released_id in released:
        echo_line(f"released: {released_id}")
    echo_line(f"{len(released)} entr{'y' if len(released) == 1 else 'ies'} removed from "
               f"{_display(path)}")  # fmt: skip
