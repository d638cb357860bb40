"""Outage detection: many distinct tests failing with one signature at once.

An outage is a failure signature that many distinct tests failed with (their first attempt),
in one run or across runs within `outage_span_hours` of the first such failure: at least
`outage_min_tests` tests (absolute), and at least `outage_min_share` of the distinct tests
those runs ran (relative). A shared service down for a few runs fails a fifth of a suite with
one message; a flaky test, however often it fails, is one test.

Found outages are proposed as incidents (`record_outages`, after an ingest or a merge): an
incident row with the cluster's window and signature, tagged `outage-YYYYMMDD-HHMM-<hash>`,
whose runs are tagged so scoring excludes them (`exclude_proposed_outages`, on by default).
A flaky test that failed in an outage keeps its evidence from every other run. An outage
passes: a cluster is proposed only once at least half of its tests passed again in a later
run (the re-run of the red commit, the next push), so a change that broke five tests at once
is left to the scorer, which calls it a regression. A person then
accepts the proposal (it stays, as any incident) or rejects it (its runs count again, and the
same cluster is never proposed again). Review states live in `meta` under REVIEW_KEY, so the
store's schema is unchanged: {tag: "proposed" | "rejected"}; an accepted proposal is an
ordinary incident and leaves the map. A rejected proposal's rule (window and signature) is kept
under REJECTED_KEY, {tag: [start, end, signature]}: the runs it matches count, and are not
proposed again as runs where most tests failed either.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from flaketui.core.config import Config
from flaketui.core.history.store import transaction
from flaketui.core.rollups.pending import WAITING_TABLE
from flaketui.core.timeutil import parse_iso, to_iso, utc_now
from flaketui.core.words import plural

if TYPE_CHECKING:
    from flaketui.core.history.dbhandle import Connected

REVIEW_KEY = "outage_reviews"
REJECTED_KEY = "outage_rejections"
PROPOSED = "proposed"
REJECTED = "rejected"
ACCEPTED = "accepted"


@dataclass(slots=True)
class Outage:
    """A cluster of first-attempt failures with one signature: the evidence of a proposal."""

    tag: str
    signature: str
    signature_text: str
    start: datetime
    end: datetime
    run_pks: list[int]
    run_ids: list[str]
    failed_tests: int  # distinct tests that failed with the signature
    tests: int  # distinct tests the cluster's runs ran
    suites: list[str] = field(default_factory=list)
    status: str = "new"  # new (not recorded) | proposed | rejected | accepted

    @property
    def share(self) -> float:
        return self.failed_tests / self.tests if self.tests else 0.0


def _both(select: str, filed: str = "test_runs") -> str:
    """`select` (a query of per-test rows naming its table `{table}`) over the rows filed into
    test_runs and those of runs still waiting to be filed, as one compound query: the search
    runs after every `flaketui ingest`, whose run waits (flaketui.core.rollups.pending)."""
    return f"{select.format(table=filed)} UNION ALL {select.format(table=WAITING_TABLE)}"


def _tag(start: datetime, signature: str) -> str:
    return f"outage-{start:%Y%m%d-%H%M}-{signature[:6]}"


def reviews(conn: sqlite3.Connection) -> dict[str, str]:
    """The review state of every recorded proposal, by tag."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (REVIEW_KEY,)).fetchone()
    return dict(json.loads(row[0])) if row else {}


def _save_reviews(conn: sqlite3.Connection, states: dict[str, str]) -> None:
    _set(conn, REVIEW_KEY, json.dumps(states, sort_keys=True))


