"""Per test, per UTC day (and week), per suite rollups of the counted runs, so ranking reads
tests x weeks rows.

A rollup row sums the counted test-runs (not skipped, the commit did not edit the test,
the run is no incident) of one (test, day, suite); a week row sums the day rows of one
Monday-to-Sunday week. Recency weights stay exact: a run's decay weight 2^(-(now - ts)/h) is
2^(-(now - anchor)/h) * 2^((ts - anchor)/h) for any anchor day, so the rows store sums of
2^((ts - anchor)/h) (main and other branches apart) for one anchor kept in `meta`, and the
reader multiplies the window's sums by one factor. The half-life h the sums were made with is
kept in `meta` too; another half-life, a branch-kind or suite filter, a window further than
ANCHOR_SPAN half-lives from the anchor, or a history without rollups makes `test_base` return
None (raw scan).

Maintenance (always inside the caller's transaction): the writer refreshes the (test, day) pairs
of the run it wrote, and their weeks (`after_write`; a history without rollups gets them built
at its first write, a run past the anchor's span re-anchors them); incident tagging refreshes
the days of the runs it tags; prune drops the days it removes. Each refresh recomputes its rows
from the raw test_runs (weeks from the day rows), so it is exact whatever happened before
(attempts appended across batches, a test-run replaced). Any other writer of test_runs or
runs.incident must call `refresh_run(s)` too (or `rebuild`).

Deferred folds: the pytest recorder lists its run in rollup_pending instead
(flaketui.core.rollups.pending.defer), so a
test session pays for its raw rows only. The next writer's `after_write`, or the next reader
that may write (flaketui.core.history.store.fold_deferred), folds the listed runs in one
transaction (`fold_pending`); while one is listed the rollups answer nothing and readers score
the raw rows, so every reader's result is the raw scorer's.

The sequence tables of flaketui.core.rollups.sequences (per-day sequence facts of tests and
families, same-commit pairs, signature counts) are created, rebuilt, refreshed and pruned by the
same calls; `VERSION` in `meta` names the set, and a history with an older set is rebuilt at its
next write and read from raw rows until then. merge and prune call the same hooks.

Reading (`test_base`): the window's whole weeks come from the week rows, its other whole days
from the day rows, and the partial edge days (`window_params`: the first day when runs of it
precede the window, the last when runs of it follow now) from the raw rows, so the result
equals a scan of the raw rows over the window.
"""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from flaketui.core.config import Config
from flaketui.core.rollups import sequences as seq_rollups
from flaketui.core.rollups import sql as q
from flaketui.core.rollups.evidence import ensure_sql_functions
from flaketui.core.rollups.pending import (
    PENDING_TABLE,
    TEST_RUN_COLUMNS,
    WAITING_TABLE,
    file_waiting,
    pending,
    waiting_rows,
)
from flaketui.core.timeutil import to_iso

META_KEY = "rollup_half_life_days"
# Bumped when the set of rollup tables changes: an older set is rebuilt at the next write
# and not read before (the reader falls back to raw rows).
VERSION_KEY = "rollup_version"
VERSION = "4"
# The recency sums are kept relative to one anchor day (ANCHOR_KEY), exact within ANCHOR_SPAN
# half-lives of it (2^256 is far inside a double's range): a write past that re-anchors (a
# rebuild); a window outside it is read from the raw rows.
ANCHOR_KEY = "rollup_weight_anchor"
ANCHOR_SPAN = 256.0
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
    main_w          REAL NOT NULL,          -- recency sums 2^((ts - anchor)/h) over the main
    main_w_bad      REAL NOT NULL,          -- runs (all, failed in any attempt) and the
    other_w         REAL NOT NULL,          -- others'; anchor: ANCHOR_KEY in meta
    other_w_bad     REAL NOT NULL,
    PRIMARY KEY (test, suite, day)  -- scans come out grouped by (test, suite)
) WITHOUT ROWID
"""
# The same sums per Monday-to-Sunday week ('YYYY-MM-DD' of its Monday), made from the day rows:
# a window reads its whole weeks from here and only the days around them from the day rows.
_WEEK_SCHEMA = (
    _SCHEMA.replace("test_day_rollups", "test_week_rollups")
    .replace(
        "day             TEXT NOT NULL,          -- 'YYYY-MM-DD' (UTC) of the runs' ts",
        "week            TEXT NOT NULL,          -- 'YYYY-MM-DD' (UTC) of the week's Monday",
    )
    .replace("PRIMARY KEY (test, suite, day)", "PRIMARY KEY (test, suite, week)")
)

# A run's recency sum term: 2^((ts - anchor)/h). Relative to one anchor day (not the row's own
# day), a window's sums are plain sums times one factor 2^(-(now - anchor)/h).
_ANCHORED = "exp(:ln2_per_h * (julianday(tr.ts) - :anchor_jd))"
_MAIN, _BAD = "r.branch_kind = 'main'", "tr.outcome <> 'pass'"

# Aggregates of counted raw rows in the rollup's shape; {where} narrows them.
_AGGREGATE = f"""
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
        AS last_failure_s,
    total(CASE WHEN {_MAIN} THEN {_ANCHORED} END) AS main_w,
    total(CASE WHEN {_MAIN} AND {_BAD} THEN {_ANCHORED} END) AS main_w_bad,
    total(CASE WHEN NOT {_MAIN} THEN {_ANCHORED} END) AS other_w,
    total(CASE WHEN NOT {_MAIN} AND {_BAD} THEN {_ANCHORED} END) AS other_w_bad
