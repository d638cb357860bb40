"""`flaketui pivot`: a test's or family's failure rate per worker count and worker id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from flaketui.cli import cli
from flaketui.cli.params import FilePath
from flaketui.core.config import load_config
from flaketui.core.history.store import open_history
from flaketui.core.scoring.pivot import Pivot, PivotRow, worker_pivot
from flaketui.core.scoring.report import effective_now
from flaketui.core.timeutil import parse_iso, to_iso
from flaketui.core.words import plural


def _row_dict(row: PivotRow) -> dict[str, Any]:
    return {
        "runs": row.runs,
        "bad_runs": row.bad_runs,
        "fail_rate": row.fail_rate,
        "wilson_low": row.wilson_low,
        "wilson_high": row.wilson_high,
    }


def pivot_json(pivot: Pivot, *, now_was_clamped: bool) -> dict[str, Any]:
    """The pivot as a JSON-ready dict."""
    return {
        "key": pivot.key,
        "kind": pivot.kind,
        "members": pivot.members,
        "now": to_iso(pivot.now),
        "now_was_clamped": now_was_clamped,
        "runs": pivot.runs,
        "bad_runs": pivot.bad_runs,
        "by_worker_count": [
            {"worker_count": int(row.key), **_row_dict(row)} for row in pivot.by_worker_count
        ],
        "by_worker_id": [
            {"worker_id": row.key or None, **_row_dict(row)} for row in pivot.by_worker_id
        ],
    }


def _table(title: str, rows: list[PivotRow]) -> list[str]:
    lines = [f"{title:>10}  {'runs':>6}  {'bad':>5}  {'fail rate':>9}  Wilson 95%"]
    for row in rows:
        lines.append(
            f"{row.key or '?':>10}  {row.runs:>6}  {row.bad_runs:>5}  {row.fail_rate:>9.1%}  "
            f"{row.wilson_low:.1%} - {row.wilson_high:.1%}"
        )
    return lines


@cli.command("pivot")
@click.argument("db", type=FilePath(what="history file", dir_okay=False, path_type=Path))
@click.argument("test_or_parent")
@click.option("--now", metavar="ISO", help="Score as of this time (default: now).")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def pivot_command(db: Path, test_or_parent: str, now: str | None, fmt: str) -> None:
    """Runs, bad runs and Wilson interval per worker count and worker id (TEST or family)."""
    history = open_history(db, create=False, readonly=True)
    config = load_config()
    moment, clamped = effective_now(history, parse_iso(now) if now else None, config)
    pivot = worker_pivot(history, test_or_parent, now=moment, config=config)
    if fmt == "json":
        click.echo(json.dumps(pivot_json(pivot, now_was_clamped=clamped), indent=2))
        return
    what = f"family of {plural(len(pivot.members), 'param')}" if pivot.kind == "family" else "test"
    clock = " (history is older than the window: shown as of its newest run)" if clamped else ""
    click.echo(f"{pivot.key} ({what}) as of {to_iso(moment)}{clock}")
    click.echo(f"{plural(pivot.runs, 'counted run')}, {pivot.bad_runs} bad (first attempt failed)")
    if not pivot.runs:
        return
    click.echo("")
    click.echo("\n".join(_table("workers", pivot.by_worker_count)))
    click.echo("")
    click.echo("\n".join(_table("worker id", pivot.by_worker_id)))
