"""Statements on the store's derived rows shared by every writer: test rows and per-run outcomes."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping

from flaketui.core.rollups.pending import file_waiting
from flaketui.core.testids import file_of_test, normalise_path, origin_file, parent_of

# A test row seen again keeps its earliest first_seen (shared by the writer and merge). Its file
# is the one named by the latest run (by run time) whose case named one, the attempts' origin
# (latest_file; the upsert keeps the stored file, and the writer and merge move it with
# take_latest_files where a run names another); where no run named one, the file its id names
# (testids.file_of_test), learned by a row stored without one. A file's id ``<file>::<id>`` is
# that file's (file_test), and a plain id whose attempts moved to their files' ids takes the
# file of those it still holds (settle_files).
UPSERT_TEST_SQL = (
    "INSERT INTO tests (test_id, parent, test_file, first_seen) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (test_id) DO UPDATE SET"
    " first_seen = min(first_seen, excluded.first_seen),"
    " test_file = coalesce(test_file, excluded.test_file)"
    " WHERE first_seen > excluded.first_seen"
    " OR (test_file IS NULL AND excluded.test_file IS NOT NULL)"
)


# Per (test, run) outcome ------------------------------------------------------------------

# A test's per-run outcome from its attempts. Attempts of one leg (one report file; every
# attempt without a leg counts as one leg) are retries of one execution, whose outcome is
# skipped (no attempt passed or failed), pass (none failed), fail (none passed) or flaky (some
# of each, in any order). A test that ran in several legs of the run (matrix legs, shards) is:
# - fail when any leg failed (every non-skipped attempt of that leg failed): a failing run,
#   whatever the other legs did;
# - else flaky when any leg was flaky;
# - else pass when any leg passed; else skipped.
# It is bad when any leg's first non-skipped attempt failed or errored. attempts and
# failed_attempts count every leg's. The outcome and bad do not depend on the order the legs
# were ingested in; worker_id, first_duration_ms, first_timeout_ms and first_position are those
# of the test's lowest-numbered attempt, and signature that of its lowest-numbered failed attempt.
#
# The rows are worked out into a temporary table first, then replace the run's stored rows of
# those tests: an aggregate (any function call) or OR REPLACE in an INSERT ... SELECT makes
# SQLite copy every page the statement changes to a statement journal first (a temporary file
# past 64 KiB), a second write of each page of test_runs when the tests have earlier runs.
# Deleting by key, then inserting plain columns with OR FAIL keeps none where foreign keys go
# unchecked (the writers, storing recorded attempts); checking them keeps it, as before.
REFRESHED_TABLE = "refreshed_test_runs"
_REFRESHED_SCHEMA = f"""
CREATE TEMP TABLE IF NOT EXISTS {REFRESHED_TABLE} (
    test INTEGER PRIMARY KEY, outcome TEXT, bad INTEGER, attempts INTEGER,
    failed_attempts INTEGER, worker_id TEXT, signature INTEGER, edited INTEGER,
    first_duration_ms INTEGER, first_timeout_ms INTEGER, first_position INTEGER
)"""
_REFRESH_SQL = f"""
INSERT INTO temp.{REFRESHED_TABLE}
    (test, outcome, bad, attempts, failed_attempts, worker_id, signature, edited,
     first_duration_ms, first_timeout_ms, first_position)
SELECT a.test,
    CASE WHEN a.fail_legs > 0 THEN 'fail'
         WHEN a.flaky_legs > 0 THEN 'flaky'
         WHEN a.pass_legs > 0 THEN 'pass'
         ELSE 'skipped' END,
    a.bad, a.attempts, a.failed, f.worker_id,
    (SELECT r.signature FROM results r
      WHERE r.run = :run AND r.test = a.test AND r.attempt = a.first_fail),
    EXISTS (SELECT 1 FROM tests t JOIN run_changed_files c ON c.run = :run AND c.path = t.test_file
             WHERE t.id = a.test),
    f.duration_ms, f.timeout_ms, f.position
