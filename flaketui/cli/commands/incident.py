"""`flaketui incident add|list|remove`: tag runs as incidents so scoring ignores them."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from flaketui.cli import cli
from flaketui.cli.echo import echo_line, echo_text
from flaketui.cli.history_address import HISTORY_ADDRESS, local_history, shown
from flaketui.core.config import load_config
from flaketui.core.errors import FlaketuiError
from flaketui.core.history.address import command_address
from flaketui.core.history.incidents import (
    Incident,
    IncidentChange,
    add_incident,
    list_incidents,
    propose_incidents,
    remove_incident,
)
from flaketui.core.history.outages import (
    ACCEPTED,
    REJECTED,
    Outage,
    accept_outage,
    find_outages,
    outage_proposal,
    proposed_outages,
    record_outages,
    reject_outage,
)
from flaketui.core.history.pg.admin import add_server_incident, remove_server_incident
from flaketui.core.history.store import history_file
from flaketui.core.output.notices import review_command
from flaketui.core.scoring.report import effective_now
from flaketui.core.timeutil import parse_iso, to_iso
from flaketui.core.words import plural

if TYPE_CHECKING:
    from flaketui.core.config import Config
    from flaketui.core.history.dbhandle import Connected


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
        with history_file(db, create=False) as history:
            change = add_incident(history, tag, **window)
    if change.start is not None and change.end is not None:
        what = f"{to_iso(change.start)} .. {to_iso(change.end)}"
    else:
        what = f"signature {change.signature}"
    echo_line(f"incident {change.tag} ({what}): tagged {plural(change.runs_tagged, 'run')}")
    if change.runs_already_tagged:
        keep = "keeps its" if change.runs_already_tagged == 1 else "keep their"
        count = plural(change.runs_already_tagged, "matching run")
        echo_text(f"  {count} {keep} other incident tag")


def _describe(item: Incident) -> str:
    """One incident's rule (or origin), time span and note."""
    span = f"{to_iso(item.start)} .. {to_iso(item.end)}" if item.start and item.end else ""
    if item.kind == "signature":
        rule = f"signature {item.signature} {item.signature_text or ''}".rstrip()
    elif item.kind == "window":
        rule = f"window {span}"
    elif item.kind == "outage":
        # Accepted, it is an outage like any other: only a proposal is a suspected one.
        rule = f"suspected outage {span}" if item.awaiting_review else f"outage {span}"
    else:
        rule = f"tagged at ingest {span}".rstrip()
    # The ingest writer's own note only repeats the origin.
    note = f"  ({item.note})" if item.note and item.note != "tagged at ingest" else ""
    return rule + note


def review_hint(pending: int, db: str, now: str | None = None) -> str:
    """The line that counts the suspected outages awaiting review, with the command (for the
    history as the user named it, a URL without its password, and at the same --now) that
    shows them (`review_command`, which the notices of `check` and the reports end with too)."""
    return f"{plural(pending, 'suspected outage')} excluded from scoring: review with " + (
        review_command(db, now)
    )


def propose_outages(history: Connected, config: Config, db: str, *, err: bool = False) -> None:
    """After a write: propose new outages as incidents (excluded from scoring) and say so (on
    stderr with err: a command whose stdout is a report); db names the history as the user
    gave it."""
    moment, _clamped = effective_now(history, None, config)
    new = record_outages(history, now=moment, config=config)
    if new:
        echo_line(review_hint(len(new), db), err=err)


STATE_WORDS = {
    "proposed": "excluded from scoring, awaiting review",
    "rejected": "rejected: its runs count",
    "accepted": "accepted",
    "new": "not excluded (exclude_proposed_outages is off)",
}


def _show_outage(db: str, item: Outage) -> None:
    echo_line(
        f"OUTAGE {item.tag}: {item.failed_tests} of {item.tests} tests failed with one "
        f"signature in {plural(len(item.run_ids), 'run')}, "
        f"{to_iso(item.start)} .. {to_iso(item.end)}, "
        f"suites {', '.join(item.suites)}; {STATE_WORDS[item.status]}"
    )
    echo_line(f"  signature {item.signature}: {item.signature_text}")
    echo_line(f"  runs: {', '.join(item.run_ids)}")
    if item.status == "proposed":
        address, _note = command_address(db)
        for verb in ("accept", "reject"):
            echo_line(f"  {verb}: {shlex.join(['flaketui', 'incident', verb, address, item.tag])}")


@incident.command("accept")
@click.argument("db", type=HISTORY_ADDRESS)
@click.argument("tag")
def accept_command(db: Path | str, tag: str) -> None:
    """Keep proposed outage TAG as an incident: its runs stay out of scoring. For a server, the
    decision is the server's, for every replica."""
    _decide_on_server(db, tag, ACCEPTED)
    with history_file(local_history(db, sync=False), create=False) as history:
        runs = accept_outage(history, tag)
    echo_line(
        f"outage {tag} accepted: {plural(runs, 'run')} {'stays' if runs == 1 else 'stay'} excluded"
    )


