"""Incidents: tag runs (by time window or failure signature) so scoring ignores them."""

from __future__ import annotations

import json
import shlex
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from flaketui.core.config import Config
from flaketui.core.errors import FlaketuiError
from flaketui.core.history.outages import PROPOSED, rejected_rules, reviews
from flaketui.core.history.store import transaction
from flaketui.core.rollups import build as rollups
from flaketui.core.timeutil import parse_iso, to_iso, utc_now

if TYPE_CHECKING:
    from flaketui.core.history.dbhandle import Connected

# Bad runs closer together than this are proposed as one incident window.
PROPOSAL_GAP_HOURS = 4.0


class IncidentError(FlaketuiError):
    """A bad incident request: unknown tag, bad window, unknown signature."""


@dataclass(slots=True)
class IncidentChange:
    """What adding an incident did."""

    tag: str
    kind: str  # window | signature
    runs_tagged: int  # runs newly tagged with this incident
    runs_already_tagged: int  # matching runs left with the other incident they already had
    start: datetime | None = None
    end: datetime | None = None
    signature: str | None = None  # full signature hash


@dataclass(slots=True)
class Incident:
    """A tagged incident as listed: its rules and how many runs carry the tag now."""

    tag: str
    kind: str  # window | signature | outage | ingest (tagged when the run was ingested, no rule)
    runs: int
    start: datetime | None = None  # window rule, or the first tagged run for 'ingest'
    end: datetime | None = None
    signature: str | None = None
    signature_text: str | None = None
    note: str | None = None
    created_at: datetime | None = None
    awaiting_review: bool = False  # an outage proposed and not yet accepted: a suspected one


@dataclass(slots=True)
class ProposedRun:
    """One run in which most tests failed their first attempt."""

    run_id: str
    ts: datetime
    suite: str
    tests: int
    failed_tests: int

    @property
    def failed_share(self) -> float:
        """Share of the run's tests whose first attempt failed."""
        return self.failed_tests / self.tests if self.tests else 0.0


@dataclass(slots=True)
class Proposal:
    """A suggested incident window grouping bad runs within a few hours of each other."""

    tag: str
    start: datetime
    end: datetime
    runs: list[ProposedRun]
    runs_in_window: int  # every untagged run the window would tag, bad or not
    top_signature: str | None = None
    top_signature_text: str | None = None
    suites: list[str] = field(default_factory=list)

    def accept_command(self, db_path: str) -> str:
        """The command line that accepts this proposal."""
        return shlex.join(
            [
                "flaketui", "incident", "add", db_path, self.tag,
                "--from", to_iso(self.start), "--to", to_iso(self.end),
            ]
        )  # fmt: skip


def set_incident(conn: sqlite3.Connection, run_pks: Iterable[int], tag: str | None) -> int:
    """Set or clear runs.incident and refresh the rollups of the runs' days, inside the
    caller's transaction; how many runs."""
    pks = tag_runs(conn, run_pks, tag)
    rollups.refresh_runs(conn, pks)
    return len(pks)


def tag_runs(conn: sqlite3.Connection, run_pks: Iterable[int], tag: str | None) -> list[int]:
    """Set or clear runs.incident: the single place incident tags change; the runs.

    The per-day rollups that depend on runs.incident must then be refreshed for the days of
    the affected runs (rollups.refresh_runs) inside the caller's transaction: once, after all
    of its tags are set, so that a day that several changes touch is recounted once
    (set_incident does both for one change).
    """
    pks = list(run_pks)
    conn.executemany("UPDATE runs SET incident = ? WHERE id = ?", [(tag, pk) for pk in pks])
    return pks


def _first_two(conn: sqlite3.Connection, prefix: str) -> list[Any]:
    sql = "SELECT hash FROM signatures WHERE substr(hash, 1, ?) = ? ORDER BY hash LIMIT 2"
    return conn.execute(sql, (len(prefix), prefix)).fetchall()


def resolve_signature(text: str, first_two: Callable[[str], Sequence[Sequence[Any]]]) -> str:
    """The full signature hash for a hash or a unique prefix of one; `first_two(prefix)` gives
    the first two hashes (as rows) that start with the prefix, from whichever history holds
    them (the file, or a server)."""
    prefix = text.strip().lower()
    if not prefix:
        raise IncidentError("empty signature")
    rows = first_two(prefix)
    if not rows:
        raise IncidentError(f"no failure signature starting with {text!r}")
    if len(rows) > 1:
        raise IncidentError(f"signature prefix {text!r} is ambiguous; give more characters")
    return str(rows[0][0])


