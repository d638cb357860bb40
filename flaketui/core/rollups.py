"""Per test, per UTC day, per suite rollups of the counted runs, so ranking reads tests x days rows.

A rollup row sums the counted test-runs (SPEC §4: not skipped, the commit did not edit the test,
the run is no incident) of one (test, day, suite). Recency weights stay exact per bucket: a run's
decay weight 2^(-(now - ts)/h) is 2^(-(now - day)/h) * 2^((ts - day)/h), so the row stores
sums of 2^((ts - day)/h) (main and other branches apart) and the reader multiplies by the
day's factor. The half-life h the sums were made with is kept in `meta`; another half-life, a
branch-kind filter, or a history without rollups makes `test_base` return None (raw scan).

Maintenance (always inside the caller's transaction): the writer refreshes the (test, day) pairs
of the run it wrote (`after_write`; a history without rollups gets them built at its first
write); incident tagging refreshes the days of the runs it tags; prune drops the days it removes.
Each refresh recomputes its rows from the raw test_runs, so it is exact whatever happened before
(attempts appended across batches, a test-run replaced). Any other writer of test_runs or
runs.incident must call `refresh_run(s)` too (or `rebuild`).

The sequence tables of flaketui.core.seq_rollups (per-day sequence facts of tests and
families, same-commit pairs, signature counts) are created, rebuilt, refreshed and pruned by the
same calls; `VERSION` in `meta` names the set, and a history with an older set is rebuilt at its
next write and read from raw rows until then. merge and prune call the same hooks.

Reading (`test_base`): whole days of the window come from the rollups; the partial edge days
(`window_params`: the first day when runs of it precede the window, the last when runs of it
follow now) come from the raw rows, so the result equals a scan of the raw rows over the window.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import date, datetime, timedelta
from typing import Any

from flaketui.core import seq_rollups
from flaketui.core.config import Config
from flaketui.core.evidence import ensure_sql_functions
from flaketui.core.timeutil import to_iso

META_KEY = "rollup_half_life_days"
# Bumped when the set of rollup tables changes: an older set is rebuilt at the next write
# and not read before (the reader falls back to raw rows).
VERSION_KEY = "rollup_version"
VERSION = "3"
UNIX_EPOCH_JD = 2440587.5  # julianday('1970-01-01')

_SCHEMA = """
CREATE TABLE IF NOT EXISTS test_day_rollups (
    test            INTEGER NOT NULL REFERENCES tests (id),
    day             TEXT NOT NULL,          -- 'YYYY-MM-DD' (UTC) of the runs' ts
    suite           TEXT NOT NULL,
    runs            INTEGER NOT NULL,       -- counted test-runs
    main_runs       INTEGER NOT NULL,
    flaky_runs      INTEGER NOT NULL,
    failed_runs     INTEGER NOT NULL,       -- bad: first attempt failed
    failed_any_runs INTEGER NOT NULL,       -- outcome other than pass
    max_attempts    INTEGER NOT NULL,
    first_s         INTEGER NOT NULL,       -- unix seconds of the first, last and last failed
    last_s          INTEGER NOT NULL,       -- run (4 bytes each instead of an ISO string)
    last_failure_s  INTEGER,
    PRIMARY KEY (test, suite, day)  -- scans come out grouped by (test, suite)
) WITHOUT ROWID
"""

# Aggregates of counted raw rows in the rollup's shape; {where} narrows the raw rows.
_AGGREGATE = """
SELECT tr.test AS test, substr(tr.ts, 1, 10) AS day, r.suite AS suite,
    count(*) AS runs,
    sum(r.branch_kind = 'main') AS main_runs,
    sum(tr.outcome = 'flaky') AS flaky_runs,
    sum(tr.bad) AS failed_runs,
    sum(tr.outcome <> 'pass') AS failed_any_runs,
    max(tr.attempts) AS max_attempts,
    CAST(strftime('%s', min(tr.ts)) AS INTEGER) AS first_s,
    CAST(strftime('%s', max(tr.ts)) AS INTEGER) AS last_s,
    CAST(strftime('%s', max(CASE WHEN tr.outcome <> 'pass' THEN tr.ts END)) AS INTEGER)
        AS last_failure_s