FROM test_runs tr JOIN runs r ON r.id = tr.run
WHERE r.incident IS NULL AND r.source <> 'diagnose' AND tr.outcome <> 'skipped'
    AND tr.edited = 0 AND {{where}}
GROUP BY tr.test, substr(tr.ts, 1, 10), r.suite
"""

_COLUMNS = (
    "test, day, suite, runs, main_runs, flaky_runs, failed_runs, failed_any_runs, max_attempts,"
    " first_s, last_s, last_failure_s, main_w, main_w_bad, other_w, other_w_bad"
)


# Weekly rows, made from the day rows: the Monday of a 'YYYY-MM-DD' day.
_WEEK_OF = "date({day}, '-6 days', 'weekday 1')"
_WEEK_COLUMNS = _COLUMNS.replace("test, day, suite", "test, week, suite")
_WEEKS_FROM_DAYS = f"""
INSERT INTO test_week_rollups ({_WEEK_COLUMNS})
SELECT test, {_WEEK_OF.format(day="day")}, suite, sum(runs), sum(main_runs), sum(flaky_runs),
    sum(failed_runs), sum(failed_any_runs), max(max_attempts), min(first_s), max(last_s),
    max(last_failure_s), total(main_w), total(main_w_bad), total(other_w), total(other_w_bad)
FROM test_day_rollups WHERE {{where}}
GROUP BY test, suite, {_WEEK_OF.format(day="day")}"""


@dataclass(frozen=True, slots=True)
class _Settings:
    """What the stored rollups were made with: the half-life and the weights' anchor day."""

    half_life: float
    anchor: str  # 'YYYY-MM-DD'

    @property
    def ln2_per_h(self) -> float:
        """ln 2 per day of half-life (the decay rate of the recency weights)."""
        return math.log(2.0) / self.half_life

    def covers(self, day: str) -> bool:
        """Whether sums anchored here stay well inside a double's range on `day`."""
        return abs(_day_jd(day) - _day_jd(self.anchor)) <= ANCHOR_SPAN * self.half_life

    def params(self) -> dict[str, float]:
        """The SQL parameters of the anchored sums."""
        return {"ln2_per_h": self.ln2_per_h, "anchor_jd": _day_jd(self.anchor)}


def _day_jd(day: str) -> float:
    """julianday() of a 'YYYY-MM-DD' day's midnight (UTC)."""
    return (date.fromisoformat(day[:10]) - date(1970, 1, 1)).days + UNIX_EPOCH_JD


def week_of(day: str) -> str:
    """The Monday of a 'YYYY-MM-DD' day's week."""
    value = date.fromisoformat(day[:10])
    return (value - timedelta(days=value.weekday())).isoformat()


def _settings(conn: sqlite3.Connection) -> _Settings | None:
    """The stored rollups' settings; None when the history has none (or an older set)."""
    try:
        rows = dict(
            conn.execute(
                "SELECT key, value FROM meta WHERE key IN (?, ?, ?)",
                (META_KEY, VERSION_KEY, ANCHOR_KEY),
            ).fetchall()
        )
    except sqlite3.OperationalError:
        return None
    if rows.get(VERSION_KEY) != VERSION or META_KEY not in rows or ANCHOR_KEY not in rows:
        return None
    return _Settings(float(rows[META_KEY]), str(rows[ANCHOR_KEY]))


