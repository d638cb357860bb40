"""Keep a local SQLite replica of a server history: pull what changed since the last sync.

The replica is an ordinary history (scoring, the app and reports read it as they read any
other) plus meta values: ``replica_of`` (the server history's id: a replica follows one
server), ``replica_change`` (the change-id watermark: everything below it is here),
``replica_incidents`` (the server's incident rules it holds) and, during a sync,
``replica_cursor`` (the last result row applied) and ``replica_holding`` (the runs whose
rows are still arriving).

A sync reads from one REPEATABLE READ snapshot of the server and pulls the result rows whose
change id lies in [watermark, snapshot xmin) in batches ordered by (change, run, test,
attempt); each batch lands in one local transaction that also records the cursor, so a killed
sync resumes after its last batch and inserting a row twice is impossible (INSERT OR IGNORE on
(run, test, attempt) as well). Runs, tests and signatures come with the results that need them.
A run a batch adds rows to is held unfinished (``finished`` 0, listed in ``replica_holding``)
until the last transaction gives it the server's value: a sync stopped midway leaves its runs
read as interrupted ones (counted only for the tests they hold), never as whole runs.
Then runs changed in the window (an incident tag set or cleared), tests (an earlier first
sighting), the server's incident rules (replaced when they differ; the outages the replica
proposed itself stay), the reviews of suspected outages (as a merge of history files takes
them: a decision beats a proposal, and where the replica decided otherwise its decision stays),
audit rows, pruned runs and moved attempts are applied, and the watermark moves up, all in one
last transaction. Attempts the server moved to a file-prefixed test id (a later shard showed
that files of the run share the name: flaketui.core.history.pg.push) arrive as rows of that id;
their copies under the plain id are dropped by the ``deletions`` row the move left.

Rollups: a sync into a history with no run yet copies raw rows only and builds the rollups
once at the end (readers meanwhile read the raw rows: the history says it has no rollups);
otherwise each batch lists the runs it touched as waiting for their fold, and the last
transaction folds them all at once (a sync killed before it leaves them listed: readers score
the raw rows, and the next writer folds them).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from flaketui.core.errors import HistoryError
from flaketui.core.history.derived_rows import (
    UPSERT_TEST_SQL,
    refresh_moved,
    refresh_test_runs,
    set_files,
)
from flaketui.core.history.outages import outage_states, reviews, take_states
from flaketui.core.history.pg.columns import (
    PREDECESSOR,
    add_audit_rows,
    both_have,
    server_audit_select,
    shared_columns,
)
from flaketui.core.history.pg.push import SCHEME_KEY
from flaketui.core.history.pg.reviews import server_rejected_rules, server_states
from flaketui.core.history.pg.schema import history_id, run_among
from flaketui.core.history.store import foreign_keys_off, transaction
from flaketui.core.rollups import build as rollups
from flaketui.core.rollups import pending as rollups_pending

BATCH_ROWS = 20_000
REPLICA_OF = "replica_of"
REPLICA_CHANGE = "replica_change"
REPLICA_CURSOR = "replica_cursor"
REPLICA_BULK = "replica_bulk"  # rollups are rebuilt when the sync completes
REPLICA_INCIDENTS = "replica_incidents"  # the server's incident rules the replica holds
REPLICA_HOLDING = "replica_holding"  # run ids held unfinished until the sync completes
INCIDENT_COLUMNS = ("tag", "start_ts", "end_ts", "signature", "created_at", "note")

Progress = Callable[[int, int], None]  # (result rows done, result rows in this sync)


@dataclass
class SyncSummary:
    """What one sync brought into the replica."""

    results_added: int = 0
    runs_added: int = 0
    runs_updated: int = 0
    runs_deleted: int = 0
    audit_rows_added: int = 0
    incidents_changed: bool = False
    decisions_kept: list[str] = field(default_factory=list)  # outages decided otherwise here
    batches: int = 0
    resumed: bool = False


def _meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def _set_meta(conn: sqlite3.Connection, key: str, value: str | None) -> None:
    if value is None:
        conn.execute("DELETE FROM meta WHERE key = ?", (key,))
    else:
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))


def replica_watermark(conn: sqlite3.Connection) -> int:
    """The change id below which the replica holds everything (0: never synced)."""
    return int(_meta(conn, REPLICA_CHANGE) or 0)


def same_server(pg: Any, conn: sqlite3.Connection) -> str:
    """The server history's id; raise HistoryError if the history at conn replicates another."""
    server = history_id(pg)
    mine = _meta(conn, REPLICA_OF)
    if mine is not None and mine != server:
        raise HistoryError(
            "this history is a replica of another server history; sync into a new file"
        )
    return server