FROM test_runs tr JOIN runs r ON r.id = tr.run
WHERE r.incident IS NULL AND tr.outcome <> 'skipped' AND tr.edited = 0 AND {where}
GROUP BY tr.test, substr(tr.ts, 1, 10), r.suite
"""

_COLUMNS = (
    "test, day, suite, runs, main_runs, flaky_runs, failed_runs, failed_any_runs, max_attempts,"
    " first_s, last_s, last_failure_s"
)


def _half_life(conn: sqlite3.Connection) -> float | None:
    """The half-life the rollups were built with; None when the history has none (or old ones)."""
    try:
        rows = dict(
            conn.execute(
                "SELECT key, value FROM meta WHERE key IN (?, ?)", (META_KEY, VERSION_KEY)
            ).fetchall()
        )
    except sqlite3.OperationalError:
        return None
    if rows.get(VERSION_KEY) != VERSION or META_KEY not in rows:
        return None
    return float(rows[META_KEY])


def half_life(conn: sqlite3.Connection) -> float | None:
    """The half-life the current rollups were built with; None without current rollups."""
    return _half_life(conn)


def enabled(conn: sqlite3.Connection) -> bool:
    """Whether this history maintains rollups."""
    return _half_life(conn) is not None


def answers(conn: sqlite3.Connection, config: Config) -> bool:
    """Whether the rollups can answer a request with this config exactly (same half-life)."""
    return _half_life(conn) == config.half_life_days


def rebuild(conn: sqlite3.Connection, half_life_days: float = Config().half_life_days) -> int:
    """(Re)create every rollup row from the raw rows, inside the caller's transaction."""
    ensure_sql_functions(conn)
    # Dropped and created again: an older version's table may have other columns.
    conn.execute("DROP TABLE IF EXISTS test_day_rollups")
    conn.execute(_SCHEMA)
    conn.executemany(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
        [(META_KEY, repr(half_life_days)), (VERSION_KEY, VERSION)],
    )
    sql = f"INSERT INTO test_day_rollups ({_COLUMNS}) " + _AGGREGATE.format(where="1")
    conn.execute(sql, {"ln2_per_h": math.log(2.0) / half_life_days})
    seq_rollups.rebuild(conn, math.log(2.0) / half_life_days)
    return int(conn.execute("SELECT count(*) FROM test_day_rollups").fetchone()[0])


def refresh(conn: sqlite3.Connection, day: str, tests: Iterable[int]) -> None:
    """Recompute the rollup rows of `tests` on one day (no-op when rollups are off)."""
    half_life = _half_life(conn)
    if half_life is None:
        return
    ensure_sql_functions(conn)
    test_pks = sorted(set(tests))
    ln2_per_h = math.log(2.0) / half_life
    params = {"day": day, "tests": json.dumps(test_pks), "ln2_per_h": ln2_per_h}
    conn.execute(
        "DELETE FROM test_day_rollups WHERE day = :day"
        " AND test IN (SELECT value FROM json_each(:tests))",
        params,
    )
    where = (
        "tr.test IN (SELECT value FROM json_each(:tests))"
        " AND tr.ts >= :day AND tr.ts < date(:day, '+1 day')"
    )
    conn.execute(
        f"INSERT INTO test_day_rollups ({_COLUMNS}) " + _AGGREGATE.format(where=where), params
    )
    seq_rollups.refresh_day(conn, day, test_pks, ln2_per_h)


def refresh_commits(
    conn: sqlite3.Connection, commits: Iterable[str | None], tests: Iterable[int] | None = None
) -> None:
    """Recompute the mixed-commit pairs of some commits (all tests, or the given ones)."""
    if enabled(conn):
        seq_rollups.refresh_commits(conn, commits, tests)


def refresh_run(conn: sqlite3.Connection, run_pk: int, tests: Iterable[int] | None = None) -> None:
    """Refresh the rollups a run's test-runs feed (all its tests, or the given ones)."""
    if not enabled(conn):
        return
    row = conn.execute(
        "SELECT substr(ts, 1, 10), commit_sha FROM runs WHERE id = ?", (run_pk,)
    ).fetchone()
    if row is None:
        return
    if tests is None:
        tests = [t for (t,) in conn.execute("SELECT test FROM test_runs WHERE run = ?", (run_pk,))]
    tests = list(tests)
    refresh(conn, str(row[0]), tests)
    seq_rollups.refresh_commits(conn, [row[1]], tests)


