"""`flaketui resign`: sign stored failure messages again with the current scheme."""

from __future__ import annotations

from pathlib import Path

import click

from flaketui.cli import cli
from flaketui.cli.echo import echo_text
from flaketui.cli.params import FilePath
from flaketui.core.config import load_config
from flaketui.core.history.dbhandle import Connected
from flaketui.core.history.store import history_file
from flaketui.core.ingest.resign import (
    ensure_current,
    resign,
    scheme_of,
    stored_scheme,
)
from flaketui.core.words import plural


@cli.command("resign")
@click.argument(
    "db",
    type=FilePath(
        what="history file",
        dir_okay=False,
        path_type=Path,
        server_hint="re-signing rewrites a history file's signatures; a server keeps those its "
        "writers computed: re-sign a replica instead (flaketui sync URL FILE)",
    ),
)
def resign_command(db: Path) -> None:
    """Re-sign the failure messages of history DB with this flaketui's algorithm and the
    configured mask patterns (ingest and merge do this by themselves when the scheme changed).
    """
    patterns = load_config().mask_patterns
    with history_file(db, create=False) as history:
        before = stored_scheme(history)
        summary = resign(history, patterns)
    echo_text(
        f"re-signed {plural(summary.messages, 'failure message')}"
        f" ({before} -> {scheme_of(patterns)}):"
        f" {summary.changed} of them changed signature, {summary.signatures_before} ->"
        f" {plural(summary.signatures_after, 'signature')}"
    )


def resign_if_stale(history: Connected, patterns: tuple[str, ...]) -> None:
    """After a successful write: re-sign old messages when the scheme changed, and say so.

    (A history the write found empty was stamped with the current scheme by the writer.)
    """
    summary = ensure_current(history, patterns)
    if summary is not None:
        echo_text(
            f"re-signed {plural(summary.messages, 'stored failure message')} for the current"
            f" signature scheme ({summary.signatures_before} ->"
            f" {plural(summary.signatures_after, 'signature')})"
        )