def _set(conn: sqlite3.Connection, key: str, value: str) -> None:
    """Write a meta value unless it is there already (a merge run twice changes nothing)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    if row is None or row[0] != value:
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))


def find_outages(
    conn: sqlite3.Connection, *, now: datetime, config: Config, remember: bool = False
) -> list[Outage]:
    """Every outage-like cluster among the runs of the window, oldest first.

    Runs already tagged with another incident are left out, and so are `flaketui diagnose`
    runs (experiments that fail a test on purpose); runs tagged with an outage proposal are
    kept, so a recorded proposal is found again (and shown with its state). `remember`
    (inside the caller's write transaction): keep the runs' counts of tests run that this
    search took (_run_sizes), so the next one reads them instead.
    """
    since = to_iso(now - timedelta(days=config.window_days))
    states = reviews(conn)
    proposal_tags = json.dumps(sorted(states))
    # The window's failed first attempts, from the index that holds them alone (in time order,
    # with their test, run and signature).
    failures = conn.execute(
        "SELECT tr.run, tr.ts, s.hash, s.text, tr.test FROM ("
        + _both(
            "SELECT run, ts, signature, test FROM {table} WHERE bad = 1"
            " AND ts > :since AND ts <= :now",
            "test_runs INDEXED BY test_runs_failed",
        )
        + ") tr CROSS JOIN runs r ON r.id = tr.run JOIN signatures s ON s.id = tr.signature "
        "WHERE r.source <> 'diagnose' AND (r.incident IS NULL OR r.incident IN "
        "(SELECT value FROM json_each(:tags))) ORDER BY s.hash, tr.ts, tr.run",
        {"since": since, "now": to_iso(now), "tags": proposal_tags},
    ).fetchall()
    span = timedelta(hours=config.outage_span_hours)
    clusters: list[tuple[str, str, datetime, dict[int, str], set[int]]] = []
    moments: dict[str, datetime] = {}  # a run's failures share its ts: parsed once a run
    for run, ts, sig, text, test in failures:
        when = moments.get(ts)
        if when is None:
            when = moments[ts] = parse_iso(ts)
        last = clusters[-1] if clusters else None
        if last is None or last[0] != sig or when - last[2] > span:
            clusters.append((sig, text, when, {}, set()))
            last = clusters[-1]
        last[3][int(run)] = ts
        last[4].add(int(test))
    candidates = [c for c in clusters if len(c[4]) >= config.outage_min_tests]
    sizes = _run_sizes(conn, {pk for c in candidates for pk in c[3]}, remember=remember)
    found = []
    for sig, text, start, runs, failed in candidates:
        # The tests a cluster's runs ran are at least those any one of them ran: most clusters
        # (a few tests sharing a common message) fall short of that share already, and only
        # the others count the tests of all their runs.
        if len(failed) < config.outage_min_share * max(sizes.get(pk, 0) for pk in runs):
            continue
        pks = sorted(runs, key=lambda pk: (runs[pk], pk))
        ran, suites, run_ids = _runs_facts(conn, pks)
        if len(failed) < config.outage_min_share * ran:
            continue
        if 2 * _recovered(conn, failed, runs[pks[-1]]) < len(failed):
            continue
        tag = _tag(start, sig)
        found.append(
            Outage(
                tag=tag,
                signature=sig,
                signature_text=text,
                start=start,
                end=parse_iso(runs[pks[-1]]),
                run_pks=pks,
                run_ids=run_ids,
                failed_tests=len(failed),
                tests=ran,
                suites=suites,
                status=states.get(tag, "new"),
            )
        )
    accepted = {
        str(tag) for (tag,) in conn.execute("SELECT tag FROM incidents WHERE note LIKE 'outage:%'")
    }
    for outage in found:
        if outage.status == "new" and outage.tag in accepted:
            outage.status = ACCEPTED
    return found


def _recovered(conn: sqlite3.Connection, tests: set[int], after: str) -> int:
    """How many of `tests` passed their first attempt in a run after `after` (not a diagnose
    run: an experiment's pass says nothing about the outage)."""
    row = conn.execute(
        "SELECT count(DISTINCT tr.test) FROM ("
        + _both(
            "SELECT test, run FROM {table} WHERE bad = 0 AND outcome <> 'skipped'"
            " AND ts > :after AND test IN (SELECT value FROM json_each(:tests))"
        )
        + ") tr JOIN runs r ON r.id = tr.run WHERE r.source <> 'diagnose'",
        {"after": after, "tests": json.dumps(sorted(tests))},
    ).fetchone()
    return int(row[0])


def _run_sizes(
    conn: sqlite3.Connection, run_pks: set[int], *, remember: bool = False
) -> dict[int, int]:
    """A lower bound of the tests (not skipped) each of run_pks ran, by run row id: its tests
    whose first attempt was not skipped, read in `results`' key order (run first); a test
    skipped first and run on a later attempt is left out. A run counted before keeps its count
    in runs.ran_at_least (still a lower bound: a run only gains tests, and one whose attempts
    move is counted again); the others are counted here, and kept when `remember`."""
    if not run_pks:
        return {}
    sizes = {
        int(run): int(count)
        for run, count in conn.execute(
            "SELECT id, ran_at_least FROM runs WHERE id IN (SELECT value FROM json_each(?))"
            " AND ran_at_least IS NOT NULL",
            (json.dumps(sorted(run_pks)),),
        )
    }
    missing = sorted(run_pks - sizes.keys())
    if not missing:
        return sizes
    counted = dict.fromkeys(missing, 0)
    counted.update(
        (int(run), int(count))
        for run, count in conn.execute(
            "SELECT run, count(*) FROM results WHERE run IN (SELECT value FROM json_each(?)) "
            "AND attempt = 1 AND outcome <> 'skipped' GROUP BY run",
            (json.dumps(missing),),
        )
    )
    if remember:
        conn.executemany(
            "UPDATE runs SET ran_at_least = ? WHERE id = ?",
            [(count, run) for run, count in counted.items()],
        )
    return sizes | counted


def _runs_facts(conn: sqlite3.Connection, pks: list[int]) -> tuple[int, list[str], list[str]]:
    """(distinct tests run, suites, run ids) of some runs."""
    wanted = json.dumps(pks)
    ran = conn.execute(
        "SELECT count(DISTINCT test) FROM ("
        + _both(
            "SELECT test FROM {table} WHERE outcome <> 'skipped'"
            " AND run IN (SELECT value FROM json_each(:runs))"
        )
        + ")",
        {"runs": wanted},
    ).fetchone()[0]
    rows = conn.execute(
        "SELECT run_id, suite FROM runs WHERE id IN (SELECT value FROM json_each(?)) "
        "ORDER BY ts, id",
        (wanted,),
    ).fetchall()
    return int(ran), sorted({str(s) for _r, s in rows}), [str(r) for r, _s in rows]


def _note(outage: Outage) -> str:
    return (
        f"outage: {outage.failed_tests} of {outage.tests} tests failed with "
        f"{outage.signature_text} in {plural(len(outage.run_pks), 'run')}"
    )


def record_outages(db: Connected, *, now: datetime | None, config: Config) -> list[Outage]:
    """Propose the outages not seen before as incidents and exclude their runs from scoring.

    Does nothing unless `exclude_proposed_outages` is on. Returns the new proposals.
    """
    if not config.exclude_proposed_outages:
        return []
    from flaketui.core.history.incidents import tag_runs
    from flaketui.core.rollups import build as rollups

    conn = db.conn
    moment = now or utc_now()
    with transaction(conn):
        states = reviews(conn)
        found = find_outages(conn, now=moment, config=config, remember=True)
        new = [o for o in found if o.status == "new"]
        tagged: list[int] = []
        for outage in new:
            conn.execute(
                "INSERT INTO incidents (tag, start_ts, end_ts, signature, created_at, note) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    outage.tag,
                    to_iso(outage.start),
                    to_iso(outage.end),
                    outage.signature,
                    to_iso(utc_now()),
                    _note(outage),
                ),
            )
            free = [
                int(pk)
                for (pk,) in conn.execute(
                    "SELECT id FROM runs WHERE incident IS NULL "
                    "AND id IN (SELECT value FROM json_each(?))",
                    (json.dumps(outage.run_pks),),
                )
            ]
            tagged += tag_runs(conn, free, outage.tag)
            states[outage.tag] = PROPOSED
            outage.status = PROPOSED
        # Once for every proposal: outages of one day recount that day once.
        rollups.refresh_runs(conn, tagged)
        if new:
            _save_reviews(conn, states)
    return new


def _pending(conn: sqlite3.Connection, tag: str) -> dict[str, str]:
    from flaketui.core.history.incidents import IncidentError

    states = reviews(conn)
    if states.get(tag) != PROPOSED:
        raise IncidentError(
            f"no proposed outage tagged {tag!r} (see flaketui incident list --proposed)"
        )
    return states


def outage_proposal(conn: sqlite3.Connection, tag: str) -> tuple[object, ...] | None:
    """The incident row (tag, start_ts, end_ts, signature, created_at, note) of proposed outage
    tag (None when it has none); IncidentError when tag awaits no review."""
    _pending(conn, tag)
    row = conn.execute(
        "SELECT tag, start_ts, end_ts, signature, created_at, note FROM incidents WHERE tag = ?"
        " AND start_ts IS NOT NULL AND end_ts IS NOT NULL AND signature IS NOT NULL"
        " ORDER BY id LIMIT 1",
        (tag,),
    ).fetchone()
    return None if row is None else tuple(row)


def accept_outage(db: Connected, tag: str) -> int:
    """Keep a proposed outage as an incident; returns how many runs it excludes."""
    conn = db.conn
    with transaction(conn):
        states = _pending(conn, tag)
        del states[tag]
        _save_reviews(conn, states)
        return int(
            conn.execute("SELECT count(*) FROM runs WHERE incident = ?", (tag,)).fetchone()[0]
        )


def reject_outage(db: Connected, tag: str) -> int:
    """Drop a proposed outage: its runs count again and it is never proposed again."""
    conn = db.conn
    with transaction(conn):
        return reject(conn, tag, _pending(conn, tag))


def reject(conn: sqlite3.Connection, tag: str, states: dict[str, str]) -> int:
    """Reject outage tag (inside the caller's transaction): delete its incident row, untag its
    runs (another rule may take them), keep its rule under REJECTED_KEY and record the state;
    returns how many runs count again."""
    from flaketui.core.history.incidents import apply_rule_tags, tag_runs
    from flaketui.core.rollups import build as rollups

    row = conn.execute(
        "SELECT start_ts, end_ts, signature FROM incidents WHERE tag = ? "
        "AND start_ts IS NOT NULL AND end_ts IS NOT NULL AND signature IS NOT NULL "
        "ORDER BY id LIMIT 1",
        (tag,),
    ).fetchone()
    freed = [int(pk) for (pk,) in conn.execute("SELECT id FROM runs WHERE incident = ?", (tag,))]
    conn.execute("DELETE FROM incidents WHERE tag = ?", (tag,))
    tag_runs(conn, freed, None)
    retagged = len(apply_rule_tags(conn, freed))  # another rule may take them
    rollups.refresh_runs(conn, freed)  # once for both changes
    if row is not None:
        keep_rejected_rule(conn, tag, (str(row[0]), str(row[1]), str(row[2])))
    states[tag] = REJECTED
    save_states(conn, states)
    return len(freed) - retagged


def outage_states(conn: sqlite3.Connection) -> dict[str, str]:
    """Every outage proposal's state by tag: proposed, rejected, or accepted (an incident
    recorded as an outage that left the review map)."""
    states = reviews(conn)
    for (tag,) in conn.execute("SELECT DISTINCT tag FROM incidents WHERE note LIKE 'outage:%'"):
        states.setdefault(str(tag), ACCEPTED)
    return states


def settle(ours: str | None, theirs: str) -> tuple[str, bool]:
    """The state an outage keeps when a history holding it as `ours` (None: unknown there)
    takes in another's `theirs`, and whether the two decided differently (then ours stays): a
    decision beats a proposal awaiting review."""
    if ours is None or ours == PROPOSED:
        return theirs, False
    return ours, theirs not in (PROPOSED, ours)


def take_states(
    conn: sqlite3.Connection,
    theirs: dict[str, str],
    their_rules: dict[str, tuple[str, str, str]],
    before: dict[str, str],
) -> list[str]:
    """Give the history at conn the review of each outage of another history (`theirs`, with
    the rules it kept of rejected ones), its incident rows already taken in; `before` holds
    this history's states from before. Inside the caller's transaction; the outages the two
    decided differently (this history's decision stays)."""
    if not theirs:
        return []
    kept: list[str] = []
    states = outage_states(conn)
    for tag, their_state in sorted(theirs.items()):
        state, differ = settle(before.get(tag), their_state)
        if differ:
            kept.append(tag)
        states[tag] = state
        if state == REJECTED:
            if tag not in rejected_rules(conn) and tag in their_rules:
                keep_rejected_rule(conn, tag, their_rules[tag])
            # Drops the rule the other history still had, and frees the runs tagged with it.
            reject(conn, tag, states)
    save_states(conn, states)
    return kept


def save_states(conn: sqlite3.Connection, states: dict[str, str]) -> None:
    """Write outage states as outage_states reads them (accepted ones leave the review map),
    inside the caller's transaction."""
    _save_reviews(conn, {tag: state for tag, state in states.items() if state != ACCEPTED})


def keep_rejected_rule(conn: sqlite3.Connection, tag: str, rule: tuple[str, str, str]) -> None:
    """Record a rejected outage's rule (start, end, signature), inside the caller's
    transaction."""
    rules = rejected_rules(conn)
    rules[tag] = rule
    _set(conn, REJECTED_KEY, json.dumps({t: list(r) for t, r in sorted(rules.items())}))


def rejected_rules(conn: sqlite3.Connection) -> dict[str, tuple[str, str, str]]:
    """(start, end, signature) of every rejected outage whose rule was kept, by tag."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (REJECTED_KEY,)).fetchone()
    if row is None:
        return {}
    return {str(tag): (str(a), str(b), str(c)) for tag, (a, b, c) in json.loads(row[0]).items()}


def proposed_outages(
    conn: sqlite3.Connection,
    *,
    now: datetime | None = None,
    window_days: float | None = None,
    suite: str | None = None,
    branch_kind: str | None = None,
) -> list[dict[str, object]]:
    """The recorded proposals awaiting review, for reports: tag, window, signature, runs.

    With `now` and `window_days`, only those that leave runs out of the scores of that window
    (of `suite` and `branch_kind` when given), and `runs` counts those runs: a proposal whose
    runs were pruned, or lie outside the window, excludes nothing there.
    """
    pending = sorted(tag for tag, state in reviews(conn).items() if state == PROPOSED)
    scope = ""
    params: list[object] = []
    if now is not None and window_days is not None:
        scope = " AND r.ts > ? AND r.ts <= ? AND r.source <> 'diagnose'"
        params = [to_iso(now - timedelta(days=window_days)), to_iso(now)]
        for column, value in (("suite", suite), ("branch_kind", branch_kind)):
            if value is not None:
                scope += f" AND r.{column} = ?"
                params.append(value)
    out: list[dict[str, object]] = []
    for tag in pending:
        row = conn.execute(
            "SELECT i.start_ts, i.end_ts, i.signature, s.text, i.note, "
            f"(SELECT count(*) FROM runs r WHERE r.incident = i.tag{scope}) "
            "FROM incidents i LEFT JOIN signatures s ON s.hash = i.signature WHERE i.tag = ?",
            (*params, tag),
        ).fetchone()
        if row is None or (scope and not row[5]):
            continue
        start, end, sig, text, note, runs = row
        out.append(
            {
                "tag": tag,
                "start": start,
                "end": end,
                "signature": sig,
                "signature_text": text,
                "runs": int(runs),
                "evidence": note,
            }
        )
    return out


def pending_outages(conn: sqlite3.Connection) -> list[Outage]:
    """The proposals awaiting review with their evidence, oldest first: for the app's review.

    Read from what each proposal excludes (its incident row and the runs tagged with it), so
    a proposal shows the same evidence whatever window the scores are computed over.
    """
    pending = [tag for tag, state in reviews(conn).items() if state == PROPOSED]
    found: list[Outage] = []
    for tag in pending:
        row = conn.execute(
            "SELECT i.start_ts, i.end_ts, i.signature, coalesce(s.text, '') FROM incidents i "
            "LEFT JOIN signatures s ON s.hash = i.signature WHERE i.tag = ?",
            (tag,),
        ).fetchone()
        if row is None or row[0] is None or row[1] is None:
            continue  # not an outage proposal's row (removed, or tagged by hand)
        start, end, sig, text = row
        pks = [
            int(pk)
            for (pk,) in conn.execute(
                "SELECT id FROM runs WHERE incident = ? ORDER BY ts, id", (tag,)
            )
        ]
        failed = conn.execute(
            "SELECT count(DISTINCT tr.test) FROM ("
            + _both(
                "SELECT test, signature FROM {table} WHERE bad = 1"
                " AND run IN (SELECT id FROM runs WHERE incident = :tag)"
            )
            + ") tr JOIN signatures s ON s.id = tr.signature WHERE s.hash = :sig",
            {"tag": tag, "sig": sig},
        ).fetchone()[0]
        ran, suites, run_ids = _runs_facts(conn, pks)
        found.append(
            Outage(
                tag=tag,
                signature=str(sig or ""),
                signature_text=str(text),
                start=parse_iso(start),
                end=parse_iso(end),
                run_pks=pks,
                run_ids=run_ids,
                failed_tests=int(failed),
                tests=ran,
                suites=suites,
                status=PROPOSED,
            )
        )
    return sorted(found, key=lambda outage: (outage.start, outage.tag))