def _matching_runs(
    conn: sqlite3.Connection,
    *,
    start: str | None,
    end: str | None,
    signature: str | None,
    only_pks: Sequence[int] | None = None,
) -> list[tuple[int, str | None]]:
    """(run pk, current incident) of the runs one incident rule matches (among only_pks)."""
    if only_pks is not None and not only_pks:
        return []
    among = "" if only_pks is None else " AND runs.id IN (SELECT value FROM json_each(?))"
    pks = [] if only_pks is None else [json.dumps([int(pk) for pk in only_pks])]
    if signature is not None:
        # An outage proposal has both: the runs of its window that failed with its signature.
        rows = conn.execute(
            "SELECT DISTINCT runs.id, runs.incident FROM runs "
            "JOIN results ON results.run = runs.id "
            "JOIN signatures ON signatures.id = results.signature "
            "WHERE signatures.hash = ? AND (? IS NULL OR runs.ts >= ?) "
            f"AND (? IS NULL OR runs.ts <= ?){among}",
            (signature, start, start, end, end, *pks),
        ).fetchall()
    else:
        rows = conn.execute(
            f"SELECT id, incident FROM runs WHERE ts >= ? AND ts <= ?{among}",
            (start, end, *pks),
        ).fetchall()
    return [(int(pk), incident) for pk, incident in rows]


def incident_rule(
    tag: str, *, start: datetime | None, end: datetime | None, signature: str | None
) -> tuple[str, str | None, str | None]:
    """A new incident's tag and window as stored, or IncidentError when the rule is not one."""
    tag = tag.strip()
    if not tag:
        raise IncidentError("an incident needs a non-empty tag")
    has_window = start is not None or end is not None
    if has_window == (signature is not None):
        raise IncidentError("give either a window (--from and --to) or --signature, not both")
    if has_window and (start is None or end is None):
        raise IncidentError("a window incident needs both --from and --to")
    start_ts = to_iso(start) if start is not None else None
    end_ts = to_iso(end) if end is not None else None
    if start_ts is not None and end_ts is not None and end_ts < start_ts:
        raise IncidentError(f"window ends ({end_ts}) before it starts ({start_ts})")
    return tag, start_ts, end_ts


def tag_in_use(tag: str) -> IncidentError:
    """The refusal of a new incident whose tag is taken."""
    return IncidentError(
        f"an incident tagged {tag!r} already exists (see flaketui incident list): "
        "choose another tag, or remove it first"
    )


def _refuse_taken_tag(conn: sqlite3.Connection, tag: str) -> None:
    """IncidentError when tag names an incident already: a rule, tagged runs, or an outage
    proposal (a rejected one too)."""
    taken = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM incidents WHERE tag = :tag)"
        " OR EXISTS (SELECT 1 FROM runs WHERE incident = :tag)",
        {"tag": tag},
    ).fetchone()[0]
    if taken:
        raise tag_in_use(tag)
    if tag in reviews(conn):
        raise suspected_outage_tag(tag)


def suspected_outage_tag(tag: str) -> IncidentError:
    """The refusal of a new incident whose tag is an outage proposal's (a rejected one too)."""
    return IncidentError(
        f"{tag!r} is a suspected outage's tag (see flaketui incident list --proposed): "
        "choose another tag"
    )


def split_matched(matched: Sequence[tuple[int, str | None]], tag: str) -> tuple[list[int], int]:
    """The untagged runs to tag, and how many keep another tag (one tag per run, first wins)."""
    free = [pk for pk, incident in matched if incident is None]
    other = sum(1 for _pk, incident in matched if incident is not None and incident != tag)
    return free, other


def incident_change(
    tag: str,
    start_ts: str | None,
    end_ts: str | None,
    signature: str | None,
    *,
    tagged: int,
    other: int,
) -> IncidentChange:
    """What adding an incident did, as the commands report it."""
    return IncidentChange(
        tag=tag,
        kind="signature" if signature is not None else "window",
        runs_tagged=tagged,
        runs_already_tagged=other,
        start=parse_iso(start_ts) if start_ts else None,
        end=parse_iso(end_ts) if end_ts else None,
        signature=signature,
    )


