"""`flaketui sync URL HISTORY`: bring a local replica of a server history up to date."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import click

from flaketui.cli import cli
from flaketui.cli.commands.incident import propose_outages
from flaketui.cli.echo import echo_line
from flaketui.cli.params import FilePath
from flaketui.core.config import load_config
from flaketui.core.errors import FlaketuiError
from flaketui.core.history.address import is_server_url, mask_url
from flaketui.core.history.pg.connect import connect, server_errors
from flaketui.core.history.pg.sync import SyncSummary, same_server, sync_replica
from flaketui.core.history.store import get_meta, history_file, refuse_special_file
from flaketui.core.ingest.resign import has_runs, stamp
from flaketui.core.ingest.scheme import SCHEME_KEY
from flaketui.core.words import plural


def replica_path(url: str) -> Path:
    """Where `flaketui URL` keeps its replica: the user's cache directory (XDG_CACHE_HOME, else
    ~/.cache), one file per server, user and database (the password plays no part)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    key = hashlib.sha256(mask_url(url).encode("utf-8")).hexdigest()[:16]
    return Path(base) / "flaketui" / "replicas" / f"{key}.db"


def run_sync(
    url: str,
    history: Path,
    *,
    quiet: bool = False,
    notes_err: bool = False,
    shown_as: str | None = None,
    make_folder: bool = False,
) -> SyncSummary:
    """Sync the replica file from the server, with a progress line on stderr (and the outages
    it proposes said on stderr too with notes_err, naming the history as shown_as, by default
    the replica's path). make_folder: the replica's folder may be missing, and is made (with
    its parents) once the server has answered, so a server that cannot be reached leaves no
    empty folder behind."""
    if not is_server_url(url):
        raise FlaketuiError(f"{url}: not a postgresql:// URL")
    shown = mask_url(url)
    last = [-1]

    def progress(done: int, total: int) -> None:
        if quiet:
            return
        percent = 100 if total == 0 else done * 100 // total
        if percent != last[0] or done == total:
            last[0] = percent
            end = "\n" if done >= total else ""
            print(f"\rsyncing {shown}: {done}/{total} results ({percent}%)", end=end,
                  file=sys.stderr, flush=True)  # fmt: skip

    # A pipe or a device would be replaced by the replica file (first sync) or waited on.
    refuse_special_file(history)
    # Said of the file given, not of the one built beside it.
    if not make_folder and not history.parent.is_dir():
        raise FlaketuiError(f"{history}: directory {history.parent} does not exist")
    config = load_config()  # a bad configuration is refused before anything is written
    # A first sync builds the replica beside it and renames it into place once complete, so an
    # interrupted one leaves no half-filled history for readers; the next sync resumes it.
    first = holds_no_run(history)
    pg = connect(url)  # an unreachable server leaves no file behind
    target = unfinished_path(history) if first else history
    with closing(pg):
        if make_folder:
            history.parent.mkdir(parents=True, exist_ok=True)
        if first and history.exists() and not target.exists():
            start_from(url, pg, history, target)
        with history_file(target) as db:
            kept = "the replica keeps what landed; the next sync completes it"
            with server_errors(url, "syncing", note=kept):
                summary = sync_replica(pg, db.conn, progress=progress)
            if has_runs(db) and get_meta(db, SCHEME_KEY) is None:
                # Rows from writers that recorded no scheme: signed as this configuration signs.
                stamp(db, config.mask_patterns)
            # A replica proposes outages as a history written directly does: same reports, same
            # report.
            propose_outages(db, config, shown_as or str(history), err=notes_err)
    if first:  # closed: its -wal file is folded in and gone
        if history.exists():
            shutil.copymode(history, target)  # a file made private (mktemp) stays private
        os.replace(target, history)
    return summary


def holds_no_run(history: Path) -> bool:
    """Whether the file is no history yet (missing, or empty as `touch` leaves it) or a history
    without a run: a first sync into it builds the replica beside it."""
    if not history.exists() or history.stat().st_size == 0:
        return True
    with history_file(history, readonly=True) as db:
        return not has_runs(db)


def start_from(url: str, pg: Any, history: Path, unfinished: Path) -> None:
    """Start the unfinished replica as a copy of a history without a run, so what it holds
    (quarantine decisions, incidents, audit rows) stays when the replica replaces it; nothing
    is copied for a replica of another server (refused)."""
    if history.stat().st_size == 0:
        return
    with history_file(history, readonly=True) as db:
        with server_errors(url, "syncing"):
            same_server(pg, db.conn)
        copy = sqlite3.connect(unfinished)
        try:
            db.conn.backup(copy)
        finally:
            copy.close()


def unfinished_path(history: Path) -> Path:
    """Where a first sync builds the replica history until it is complete."""
    return history.with_name(history.name + ".unfinished")


@cli.command("sync")
@click.argument("url")
@click.argument(
    "history",
    type=FilePath(
        what="history file",
        dir_okay=False,
        path_type=Path,
        server_hint="the replica is a file, not a second server: flaketui sync URL FILE",
    ),
)
def sync_command(url: str, history: Path) -> None:
    """Bring replica HISTORY up to date with the server history at URL (only what changed)."""
    summary = run_sync(url, history, quiet=not sys.stderr.isatty())
    echo_line(
        f"synced {mask_url(url)} into {history}: {plural(summary.runs_added, 'run')} and "
        f"{plural(summary.results_added, 'result')} added, "
        f"{plural(summary.runs_updated, 'run')} updated, "
        f"{summary.runs_deleted} pruned, {plural(summary.audit_rows_added, 'audit row')} added"
    )
    for tag in summary.decisions_kept:
        echo_line(f"outage {tag}: decided otherwise on the server; kept as decided here")