@incident.command("reject")
@click.argument("db", type=HISTORY_ADDRESS)
@click.argument("tag")
def reject_command(db: Path | str, tag: str) -> None:
    """Reject proposed outage TAG: its runs count again; it is not proposed again. For a server,
    the decision is the server's, for every replica."""
    _decide_on_server(db, tag, REJECTED)
    with history_file(local_history(db, sync=False), create=False) as history:
        runs = reject_outage(history, tag)
    echo_line(
        f"outage {tag} rejected: {plural(runs, 'run')} {'counts' if runs == 1 else 'count'} again"
    )


def _decide_on_server(db: Path | str, tag: str, decision: str) -> None:
    """For a server: sync its replica, then record the decision on the server (the replica
    takes it right after, as the caller decides there too)."""
    if isinstance(db, Path):
        return
    from flaketui.core.history.pg.reviews import decide_on_server

    with history_file(local_history(db), create=False, readonly=True) as history:
        proposal = outage_proposal(history.conn, tag)
    _on_server(db, f"recording the review of outage {tag}", decide_on_server, tag, decision,
               proposal)  # fmt: skip


@incident.command("list")
@click.argument("db", type=HISTORY_ADDRESS)
@click.option("--now", metavar="ISO", help="Propose incidents as of this time (default: now).")
@click.option(
    "--proposed",
    is_flag=True,
    help="Only the suspected outages (many tests failing with one signature), with evidence.",
)
def list_command(db: Path | str, now: str | None, proposed: bool) -> None:
    """List tagged incidents and the runs proposed as incidents (most tests failed at once)."""
    config = load_config()
    with history_file(local_history(db), create=False, readonly=True) as history:
        moment, _clamped = effective_now(history, parse_iso(now) if now else None, config)
        outages = find_outages(history.conn, now=moment, config=config)
        if not proposed:
            incidents = list_incidents(history)
            proposals = propose_incidents(history, now=moment, config=config)
            # Counted as the report's header counts them: what the window's scores leave out.
            excluded = proposed_outages(history.conn, now=moment, window_days=config.window_days)
    _address, note = command_address(shown(db))
    if proposed:
        for outage in outages:
            _show_outage(shown(db), outage)
        if not outages:
            echo_text("no suspected outages")
        elif note and any(outage.status == "proposed" for outage in outages):
            echo_line(f"note: in the commands above, {note}")
        return
    if not incidents:
        echo_text("no tagged incidents")
    for item in incidents:
        echo_line(f"{item.tag}: {plural(item.runs, 'run')}, {_describe(item)}")
    for proposal in proposals:
        worst = max(proposal.runs, key=lambda run: run.failed_share)
        echo_line(
            f"PROPOSED {proposal.tag}: {plural(len(proposal.runs), 'run')} where most tests failed "
            f"(worst {worst.failed_tests}/{worst.tests} in {worst.run_id}), "
            f"{to_iso(proposal.start)} .. {to_iso(proposal.end)}, "
            f"suites {', '.join(proposal.suites)}; "
            f"{plural(proposal.runs_in_window, 'run')} in window"
        )
        if proposal.top_signature_text:
            echo_line(f"  top signature {proposal.top_signature}: {proposal.top_signature_text}")
        echo_line(f"  accept: {proposal.accept_command(command_address(shown(db))[0])}")
    if excluded:
        echo_line(review_hint(len(excluded), shown(db), now))
    elif not proposals:
        echo_text("no proposed incidents")
    if proposals and note and not excluded:
        echo_line(f"note: in the commands above, {note}")


@incident.command("remove")
@click.argument("db", type=HISTORY_ADDRESS)
@click.argument("tag")
def remove_command(db: Path | str, tag: str) -> None:
    """Remove incident TAG: its runs count again."""
    freed: int
    if isinstance(db, str):
        freed = _on_server(db, "removing the incident", remove_server_incident, tag)
    else:
        with history_file(db, create=False) as history:
            freed = remove_incident(history, tag)
    counts = "counts" if freed == 1 else "count"
    echo_line(f"incident {tag} removed: {plural(freed, 'run')} {counts} again")


def _on_server(url: str, doing: str, operation: Any, *args: Any, **kwargs: Any) -> Any:
    """Run an incident operation on the server history at url."""
    from flaketui.core.history.pg.connect import connect, server_errors

    pg = connect(url)
    try:
        with server_errors(url, doing):
            return operation(pg, *args, **kwargs)
    finally:
        pg.close()
