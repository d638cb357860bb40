"""Writers of the server history beyond runs: incidents, retention, audit rows.

Each is one server transaction. Incident tags change ``runs.incident`` (and the run's change
id), so replicas re-read the runs and refresh what they feed; a pruned run leaves a row in
``deletions`` for replicas to apply. Rules are the SQLite history's (flaketui.core.history
.incidents and .prune): one tag per run, the first tag wins; the audit log is never pruned.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from flaketui.core.history.incidents import (
    IncidentChange,
    IncidentError,
    incident_change,
    incident_rule,
    resolve_signature,
    split_matched,
    suspected_outage_tag,
    tag_in_use,
)
from flaketui.core.history.pg.columns import AUDIT_COLUMNS
from flaketui.core.history.prune import check_older_than
from flaketui.core.timeutil import to_iso, utc_now

INCIDENT_LOCK = 0x666C6963  # the push's incident lock: rules change one writer at a time


def _first_two(pg: Any, prefix: str) -> list[Any]:
    sql = "SELECT hash FROM signatures WHERE left(hash, %s) = %s ORDER BY hash LIMIT 2"
    return list(pg.execute(sql, (len(prefix), prefix)).fetchall())


def matching(
    pg: Any, start: str | None, end: str | None, signature: str | None, only: Sequence[int] | None
) -> list[tuple[int, str | None]]:
    if signature is not None:
        sql = (
            "SELECT DISTINCT r.id, r.incident FROM runs AS r JOIN results AS x ON x.run = r.id"
            " JOIN signatures AS g ON g.id = x.signature WHERE g.hash = %s"
        )
        params: tuple[Any, ...] = (signature,)
        # An outage's rule has both: the runs of its window that failed with its signature.
        if start is not None:
            sql += " AND r.ts >= %s"
            params = (*params, start)
        if end is not None:
            sql += " AND r.ts <= %s"
            params = (*params, end)
    else:
        sql = "SELECT id, incident FROM runs AS r WHERE ts >= %s AND ts <= %s"
        params = (start, end)
    if only is not None:
        sql += " AND r.id = ANY(%s)"
        params = (*params, list(only))
    return [(int(pk), incident) for pk, incident in pg.execute(sql, params).fetchall()]


def tag_runs(pg: Any, run_pks: Sequence[int], tag: str | None) -> int:
    if run_pks:
        pg.execute(
            "UPDATE runs SET incident = %s, change = pg_current_xact_id() WHERE id = ANY(%s)",
            (tag, list(run_pks)),
        )
    return len(run_pks)


def add_server_incident(
    pg: Any,
    tag: str,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    signature: str | None = None,
    note: str | None = None,
) -> IncidentChange:
    """add_incident on the server."""
    tag, start_ts, end_ts = incident_rule(tag, start=start, end=end, signature=signature)
    with pg.transaction():
        pg.execute("SELECT pg_advisory_xact_lock(%s)", (INCIDENT_LOCK,))
        taken = pg.execute(
            "SELECT EXISTS (SELECT 1 FROM incidents WHERE tag = %s)"
            " OR EXISTS (SELECT 1 FROM runs WHERE incident = %s)",
            (tag, tag),
        ).fetchone()[0]
        if taken:
            raise tag_in_use(tag)
        if pg.execute("SELECT 1 FROM outage_reviews WHERE tag = %s", (tag,)).fetchone():
            raise suspected_outage_tag(tag)
        full = (
            resolve_signature(signature, lambda prefix: _first_two(pg, prefix))
            if signature is not None
            else None
        )
        matched = matching(pg, start_ts, end_ts, full, None)
        free, other = split_matched(matched, tag)
        pg.execute(
            "INSERT INTO incidents (tag, start_ts, end_ts, signature, created_at, note)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            (tag, start_ts, end_ts, full, to_iso(utc_now()), note),
        )
        tagged = tag_runs(pg, free, tag)
    return incident_change(tag, start_ts, end_ts, full, tagged=tagged, other=other)


def remove_server_incident(pg: Any, tag: str) -> int:
    """remove_incident on the server: the runs that count again."""
    with pg.transaction():
        pg.execute("SELECT pg_advisory_xact_lock(%s)", (INCIDENT_LOCK,))
        freed = [int(r[0]) for r in pg.execute("SELECT id FROM runs WHERE incident = %s", (tag,))]
        rules = pg.execute("DELETE FROM incidents WHERE tag = %s", (tag,)).rowcount
        if not freed and not rules:
            raise IncidentError(f"no incident tagged {tag!r} (see flaketui incident list)")
        tag_runs(pg, freed, None)
        retag(pg, freed)
        still = pg.execute(
            "SELECT count(*) FROM runs WHERE incident IS NULL AND id = ANY(%s)", (freed,)
        ).fetchone()[0]
    return int(still)


def retag(pg: Any, freed: Sequence[int]) -> int:
    """Apply every rule, oldest first, to the untagged runs among freed (another incident's
    rule may cover runs a removed tag had claimed first); how many runs were tagged."""
    tagged = 0
    for rule_tag, start_ts, end_ts, signature in pg.execute(
        "SELECT tag, start_ts, end_ts, signature FROM incidents WHERE signature IS NOT NULL"
        " OR (start_ts IS NOT NULL AND end_ts IS NOT NULL) ORDER BY id"
    ).fetchall():
        matched = matching(pg, start_ts, end_ts, signature, freed)
        tagged += tag_runs(pg, [pk for pk, incident in matched if incident is None], rule_tag)
    return tagged


def prune_server(
    pg: Any, older_than_days: float, *, now: datetime | None = None
) -> tuple[datetime, int, int]:
    """Delete the server's runs older than the cutoff (with their rows); (cutoff, runs, results).

    Each pruned run leaves its run id in ``deletions``, so replicas drop it at their next sync.
    """
    check_older_than(older_than_days)
    cutoff = (now or utc_now()) - timedelta(days=older_than_days)
    with pg.transaction():
        old = pg.execute(
            "SELECT id, run_id FROM runs WHERE ts < %s ORDER BY id", (to_iso(cutoff),)
        ).fetchall()
        if not old:
            return cutoff, 0, 0
        ids = [int(row[0]) for row in old]
        results = pg.execute("SELECT count(*) FROM results WHERE run = ANY(%s)", (ids,)).fetchone()
        pg.execute("DELETE FROM runs WHERE id = ANY(%s)", (ids,))
        pg.execute(
            "INSERT INTO deletions (kind, key) SELECT 'run', k FROM unnest(%s::text[]) AS k",
            ([str(row[1]) for row in old],),
        )
    return cutoff, len(old), int(results[0])


def push_audit(pg: Any, rows: Sequence[Sequence[object]]) -> int:
    """Append audit rows (AUDIT_COLUMNS order) the server does not have yet (equal in every
    column: its unique key); how many landed."""
    if not rows:
        return 0
    marks = ", ".join(["%s"] * len(AUDIT_COLUMNS))
    with pg.transaction(), pg.cursor() as cur:
        cur.executemany(
            f"INSERT INTO audit_log ({', '.join(AUDIT_COLUMNS)}) VALUES ({marks})"
            " ON CONFLICT DO NOTHING",
            [tuple(row) for row in rows],
        )
        return max(int(cur.rowcount), 0)