def fold_pending(conn: sqlite3.Connection) -> int:
    """Fold the deferred runs into the rollups inside the caller's transaction; returns how
    many.

    The runs are folded together, a day at a time. A day's runs that all follow every other
    run of it, none of their test-runs counted yet (runs written in time order), are added to
    its rows as one segment (_append_day); any other day is recomputed from the raw rows for
    every test one of them ran (in slices of FOLD_SLICE tests, memory). Each commit they share
    with another run is recomputed once. So N runs of a day rewrite that day's rollup pages
    once, not N times, and the result is exact whatever was folded before (a run deferred again
    after a partial fold included). The runs' waiting per-test rows are filed into test_runs
    first (_file_waiting_rows): the fold reads them there, a segment from its copy of them.
    """
    # Rows wait only for listed runs; filed all the same where none is left to fold, so that
    # no row can outlast its listing unseen.
    if not pending(conn):
        file_waiting(conn)
        return 0
    runs = _pending_list(conn)
    conn.execute(f"DELETE FROM {PENDING_TABLE}")  # listed runs pruned since are dropped too
    if not runs:
        file_waiting(conn)
        return 0
    settings = _settings(conn)
    if settings is None:
        rebuild(conn)  # made from every raw row: the deferred runs included
        return len(runs)
    latest = _latest_day(conn)
    if any(not settings.covers(day) and day >= (latest or day) for _, day, _ in runs):
        rebuild(conn, settings.half_life)  # the newest day left the anchor's span: re-anchor
        return len(runs)
    filed = _file_waiting_rows(conn)
    by_day: dict[str, list[int]] = {}
    by_commit: dict[str, list[int]] = {}
    for run_pk, day, commit in runs:
        by_day.setdefault(day, []).append(run_pk)
        if commit is not None:
            by_commit.setdefault(commit, []).append(run_pk)
    # Appends first: a recomputed day recomputes a family that just came to be whole, with
    # every run of it, and no later append may add a run to it again.
    seq_rollups.start_segments(conn)
    recompute = [
        (day, run_pks)
        for day, run_pks in sorted(by_day.items())
        if not _append_day(conn, settings, day, run_pks, filed)
    ]
    conn.execute(f"DROP TABLE IF EXISTS temp.{FILED_ROWS}")
    for day, run_pks in recompute:
        for tests in _tests_of_runs(conn, run_pks):
            _fold_day(conn, day, tests)
    seq_rollups.finish_segments(conn, settings.ln2_per_h)
    for commit, run_pks in sorted(by_commit.items()):
        if len(run_pks) > 1 or _commit_shared(conn, commit, run_pks[0]):
            for tests in _tests_of_runs(conn, run_pks):
                seq_rollups.refresh_commits(conn, [commit], tests)
    return len(runs)


FOLD_SLICE = 10_000  # tests per recomputed slice of a day when folding (memory)
FILED_ROWS = "fold_filed_rows"
_TR_COLUMNS = ", ".join(f"tr.{column.strip()}" for column in TEST_RUN_COLUMNS.split(","))


def _file_waiting_rows(conn: sqlite3.Connection) -> set[int]:
    """File the waiting per-test rows into test_runs (pending.file_waiting), keeping a copy of
    them, in run order, in the temporary table FILED_ROWS for the rest of the fold: a segment
    of those runs (_append_day) reads them there rather than seeking each row in test_runs
    again, where they landed one page per test. Returns the runs they belong to."""
    conn.execute(f"DROP TABLE IF EXISTS temp.{FILED_ROWS}")
    if not waiting_rows(conn):
        return set()
    conn.execute(
        f"CREATE TEMP TABLE {FILED_ROWS} AS SELECT {TEST_RUN_COLUMNS} FROM {WAITING_TABLE}"
    )
    file_waiting(conn)
    return {int(run) for (run,) in conn.execute(f"SELECT DISTINCT run FROM temp.{FILED_ROWS}")}


def _pending_list(conn: sqlite3.Connection) -> list[tuple[int, str, str | None]]:
    """The deferred runs still in the history: (run, day, commit), oldest first."""
    return [
        (int(pk), str(day), None if commit is None else str(commit))
        for pk, day, commit in conn.execute(
            f"SELECT p.run, substr(r.ts, 1, 10), r.commit_sha FROM {PENDING_TABLE} p"
            " JOIN runs r ON r.id = p.run ORDER BY r.ts, r.id"
        )
    ]


def _tests_of_runs(conn: sqlite3.Connection, run_pks: list[int]) -> Iterator[list[int]]:
    """The distinct tests the runs hold, ascending, in slices of FOLD_SLICE."""
    last = -1
    while True:
        tests = [
            int(test)
            for (test,) in conn.execute(
                "SELECT DISTINCT test FROM test_runs"
                " WHERE run IN (SELECT value FROM json_each(?)) AND test > ?"
                " ORDER BY test LIMIT ?",
                (json.dumps(run_pks), last, FOLD_SLICE),
            )
        ]
        if not tests:
            return
        yield tests
        last = tests[-1]


def _fold_day(conn: sqlite3.Connection, day: str, tests: list[int]) -> None:
    """One slice of a fold: the day's rollups of `tests`, recomputed from the raw rows."""
    refresh(conn, day, tests)


# A fold segment's test-runs, read once through test_runs_run into a temporary table (each read
# of test_runs by run looks its rows up one by one) for the tests' pass and the families'.
SEGMENT_ROWS = "fold_segment_rows"
# Whether a test-run of the segment is counted in a day row already: with no other run of the
# day at or after :first, a row that far on can only hold one of them. One look-up per test
# and suite of the segment, not per test-run.
_COUNTED_ALREADY = f"""
SELECT EXISTS (SELECT 1 FROM (SELECT DISTINCT tr.test, r.suite FROM temp.{SEGMENT_ROWS} tr
        CROSS JOIN runs r ON r.id = tr.run) s
    CROSS JOIN test_day_rollups d ON d.test = s.test AND d.suite = s.suite AND d.day = :day
    WHERE d.last_s >= CAST(strftime('%s', :first) AS INTEGER))"""

