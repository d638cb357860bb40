"""`flaketui pivot`: a test's or family's failure rate per worker count and worker id, or per
value of any recorded dimension (`--by DIM`, `--by all`) with the suspects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from flaketui.cli import cli
from flaketui.cli.echo import echo_line, echo_text
from flaketui.cli.history_address import READ_ADDRESS, local_history
from flaketui.core.config import load_config
from flaketui.core.history.store import history_file
from flaketui.core.output.text import visible
from flaketui.core.scoring.causes import DIMENSIONS, DimensionRow
from flaketui.core.scoring.pivot import (
    DimensionPivot,
    Pivot,
    PivotRow,
    dimension_pivot,
    worker_pivot,
)
from flaketui.core.scoring.report import effective_now
from flaketui.core.scoring.results import Suspect
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


def _head(pivot: Pivot | DimensionPivot, now_was_clamped: bool) -> dict[str, Any]:
    """What both pivots' JSON starts with: the target, the clock and its run counts."""
    return {
        "key": pivot.key,
        "kind": pivot.kind,
        "members": pivot.members,
        "now": to_iso(pivot.now),
        "now_was_clamped": now_was_clamped,
        "runs": pivot.runs,
        "bad_runs": pivot.bad_runs,
        "interrupted_runs": pivot.interrupted_runs,
    }


def pivot_json(pivot: Pivot, *, now_was_clamped: bool) -> dict[str, Any]:
    """The pivot as a JSON-ready dict."""
    return {
        **_head(pivot, now_was_clamped),
        "by_worker_count": [
            {"worker_count": int(row.key), **_row_dict(row)} for row in pivot.by_worker_count
        ],
        "by_worker_id": [
            {"worker_id": row.key or None, **_row_dict(row)} for row in pivot.by_worker_id
        ],
    }


def interrupted_line(count: int) -> str:
    """What the text output says of interrupted runs (nothing when there are none)."""
    if not count:
        return ""
    they = "it" if count == 1 else "they"
    return f"{plural(count, 'interrupted run')} among them (scored for the tests {they} recorded)"


def _table(title: str, rows: list[PivotRow]) -> list[str]:
    lines = [f"{title:>10}  {'runs':>6}  {'bad':>5}  {'fail rate':>9}  Wilson 95%"]
    for row in rows:
        key = visible(row.key) or "?"
        lines.append(
            f"{key:>10}  {row.runs:>6}  {row.bad_runs:>5}  {row.fail_rate:>9.1%}  "
            f"{row.wilson_low:.1%} - {row.wilson_high:.1%}"
        )
    return lines


def suspect_dict(suspect: Suspect) -> dict[str, Any]:
    """One suspect as the JSON `causes` entries have it."""
    return {
        "dimension": suspect.dimension,
        "value": suspect.value,
        "bad": suspect.bad,
        "runs": suspect.runs,
        "rate": round(suspect.rate, 6),
        "rest_rate": round(suspect.rest_rate, 6),
        "p_value": float(f"{suspect.p_value:.6g}"),
        "label": suspect.label,
    }


def _dimension_row(row: DimensionRow) -> dict[str, Any]:
    return {
        "value": row.value,
        "runs": row.runs,
        "bad_runs": row.bad_runs,
        "fail_rate": round(row.fail_rate, 6),
        "wilson_low": round(row.wilson_low, 6),
        "wilson_high": round(row.wilson_high, 6),
    }


def dimension_pivot_json(pivot: DimensionPivot, *, now_was_clamped: bool) -> dict[str, Any]:
    """The dimension pivot as a JSON-ready dict."""
    return {
        **_head(pivot, now_was_clamped),
        "by": {dim: [_dimension_row(row) for row in rows] for dim, rows in pivot.by.items()},
        "causes": [suspect_dict(s) for s in pivot.suspects],
    }