def sync_replica(
    pg: Any,
    conn: sqlite3.Connection,
    *,
    batch_rows: int = BATCH_ROWS,
    progress: Progress | None = None,
) -> SyncSummary:
    """Bring the replica at conn up to date with the server at pg (see the module doc)."""
    summary = SyncSummary()
    server = same_server(pg, conn)
    mine = _meta(conn, REPLICA_OF)
    with pg.transaction():
        pg.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        high = int(pg.execute("SELECT pg_snapshot_xmin(pg_current_snapshot())::text").fetchone()[0])
        low = replica_watermark(conn)
        with transaction(conn):
            if mine is None:
                _set_meta(conn, REPLICA_OF, server)
                if conn.execute("SELECT 1 FROM runs LIMIT 1").fetchone() is None:
                    # A new replica: raw rows first, the rollups once at the end.
                    _set_meta(conn, REPLICA_BULK, "1")
                    conn.execute("DELETE FROM meta WHERE key = ?", (rollups.VERSION_KEY,))
        bulk = _meta(conn, REPLICA_BULK) == "1"
        cursor_text = _meta(conn, REPLICA_CURSOR)
        cursor = json.loads(cursor_text) if cursor_text else None
        summary.resumed = cursor is not None
        puller = _Puller(pg, conn, bulk, summary)
        total = int(
            pg.execute(
                "SELECT count(*) FROM results WHERE change >= %s::text::xid8"
                " AND change < %s::text::xid8",
                (str(low), str(high)),
            ).fetchone()[0]
        )
        done = 0
        if cursor is not None:
            done = int(
                pg.execute(
                    "SELECT count(*) FROM results WHERE change >= %s::text::xid8"
                    " AND (change, run, test, attempt) <= (%s::text::xid8, %s, %s, %s)",
                    (str(low), str(cursor[0]), cursor[1], cursor[2], cursor[3]),
                ).fetchone()[0]
            )
        if progress is not None:
            progress(done, total)
        while True:
            rows = puller.fetch(low, high, cursor, batch_rows)
            if not rows:
                break
            cursor = puller.apply(rows)
            done += len(rows)
            summary.batches += 1
            if progress is not None:
                progress(done, total)
        with transaction(conn):  # references checked: deleting a run deletes its rows
            if not bulk:
                rollups.fold_pending(conn)  # every batch's runs together
            puller.release_held()
            puller.finish(low, high)
            if bulk:
                rollups.rebuild(conn)
                _set_meta(conn, REPLICA_BULK, None)
            _set_meta(conn, REPLICA_CURSOR, None)
            _set_meta(conn, REPLICA_CHANGE, str(high))
    return summary