def add_incident(
    db: Connected,
    tag: str,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    signature: str | None = None,
    note: str | None = None,
) -> IncidentChange:
    """Record an incident rule and tag the untagged runs it matches, in one transaction."""
    tag, start_ts, end_ts = incident_rule(tag, start=start, end=end, signature=signature)
    conn = db.conn
    with transaction(conn):
        _refuse_taken_tag(conn, tag)
        full_hash = (
            resolve_signature(signature, lambda prefix: _first_two(conn, prefix))
            if signature is not None
            else None
        )
        matched = _matching_runs(conn, start=start_ts, end=end_ts, signature=full_hash)
        free, other = split_matched(matched, tag)
        conn.execute(
            "INSERT INTO incidents (tag, start_ts, end_ts, signature, created_at, note) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (tag, start_ts, end_ts, full_hash, to_iso(utc_now()), note),
        )
        tagged = set_incident(conn, free, tag)
    return incident_change(tag, start_ts, end_ts, full_hash, tagged=tagged, other=other)


def apply_incidents(db: Connected, run_pks: Sequence[int] | None = None) -> int:
    """Tag untagged runs matched by recorded incident rules (e.g. runs ingested late)."""
    conn = db.conn
    with transaction(conn):
        return apply_rules(conn, run_pks)


def apply_rules(conn: sqlite3.Connection, run_pks: Sequence[int] | None) -> int:
    """Apply every recorded rule, oldest first, to the untagged runs among run_pks (every run
    with None), inside the caller's transaction; how many runs were tagged."""
    tagged = apply_rule_tags(conn, run_pks)
    rollups.refresh_runs(conn, tagged)
    return len(tagged)


def apply_rule_tags(conn: sqlite3.Connection, run_pks: Sequence[int] | None) -> list[int]:
    """apply_rules without the rollups' refresh, which the caller owes (see tag_runs); the
    runs tagged."""
    tagged: list[int] = []
    rules = conn.execute(
        "SELECT tag, start_ts, end_ts, signature FROM incidents "
        "WHERE signature IS NOT NULL OR (start_ts IS NOT NULL AND end_ts IS NOT NULL) ORDER BY id"
    ).fetchall()
    for tag, start_ts, end_ts, signature in rules:
        matched = _matching_runs(
            conn, start=start_ts, end=end_ts, signature=signature, only_pks=run_pks
        )
        tagged += tag_runs(conn, [pk for pk, incident in matched if incident is None], tag)
    return tagged


def remove_incident(db: Connected, tag: str) -> int:
    """Delete an incident's rules and untag its runs; return how many runs were untagged."""
    conn = db.conn
    with transaction(conn):
        freed = [
            int(row[0]) for row in conn.execute("SELECT id FROM runs WHERE incident = ?", (tag,))
        ]
        rules = conn.execute("DELETE FROM incidents WHERE tag = ?", (tag,)).rowcount
        if not freed and not rules:
            raise IncidentError(f"no incident tagged {tag!r} (see flaketui incident list)")
        tag_runs(conn, freed, None)
        # Another incident's rule may cover runs this tag had claimed first.
        apply_rule_tags(conn, freed)
        rollups.refresh_runs(conn, freed)  # once for both changes
        still = conn.execute(
            "SELECT count(*) FROM runs WHERE incident IS NULL AND id IN "
            "(SELECT value FROM json_each(?))",
            (f"[{','.join(str(pk) for pk in freed)}]",),
        ).fetchone()[0]
    return int(still)


def list_incidents(db: Connected) -> list[Incident]:
    """Every incident: recorded rules, and tags set at ingest without a rule.

    A run carries one tag; among the rules of that tag (one tag may hold several: rules merged
    from other histories, a signature split by re-signing) it is counted for the first rule
    that matches it, so each rule's count is the runs it holds. The tag's runs no rule of it
    matches (tagged at ingest) are counted for its rule-less row, or listed as tagged at
    ingest.
    """
    conn = db.conn
    carried: dict[str, dict[int, str]] = {}
    for pk, tag, ts in conn.execute("SELECT id, incident, ts FROM runs WHERE incident IS NOT NULL"):
        carried.setdefault(str(tag), {})[int(pk)] = str(ts)
    claimed: dict[str, set[int]] = {}
    pending = {tag for tag, state in reviews(conn).items() if state == PROPOSED}
    incidents: list[Incident] = []
    ruleless: dict[str, Incident] = {}
    for tag, start_ts, end_ts, sig, sig_text, created_at, note in conn.execute(
        "SELECT incidents.tag, start_ts, end_ts, incidents.signature, signatures.text, "
        "created_at, note FROM incidents "
        "LEFT JOIN signatures ON signatures.hash = incidents.signature ORDER BY incidents.id"
    ).fetchall():
        tag = str(tag)
        if sig is None and (start_ts is None or end_ts is None):
            # Recorded by `flaketui ingest --incident`: no rule, the runs carry the tag.
            if tag not in ruleless:
                ruleless[tag] = Incident(
                    tag, "ingest", 0, note=note, created_at=parse_iso(created_at)
                )
                incidents.append(ruleless[tag])
            continue
        taken = claimed.setdefault(tag, set())
        free = [pk for pk in carried.get(tag, {}) if pk not in taken]
        held = {
            pk
            for pk, _incident in _matching_runs(
                conn, start=start_ts, end=end_ts, signature=sig, only_pks=free
            )
        }
        taken |= held
        if sig is None:
            kind = "window"
        else:
            kind = "signature" if start_ts is None else "outage"
        incidents.append(
            Incident(
                tag=tag,
                kind=kind,
                runs=len(held),
                start=parse_iso(start_ts) if start_ts else None,
                end=parse_iso(end_ts) if end_ts else None,
                signature=sig,
                signature_text=sig_text,
                note=note,
                created_at=parse_iso(created_at),
                awaiting_review=kind == "outage" and tag in pending,
            )
        )
    for tag in sorted(carried):
        left = sorted(ts for pk, ts in carried[tag].items() if pk not in claimed.get(tag, ()))
        item = ruleless.get(tag)
        if item is None:
            if not left:
                continue
            item = Incident(tag, "ingest", 0)
            incidents.append(item)
        item.runs = len(left)
        if left:
            item.start, item.end = parse_iso(left[0]), parse_iso(left[-1])
    return incidents


