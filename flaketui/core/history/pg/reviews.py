"""Suspected outages' reviews on the server, by the rules of a history file
(flaketui.core.history.outages): an outage is proposed (awaiting review), accepted (an ordinary
incident row, no review row) or rejected (no incident row; its runs count, and its rule is
kept so the same cluster is never proposed again).

Pushes and syncs carry each outage's state as a merge of history files does: a decision beats a
proposal awaiting review, and where the two sides decided differently the destination keeps its
own. Reviews change under the incidents' advisory lock, one writer at a time.
"""

from __future__ import annotations

from typing import Any

from flaketui.core.history.incidents import IncidentError
from flaketui.core.history.outages import ACCEPTED, PROPOSED, REJECTED, settle
from flaketui.core.history.pg.admin import INCIDENT_LOCK, matching, retag, tag_runs

Rule = tuple[str, str, str]  # start, end, signature


def has_reviews(pg: Any) -> bool:
    """Whether the server keeps reviews (schema version 4 on; an older one, only ever met
    unmigrated, holds accepted outages only)."""
    return pg.execute("SELECT to_regclass('outage_reviews')").fetchone()[0] is not None


def server_states(pg: Any) -> dict[str, str]:
    """Every outage's state on the server, by tag (outage_states of a history file)."""
    states: dict[str, str] = {}
    if has_reviews(pg):
        states = {
            str(tag): str(state)
            for tag, state in pg.execute("SELECT tag, state FROM outage_reviews").fetchall()
        }
    for (tag,) in pg.execute(
        "SELECT DISTINCT tag FROM incidents WHERE note LIKE 'outage:%'"
    ).fetchall():
        states.setdefault(str(tag), ACCEPTED)
    return states


def server_rejected_rules(pg: Any) -> dict[str, Rule]:
    """(start, end, signature) of every rejected outage whose rule the server kept, by tag."""
    if not has_reviews(pg):
        return {}
    return {
        str(tag): (str(start), str(end), str(signature))
        for tag, start, end, signature in pg.execute(
            "SELECT tag, start_ts, end_ts, signature FROM outage_reviews WHERE state = 'rejected'"
            " AND start_ts IS NOT NULL AND end_ts IS NOT NULL AND signature IS NOT NULL"
        ).fetchall()
    }


def _write(pg: Any, tag: str, state: str, rule: Rule | None = None) -> None:
    """Record a state (an accepted outage leaves the table); a row is rewritten only when it
    changes, so replicas see a change id move only then."""
    if state == ACCEPTED:
        pg.execute("DELETE FROM outage_reviews WHERE tag = %s", (tag,))
        return
    start, end, signature = rule if rule is not None else (None, None, None)
    pg.execute(
        "INSERT INTO outage_reviews AS o (tag, state, start_ts, end_ts, signature)"
        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tag) DO UPDATE SET state = excluded.state,"
        " start_ts = coalesce(excluded.start_ts, o.start_ts),"
        " end_ts = coalesce(excluded.end_ts, o.end_ts),"
        " signature = coalesce(excluded.signature, o.signature), change = pg_current_xact_id()"
        " WHERE o.state IS DISTINCT FROM excluded.state"
        " OR (excluded.start_ts IS NOT NULL AND o.start_ts IS NULL)",
        (tag, state, start, end, signature),
    )


def _reject(pg: Any, tag: str, rule: Rule | None) -> int:
    """Reject outage tag on the server: delete its incident rows, untag its runs (another rule
    may take them), keep its rule (the incident row's, else the one kept already, else `rule`);
    how many runs count again."""
    row = pg.execute(
        "SELECT start_ts, end_ts, signature FROM incidents WHERE tag = %s"
        " AND start_ts IS NOT NULL AND end_ts IS NOT NULL AND signature IS NOT NULL"
        " ORDER BY id LIMIT 1",
        (tag,),
    ).fetchone()
    freed = [int(r[0]) for r in pg.execute("SELECT id FROM runs WHERE incident = %s", (tag,))]
    pg.execute("DELETE FROM incidents WHERE tag = %s", (tag,))
    tag_runs(pg, freed, None)
    retagged = retag(pg, freed)
    if row is not None:
        rule = (str(row[0]), str(row[1]), str(row[2]))
    elif tag in server_rejected_rules(pg):
        rule = None  # kept already
    _write(pg, tag, REJECTED, rule)
    return len(freed) - retagged


def lock_reviews(pg: Any) -> dict[str, str]:
    """Take the incidents' lock (inside the caller's transaction); the states before a change."""
    pg.execute("SELECT pg_advisory_xact_lock(%s)", (INCIDENT_LOCK,))
    return server_states(pg)


def take_into_server(
    pg: Any, theirs: dict[str, str], their_rules: dict[str, Rule], before: dict[str, str]
) -> list[str]:
    """Give the server the review of each outage of a pushed history (`theirs`, with the rules
    it kept of rejected ones), its incident rows already pushed; `before` holds the server's
    states from before the push. Inside the caller's transaction, under lock_reviews; the
    outages the two decided differently (the server's decision stays)."""
    kept: list[str] = []
    if not has_reviews(pg):
        return kept
    for tag, their_state in sorted(theirs.items()):
        state, differ = settle(before.get(tag), their_state)
        if differ:
            kept.append(tag)
        if state == REJECTED:
            _reject(pg, tag, their_rules.get(tag))
        else:
            _write(pg, tag, state)
    return kept


def decide_on_server(pg: Any, tag: str, decision: str, proposal: tuple[Any, ...] | None) -> None:
    """Accept or reject (decision) outage tag on the server, in one transaction.

    proposal: the incident row (tag, start_ts, end_ts, signature, created_at, note) of the
    replica's proposal, for an outage the server has not heard of yet (proposed in the replica
    only): accepting records its rule on the server and tags the untagged runs it matches.
    """
    with pg.transaction():
        state = lock_reviews(pg).get(tag)
        if state not in (None, PROPOSED):
            raise IncidentError(
                f"outage {tag!r} was {state} on the server meanwhile"
                " (see flaketui incident list --proposed)"
            )
        if decision == REJECTED:
            rule = None if proposal is None else (str(proposal[1]), str(proposal[2]),
                                                  str(proposal[3]))  # fmt: skip
            _reject(pg, tag, rule)
            return
        has_rule = pg.execute("SELECT 1 FROM incidents WHERE tag = %s", (tag,)).fetchone()
        if has_rule is None and proposal is not None:
            pg.execute(
                "INSERT INTO incidents (tag, start_ts, end_ts, signature, created_at, note)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                tuple(proposal),
            )
            matched = matching(pg, proposal[1], proposal[2], proposal[3], None)
            tag_runs(pg, [pk for pk, incident in matched if incident is None], tag)
        _write(pg, tag, ACCEPTED)
