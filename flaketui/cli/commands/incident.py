"""`flaketui incident add|list|remove`: tag runs as incidents so scoring ignores them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from flaketui.cli import cli
from flaketui.cli.history_address import HISTORY_ADDRESS, local_history, shown
from flaketui.core.config import load_config
from flaketui.core.errors import FlaketuiError
from flaketui.core.history.incidents import (
    Incident,
    IncidentChange,
    add_incident,
    list_incidents,
    propose_incidents,
    remove_incident,
)
from flaketui.core.history.pg.admin import add_server_incident, remove_server_incident
from flaketui.core.history.store import open_history
from flaketui.core.scoring.report import effective_now
from flaketui.core.timeutil import parse_iso, to_iso

DB_PATH = click.Path(dir_okay=False, path_type=Path)


@cli.group()
def incident() -> None:
    """Tag runs as incidents (outages) so they do not count, and review proposals."""


@incident.command("add")
@click.argument("db", type=HISTORY_ADDRESS)
@click.argument("tag")
@click.option("--from", "start", metavar="ISO", help="Window start (inclusive, UTC).")
@click.option("--to", "end", metavar="ISO", help="Window end (inclusive, UTC).")
@click.option("--signature", metavar="HASH", help="Tag every run with this failure signature.")
@click.option("--note", help="Why: shown by `incident list`.")
def add_command(
    db: Path | str,
    tag: str,
    start: str | None,
    end: str | None,
    signature: str | None,
    note: str | None,
) -> None:
    """Tag the runs in a time window, or with a failure signature, as incident TAG."""
    if signature is None and (start is None or end is None):
        raise FlaketuiError("give --from and --to (a window) or --signature HASH")
    window: dict[str, Any] = {
        "start": parse_iso(start) if start is not None else None,
        "end": parse_iso(end) if end is not None else None,
        "signature": signature,
        "note": note,
    }
    change: IncidentChange
    if isinstance(db, str):
        change = _on_server(db, "adding the incident", add_server_incident, tag, **window)
    else:
        change = add_incident(open_history(db, create=False), tag, **window)
    what = (
        f"signature {change.signature}"
        if change.kind == "signature"
        else f"{to_iso(change.start)} .. {to_iso(change.end)}"  # type: ignore[arg-type]
    )
    click.echo(f"incident {change.tag} ({what}): tagged {change.runs_tagged} run(s)")
    if change.runs_already_tagged:
        click.echo(f"  {change.runs_already_tagged} matching run(s) keep their other incident tag")


def _describe(item: Incident) -> str:
    """One incident's rule (or origin), time span and note."""
    span = f"{to_iso(item.start)} .. {to_iso(item.end)}" if item.start and item.end else ""
    if item.kind == "signature":
        rule = f"signature {item.signature} {item.signature_text or ''}".rstrip()
    elif item.kind == "window":
        rule = f"window {span}"
    else:
        rule = f"tagged at ingest {span}".rstrip()
    # The ingest writer's own note only repeats the origin.
    note = f"  ({item.note})" if item.note and item.note != "tagged at ingest" else ""
    return rule + note


@incident.command("list")
@click.argument("db", type=HISTORY_ADDRESS)
@click.option("--now", metavar="ISO", help="Propose incidents as of this time (default: now).")
def list_command(db: Path | str, now: str | None) -> None:
    """List tagged incidents and the runs proposed as incidents (most tests failed at once)."""
    history = open_history(local_history(db), create=False, readonly=True)
    config = load_config()
    moment, _clamped = effective_now(history, parse_iso(now) if now else None, config)
    incidents = list_incidents(history)
    if not incidents:
        click.echo("no tagged incidents")
    for item in incidents:
        click.echo(f"{item.tag}: {item.runs} run(s), {_describe(item)}")
    proposals = propose_incidents(history, now=moment, config=config)
    for proposal in proposals:
        worst = max(proposal.runs, key=lambda run: run.failed_share)
        click.echo(
            f"PROPOSED {proposal.tag}: {len(proposal.runs)} run(s) where most tests failed "
            f"(worst {worst.failed_tests}/{worst.tests} in {worst.run_id}), "
            f"{to_iso(proposal.start)} .. {to_iso(proposal.end)}, "
            f"suites {', '.join(proposal.suites)}; {proposal.runs_in_window} run(s) in window"
        )
        if proposal.top_signature_text:
            click.echo(f"  top signature {proposal.top_signature}: {proposal.top_signature_text}")
        click.echo(f"  accept: {proposal.accept_command(shown(db))}")
    if not proposals:
        click.echo("no proposed incidents")


@incident.command("remove")
@click.argument("db", type=HISTORY_ADDRESS)
@click.argument("tag")
def remove_command(db: Path | str, tag: str) -> None:
    """Remove incident TAG: its runs count again."""
    freed: int
    if isinstance(db, str):
        freed = _on_server(db, "removing the incident", remove_server_incident, tag)
    else:
        freed = remove_incident(open_history(db, create=False), tag)
    click.echo(f"incident {tag} removed: {freed} run(s) count again")


def _on_server(url: str, doing: str, operation: Any, *args: Any, **kwargs: Any) -> Any:
    """Run an incident operation on the server history at url."""
    from flaketui.core.history.pg.connect import connect, server_errors

    pg = connect(url)
    try:
        with server_errors(url, doing):
            return operation(pg, *args, **kwargs)
    finally:
        pg.close()