def propose_incidents(
    db: Connected,
    *,
    now: datetime,
    config: Config,
    min_tests: int = 10,
    min_failed_share: float = 0.5,
    gap_hours: float = PROPOSAL_GAP_HOURS,
) -> list[Proposal]:
    """Untagged runs where most of the run's tests failed their first attempt, grouped."""
    conn = db.conn
    since = to_iso(now - timedelta(days=config.window_days))
    rows = conn.execute(
        "SELECT runs.id, runs.run_id, runs.ts, runs.suite, count(*) AS tests, "
        "sum(test_runs.bad) AS failed FROM runs "
        "JOIN test_runs ON test_runs.run = runs.id "
        "WHERE runs.incident IS NULL AND runs.source <> 'diagnose' "
        "AND runs.ts > ? AND runs.ts <= ? "
        "AND test_runs.outcome != 'skipped' "
        "GROUP BY runs.id HAVING count(*) >= ? AND sum(test_runs.bad) >= ? * count(*) "
        "ORDER BY runs.ts, runs.id",
        (since, to_iso(now), min_tests, min_failed_share),
    ).fetchall()
    # The runs of a rejected outage count, as a person decided: not proposed again.
    decided = {
        pk
        for start, end, signature in rejected_rules(conn).values()
        for pk, _incident in _matching_runs(conn, start=start, end=end, signature=signature)
    }
    groups: list[list[tuple[int, ProposedRun]]] = []
    for pk, run_id, ts, suite, tests, failed in rows:
        if pk in decided:
            continue
        run = ProposedRun(run_id, parse_iso(ts), suite, int(tests), int(failed))
        if groups and run.ts - groups[-1][-1][1].ts <= timedelta(hours=gap_hours):
            groups[-1].append((pk, run))
        else:
            groups.append([(pk, run)])
    return [_proposal(conn, group) for group in groups]


def _proposal(conn: sqlite3.Connection, group: list[tuple[int, ProposedRun]]) -> Proposal:
    """Describe one group of bad runs as a window proposal."""
    runs = [run for _pk, run in group]
    start, end = runs[0].ts, runs[-1].ts
    pks = f"[{','.join(str(pk) for pk, _run in group)}]"
    in_window = conn.execute(
        "SELECT count(*) FROM runs WHERE incident IS NULL AND source <> 'diagnose'"
        " AND ts >= ? AND ts <= ?",
        (to_iso(start), to_iso(end)),
    ).fetchone()[0]
    top = conn.execute(
        "SELECT signatures.hash, signatures.text FROM test_runs "
        "JOIN signatures ON signatures.id = test_runs.signature "
        "WHERE test_runs.run IN (SELECT value FROM json_each(?)) AND test_runs.bad = 1 "
        "GROUP BY signatures.id ORDER BY count(*) DESC, signatures.hash LIMIT 1",
        (pks,),
    ).fetchone()
    return Proposal(
        tag=f"auto-{start:%Y%m%d-%H%M}",
        start=start,
        end=end,
        runs=runs,
        runs_in_window=int(in_window),
        top_signature=top[0] if top else None,
        top_signature_text=top[1] if top else None,
        suites=sorted({run.suite for run in runs}),
    )