class _Puller:
    """Copies server rows into the replica, remapping ids through natural keys."""

    def __init__(self, pg: Any, conn: sqlite3.Connection, bulk: bool, summary: SyncSummary):
        self.pg = pg
        self.conn = conn
        self.bulk = bulk
        self.summary = summary
        self.run_cols = shared_columns(conn, pg, "runs")
        self.result_cols = shared_columns(conn, pg, "results")
        # The predecessor (a tests.id) comes as its test_id and becomes the replica's tests.id.
        self.predecessor = both_have(conn, pg, "results", PREDECESSOR)
        self.runs: dict[str, tuple[int, str]] = {}  # run_id -> local (id, ts)
        self.tests: dict[str, int] = {}
        self.signatures: dict[str, int] = {}
        self.held: list[str] = json.loads(_meta(conn, REPLICA_HOLDING) or "[]")

    def fetch(
        self, low: int, high: int, cursor: Sequence[int] | None, limit: int
    ) -> list[tuple[Any, ...]]:
        cols = ", ".join(f'x."{c}"' for c in self.result_cols)
        pred = "p.test_id" if self.predecessor else "NULL::text"
        order = "ORDER BY x.change, x.run, x.test, x.attempt"
        # The batch's rows first, in the order of the index on (change, run, test, attempt), and
        # only then their names: joined before the limit, the planner (which guesses one row
        # past a cursor) joined and sorted every row still to come, for every batch.
        if cursor is None:
            after = "x.change >= %s::text::xid8"
            params: tuple[Any, ...] = (str(low), str(high), limit)
        else:
            after = "(x.change, x.run, x.test, x.attempt) > (%s::text::xid8, %s, %s, %s)"
            params = (str(cursor[0]), cursor[1], cursor[2], cursor[3], str(high), limit)
        sql = (
            f"SELECT x.change::text, x.run, x.test, x.attempt, r.run_id, t.test_id, g.hash, {pred},"
            f" {cols} FROM (SELECT * FROM results AS x WHERE {after}"
            f" AND x.change < %s::text::xid8 {order} LIMIT %s) AS x"
            " JOIN runs AS r ON r.id = x.run JOIN tests AS t ON t.id = x.test"
            " LEFT JOIN signatures AS g ON g.id = x.signature"
        )
        if self.predecessor:
            sql += " LEFT JOIN tests AS p ON p.id = x.predecessor"
        return list(self.pg.execute(f"{sql} {order}", params).fetchall())

    def apply(self, rows: list[tuple[Any, ...]]) -> list[int]:
        """Land one batch and its cursor in one local transaction; the new cursor."""
        conn = self.conn
        last = rows[-1]
        cursor = [int(last[0]), int(last[1]), int(last[2]), int(last[3])]
        # Every id stored is one mapped or created just before: unchecked references keep the
        # inserts from journaling each page they change, as an ingest's do.
        with foreign_keys_off(conn, unchecked=False), transaction(conn):
            self._ensure_runs(sorted({str(row[4]) for row in rows}))
            # A predecessor ran in the same run, perhaps in a later batch: its test comes now.
            named = {str(row[5]) for row in rows} | {str(row[7]) for row in rows if row[7]}
            self._ensure_tests(sorted(named))
            self._ensure_signatures(sorted({str(row[6]) for row in rows if row[6] is not None}))
            keys = ["run", "test", "signature"] + ([PREDECESSOR] if self.predecessor else [])
            cols = ", ".join(f'"{c}"' for c in [*keys, *self.result_cols])
            placeholders = ", ".join("?" for _ in range(len(keys) + len(self.result_cols)))
            touched: dict[str, set[int]] = {}

            def local(row: tuple[Any, ...]) -> tuple[Any, ...]:
                ids = [
                    self.runs[row[4]][0],
                    self.tests[row[5]],
                    None if row[6] is None else self.signatures[row[6]],
                ]
                if self.predecessor:
                    ids.append(None if row[7] is None else self.tests[row[7]])
                return (*ids, *row[8:])

            before = conn.total_changes
            conn.executemany(
                f"INSERT OR IGNORE INTO results ({cols}) VALUES ({placeholders})",
                [local(row) for row in rows],
            )
            self.summary.results_added += conn.total_changes - before
            for row in rows:
                touched.setdefault(str(row[4]), set()).add(self.tests[row[5]])
            for run_id, tests in touched.items():
                run_pk, ts = self.runs[run_id]
                refresh_test_runs(conn, run_pk, ts, tests)
                if not self.bulk:
                    rollups_pending.defer(conn, run_pk)  # folded once, when the sync ends
            self._hold(sorted(set(touched) - set(self.held)))
            _set_meta(conn, REPLICA_CURSOR, json.dumps(cursor))
        return cursor

    def _hold(self, run_ids: list[str]) -> None:
        """Mark runs unfinished until the sync completes (their rows may be in later batches)."""
        if not run_ids:
            return
        self.conn.executemany(
            "UPDATE runs SET finished = 0 WHERE id = ?", [(self.runs[r][0],) for r in run_ids]
        )
        self.held.extend(run_ids)
        _set_meta(self.conn, REPLICA_HOLDING, json.dumps(self.held))

    def release_held(self) -> None:
        """Give the held runs the server's ``finished`` (a run the server pruned meanwhile is
        dropped with the window's deletions)."""
        if not self.held:
            return
        self.conn.executemany(
            "UPDATE runs SET finished = ? WHERE run_id = ?",
            [
                (int(finished), str(run_id))
                for run_id, finished in self.pg.execute(
                    f"SELECT run_id, finished FROM runs WHERE {run_among('run_id')}",
                    (self.held, self.held),
                ).fetchall()
            ],
        )
        self.held = []
        _set_meta(self.conn, REPLICA_HOLDING, None)

    def _ensure_runs(self, run_ids: list[str]) -> None:
        missing = [r for r in run_ids if r not in self.runs]
        if not missing:
            return
        conn = self.conn
        for run_id in missing:
            row = conn.execute("SELECT id, ts FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is not None:
                self.runs[run_id] = (int(row[0]), str(row[1]))
        missing = [r for r in missing if r not in self.runs]
        if not missing:
            return
        cols = ", ".join(f'"{c}"' for c in self.run_cols)
        server_rows = self.pg.execute(
            f"SELECT id, {cols} FROM runs WHERE {run_among('run_id')} ORDER BY ts, id",
            (missing, missing),
        ).fetchall()
        placeholders = ", ".join("?" for _ in self.run_cols)
        id_at = self.run_cols.index("run_id")
        ts_at = self.run_cols.index("ts")
        local_of: dict[int, int] = {}
        for server_pk, *values in server_rows:
            cur = conn.execute(f"INSERT INTO runs ({cols}) VALUES ({placeholders})", values)
            local = int(cur.lastrowid or 0)
            self.runs[str(values[id_at])] = (local, str(values[ts_at]))
            local_of[int(server_pk)] = local
            self.summary.runs_added += 1
        for table, column in (("run_files", "content_hash"), ("run_changed_files", "path")):
            rows = self.pg.execute(
                f"SELECT run, {column} FROM {table} WHERE run = ANY(%s)", (list(local_of),)
            ).fetchall()
            conn.executemany(
                f"INSERT OR IGNORE INTO {table} (run, {column}) VALUES (?, ?)",
                [(local_of[int(run)], value) for run, value in rows],
            )

    def _ensure_tests(self, test_ids: list[str]) -> None:
        missing = [t for t in test_ids if t not in self.tests]
        if not missing:
            return
        rows = self.pg.execute(
            "SELECT test_id, parent, test_file, first_seen FROM tests"
            " WHERE md5(test_id) IN (SELECT md5(k) FROM unnest(%s::text[]) AS k)"
            " AND test_id = ANY(%s)",
            (missing, missing),
        ).fetchall()
        self.conn.executemany(UPSERT_TEST_SQL, rows)
        for pk, test_id in self.conn.execute(
            "SELECT id, test_id FROM tests WHERE test_id IN (SELECT value FROM json_each(?))",
            (json.dumps(missing),),
        ):
            self.tests[str(test_id)] = int(pk)

    def _ensure_signatures(self, hashes: list[str]) -> None:
        missing = [h for h in hashes if h not in self.signatures]
        if not missing:
            return
        rows = self.pg.execute(
            "SELECT hash, text, example FROM signatures WHERE hash = ANY(%s)", (missing,)
        ).fetchall()
        self.conn.executemany(
            "INSERT OR IGNORE INTO signatures (hash, text, example) VALUES (?, ?, ?)", rows
        )
        for pk, sig_hash in self.conn.execute(
            "SELECT id, hash FROM signatures WHERE hash IN (SELECT value FROM json_each(?))",
            (json.dumps(missing),),
        ):
            self.signatures[str(sig_hash)] = int(pk)

    def _replace_incidents(self) -> bool:
        """Make the server's incident rules the replica's, leaving the replica's own rows (the
        outages it proposed, accepted or not) alone; whether anything changed."""
        conn = self.conn
        columns = ", ".join(INCIDENT_COLUMNS)
        theirs = [
            list(row)
            for row in self.pg.execute(f"SELECT {columns} FROM incidents ORDER BY id").fetchall()
        ]
        known = _meta(conn, REPLICA_INCIDENTS)
        if known is not None:
            before = json.loads(known)
        else:  # a replica from before the rules were recorded: every row but its proposals
            proposals = set(reviews(conn))
            before = [
                list(row)
                for row in conn.execute(f"SELECT {columns} FROM incidents ORDER BY id")
                if row[0] not in proposals
            ]
        if theirs == before:
            if known is None:
                _set_meta(conn, REPLICA_INCIDENTS, json.dumps(theirs))
            return False
        same = " AND ".join(f"{column} IS ?" for column in INCIDENT_COLUMNS)
        conn.executemany(f"DELETE FROM incidents WHERE {same}", before)
        # The server's row replaces the replica's own copy of one rule (a proposal it sent).
        conn.executemany(
            "DELETE FROM incidents WHERE tag IS ? AND start_ts IS ? AND end_ts IS ?"
            " AND signature IS ?",
            [row[:4] for row in theirs],
        )
        marks = ", ".join("?" * len(INCIDENT_COLUMNS))
        conn.executemany(f"INSERT INTO incidents ({columns}) VALUES ({marks})", theirs)
        _set_meta(conn, REPLICA_INCIDENTS, json.dumps(theirs))
        return True

    def _drop_moved(self, low: int, high: int) -> None:
        """Drop the replica's copies of attempts the server moved in the window to their
        file's test id (the moved rows came with the window's results)."""
        conn = self.conn
        for (key,) in self.pg.execute(
            "SELECT key FROM deletions WHERE kind = 'attempts'"
            " AND change >= %s::text::xid8 AND change < %s::text::xid8 ORDER BY id",
            (str(low), str(high)),
        ).fetchall():
            run_id, test_id, origin = json.loads(key)
            found = conn.execute(
                "SELECT r.id, r.ts, t.id FROM runs AS r JOIN tests AS t ON t.test_id = ?"
                " WHERE r.run_id = ?",
                (test_id, run_id),
            ).fetchone()
            if found is None:
                continue
            run_pk, ts, test_pk = int(found[0]), str(found[1]), int(found[2])
            if conn.execute(
                "DELETE FROM results WHERE run = ? AND test = ? AND origin = ?",
                (run_pk, test_pk, origin),
            ).rowcount:
                refresh_moved(conn, run_pk, ts, {test_pk}, {test_pk})

    def finish(self, low: int, high: int) -> None:
        """Runs, tests, incidents, audit rows and deletions changed in the window."""
        conn, pg, summary = self.conn, self.pg, self.summary
        window = (str(low), str(high))
        in_window = "change >= %s::text::xid8 AND change < %s::text::xid8"
        deleted = [
            str(r[0])
            for r in pg.execute(
                f"SELECT key FROM deletions WHERE kind = 'run' AND {in_window}", window
            ).fetchall()
        ]
        if deleted:
            # A run pruned and then ingested again under its id stays.
            alive = {
                str(r[0])
                for r in pg.execute(
                    f"SELECT run_id FROM runs WHERE {run_among('run_id')}", (deleted, deleted)
                ).fetchall()
            }
            deleted = [run_id for run_id in deleted if run_id not in alive]
        gone_days: dict[str, set[int]] = {}  # the tests each day of a deleted run held
        gone_commits: set[str] = set()
        if deleted and not self.bulk:
            for day, commit, test in conn.execute(
                "SELECT substr(r.ts, 1, 10), r.commit_sha, tr.test FROM runs AS r"
                " JOIN test_runs AS tr ON tr.run = r.id"
                " WHERE r.run_id IN (SELECT value FROM json_each(?))",
                (json.dumps(deleted),),
            ):
                gone_days.setdefault(str(day), set()).add(int(test))
                if commit is not None:
                    gone_commits.add(str(commit))
        if deleted:
            summary.runs_deleted = conn.execute(
                "DELETE FROM runs WHERE run_id IN (SELECT value FROM json_each(?))",
                (json.dumps(deleted),),
            ).rowcount
        self._drop_moved(low, high)
        retagged: list[int] = []
        for run_id, incident, finished in pg.execute(
            f"SELECT run_id, incident, finished FROM runs WHERE {in_window}", window
        ).fetchall():
            row = conn.execute(
                "SELECT id, incident, finished FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None or (row[1], row[2]) == (incident, finished):
                continue
            conn.execute(
                "UPDATE runs SET incident = ?, finished = ? WHERE id = ?",
                (incident, finished, row[0]),
            )
            summary.runs_updated += 1
            if row[1] != incident:
                retagged.append(int(row[0]))
        changed_tests = pg.execute(
            f"SELECT test_id, first_seen, test_file FROM tests WHERE {in_window}", window
        ).fetchall()
        conn.executemany(
            "UPDATE tests SET first_seen = min(first_seen, ?) WHERE test_id = ?",
            [(first_seen, test_id) for test_id, first_seen, _ in changed_tests],
        )
        # A test's file is the server's (a file's id is that file's; a plain id whose attempts
        # moved has the file of those it holds), and the runs it edits follow (set_files).
        server_files = {str(t): f for t, _, f in changed_tests}
        set_files(
            conn,
            {
                int(pk): server_files[str(test_id)]
                for pk, test_id, test_file in conn.execute(
                    "SELECT id, test_id, test_file FROM tests"
                    " WHERE test_id IN (SELECT value FROM json_each(?))",
                    (json.dumps(sorted(server_files)),),
                ).fetchall()
                if server_files[str(test_id)] not in (None, test_file)
            },
        )
        states = outage_states(conn)
        summary.incidents_changed = self._replace_incidents()
        summary.decisions_kept = take_states(
            conn, server_states(pg), server_rejected_rules(pg), states
        )
        # A row the replica has in every column is not taken twice (the server's key).
        summary.audit_rows_added = add_audit_rows(
            conn,
            pg.execute(
                f"SELECT {server_audit_select(pg)} FROM audit_log WHERE {in_window} ORDER BY id",
                window,
            ).fetchall(),
        )
        scheme = pg.execute(
            "SELECT value FROM flaketui_meta WHERE key = %s", (SCHEME_KEY,)
        ).fetchone()
        if scheme is not None:
            _set_meta(conn, SCHEME_KEY, str(scheme[0]))
        if not self.bulk:
            # The days and commits of the deleted runs are recounted from the rows that stay
            # (as a prune recounts its cutoff's day), not the whole history.
            for day, tests in sorted(gone_days.items()):
                rollups.refresh(conn, day, tests)
            if gone_commits:
                rollups.refresh_commits(conn, sorted(gone_commits))
            if retagged:
                rollups.refresh_runs(conn, retagged)