# The segment's counted test-runs in (test, ts, run) order: what its rollup rows, sequence
# day rows and signature counts are all made from, in one pass.
_SEGMENT_UNITS = f"""
SELECT tr.test, tr.run, tr.ts, tr.bad, tr.outcome = 'flaky', tr.outcome <> 'pass',
    r.branch_kind = 'main', r.suite, tr.attempts, tr.signature
FROM temp.{SEGMENT_ROWS} tr CROSS JOIN runs r ON r.id = tr.run
WHERE {q.COUNTED}
ORDER BY tr.test, tr.ts, tr.run"""
SEGMENT_FLUSH = 4_096  # day rows a segment's pass holds before writing them (memory)
JD_UNIX_EPOCH_MS = 210_866_760_000_000  # julianday('1970-01-01') in ms, as SQLite keeps it


def _append_day(
    conn: sqlite3.Connection,
    settings: _Settings,
    day: str,
    runs: list[int],
    filed: set[int],
) -> bool:
    """Add a day's deferred runs to its rollups as one later segment, when they all follow
    every other run of the day and none of their test-runs is counted yet (runs ingested in
    time order); False, changing nothing, when the day must be recomputed instead.

    Families that just came to be and ran elsewhere are left out: their names are kept in the
    temporary table fold_whole_families for the caller to recompute whole. `filed`: runs whose
    rows this fold filed, read from its copy of them (_file_waiting_rows).
    """
    runs_json = json.dumps(runs)
    first_ts = conn.execute(
        "SELECT min(ts) FROM runs WHERE id IN (SELECT value FROM json_each(?))", (runs_json,)
    ).fetchone()[0]
    if first_ts is None:
        return True  # pruned since they were listed: nothing to add
    later = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM runs WHERE ts >= ? AND ts < date(?, '+1 day')"
        " AND id NOT IN (SELECT value FROM json_each(?)))",
        (first_ts, day, runs_json),
    ).fetchone()[0]
    if later:
        return False
    conn.execute(f"DROP TABLE IF EXISTS temp.{SEGMENT_ROWS}")
    if filed.issuperset(runs):
        conn.execute(
            f"CREATE TEMP TABLE {SEGMENT_ROWS} AS SELECT {TEST_RUN_COLUMNS}"
            f" FROM temp.{FILED_ROWS} WHERE run IN (SELECT value FROM json_each(?))",
            (runs_json,),
        )
    else:
        conn.execute(
            f"CREATE TEMP TABLE {SEGMENT_ROWS} AS SELECT {_TR_COLUMNS} FROM json_each(?) p"
            " CROSS JOIN test_runs tr ON tr.run = p.value",
            (runs_json,),
        )
    try:
        counted = conn.execute(_COUNTED_ALREADY, {"day": day, "first": first_ts}).fetchone()[0]
        if not counted:
            _append_segment_tests(conn, settings, day)
            seq_rollups.append_segment_families(
                conn, f"temp.{SEGMENT_ROWS}", runs_json, settings.ln2_per_h
            )
    except BaseException:
        # A read of the table cut short by the error may still hold it (its cursor lives on in
        # the traceback), and SQLite refuses to drop a table being read: the error raised then
        # would stand in for this one (a stop signal taken for a lock). The table goes with
        # the transaction's rollback, else before the next segment's is made.
        with contextlib.suppress(sqlite3.Error):
            conn.execute(f"DROP TABLE IF EXISTS temp.{SEGMENT_ROWS}")
        raise
    conn.execute(f"DROP TABLE IF EXISTS temp.{SEGMENT_ROWS}")
    return not counted