def after_write(
    conn: sqlite3.Connection,
    run_pk: int,
    tests: Iterable[int] | None = None,
    *,
    appended: bool = False,
) -> None:
    """The writer's hook: refresh what a run feeds; a history without rollups gets them built.

    When the run is later than every other run of its day, the test-runs it adds (those not
    yet in their day row's run list) are added to the rollups instead of recomputing the day;
    test-runs it changes are recomputed. `appended=True` is the caller's word that no test-run
    of `tests` in this run was counted before (a run created in this transaction, each test in
    one call): the run lists are then not searched.
    """
    if not enabled(conn):
        rebuild(conn)  # once per history: its first write after rollups existed
        return
    row = conn.execute(
        "SELECT substr(ts, 1, 10), ts, commit_sha FROM runs WHERE id = ?", (run_pk,)
    ).fetchone()
    if row is None:
        return
    day, ts, commit = str(row[0]), str(row[1]), row[2]
    if tests is None:
        tests = [t for (t,) in conn.execute("SELECT test FROM test_runs WHERE run = ?", (run_pk,))]
    test_pks = sorted(set(tests))
    later = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM runs WHERE ts >= ? AND ts < date(?, '+1 day') AND id <> ?)",
        (ts, day, run_pk),
    ).fetchone()[0]
    if later:
        refresh(conn, day, test_pks)
    else:
        # A test already counted in this run (an earlier batch or file) is recomputed.
        present: set[int] = set()
        if not appended:
            present = {
                int(t)
                for (t,) in conn.execute(
                    "SELECT test FROM test_day_seq WHERE day = :day"
                    " AND test IN (SELECT value FROM json_each(:tests))"
                    " AND ',' || run_list || ',' LIKE '%,' || :run || ',%'",
                    {"day": day, "tests": json.dumps(test_pks), "run": run_pk},
                )
            }
        fresh = [t for t in test_pks if t not in present]
        if fresh:
            _append_run(conn, run_pk, day, fresh)
        if present:
            refresh(conn, day, sorted(present))
    if commit is not None and _commit_shared(conn, str(commit), run_pk):
        seq_rollups.refresh_commits(conn, [commit], test_pks)


def _commit_shared(conn: sqlite3.Connection, commit: str, run_pk: int) -> bool:
    """Whether another run has this commit: a key with one run of a commit has one unit of it,
    so no mixed pair (and, the tables being exact before, no row of this commit to drop)."""
    return bool(
        conn.execute(
            "SELECT EXISTS (SELECT 1 FROM runs WHERE commit_sha = ? AND id <> ?)", (commit, run_pk)
        ).fetchone()[0]
    )


# One run's counted test-runs as rollup rows: what _AGGREGATE gives for a group of one row
# (count 1, sums and extremes of that row), without grouping. Added to the day's rows.
_ONE_RUN = """
SELECT tr.test, substr(tr.ts, 1, 10), r.suite, 1, r.branch_kind = 'main', tr.outcome = 'flaky',
    tr.bad, tr.outcome <> 'pass', tr.attempts, CAST(strftime('%s', tr.ts) AS INTEGER),
    CAST(strftime('%s', tr.ts) AS INTEGER),
    CASE WHEN tr.outcome <> 'pass' THEN CAST(strftime('%s', tr.ts) AS INTEGER) END
FROM json_each(:tests) f CROSS JOIN test_runs tr ON tr.test = f.value AND tr.run = :run
    CROSS JOIN runs r ON r.id = tr.run
WHERE r.incident IS NULL AND tr.outcome <> 'skipped' AND tr.edited = 0
"""
_ADD_RUN = f"""
INSERT INTO test_day_rollups ({_COLUMNS}) {_ONE_RUN}
ON CONFLICT (test, suite, day) DO UPDATE SET
    runs = runs + excluded.runs, main_runs = main_runs + excluded.main_runs,
    flaky_runs = flaky_runs + excluded.flaky_runs,
    failed_runs = failed_runs + excluded.failed_runs,
    failed_any_runs = failed_any_runs + excluded.failed_any_runs,
    max_attempts = max(max_attempts, excluded.max_attempts),
    first_s = min(first_s, excluded.first_s), last_s = max(last_s, excluded.last_s),
    last_failure_s = coalesce(max(last_failure_s, excluded.last_failure_s),
                              last_failure_s, excluded.last_failure_s)
"""


def _append_run(conn: sqlite3.Connection, run_pk: int, day: str, tests: list[int]) -> None:
    """Add one run, later than every other of its day, to the rollups of `tests` (whose
    test-runs in it were not counted before)."""
    half_life = _half_life(conn)
    assert half_life is not None
    ensure_sql_functions(conn)  # the appended day rows' weights use exp()
    conn.execute(_ADD_RUN, {"run": run_pk, "tests": json.dumps(tests)})
    seq_rollups.append_run(conn, run_pk, day, tests, math.log(2.0) / half_life)


