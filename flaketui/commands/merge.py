"""`flaketui merge`: gather histories published by CI jobs into one."""

from __future__ import annotations

from pathlib import Path

import click

from flaketui.cli import cli
from flaketui.core.merge import merge_histories
from flaketui.core.store import open_history


@cli.command("merge")
@click.argument("dest", type=click.Path(path_type=Path))
@click.argument("sources", nargs=-1, required=True, type=click.Path(path_type=Path))
def merge_command(dest: Path, sources: tuple[Path, ...]) -> None:
    """Copy into history DEST the runs of each SRC history it does not have yet (idempotent)."""
    for source in sources:  # refuse a bad source before DEST is created
        open_history(source, create=False, readonly=True).conn.close()
    history = open_history(dest)
    summary = merge_histories(history, list(sources))
    click.echo(
        f"merged {summary.sources} history(ies): {summary.runs_added} run(s) added, "
        f"{summary.runs_extended} extended, {summary.runs_unchanged} already present; "
        f"{summary.results_added} result(s), {summary.incidents_added} incident(s), "
        f"{summary.audit_rows_added} audit row(s) added"
    )