def _append_segment_tests(conn: sqlite3.Connection, settings: _Settings, day: str) -> None:
    """Add a segment's test-runs (one day's runs, see _append_day; in SEGMENT_ROWS) to the day
    and week rollups, the tests' sequence day rows and their signature counts, in one ordered
    read. The sums are the aggregates' (_AGGREGATE, sql.day_rows, SIGNATURE_ROWS) made in
    the same order; rows are written every SEGMENT_FLUSH tests, so a huge run's rows are never
    all in memory."""
    week = week_of(day)
    day_s = int((date.fromisoformat(day) - date(1970, 1, 1)).total_seconds())
    ln2_per_h, anchor_jd = settings.ln2_per_h, _day_jd(settings.anchor)
    upsert_seq = seq_rollups.append_rows_sql("test_day_seq", "test")
    sums_out: list[tuple[Any, ...]] = []
    seq_out: list[tuple[Any, ...]] = []
    signatures_out: list[tuple[Any, ...]] = []

    def flush() -> None:
        conn.executemany(_UPSERT_DAY, sums_out)
        conn.executemany(_UPSERT_WEEK, [(row[0], week, *row[2:]) for row in sums_out])
        conn.executemany(upsert_seq, seq_out)
        conn.executemany(seq_rollups.APPEND_SIGNATURES, signatures_out)
        sums_out.clear()
        seq_out.clear()
        signatures_out.clear()

    def finish(test: int) -> None:
        for suite, v in suites.items():
            sums_out.append((test, day, suite, *v))
        seq_out.append(seq_rollups.finish_day_row(seq_row, True))
        for signature, (count, last_ts) in signatures.items():
            signatures_out.append((test, day, signature, count, last_ts))
        if len(seq_out) >= SEGMENT_FLUSH:
            flush()

    # A run's units share its ts: its seconds and both weights are worked out once per run.
    moments: dict[str, tuple[int, float, float]] = {}
    current: int | None = None
    seq_row: list[Any] = []
    suites: dict[str, list[Any]] = {}
    signatures: dict[int, list[Any]] = {}
    cursor = conn.execute(_SEGMENT_UNITS)
    for test, run, ts, bad, flaky, failed_any, is_main, suite, attempts, signature in cursor:
        moment = moments.get(ts)
        if moment is None:
            secs = int(ts[11:13]) * 3600 + int(ts[14:16]) * 60 + int(ts[17:19])
            # julianday(ts) as SQLite computes it (integer milliseconds over a day's).
            jd = ((day_s + secs) * 1000 + JD_UNIX_EPOCH_MS) / 86_400_000.0
            moment = moments[ts] = (
                day_s + secs,
                math.exp(ln2_per_h * secs / 86400.0),
                math.exp(ln2_per_h * (jd - anchor_jd)),
            )
        unix_s, day_w, anchored = moment
        if test != current:
            if current is not None:
                finish(current)
            current = test
            seq_row = seq_rollups.start_day_row(test, day, bad)
            suites = {}
            signatures = {}
        seq_rollups.add_unit(seq_row, run, bad, flaky, failed_any, is_main, day_w)
        # runs, main_runs, flaky, failed, failed_any, max_attempts, first_s, last_s,
        # last_failure_s, main_w, main_w_bad, other_w, other_w_bad
        sums = suites.get(suite)
        if sums is None:
            sums = suites[suite] = [0, 0, 0, 0, 0, attempts, unix_s, unix_s, None,
                                    0.0, 0.0, 0.0, 0.0]  # fmt: skip
        sums[0] += 1
        sums[2] += flaky
        sums[3] += bad
        sums[4] += failed_any
        if attempts > sums[5]:
            sums[5] = attempts
        sums[7] = unix_s  # units come in time order
        if failed_any:
            sums[8] = unix_s
        if is_main:
            sums[1] += 1
            sums[9] += anchored
            if failed_any:
                sums[10] += anchored
        else:
            sums[11] += anchored
            if failed_any:
                sums[12] += anchored
        if signature is not None:
            counted = signatures.get(signature)
            if counted is None:
                signatures[signature] = [1, ts]
            else:
                counted[0] += 1
                counted[1] = ts
    if current is not None:
        finish(current)
    flush()


def half_life(conn: sqlite3.Connection) -> float | None:
    """The half-life the rollups were built with; None when the history has none (or old ones)."""
    settings = _settings(conn)
    return None if settings is None else settings.half_life


def enabled(conn: sqlite3.Connection) -> bool:
    """Whether this history maintains rollups."""
    return half_life(conn) is not None


def answers(conn: sqlite3.Connection, config: Config) -> bool:
    """Whether the rollups can answer a request with this config exactly (same half-life, no
    run waiting to be folded)."""
    return half_life(conn) == config.half_life_days and not pending(conn)


def _latest_day(conn: sqlite3.Connection) -> str | None:
    row = conn.execute("SELECT substr(max(ts), 1, 10) FROM runs").fetchone()
    return None if row is None or row[0] is None else str(row[0])