def refresh_runs(conn: sqlite3.Connection, run_pks: Sequence[int]) -> None:
    """Refresh the rollups of several runs (an incident tag set or cleared on them)."""
    if not run_pks or not enabled(conn):
        return
    rows = conn.execute(
        "SELECT substr(r.ts, 1, 10), r.commit_sha, tr.test"
        " FROM runs r JOIN test_runs tr ON tr.run = r.id"
        " WHERE r.id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(run_pks)),),
    )
    by_day: dict[str, set[int]] = {}
    by_commit: dict[str, set[int]] = {}
    for day, commit, test in rows:
        by_day.setdefault(str(day), set()).add(int(test))
        if commit is not None:
            by_commit.setdefault(str(commit), set()).add(int(test))
    for day, tests in sorted(by_day.items()):
        refresh(conn, day, tests)
    for commit, tests in sorted(by_commit.items()):
        seq_rollups.refresh_commits(conn, [commit], tests)


def drop_days_before(conn: sqlite3.Connection, day: str) -> int:
    """Delete the rollup rows of days before `day` (prune); returns the rows deleted."""
    if not enabled(conn):
        return 0
    deleted = conn.execute("DELETE FROM test_day_rollups WHERE day < ?", (day,)).rowcount
    return deleted + seq_rollups.drop_days_before(conn, day)


# ---- reading ----------------------------------------------------------------------------------

# The raw rows of the window's partial edge days (:edge_lo_end / :edge_hi_start from
# window_params); every other day of the window comes from a rollup row.
EDGE_RUNS = "r.ts > :start AND r.ts <= :now AND (r.ts < :edge_lo_end OR r.ts >= :edge_hi_start)"


def window_params(conn: sqlite3.Connection, now: datetime, config: Config) -> dict[str, Any]:
    """Named parameters splitting the window (now - window_days, now] into rollup and raw days.

    Whole rollup days are :lo_day..:hi_day. The first day is read raw unless no run of it
    lies at or before the window's start, the last day unless no run of it lies after now
    (the usual case when now is the present: then only the first day is read raw).
    """
    start = now - timedelta(days=config.window_days)
    first_day, last_day = to_iso(start)[:10], to_iso(now)[:10]
    first_next = (date.fromisoformat(first_day) + timedelta(days=1)).isoformat()
    last_prev = (date.fromisoformat(last_day) - timedelta(days=1)).isoformat()
    last_next = (date.fromisoformat(last_day) + timedelta(days=1)).isoformat()
    raw_first = (
        bool(
            conn.execute(
                "SELECT EXISTS (SELECT 1 FROM runs WHERE ts >= ? AND ts <= ?)",
                (first_day, to_iso(start)),
            ).fetchone()[0]
        )
        or first_day == last_day
    )
    raw_last = (
        bool(
            conn.execute(
                "SELECT EXISTS (SELECT 1 FROM runs WHERE ts > ? AND ts < ?)",
                (to_iso(now), last_next),
            ).fetchone()[0]
        )
        or first_day == last_day
    )
    return {
        "start": to_iso(start),
        "now": to_iso(now),
        "now_jd": now.timestamp() / 86400.0 + UNIX_EPOCH_JD,
        "first_day": first_day,
        "last_day": last_day,
        "lo_day": first_next if raw_first else first_day,
        "hi_day": last_prev if raw_last else last_day,
        "edge_lo_end": first_next if raw_first else to_iso(start),
        "edge_hi_start": last_day if raw_last else "9999",
        "raw_first": raw_first,
        "raw_last": raw_last,
        "main_weight": config.main_weight,
        "other_weight": config.other_weight,
    }


# Per (test, suite) sums over the rollup days (a scan in primary-key order, no sort) and over
# the raw edge days, then merged (a few rows).
_PER_SUITE = """
    SELECT test, suite, sum(runs) AS runs, sum(main_runs) AS main_runs,
        sum(flaky_runs) AS flaky_runs, sum(failed_runs) AS failed_runs,
        sum(failed_any_runs) AS failed_any_runs, max(max_attempts) AS max_attempts,
        min(first_s) AS first_s, max(last_s) AS last_s, max(last_failure_s) AS last_failure_s
    FROM {source}
    GROUP BY test, suite"""