def _dimension_table(dimension: str, rows: list[DimensionRow]) -> list[str]:
    # Escaped before the column is measured, so that it lines up as shown.
    values = [visible(row.value) if row.value else "?" for row in rows]
    width = max([len(dimension), *(len(value) for value in values)])
    lines = [f"{dimension:<{width}}  {'runs':>6}  {'bad':>5}  {'fail rate':>9}  Wilson 95%"]
    for row, value in zip(rows, values, strict=True):
        lines.append(
            f"{value:<{width}}  {row.runs:>6}  {row.bad_runs:>5}  "
            f"{row.fail_rate:>9.1%}  {row.wilson_low:.1%} - {row.wilson_high:.1%}"
        )
    return lines


@cli.command("pivot")
@click.argument("db", type=READ_ADDRESS)
@click.argument("test_or_parent")
@click.option("--now", metavar="ISO", help="Score as of this time (default: now).")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "--by",
    "by",
    type=click.Choice([*DIMENSIONS, "all"]),
    help="Split by this recorded dimension (all: every one) and list the suspects.",
)
def pivot_command(
    db: Path | str, test_or_parent: str, now: str | None, fmt: str, by: str | None
) -> None:
    """Runs, bad runs and Wilson interval per worker count and worker id (TEST or family),
    or per value of a recorded dimension with --by. DB may be a postgresql:// URL: its
    replica in the cache directory is synced and read.
    """
    db = local_history(db)
    config = load_config()
    with history_file(db, create=False, readonly=True) as history:
        moment, clamped = effective_now(history, parse_iso(now) if now else None, config)
        if by is not None:
            dimensions = list(DIMENSIONS) if by == "all" else [by]
            split = dimension_pivot(history, test_or_parent, dimensions, now=moment, config=config)
        else:
            pivot = worker_pivot(history, test_or_parent, now=moment, config=config)
    if by is not None:
        _show_dimensions(split, fmt, clamped)
        return
    if fmt == "json":
        click.echo(json.dumps(pivot_json(pivot, now_was_clamped=clamped), indent=2))
        return
    what = f"family of {plural(len(pivot.members), 'param')}" if pivot.kind == "family" else "test"
    clock = " (history is older than the window: shown as of its newest run)" if clamped else ""
    echo_line(f"{pivot.key} ({what}) as of {to_iso(moment)}{clock}")
    echo_text(f"{plural(pivot.runs, 'counted run')}, {pivot.bad_runs} bad (first attempt failed)")
    if pivot.interrupted_runs:
        echo_text(interrupted_line(pivot.interrupted_runs))
    if not pivot.runs:
        return
    echo_text("")
    echo_text("\n".join(_table("workers", pivot.by_worker_count)))
    echo_text("")
    echo_text("\n".join(_table("worker id", pivot.by_worker_id)))


def _show_dimensions(pivot: DimensionPivot, fmt: str, clamped: bool) -> None:
    if fmt == "json":
        click.echo(json.dumps(dimension_pivot_json(pivot, now_was_clamped=clamped), indent=2))
        return
    what = f"family of {len(pivot.members)} params" if pivot.kind == "family" else "test"
    clock = " (history is older than the window: shown as of its newest run)" if clamped else ""
    echo_line(f"{pivot.key} ({what}) as of {to_iso(pivot.now)}{clock}")
    echo_text(f"{pivot.runs} counted runs, {pivot.bad_runs} bad (first attempt failed)")
    if pivot.interrupted_runs:
        echo_text(interrupted_line(pivot.interrupted_runs))
    if not pivot.runs:
        return
    for dimension, rows in pivot.by.items():
        echo_text("")
        if rows:
            echo_text("\n".join(_dimension_table(dimension, rows)))
        else:
            echo_text(f"{dimension}: not recorded")
    echo_text("")
    if not pivot.suspects:
        echo_text("suspects: none (no value fails significantly more than the rest)")
        return
    echo_text("suspects (Fisher's exact test, Benjamini-Hochberg adjusted p):")
    for suspect in pivot.suspects:
        echo_line(
            f"  {suspect.label}: {suspect.bad}/{suspect.runs} bad ({suspect.rate:.0%}) "
            f"against {suspect.rest_rate:.0%} elsewhere, p = {suspect.p_value:.2g}"
        )