def _anchor_for(conn: sqlite3.Connection, half_life_days: float) -> str:
    """The kept anchor while it covers the newest run (a rebuild then changes no sum), else
    the newest run's day (today in an empty history)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (ANCHOR_KEY,)).fetchone()
    latest = _latest_day(conn) or datetime.now(UTC).date().isoformat()
    if row is not None and _Settings(half_life_days, str(row[0])).covers(latest):
        return str(row[0])
    return latest


def rebuild(conn: sqlite3.Connection, half_life_days: float = Config().half_life_days) -> int:
    """(Re)create every rollup row from the raw rows, inside the caller's transaction."""
    file_waiting(conn)
    ensure_sql_functions(conn)
    settings = _Settings(half_life_days, _anchor_for(conn, half_life_days))
    # Dropped and created again: an older version's table may have other columns.
    for table, schema in (("test_day_rollups", _SCHEMA), ("test_week_rollups", _WEEK_SCHEMA)):
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(schema)
    conn.executemany(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
        [
            (META_KEY, repr(half_life_days)),
            (VERSION_KEY, VERSION),
            (ANCHOR_KEY, settings.anchor),
        ],
    )
    sql = f"INSERT INTO test_day_rollups ({_COLUMNS}) " + _AGGREGATE.format(where="1")
    conn.execute(sql, settings.params())
    conn.execute(_WEEKS_FROM_DAYS.format(where="1"))
    seq_rollups.rebuild(conn, settings.ln2_per_h)
    if pending(conn):  # every deferred run is in the rows just made
        conn.execute(f"DELETE FROM {PENDING_TABLE}")
    return int(conn.execute("SELECT count(*) FROM test_day_rollups").fetchone()[0])


def refresh(conn: sqlite3.Connection, day: str, tests: Iterable[int]) -> None:
    """Recompute the rollup rows of `tests` on one day, and their week (no-op without rollups).

    The raw rows it counts include those of the runs waiting to be folded (a family pools its
    members' runs): those are folded first, so that no later fold adds them again.
    """
    if _settings(conn) is None:
        return
    if pending(conn):
        fold_pending(conn)  # it may re-anchor the rollups: their settings are read after it
    settings = _settings(conn)
    if settings is None:
        return
    ensure_sql_functions(conn)
    test_pks = sorted(set(tests))
    params = {"day": day, "week": week_of(day), "tests": json.dumps(test_pks), **settings.params()}
    picked = "test IN (SELECT value FROM json_each(:tests))"
    conn.execute(f"DELETE FROM test_day_rollups WHERE day = :day AND {picked}", params)
    where = f"tr.{picked} AND tr.ts >= :day AND tr.ts < date(:day, '+1 day')"
    conn.execute(
        f"INSERT INTO test_day_rollups ({_COLUMNS}) " + _AGGREGATE.format(where=where), params
    )
    conn.execute(f"DELETE FROM test_week_rollups WHERE week = :week AND {picked}", params)
    conn.execute(
        _WEEKS_FROM_DAYS.format(
            where=f"{picked} AND day >= :week AND day < date(:week, '+7 days')"
        ),
        params,
    )
    seq_rollups.refresh_day(conn, day, test_pks, settings.ln2_per_h)


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
    if pending(conn):
        fold_pending(conn)  # the runs a recorder deferred, before this one
    settings = _settings(conn)
    if settings is None:
        rebuild(conn)  # once per history: its first write after rollups existed
        return
    row = conn.execute(
        "SELECT substr(ts, 1, 10), ts, commit_sha FROM runs WHERE id = ?", (run_pk,)
    ).fetchone()
    if row is None:
        return
    day, ts, commit = str(row[0]), str(row[1]), row[2]
    if not settings.covers(day) and day >= (_latest_day(conn) or day):
        rebuild(conn, settings.half_life)  # the newest day left the anchor's span: re-anchor
        return
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
            _append_run(conn, settings, run_pk, day, fresh)
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
# (count 1, sums and extremes of that row), without grouping. Added to the day's and the
# week's rows ({bucket}: the row's day or week).
_ONE_RUN = f"""
SELECT tr.test, {{bucket}}, r.suite, 1, {_MAIN}, tr.outcome = 'flaky', tr.bad, {_BAD},
    tr.attempts, CAST(strftime('%s', tr.ts) AS INTEGER), CAST(strftime('%s', tr.ts) AS INTEGER),
    CASE WHEN {_BAD} THEN CAST(strftime('%s', tr.ts) AS INTEGER) END,
    CASE WHEN {_MAIN} THEN {_ANCHORED} ELSE 0.0 END,
    CASE WHEN {_MAIN} AND {_BAD} THEN {_ANCHORED} ELSE 0.0 END,
    CASE WHEN {_MAIN} THEN 0.0 ELSE {_ANCHORED} END,
    CASE WHEN NOT {_MAIN} AND {_BAD} THEN {_ANCHORED} ELSE 0.0 END
FROM json_each(:tests) f CROSS JOIN test_runs tr ON tr.test = f.value AND tr.run = :run
    CROSS JOIN runs r ON r.id = tr.run
WHERE r.incident IS NULL AND r.source <> 'diagnose' AND tr.outcome <> 'skipped' AND tr.edited = 0
"""
# Adding counts and sums to a rollup row (the excluded row: later runs of its bucket).
_ADD_SET = """
    runs = runs + excluded.runs, main_runs = main_runs + excluded.main_runs,
    flaky_runs = flaky_runs + excluded.flaky_runs,
    failed_runs = failed_runs + excluded.failed_runs,
    failed_any_runs = failed_any_runs + excluded.failed_any_runs,
    max_attempts = max(max_attempts, excluded.max_attempts),
    first_s = min(first_s, excluded.first_s), last_s = max(last_s, excluded.last_s),
    last_failure_s = coalesce(max(last_failure_s, excluded.last_failure_s),
                              last_failure_s, excluded.last_failure_s),
    main_w = main_w + excluded.main_w, main_w_bad = main_w_bad + excluded.main_w_bad,
    other_w = other_w + excluded.other_w, other_w_bad = other_w_bad + excluded.other_w_bad
"""
# Adding rollup rows made in Python (a fold segment's sums, _COLUMNS' values) to a day's or
# a week's rows.
_UPSERT = (
    "INSERT INTO {table} ({columns}) VALUES (" + ", ".join("?" * 16) + ")"
    " ON CONFLICT (test, suite, {bucket}) DO UPDATE SET" + _ADD_SET
)
_UPSERT_DAY = _UPSERT.format(table="test_day_rollups", columns=_COLUMNS, bucket="day")
_UPSERT_WEEK = _UPSERT.format(table="test_week_rollups", columns=_WEEK_COLUMNS, bucket="week")
_ADD_RUN = (
    "INSERT INTO {table} ({columns}) {one_run}\nON CONFLICT (test, suite, {bucket}) DO UPDATE SET"
    + _ADD_SET
)
_ADD_RUN_DAY = _ADD_RUN.format(
    table="test_day_rollups",
    columns=_COLUMNS,
    one_run=_ONE_RUN.format(bucket="substr(tr.ts, 1, 10)"),
    bucket="day",
)
_ADD_RUN_WEEK = _ADD_RUN.format(
    table="test_week_rollups",
    columns=_WEEK_COLUMNS,
    one_run=_ONE_RUN.format(bucket=_WEEK_OF.format(day="substr(tr.ts, 1, 10)")),
    bucket="week",
)