_ROLLUP_DAYS = "test_day_rollups WHERE day >= :lo_day AND day <= :hi_day"
_BASE = f"""
WITH per_suite AS (
    SELECT test, suite, sum(runs) AS runs, sum(main_runs) AS main_runs,
        sum(flaky_runs) AS flaky_runs, sum(failed_runs) AS failed_runs,
        sum(failed_any_runs) AS failed_any_runs, max(max_attempts) AS max_attempts,
        min(first_s) AS first_s, max(last_s) AS last_s, max(last_failure_s) AS last_failure_s
    FROM (
        {_PER_SUITE.format(source=_ROLLUP_DAYS)}
        UNION ALL
        {_PER_SUITE.format(source="({edges})")}
    )
    GROUP BY test, suite
)
SELECT test AS key, sum(runs) AS runs, sum(flaky_runs) AS flaky_runs,
    sum(failed_runs) AS failed_runs, sum(failed_any_runs) AS failed_any_runs,
    strftime('%Y-%m-%dT%H:%M:%SZ', min(first_s), 'unixepoch') AS first_ts,
    strftime('%Y-%m-%dT%H:%M:%SZ', max(last_s), 'unixepoch') AS last_ts,
    strftime('%Y-%m-%dT%H:%M:%SZ', max(last_failure_s), 'unixepoch') AS last_failure_at,
    max(max_attempts) AS max_attempts,
    max(main_runs > 0 AND gating) AS gates_main, max(runs > main_runs AND gating) AS gates_branch,
    sum(main_runs) AS main_runs, min(suite) AS suite_min, max(suite) AS suite_max,
    json_group_object(suite, json_array(runs, max_attempts)) AS suites_json
FROM (
    SELECT *, suite NOT IN (SELECT value FROM json_each(:non_gating)) AS gating FROM per_suite
)
GROUP BY test
"""

# Recency sums per test (all suites): each rollup day's sums relative to its start times the
# day's decay factor (exact per bucket), in primary-key order; the raw edge days apart.
_WEIGHTS = """
SELECT test,
    total(f * (:main_weight * main_w_bad + :other_weight * other_w_bad)),
    total(f * (:main_weight * main_w + :other_weight * other_w))
FROM (
    SELECT *, exp(-:ln2_per_h * (:now_jd - julianday(day))) AS f FROM test_day_seq
    WHERE day >= :lo_day AND day <= :hi_day
)
GROUP BY test
"""
_EDGE_WEIGHTS = """
SELECT tr.test, total(w * (tr.outcome <> 'pass')), total(w)
FROM (
    SELECT tr.*, exp(-:ln2_per_h * max(0.0, :now_jd - julianday(tr.ts)))
        * CASE WHEN r.branch_kind = 'main' THEN :main_weight ELSE :other_weight END AS w
    FROM runs r CROSS JOIN test_runs tr ON tr.run = r.id
    WHERE {edges} AND r.incident IS NULL AND tr.outcome <> 'skipped' AND tr.edited = 0
) tr
GROUP BY tr.test
"""


def test_base(
    conn: sqlite3.Connection,
    now: datetime,
    config: Config,
    *,
    suite: str | None = None,
    branch_kind: str | None = None,
) -> list[dict[str, Any]] | None:
    """Stage-1 facts per test over the window, from rollups plus the raw edge days.

    Keys: key (tests.id), runs, flaky_runs, failed_runs, failed_any_runs, weighted_bad,
    weighted_total, first_ts, last_ts, last_failure_at, max_attempts, gates_main,
    gates_branch, main_runs, suite_min, suite_max, suites ({suite: (runs, max attempts)}).
    None when the rollups cannot answer exactly (none kept, other half-life, a suite or branch
    filter: the recency sums are kept across suites).
    """
    half_life = _half_life(conn)
    if half_life != config.half_life_days or suite is not None or branch_kind is not None:
        return None
    ensure_sql_functions(conn)
    params: dict[str, Any] = {
        **window_params(conn, now, config),
        "ln2_per_h": math.log(2.0) / half_life,
        "non_gating": json.dumps(list(config.non_gating_suites)),
    }
    weights: dict[int, list[float]] = {}
    for sql in (_WEIGHTS, _EDGE_WEIGHTS.format(edges=EDGE_RUNS)):
        for test, w_bad, w_total in conn.execute(sql, params):
            sums = weights.setdefault(test, [0.0, 0.0])
            sums[0] += w_bad
            sums[1] += w_total
    cursor = conn.execute(_BASE.format(edges=_AGGREGATE.format(where=EDGE_RUNS)), params)
    names = [col[0] for col in cursor.description]
    out = []
    for row in cursor:
        item = dict(zip(names, row, strict=True))
        suites = json.loads(item.pop("suites_json"))
        item["suites"] = {name: (int(v[0]), int(v[1])) for name, v in suites.items()}
        item["weighted_bad"], item["weighted_total"] = weights[item["key"]]
        out.append(item)
    return out