FROM (
    SELECT test,
        sum(attempts) AS attempts,
        sum(failed) AS failed,
        sum(failed > 0 AND passed = 0) AS fail_legs,
        sum(failed > 0 AND passed > 0) AS flaky_legs,
        sum(failed = 0 AND passed > 0) AS pass_legs,
        max(coalesce(first_fail = first_real, 0)) AS bad,
        min(first_attempt) AS first_attempt,
        min(first_fail) AS first_fail
    FROM (
        SELECT test,
            count(*) AS attempts,
            sum(outcome IN ('fail', 'error')) AS failed,
            sum(outcome = 'pass') AS passed,
            min(attempt) AS first_attempt,
            min(CASE WHEN outcome != 'skipped' THEN attempt END) AS first_real,
            min(CASE WHEN outcome IN ('fail', 'error') THEN attempt END) AS first_fail
        FROM results
        WHERE {{where}}
        GROUP BY test, leg
    )
    GROUP BY test
) AS a
CROSS JOIN results f ON f.run = :run AND f.test = a.test AND f.attempt = a.first_attempt
"""
_REFRESH_RUN_SQL = _REFRESH_SQL.format(where="run = :run")
_REPLACE_REFRESHED_SQL = (
    f"DELETE FROM test_runs WHERE test IN (SELECT test FROM temp.{REFRESHED_TABLE})"
    " AND ts = :ts AND run = :run",
    "INSERT OR FAIL INTO test_runs (test, run, ts, outcome, bad, attempts, failed_attempts,"
    " worker_id, signature, edited, first_duration_ms, first_timeout_ms, first_position)"
    " SELECT test, :run, :ts, outcome, bad, attempts, failed_attempts, worker_id, signature,"
    f" edited, first_duration_ms, first_timeout_ms, first_position FROM temp.{REFRESHED_TABLE}"
    " ORDER BY test",
    f"DELETE FROM temp.{REFRESHED_TABLE}",  # a failed refresh rolls back with its transaction
)
# With a list of tests, search the (run, test) primary key instead of scanning the whole run.
_REFRESH_TESTS_SQL = _REFRESH_SQL.format(
    where="run = :run AND test IN (SELECT value FROM json_each(:tests))"
)


def refresh_test_runs(
    conn: sqlite3.Connection, run_pk: int, ts: str, tests: Iterable[int] | None = None
) -> None:
    """Recompute the test_runs rows of one run (of the given test row ids, or all of them),
    inside the caller's transaction; rows of the run still waiting to be filed are filed
    first (a run's rows are all in one of the two tables)."""
    file_waiting(conn, run_pk)
    conn.execute(_REFRESHED_SCHEMA)
    if tests is None:
        conn.execute(_REFRESH_RUN_SQL, {"run": run_pk, "ts": ts})
    else:
        test_list = json.dumps(sorted(set(tests)))
        conn.execute(_REFRESH_TESTS_SQL, {"run": run_pk, "ts": ts, "tests": test_list})
    for statement in _REPLACE_REFRESHED_SQL:
        conn.execute(statement, {"run": run_pk, "ts": ts})


def refresh_moved(
    conn: sqlite3.Connection, run_pk: int, ts: str, left: set[int], touched: set[int]
) -> None:
    """After attempts of a run moved from the tests `left` (to others, or away: a replica drops
    the rows its server moved), inside the caller's transaction: the per-run rows of the tests
    `touched` recomputed, the rollups of the tests that left the run refreshed (those they
    moved to are the run's, which its writer folds or refreshes), a test left with no run and
    no decision in the audit log dropped, as prune drops it (settle_left), and the run's count
    of tests run (runs.ran_at_least) cleared."""
    from flaketui.core.rollups import build as rollups

    file_waiting(conn, run_pk)
    conn.execute(
        "DELETE FROM test_runs WHERE test IN (SELECT value FROM json_each(?)) AND ts = ?"
        " AND run = ?",
        (json.dumps(sorted(touched)), ts, run_pk),
    )
    refresh_test_runs(conn, run_pk, ts, touched)
    # Its first attempts may be fewer now: the count the outage search keeps is counted again.
    conn.execute("UPDATE runs SET ran_at_least = NULL WHERE id = ?", (run_pk,))
    commit = conn.execute("SELECT commit_sha FROM runs WHERE id = ?", (run_pk,)).fetchone()[0]
    rollups.refresh(conn, ts[:10], left)
    rollups.refresh_commits(conn, [commit], left)
    settle_left(conn, ts, left)


def settle_left(conn: sqlite3.Connection, ts: str, tests: Iterable[int]) -> None:
    """After a run at ts stopped holding the tests' attempts (moved to their files' ids): a
    test is seen first at the earliest run holding its attempts, whatever order the reports
    came in, so one seen first at ts is seen first at the earliest run that still holds it;
    its file is that of the attempts it still holds (settle_files); one no run holds (and no
    decision in the audit log names) is dropped (drop_runless). A test seen first before ts
    keeps it (a pruned run may have been the first)."""
    file_waiting(conn)  # every run's rows, where they are read
    ids = sorted(set(tests))
    conn.execute(
        "UPDATE tests SET first_seen = (SELECT min(r.ts) FROM test_runs AS r"
        " WHERE r.test = tests.id) WHERE id IN (SELECT value FROM json_each(?))"
        " AND first_seen >= ? AND EXISTS (SELECT 1 FROM test_runs AS r WHERE r.test = tests.id)",
        (json.dumps(ids), ts),
    )
    settle_files(conn, ids)
    drop_runless(conn, ids)


def drop_runless(conn: sqlite3.Connection, tests: Iterable[int]) -> None:
    """Drop those of the tests that no run holds and the audit log does not name, as prune
    drops them."""
    file_waiting(conn)
    conn.execute(
        "DELETE FROM tests WHERE id IN (SELECT value FROM json_each(?))"
        " AND NOT EXISTS (SELECT 1 FROM test_runs AS r WHERE r.test = tests.id)"
        " AND test_id NOT IN (SELECT test_id FROM audit_log)",
        (json.dumps(sorted(set(tests))),),
    )


def separate_stored(conn: sqlite3.Connection, run_pk: int, ts: str, shared: Iterable[str]) -> bool:
    """Move the run's attempts stored under a plain id that its files turn out to share, and
    whose case named its file, to that file's prefixed id ``<file>::<id>``: what the ingest of
    all the run's reports at once would have stored them under. Attempts of an unknown file
    stay. Moved attempts are numbered after those the prefixed id holds in the run already;
    the legs keep the outcome rules whatever the numbers. A plain id left with no run at all
    (and no decision in the audit log) is dropped, as prune drops it; one seen first at this
    run is seen first at the earliest run that still holds it (settle_left). True if any
    moved.
    """
    held = of_known_files(conn, run_pk, shared)
    if not held:
        return False
    left: set[int] = set()
    touched: set[int] = set()
    for old_pk, test_id, origin in held:
        new_pk = file_test(conn, test_id, origin, ts)
        top = conn.execute(
            "SELECT coalesce(max(attempt), 0) FROM results WHERE run = ? AND test = ?",
            (run_pk, new_pk),
        ).fetchone()[0]
        conn.execute(
            "UPDATE results SET test = ?, attempt = attempt + ?"
            " WHERE run = ? AND test = ? AND origin = ?",
            (new_pk, top, run_pk, old_pk, origin),
        )
        left.add(int(old_pk))
        touched |= {int(old_pk), new_pk}
    refresh_moved(conn, run_pk, ts, left, touched)
    return True


def file_test(conn: sqlite3.Connection, test_id: str, origin: str, ts: str) -> int:
    """The row id of ``<origin>::<test_id>``, the id a shared test of the file origin is
    stored under (created, seen first at ts, if the history lacks it). Its file is origin,
    whatever file the plain id or an earlier copy of the row says (set_files); a karma
    describe block is no file (testids.origin_file)."""
    new_id = f"{origin}::{test_id}"
    test_file = file_of_test(new_id, origin_file(origin))
    conn.execute(UPSERT_TEST_SQL, (new_id, parent_of(new_id), test_file, ts))
    pk = int(conn.execute("SELECT id FROM tests WHERE test_id = ?", (new_id,)).fetchone()[0])
    set_files(conn, {pk: test_file})
    return pk


def latest_file(named: Iterable[tuple[str, str]]) -> str | None:
    """The file of the latest run naming one, from (origin, run time) pairs: the latest time's,
    the greatest file at a tie (runs of one time naming two files: any order of ingest gives
    the same); None when none is named. An origin that is a karma describe block names no
    file (testids.origin_file)."""
    latest: tuple[str, str] | None = None
    for origin, ts in named:
        if origin_file(origin) is None:
            continue
        key = (ts, normalise_path(origin))
        if latest is None or key > latest:
            latest = key
    return None if latest is None else latest[1]


def file_of_attempts(test_id: str, named: Iterable[tuple[str, str]]) -> str | None:
    """The file of a plain id whose attempts of some file moved to that file's id, from the
    files its remaining attempts' cases named: named holds a (file, run time) pair per run and
    file. The test's file is that of the latest run naming one (latest_file): where it was last
    seen. None named (attempts of the recorder, of cases naming no file, or stored before files
    were) give what the id says (a pytest id's file), else no file: a file only the moved
    attempts named is not this test's. Shared by history files and the server
    (flaketui.core.history.pg.push)."""
    found = latest_file(named)
    return file_of_test(test_id, None) if found is None else found


def named_since(
    conn: sqlite3.Connection, tests: Iterable[int], since: str = ""
) -> dict[int, list[tuple[str, str]]]:
    """The files the attempts of the tests' runs at or after since name: (file, run time)
    pairs by test row id, found through each test's runs (test_runs) and the results key."""
    file_waiting(conn)
    named: dict[int, list[tuple[str, str]]] = {}
    for pk, origin, ts in conn.execute(
        "SELECT DISTINCT tr.test, x.origin, tr.ts FROM test_runs AS tr"
        " JOIN results AS x ON x.run = tr.run AND x.test = tr.test"
        " WHERE tr.test IN (SELECT value FROM json_each(?)) AND tr.ts >= ?"
        " AND x.origin IS NOT NULL",
        (json.dumps(sorted(set(tests))), since),
    ):
        named.setdefault(int(pk), []).append((str(origin), str(ts)))
    return named


def take_latest_files(
    conn: sqlite3.Connection,
    tests: Iterable[int],
    since: str = "",
    named: Mapping[int, str] | None = None,
) -> dict[int, str]:
    """Give each of the tests the file of its latest run naming one (latest_file), of its stored
    runs at or after since and, for a test in named, a run at since naming that file (the run
    being written); a test none of them names keeps its file. Runs before since are not read:
    the caller knows none of them is the latest. Returns the files that changed (set_files:
    the runs each edits follow).

    A run is edited by what its commit changed in the test's current file, not in the file
    the test had in that run: attempts name their file only for JUnit cases that name one (the
    recorder's, pytest ids' and older histories' name none), every writer and replica computes
    the flag from the test's row, and a commit that moves a test changes both its files, so
    the run of the move is edited either way. A run before a move whose commit changed only
    the old file counts against the test."""
    named = named or {}
    ids = sorted(set(tests) | set(named))
    found = named_since(conn, ids, since)
    latest: dict[int, str] = {}
    for pk in ids:
        runs = found.get(pk, [])
        if pk in named:
            runs.append((named[pk], since))
        file = latest_file(runs)
        if file is not None:
            latest[pk] = file
    changed = {
        int(pk): latest[int(pk)]
        for pk, stored in conn.execute(
            "SELECT id, test_file FROM tests WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(latest)),),
        )
        if stored != latest[int(pk)]
    }
    set_files(conn, changed)
    return changed


def settle_files(conn: sqlite3.Connection, tests: Iterable[int]) -> None:
    """Give each of the tests (plain ids whose attempts of some file moved to that file's id)
    the file its remaining attempts name (file_of_attempts)."""
    ids = sorted(set(tests))
    named = named_since(conn, ids)
    set_files(
        conn,
        {
            int(pk): file_of_attempts(str(test_id), named.get(int(pk), ()))
            for pk, test_id in conn.execute(
                "SELECT id, test_id FROM tests WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(ids),),
            )
        },
    )


def set_files(conn: sqlite3.Connection, files: Mapping[int, str | None]) -> None:
    """Set tests' files (row id: file), inside the caller's transaction. A run of a test whose
    file changes is edited by what that run's commit changed in the new file: its per-run rows
    say so, and the rollups of the days and commits where one changed are refreshed."""
    from flaketui.core.rollups import build as rollups

    stored = {
        int(pk): test_file
        for pk, test_file in conn.execute(
            "SELECT id, test_file FROM tests WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(files)),),
        )
    }
    changed = [(pk, file) for pk, file in files.items() if pk in stored and stored[pk] != file]
    if not changed:
        return
    file_waiting(conn)  # every run of the tests is flipped below
    conn.executemany("UPDATE tests SET test_file = ? WHERE id = ?", [(f, pk) for pk, f in changed])
    flipped = [
        (int(test), str(ts), int(run))
        for test, ts, run in conn.execute(
            "UPDATE test_runs SET edited = NOT edited"
            " WHERE test IN (SELECT value FROM json_each(?)) AND edited <> EXISTS"
            " (SELECT 1 FROM tests t JOIN run_changed_files c ON c.run = test_runs.run"
            " AND c.path = t.test_file WHERE t.id = test_runs.test) RETURNING test, ts, run",
            (json.dumps(sorted(pk for pk, _ in changed)),),
        ).fetchall()
    ]
    if not flipped:
        return
    for day in sorted({ts[:10] for _, ts, _ in flipped}):
        rollups.refresh(conn, day, {test for test, ts, _ in flipped if ts[:10] == day})
    commits = conn.execute(
        "SELECT DISTINCT commit_sha FROM runs WHERE id IN (SELECT value FROM json_each(?))"
        " AND commit_sha IS NOT NULL",
        (json.dumps(sorted({run for _, _, run in flipped})),),
    ).fetchall()
    rollups.refresh_commits(conn, [str(c) for (c,) in commits], {t for t, _, _ in flipped})


def of_known_files(
    conn: sqlite3.Connection, run_pk: int, test_ids: Iterable[str]
) -> list[tuple[int, str, str]]:
    """The run's tests of these ids with each file their attempts' cases named (attempts of an
    unknown file left out): (row id, test_id, file) rows."""
    return [
        (int(pk), str(test_id), str(origin))
        for pk, test_id, origin in conn.execute(
            "SELECT DISTINCT t.id, t.test_id, x.origin FROM tests AS t"
            " JOIN results AS x ON x.run = ? AND x.test = t.id"
            " WHERE t.test_id IN (SELECT value FROM json_each(?)) AND x.origin IS NOT NULL",
            (run_pk, json.dumps(sorted(test_ids))),
        )
    ]