def _append_run(
    conn: sqlite3.Connection, settings: _Settings, run_pk: int, day: str, tests: list[int]
) -> None:
    """Add one run, later than every other of its day, to the rollups of `tests` (whose
    test-runs in it were not counted before)."""
    ensure_sql_functions(conn)  # the appended rows' weights use exp()
    params = {"run": run_pk, "tests": json.dumps(tests), **settings.params()}
    conn.execute(_ADD_RUN_DAY, params)
    conn.execute(_ADD_RUN_WEEK, params)
    seq_rollups.append_run(conn, run_pk, day, tests, settings.ln2_per_h)


def refresh_runs(conn: sqlite3.Connection, run_pks: Sequence[int]) -> None:
    """Refresh the rollups of several runs (an incident tag set or cleared on them)."""
    if not run_pks or not enabled(conn):
        return
    # Each day is recounted by refresh, which folds the waiting runs first.
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
    # The cut week keeps its days from `day` on: made again from the day rows left.
    week = week_of(day)
    conn.execute("DELETE FROM test_week_rollups WHERE week <= ?", (week,))
    conn.execute(
        _WEEKS_FROM_DAYS.format(where="day >= :week AND day < date(:week, '+7 days')"),
        {"week": week},
    )
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


# Per (test, suite) sums over the window's whole weeks, the rollup days around them and the
# raw edge days (each a scan in primary-key order, no sort), then merged (a few rows).
_SUMS = """sum(runs) AS runs, sum(main_runs) AS main_runs,
        sum(flaky_runs) AS flaky_runs, sum(failed_runs) AS failed_runs,
        sum(failed_any_runs) AS failed_any_runs, max(max_attempts) AS max_attempts,
        min(first_s) AS first_s, max(last_s) AS last_s, max(last_failure_s) AS last_failure_s,
        total(main_w) AS main_w, total(main_w_bad) AS main_w_bad, total(other_w) AS other_w,
        total(other_w_bad) AS other_w_bad"""
_PER_SUITE = f"""
    SELECT test, suite, {_SUMS}
    FROM {{source}}
    GROUP BY test, suite"""
_WHOLE_WEEKS = "test_week_rollups WHERE week >= :week_lo AND week <= :week_hi"
_DAYS_AROUND = (
    "test_day_rollups WHERE day >= :lo_day AND day <= :hi_day"
    " AND (day < :weeks_start OR day >= :weeks_end)"
)
# {weeks}, {days}, {edges}: the sources, with or without _ONLY_KEYS
_PER_SUITE_SOURCES = f"""
        {_PER_SUITE.format(source="{weeks}")}
        UNION ALL
        {_PER_SUITE.format(source="{days}")}
        UNION ALL
        {_PER_SUITE.format(source="({edges})")}"""
