"""`flaketui merge`: gather histories published by CI jobs into one."""

from __future__ import annotations

from pathlib import Path

import click

from flaketui.cli import cli
from flaketui.cli.commands.incident import propose_outages
from flaketui.core.config import load_config
from flaketui.core.history.merge import merge_histories
from flaketui.core.history.store import open_history
from flaketui.core.ingest.resign import has_runs, is_current, resign, stamp
from flaketui.core.words import plural


@cli.command("merge")
@click.argument("dest", type=click.Path(path_type=Path))
@click.argument("sources", nargs=-1, required=True, type=click.Path(path_type=Path))
def merge_command(dest: Path, sources: tuple[Path, ...]) -> None:
    """Copy into history DEST the runs of each SRC history it does not have yet (idempotent)."""
    patterns = load_config().mask_patterns
    foreign = False
    for source in sources:  # refuse a bad source before DEST is created
        source_db = open_history(source, create=False, readonly=True)
        foreign |= not is_current(source_db, patterns)
        source_db.conn.close()
    history = open_history(dest)
    was_empty = not has_runs(history)
    summary = merge_histories(history, list(sources))
    if was_empty and not foreign:
        stamp(history, patterns)
    # A source signed with another scheme would split groups: sign everything with this one.
    elif foreign or not is_current(history, patterns):
        summary_resign = resign(history, patterns)
        click.echo(
            f"re-signed {plural(summary_resign.messages, 'failure message')} for this scheme"
        )
    click.echo(
        f"merged {plural(summary.sources, 'history', 'histories')}: "
        f"{plural(summary.runs_added, 'run')} added, "
        f"{summary.runs_extended} extended, {summary.runs_unchanged} already present; "
        f"{plural(summary.results_added, 'result')}, "
        f"{plural(summary.incidents_added, 'incident')}, "
        f"{plural(summary.audit_rows_added, 'audit row')} added"
    )
    propose_outages(history, load_config())
