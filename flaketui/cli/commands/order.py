"""`flaketui order`: the tests that ran before a test on its worker in its bad runs against its
good runs, ranked as candidate polluters."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import click

from flaketui.cli import cli
from flaketui.cli.echo import echo_line, echo_text
from flaketui.cli.params import FilePath
from flaketui.core.config import load_config
from flaketui.core.history.store import history_file
from flaketui.core.output.text import visible
from flaketui.core.scoring.order import Candidate, OrderView, order_view
from flaketui.core.scoring.report import effective_now
from flaketui.core.timeutil import parse_iso, to_iso
from flaketui.core.words import plural

DEFAULT_LIMIT = 20


def candidate_dict(candidate: Candidate) -> dict[str, Any]:
    """One candidate as the JSON output has it."""
    return {
        "test_id": candidate.test_id,
        "role": candidate.role,
        "bad_before": candidate.bad_before,
        "good_before": candidate.good_before,
        "rate_with": round(candidate.rate_with, 6),
        "rate_without": round(candidate.rate_without, 6),
        # Significant digits, not decimals: a polluter's p-value is far below 1e-6.
        "p_value": float(f"{candidate.p_value:.6g}"),
        "suspect": candidate.suspect,
        "explained_by": candidate.explained_by,
    }


def order_json(view: OrderView, *, now_was_clamped: bool, limit: int | None) -> dict[str, Any]:
    """The order view as a JSON-ready dict (the first `limit` candidates)."""
    shown = view.candidates if limit is None else view.candidates[:limit]
    return {
        "key": view.key,
        "kind": view.kind,
        "members": view.members,
        "now": to_iso(view.now),
        "now_was_clamped": now_was_clamped,
        "runs": view.runs,
        "ordered_runs": view.ordered_runs,
        "bad_runs": view.bad_runs,
        "good_runs": view.good_runs,
        "always_before": view.always_before,
        "candidates": [candidate_dict(c) for c in shown],
        "more_candidates": len(view.candidates) - len(shown),
        "replay": None
        if view.replay is None
        else {
            "run_id": view.replay.run_id,
            "order_seed": view.replay.order_seed,
            "command": view.replay.command(),
        },
    }


def order_lines(view: OrderView, limit: int | None) -> list[str]:
    """The order view as the table shows it (after its heading)."""
    lines = _candidate_lines(view, limit)
    if view.replay is not None:
        lines.append("")
        lines.append(
            visible(
                f"replay the order of run {view.replay.run_id}, its latest bad run: "
                f"{shlex.join(view.replay.command())}"
            )
        )
    return lines


def _candidate_lines(view: OrderView, limit: int | None) -> list[str]:
    lines = [
        f"{plural(view.ordered_runs, 'counted run')} with their order recorded "
        f"(of {view.runs}): {view.bad_runs} bad, {view.good_runs} good"
    ]
    if not view.ordered_runs:
        lines.append(
            "no order recorded: the pytest plugin records it (--flaketui-db); reports do not"
        )
        return lines
    if view.always_before:
        lines.append(
            f"{plural(len(view.always_before), 'test')} ran before it in every recorded run: "
            "the order never varied for them, so they cannot be told apart"
        )
    if not view.candidates:
        lines.append("no test ran before it in some runs and not in others")
        return lines
    shown = view.candidates if limit is None else view.candidates[:limit]
    # Escaped before the column is measured, so that it lines up as shown.
    names = [visible(c.test_id) for c in shown]
    width = max(len("ran before it"), *(len(name) for name in names))
    lines.append("")
    lines.append(
        f"{'ran before it':<{width}}  {'in bad':>7}  {'in good':>7}  "
        f"{'fails with / without':>20}  {'p (BH)':>8}  role"
    )
    for c, name in zip(shown, names, strict=True):
        bad = f"{c.bad_before}/{view.bad_runs}"
        good = f"{c.good_before}/{view.good_runs}"
        rates = f"{c.rate_with:.0%} / {c.rate_without:.0%}"
        role = c.role + (", suspect" if c.suspect else "")
        if c.explained_by:
            role += f", explained by {visible(c.explained_by.rsplit('::', 1)[-1])}"
        lines.append(
            f"{name:<{width}}  {bad:>7}  {good:>7}  {rates:>20}  {c.p_value:>8.2g}  {role}"
        )
    hidden = len(view.candidates) - len(shown)
    if hidden:
        lines.append(f"... and {plural(hidden, 'more candidate')} (--limit 0 lists all)")
    return lines


@cli.command("order")
@click.argument("db", type=FilePath(what="history file", dir_okay=False, path_type=Path))
@click.argument("test_or_parent")
@click.option("--now", metavar="ISO", help="Score as of this time (default: now).")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=DEFAULT_LIMIT,
    show_default=True,
    metavar="N",
    help="Show the first N candidates (0: all).",
)
def order_command(db: Path, test_or_parent: str, now: str | None, fmt: str, limit: int) -> None:
    """The tests that ran before TEST (or a family) on its worker in its bad runs against its
    good runs, ranked as candidate polluters (Fisher's exact test, Benjamini-Hochberg)."""
    config = load_config()
    with history_file(db, create=False, readonly=True) as history:
        moment, clamped = effective_now(history, parse_iso(now) if now else None, config)
        view = order_view(history, test_or_parent, now=moment, config=config)
    shown = limit or None
    if fmt == "json":
        click.echo(json.dumps(order_json(view, now_was_clamped=clamped, limit=shown), indent=2))
        return
    what = f"family of {plural(len(view.members), 'param')}" if view.kind == "family" else "test"
    clock = " (history is older than the window: shown as of its newest run)" if clamped else ""
    echo_line(f"{view.key} ({what}) as of {to_iso(moment)}{clock}")
    echo_text("\n".join(order_lines(view, shown)))