_ONLY_KEYS = "test IN (SELECT value FROM json_each(:keys))"
_BASE = f"""
WITH per_suite AS (
    SELECT test, suite, {_SUMS}
    FROM ({_PER_SUITE_SOURCES}
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
    json_group_object(suite, json_array(runs, max_attempts)) AS suites_json,
    :main_weight * total(main_w_bad) + :other_weight * total(other_w_bad) AS weighted_bad,
    :main_weight * total(main_w) + :other_weight * total(other_w) AS weighted_total
FROM (
    SELECT *, suite NOT IN (SELECT value FROM json_each(:non_gating)) AS gating FROM per_suite
)
GROUP BY test
"""
# The suites whose tests made more than one attempt in a counted run of the window.
_RETRY_SUITES = f"""
SELECT suite FROM ({_PER_SUITE_SOURCES}
)
GROUP BY suite HAVING max(max_attempts) > 1
"""


def _base_sources(keys: bool) -> dict[str, str]:
    """_PER_SUITE_SOURCES' sources, narrowed to the tests in :keys when `keys`."""
    only = f" AND {_ONLY_KEYS}" if keys else ""
    return {
        "weeks": _WHOLE_WEEKS + only,
        "days": _DAYS_AROUND + only,
        "edges": _AGGREGATE.format(where=EDGE_RUNS + (f" AND tr.{_ONLY_KEYS}" if keys else "")),
    }


def _week_params(lo_day: str, hi_day: str) -> dict[str, str]:
    """The whole Monday-to-Sunday weeks inside lo_day..hi_day, and the days around them."""
    lo, hi = date.fromisoformat(lo_day), date.fromisoformat(hi_day)
    first = lo + timedelta(days=-lo.weekday() % 7)  # the first Monday on or after lo
    after = hi + timedelta(days=1)
    end = after - timedelta(days=after.weekday())  # the Monday after the last whole week
    if first >= end:  # no whole week: every day from the day rows
        return {"week_lo": "9999", "week_hi": "0000", "weeks_start": "9999", "weeks_end": "9999"}
    return {
        "week_lo": first.isoformat(),
        "week_hi": (end - timedelta(days=7)).isoformat(),
        "weeks_start": first.isoformat(),
        "weeks_end": end.isoformat(),
    }


def test_base(
    conn: sqlite3.Connection,
    now: datetime,
    config: Config,
    *,
    suite: str | None = None,
    branch_kind: str | None = None,
    keys: Sequence[int] | None = None,
) -> list[dict[str, Any]] | None:
    """Stage-1 facts per test over the window, from rollups plus the raw edge days (of the
    tests in `keys` alone, when given).

    Keys: key (tests.id), runs, flaky_runs, failed_runs, failed_any_runs, weighted_bad,
    weighted_total, first_ts, last_ts, last_failure_at, max_attempts, gates_main,
    gates_branch, main_runs, suite_min, suite_max, suites ({suite: (runs, max attempts)}).
    None when the rollups cannot answer exactly (none kept, other half-life, a window outside
    the anchor's span, a suite or branch filter: the recency sums are kept across suites).
    """
    params = _base_params(conn, now, config, suite, branch_kind)
    if params is None:
        return None
    if keys is not None:
        params["keys"] = json.dumps(sorted(set(keys)))
    # Every stored sum is relative to the anchor: one factor brings them to `now`.
    factor = math.exp(-params["ln2_per_h"] * (params["now_jd"] - params["anchor_jd"]))
    cursor = conn.execute(_BASE.format(**_base_sources(keys is not None)), params)
    names = [col[0] for col in cursor.description]
    out = []
    for row in cursor:
        item = dict(zip(names, row, strict=True))
        suites = json.loads(item.pop("suites_json"))
        item["suites"] = {name: (int(v[0]), int(v[1])) for name, v in suites.items()}
        item["weighted_bad"] *= factor
        item["weighted_total"] *= factor
        out.append(item)
    return out


def retry_suites(conn: sqlite3.Connection, now: datetime, config: Config) -> set[str] | None:
    """The suites that retry: a test of theirs made more than one attempt in a counted run of
    the window (what test_base's rows of every test say). None when the rollups cannot answer
    exactly (see test_base)."""
    params = _base_params(conn, now, config, None, None)
    if params is None:
        return None
    sql = _RETRY_SUITES.format(**_base_sources(False))
    return {str(name) for (name,) in conn.execute(sql, params)}


def _base_params(
    conn: sqlite3.Connection,
    now: datetime,
    config: Config,
    suite: str | None,
    branch_kind: str | None,
) -> dict[str, Any] | None:
    """The parameters of test_base's query; None when the rollups cannot answer it."""
    settings = _settings(conn)
    if settings is None or settings.half_life != config.half_life_days or pending(conn):
        return None
    if suite is not None or branch_kind is not None:
        return None
    window = window_params(conn, now, config)
    if not (settings.covers(window["first_day"]) and settings.covers(window["last_day"])):
        return None
    ensure_sql_functions(conn)
    return {
        **window,
        **_week_params(window["lo_day"], window["hi_day"]),
        **settings.params(),
        "non_gating": json.dumps(list(config.non_gating_suites)),
    }
