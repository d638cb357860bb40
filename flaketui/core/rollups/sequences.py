"""Maintenance of the sequence rollups (flaketui.core.rollups.sql) beside test_day_rollups.

Tables (created with the rollups, refreshed in the caller's transaction by rollups.build):
- test_day_seq (test, day): per-day sequence facts of a test, with the day's run ids (all,
  bad, flaky, failed) so signature groups can be pooled by run at read time;
- family_day_seq (parent, day): the same for parametrized families, pooled by run;
- test_commit_mixed / family_commit_mixed: (key, commit) pairs with a good and a bad run;
- test_day_signatures (test, day, signature): counted runs per first-failure signature.
Each refresh recomputes its rows from the raw rows, so it is exact whatever happened before.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from datetime import date, timedelta
from typing import Any

from flaketui.core.rollups import sql as q

FAMILIES = "SELECT DISTINCT parent FROM tests WHERE test_id <> parent"
SEQ_TABLES = ("test_day_seq", "family_day_seq", "test_day_signatures")
MIXED_TABLES = ("test_commit_mixed", "family_commit_mixed")
MAX_MOMENTS = 65_536  # run timestamps whose day and weight iter_day_rows keeps at once

_SCHEMA = (
    q.seq_schema("test_day_seq", "test", "INTEGER", lists=True),
    q.seq_schema("family_day_seq", "parent", "TEXT", lists=False),
    q.mixed_schema("test_commit_mixed", "test", "INTEGER"),
    q.mixed_schema("family_commit_mixed", "parent", "TEXT"),
    q.SIGNATURE_SCHEMA,
)

_TEST_COLS = f"test, day, {q.SEQ_COLUMNS}, {q.LIST_COLUMNS}"
_FAMILY_COLS = f"parent, day, {q.SEQ_COLUMNS}"
# Sources driven from a JSON list of tests / parents (index range reads), or from commits.
_TESTS_SRC = (
    "json_each(:tests) f CROSS JOIN test_runs tr ON tr.test = f.value"
    " CROSS JOIN runs r ON r.id = tr.run"
)
_PARENTS_SRC = (
    "json_each(:parents) p CROSS JOIN tests t ON t.parent = p.value"
    " CROSS JOIN test_runs tr ON tr.test = t.id CROSS JOIN runs r ON r.id = tr.run"
)
_COMMIT_TESTS_SRC = "runs r CROSS JOIN test_runs tr ON tr.run = r.id"
_COMMIT_FAMILY_SRC = (
    "runs r CROSS JOIN test_runs tr ON tr.run = r.id CROSS JOIN tests t ON t.id = tr.test"
)
_DAY = "tr.ts >= :day AND tr.ts < :next_day"
_IN_COMMITS = "r.commit_sha IN (SELECT value FROM json_each(:commits))"


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Create the tables when missing."""
    for statement in _SCHEMA:
        conn.execute(statement)


def rebuild(conn: sqlite3.Connection, ln2_per_h: float) -> None:
    """Recompute every row from the raw rows (inside the caller's transaction)."""
    # Dropped and created again: an older version's tables may have other columns.
    conn.execute("DROP INDEX IF EXISTS runs_commit")  # version 2 kept one (small history cost)
    for table in (*SEQ_TABLES, *MIXED_TABLES):
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    ensure_schema(conn)
    params = {"ln2_per_h": ln2_per_h}
    test_units = q.TEST_UNITS.format(source=q.TEST_SOURCE, where="1")
    family_units = q.FAMILY_UNITS.format(source=q.FAMILY_SOURCE, where=f"t.parent IN ({FAMILIES})")
    # The day rows in one ordered pass (iter_day_rows), as a refresh makes them: the same rows
    # as rollup_sql.day_rows, whose window functions sort the units once per window.
    _insert(conn, "test_day_seq", _TEST_COLS, iter_day_rows(conn, test_units, params, True))
    _insert(conn, "family_day_seq", _FAMILY_COLS, iter_day_rows(conn, family_units, params, False))
    conn.execute(f"INSERT INTO test_commit_mixed {q.mixed_rows(test_units)}")
    conn.execute(f"INSERT INTO family_commit_mixed {q.mixed_rows(family_units)}")
    conn.execute(
        "INSERT INTO test_day_signatures "
        + q.SIGNATURE_ROWS.format(source=q.TEST_SOURCE, where="1")
    )


def _families_of(conn: sqlite3.Connection, tests_json: str) -> list[str]:
    rows = conn.execute(
        "SELECT DISTINCT t.parent FROM tests t WHERE t.id IN (SELECT value FROM json_each(?))"
        " AND EXISTS (SELECT 1 FROM tests m WHERE m.parent = t.parent AND m.test_id <> m.parent)",
        (tests_json,),
    )
    return [str(p) for (p,) in rows]


def day_rows(
    conn: sqlite3.Connection, units: str, params: Mapping[str, Any], lists: bool
) -> list[tuple[Any, ...]]:
    """`rollup_sql.day_rows` computed in Python over the units (faster for one day's refresh).

    Rows: key, day, SEQ_COLUMNS[, LIST_COLUMNS]; the rebuild's SQL gives the same rows.
    """
    return list(iter_day_rows(conn, units, params, lists))


def iter_day_rows(
    conn: sqlite3.Connection, units: str, params: Mapping[str, Any], lists: bool
) -> Iterator[tuple[Any, ...]]:
    """day_rows one at a time, a key after another (SQLite sorts the units, spilling to disk
    when they are many): memory stays flat however many units there are."""
    ln2_per_h = float(params["ln2_per_h"])
    cursor = conn.execute(
        f"SELECT key, run, ts, bad, flaky, failed_any, is_main FROM ({units})"
        " ORDER BY key, ts, run",
        params,
    )
    row: list[Any] | None = None
    current = None
    # The units of one run share its ts: its day and weight are worked out once per run.
    moments: dict[str, tuple[str, float]] = {}
    for key, run, ts, bad, flaky, failed_any, is_main in cursor:
        moment = moments.get(ts)
        if moment is None:
            if len(moments) >= MAX_MOMENTS:
                moments.clear()  # memory stays flat over any number of runs
            moment = moments[ts] = (ts[:10], day_weight(ts, ln2_per_h))
        day, weight = moment
        if (key, day) != current:
            if row is not None:
                yield finish_day_row(row, lists)
            current = (key, day)
            row = start_day_row(key, day, bad)
        assert row is not None
        add_unit(row, run, bad, flaky, failed_any, is_main, weight)
    if row is not None:
        yield finish_day_row(row, lists)


def day_weight(ts: str, ln2_per_h: float) -> float:
    """A unit's recency term relative to its day's start: 2^(seconds into the day / h)."""
    seconds = int(ts[11:13]) * 3600 + int(ts[14:16]) * 60 + int(ts[17:19])
    return math.exp(ln2_per_h * seconds / 86400.0)


def start_day_row(key: Any, day: str, bad: int) -> list[Any]:
    """An empty day row of `key`, for add_unit to fill in time order (its first unit's bad
    state is `bad`)."""
    # runs, main_runs, flaky, failed, failed_any, main_bad, first_bad, last_bad,
    # flips_in, tail_clean, main_first_bad, main_last_bad, starts_in, recov_in,
    # trail_bad, trail_flaky, main_w, main_w_bad, other_w, other_w_bad, lists x4
    return [key, day, 0, 0, 0, 0, 0, 0, bad, None, 0, 0, None, None, 0, 0, 0, 0,
            0.0, 0.0, 0.0, 0.0, [], [], [], []]  # fmt: skip


def add_unit(
    row: list[Any], run: int, bad: int, flaky: int, failed_any: int, is_main: int, weight: float
) -> None:
    """Add the day's next unit (units come in (ts, run) order) to its day row."""
    row[2] += 1
    row[4] += flaky
    row[5] += bad
    row[6] += failed_any
    if row[9] is not None and row[9] != bad:
        row[10] += 1
    row[9] = bad
    row[11] = 0 if failed_any else row[11] + 1
    if is_main:
        row[3] += 1
        row[7] += bad
        if row[12] is None:
            row[12] = bad
        elif row[13] == 0 and bad:
            row[14] += 1
        elif row[13] == 1 and not bad:
            row[15] += 1
        row[13] = bad
        if bad:
            row[16] += 1
            row[17] += flaky
        else:
            row[16] = row[17] = 0
        row[18] += weight
        row[19] += weight if failed_any else 0.0
    else:
        row[20] += weight
        row[21] += weight if failed_any else 0.0
    row[22].append(run)
    if bad:
        row[23].append(run)
    if flaky:
        row[24].append(run)
    if failed_any:
        row[25].append(run)


def finish_day_row(row: list[Any], lists: bool) -> tuple[Any, ...]:
    """The finished day row's values: key, day, SEQ_COLUMNS[, LIST_COLUMNS]."""
    values = row[:22]
    if lists:
        values += [",".join(map(str, ids)) if ids else None for ids in row[22:]]
    return tuple(values)


def _insert(
    conn: sqlite3.Connection, table: str, columns: str, rows: Iterable[tuple[Any, ...]]
) -> None:
    marks = ", ".join("?" * len(columns.split(", ")))
    conn.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)


def refresh_day(conn: sqlite3.Connection, day: str, tests: Iterable[int], ln2_per_h: float) -> None:
    """Recompute the rows of `tests` (and of their families) on one day."""
    tests_json = json.dumps(sorted(set(tests)))
    next_day = (date.fromisoformat(day) + timedelta(days=1)).isoformat()
    params = {"day": day, "next_day": next_day, "tests": tests_json, "ln2_per_h": ln2_per_h}
    in_tests = "test IN (SELECT value FROM json_each(:tests))"
    for table in ("test_day_seq", "test_day_signatures"):
        conn.execute(f"DELETE FROM {table} WHERE day = :day AND {in_tests}", params)
    units = q.TEST_UNITS.format(source=_TESTS_SRC, where=_DAY)
    _insert(conn, "test_day_seq", _TEST_COLS, day_rows(conn, units, params, True))
    conn.execute(
        "INSERT INTO test_day_signatures " + q.SIGNATURE_ROWS.format(source=_TESTS_SRC, where=_DAY),
        params,
    )
    parents = _families_of(conn, tests_json)
    if not parents:
        return
    # A parent that just became a family (its first parametrized member) has no rows yet.
    new = [
        str(p)
        for (p,) in conn.execute(
            "SELECT value FROM json_each(?) WHERE NOT EXISTS"
            " (SELECT 1 FROM family_day_seq WHERE parent = value)",
            (json.dumps(parents),),
        )
    ]
    if new:
        refresh_families(conn, new, ln2_per_h)
    old = sorted(set(parents) - set(new))
    if old:
        _refresh_family_day(conn, day, old, ln2_per_h)


# Appending a later segment (here: one run) to a day row; every SET reads the old values.
_APPEND_SET = """
    runs = runs + excluded.runs, main_runs = main_runs + excluded.main_runs,
    flaky_runs = flaky_runs + excluded.flaky_runs,
    failed_runs = failed_runs + excluded.failed_runs,
    failed_any_runs = failed_any_runs + excluded.failed_any_runs,
    main_bad = main_bad + excluded.main_bad,
    flips_in = flips_in + excluded.flips_in + (last_bad <> excluded.first_bad),
    last_bad = excluded.last_bad,
    tail_clean = CASE WHEN excluded.failed_any_runs > 0 THEN excluded.tail_clean
                      ELSE tail_clean + excluded.runs END,
    main_first_bad = coalesce(main_first_bad, excluded.main_first_bad),
    main_last_bad = coalesce(excluded.main_last_bad, main_last_bad),
    main_starts_in = main_starts_in + excluded.main_starts_in
        + (excluded.main_first_bad IS 1 AND main_last_bad IS 0),
    main_recov_in = main_recov_in + excluded.main_recov_in
        + (excluded.main_first_bad IS 0 AND main_last_bad IS 1),
    main_trail_bad = CASE WHEN excluded.main_runs = 0 THEN main_trail_bad
        WHEN excluded.main_trail_bad < excluded.main_runs THEN excluded.main_trail_bad
        ELSE main_trail_bad + excluded.main_trail_bad END,
    main_trail_flaky = CASE WHEN excluded.main_runs = 0 THEN main_trail_flaky
        WHEN excluded.main_trail_bad < excluded.main_runs THEN excluded.main_trail_flaky
        ELSE main_trail_flaky + excluded.main_trail_flaky END,
    main_w = main_w + excluded.main_w, main_w_bad = main_w_bad + excluded.main_w_bad,
    other_w = other_w + excluded.other_w, other_w_bad = other_w_bad + excluded.other_w_bad"""
_APPEND_LISTS = "".join(
    f""",
    {name} = CASE WHEN excluded.{name} IS NULL THEN {name} WHEN {name} IS NULL
        THEN excluded.{name} ELSE {name} || ',' || excluded.{name} END"""
    for name in q.LIST_COLUMNS.split(", ")
)


# The day row of ONE unit (what day_rows gives for a key with a single unit that day), from
# SQL: a run's units are appended set-based, without a Python pass over them. The recency
# weight is day_rows' formula (2^(seconds into the day / h)) in the same operation order.
_ONE_UNIT_SEQ = """
    1, u.is_main, u.flaky, u.bad, u.failed_any, u.is_main AND u.bad, u.bad, u.bad, 0,
    NOT u.failed_any, CASE WHEN u.is_main THEN u.bad END, CASE WHEN u.is_main THEN u.bad END,
    0, 0, u.is_main AND u.bad, u.is_main AND u.bad AND u.flaky,
    CASE WHEN u.is_main THEN u.w ELSE 0.0 END,
    CASE WHEN u.is_main AND u.failed_any THEN u.w ELSE 0.0 END,
    CASE WHEN u.is_main THEN 0.0 ELSE u.w END,
    CASE WHEN NOT u.is_main AND u.failed_any THEN u.w ELSE 0.0 END"""
_ONE_UNIT_LISTS = """,
    CAST(u.run AS TEXT), CASE WHEN u.bad THEN CAST(u.run AS TEXT) END,
    CASE WHEN u.flaky THEN CAST(u.run AS TEXT) END,
    CASE WHEN u.failed_any THEN CAST(u.run AS TEXT) END"""
_UNIT_WEIGHT = (
    "exp(:ln2_per_h * (CAST(substr(ts, 12, 2) AS INTEGER) * 3600"
    " + CAST(substr(ts, 15, 2) AS INTEGER) * 60 + CAST(substr(ts, 18, 2) AS INTEGER)) / 86400.0)"
)


def _append_units(
    conn: sqlite3.Connection, table: str, key: str, units: str, params: Mapping[str, Any]
) -> None:
    """Upsert the day rows of units of ONE run (one unit per key) into a day-row table."""
    lists = table == "test_day_seq"
    columns = _TEST_COLS if lists else _FAMILY_COLS
    conn.execute(
        f"INSERT INTO {table} ({columns})"
        f" SELECT u.key, substr(u.ts, 1, 10), {_ONE_UNIT_SEQ}{_ONE_UNIT_LISTS if lists else ''}"
        f" FROM (SELECT *, {_UNIT_WEIGHT} AS w FROM ({units})) u WHERE true"
        f" ON CONFLICT ({key}, day) DO UPDATE SET {_APPEND_SET}"
        f"{_APPEND_LISTS if lists else ''}",
        params,
    )


def append_run(
    conn: sqlite3.Connection, run_pk: int, day: str, tests: list[int], ln2_per_h: float
) -> None:
    """Add one run, later than every other run of its day, to the day rows of `tests`.

    The run's test-runs of `tests` must not have been counted before. A family's unit for the
    run is new only if no other member has a test-run in it: otherwise its day is recomputed.
    """
    tests_json = json.dumps(tests)
    params = {"run": run_pk, "tests": tests_json, "ln2_per_h": ln2_per_h}
    units = q.TEST_UNITS.format(source=_TESTS_SRC, where="tr.run = :run")
    _append_units(conn, "test_day_seq", "test", units, params)
    conn.execute(
        "INSERT INTO test_day_signatures "
        + q.SIGNATURE_ROWS.format(source=_TESTS_SRC, where="tr.run = :run")
        + " ON CONFLICT (test, day, signature) DO UPDATE SET runs = runs + excluded.runs,"
        " last_ts = max(last_ts, excluded.last_ts)",
        params,
    )
    parents = _families_of(conn, tests_json)
    if not parents:
        return
    shared = {
        str(p)
        for (p,) in conn.execute(
            "SELECT DISTINCT t.parent FROM json_each(:parents) p"
            " CROSS JOIN tests t ON t.parent = p.value"
            " CROSS JOIN test_runs tr ON tr.test = t.id AND tr.run = :run"
            " WHERE t.id NOT IN (SELECT value FROM json_each(:tests))",
            {**params, "parents": json.dumps(parents)},
        )
    }
    new = {
        str(p)
        for (p,) in conn.execute(
            "SELECT value FROM json_each(?) WHERE NOT EXISTS"
            " (SELECT 1 FROM family_day_seq WHERE parent = value)",
            (json.dumps(parents),),
        )
    }
    # A family without rows whose members ran in no other run is as new as the run: appended.
    # Others without rows (a parent that just became a family has a past) are recomputed whole.
    here_only: set[str] = set()
    if new:
        here_only = {
            str(p)
            for (p,) in conn.execute(
                "SELECT value FROM json_each(:new) p WHERE NOT EXISTS (SELECT 1 FROM tests t"
                " CROSS JOIN test_runs tr ON tr.test = t.id"
                " WHERE t.parent = p.value AND tr.run <> :run)",
                {"new": json.dumps(sorted(new)), "run": run_pk},
            )
        }
    whole = new - here_only
    if whole:
        refresh_families(conn, sorted(whole), ln2_per_h)
    redo = sorted(shared - whole)
    if redo:
        _refresh_family_day(conn, day, redo, ln2_per_h)
    fresh = sorted(set(parents) - shared - whole)
    if fresh:
        fparams = {**params, "parents": json.dumps(fresh)}
        units = q.FAMILY_UNITS.format(source=_PARENTS_SRC, where="tr.run = :run")
        _append_units(conn, "family_day_seq", "parent", units, fparams)


# ---- a fold's segments: several deferred runs of a day appended at once -------------------
# (flaketui.core.rollups.build.fold_pending). Parents come and go through temporary tables, so
# a run of millions of tests is never listed in memory.


def start_segments(conn: sqlite3.Connection) -> None:
    """Begin a fold's appends (inside its transaction)."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS fold_families (parent TEXT PRIMARY KEY)")
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS fold_whole_families (parent TEXT PRIMARY KEY)")
    conn.execute("DELETE FROM temp.fold_whole_families")


def _append_rows(
    conn: sqlite3.Connection, table: str, key: str, units: str, params: Mapping[str, Any]
) -> None:
    """Upsert the day rows of a later segment's units into a day-row table (computed as
    refresh_day computes them, streamed: a huge run's rows are never all in memory)."""
    conn.executemany(
        append_rows_sql(table, key), iter_day_rows(conn, units, params, table == "test_day_seq")
    )


def append_rows_sql(table: str, key: str) -> str:
    """The upsert adding a later segment's day rows (finish_day_row's values) to a day-row
    table keyed (key, day)."""
    lists = table == "test_day_seq"
    columns = _TEST_COLS if lists else _FAMILY_COLS
    marks = ", ".join("?" * len(columns.split(", ")))
    return (
        f"INSERT INTO {table} ({columns}) VALUES ({marks})"
        f" ON CONFLICT ({key}, day) DO UPDATE SET {_APPEND_SET}{_APPEND_LISTS if lists else ''}"
    )


# Adding a later segment's signature counts (test, day, signature, runs, last_ts).
APPEND_SIGNATURES = (
    "INSERT INTO test_day_signatures (test, day, signature, runs, last_ts) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (test, day, signature) DO UPDATE SET runs = runs + excluded.runs,"
    " last_ts = max(last_ts, excluded.last_ts)"
)


def append_segment_families(
    conn: sqlite3.Connection, rows: str, runs_json: str, ln2_per_h: float
) -> None:
    """Add runs of one day, later than every other run of it and none of whose test-runs is
    counted yet, to the day rows of their families; `rows` is a table of test_runs' columns
    holding exactly those runs' rows (read from it, not from test_runs). The tests' own rows
    are the caller's: flaketui.core.rollups.build adds them in its one pass over those rows.

    A family with no rows yet whose members also ran in other runs (a parent that just became
    a family has a past) is not appended: it goes to fold_whole_families, for finish_segments
    to recompute whole.
    """
    params = {"runs": runs_json, "ln2_per_h": ln2_per_h}
    conn.execute("DELETE FROM temp.fold_families")
    conn.execute(
        "INSERT INTO temp.fold_families (parent) SELECT DISTINCT t.parent"
        f" FROM {rows} tr CROSS JOIN tests t ON t.id = tr.test"
        f" WHERE t.parent IN ({FAMILIES})"
    )
    if conn.execute("SELECT NOT EXISTS (SELECT 1 FROM temp.fold_families)").fetchone()[0]:
        return
    conn.execute(
        "INSERT OR IGNORE INTO temp.fold_whole_families"
        " SELECT f.parent FROM temp.fold_families f"
        " WHERE NOT EXISTS (SELECT 1 FROM family_day_seq s WHERE s.parent = f.parent)"
        " AND EXISTS (SELECT 1 FROM tests t CROSS JOIN test_runs tr ON tr.test = t.id"
        " WHERE t.parent = f.parent AND tr.run NOT IN (SELECT value FROM json_each(:runs)))",
        params,
    )
    conn.execute(
        "DELETE FROM temp.fold_families WHERE parent IN"
        " (SELECT parent FROM temp.fold_whole_families)"
    )
    units = q.FAMILY_UNITS.format(
        source=f"{rows} tr JOIN runs r ON r.id = tr.run JOIN tests t ON t.id = tr.test",
        where="t.parent IN (SELECT parent FROM temp.fold_families)",
    )
    _append_rows(conn, "family_day_seq", "parent", units, params)


def finish_segments(conn: sqlite3.Connection, ln2_per_h: float) -> None:
    """End a fold's appends: recompute the families append_segment left out."""
    parents = [str(p) for (p,) in conn.execute("SELECT parent FROM temp.fold_whole_families")]
    conn.execute("DELETE FROM temp.fold_whole_families")
    conn.execute("DELETE FROM temp.fold_families")
    if parents:
        refresh_families(conn, parents, ln2_per_h)


def _refresh_family_day(
    conn: sqlite3.Connection, day: str, parents: list[str], ln2_per_h: float
) -> None:
    next_day = (date.fromisoformat(day) + timedelta(days=1)).isoformat()
    fparams = {
        "day": day, "next_day": next_day, "parents": json.dumps(parents), "ln2_per_h": ln2_per_h
    }  # fmt: skip
    conn.execute(
        "DELETE FROM family_day_seq WHERE day = :day"
        " AND parent IN (SELECT value FROM json_each(:parents))",
        fparams,
    )
    units = q.FAMILY_UNITS.format(source=_PARENTS_SRC, where=_DAY)
    _insert(conn, "family_day_seq", _FAMILY_COLS, day_rows(conn, units, fparams, False))


def refresh_families(conn: sqlite3.Connection, parents: list[str], ln2_per_h: float) -> None:
    """Recompute every day row and mixed pair of some families."""
    params = {"parents": json.dumps(sorted(set(parents))), "ln2_per_h": ln2_per_h}
    in_parents = "parent IN (SELECT value FROM json_each(:parents))"
    conn.execute(f"DELETE FROM family_day_seq WHERE {in_parents}", params)
    conn.execute(f"DELETE FROM family_commit_mixed WHERE {in_parents}", params)
    units = q.FAMILY_UNITS.format(source=_PARENTS_SRC, where="1")
    conn.execute(f"INSERT INTO family_day_seq ({_FAMILY_COLS}) {q.day_rows(units, False)}", params)
    conn.execute(f"INSERT INTO family_commit_mixed {q.mixed_rows(units)}", params)


def refresh_commits(
    conn: sqlite3.Connection, commits: Iterable[str | None], tests: Iterable[int] | None = None
) -> None:
    """Recompute the mixed pairs of some commits (for the given tests and their families)."""
    wanted = sorted({c for c in commits if c is not None})
    if not wanted:
        return
    params: dict[str, str] = {"commits": json.dumps(wanted)}
    in_commits = "commit_sha IN (SELECT value FROM json_each(:commits))"
    if tests is None:
        test_filter = family_filter = "1"
        conn.execute(f"DELETE FROM test_commit_mixed WHERE {in_commits}", params)
        conn.execute(f"DELETE FROM family_commit_mixed WHERE {in_commits}", params)
        family_filter = f"t.parent IN ({FAMILIES})"
    else:
        params["tests"] = json.dumps(sorted(set(tests)))
        params["parents"] = json.dumps(_families_of(conn, params["tests"]))
        test_filter = "tr.test IN (SELECT value FROM json_each(:tests))"
        family_filter = "t.parent IN (SELECT value FROM json_each(:parents))"
        conn.execute(
            f"DELETE FROM test_commit_mixed WHERE {in_commits}"
            " AND test IN (SELECT value FROM json_each(:tests))",
            params,
        )
        conn.execute(
            f"DELETE FROM family_commit_mixed WHERE {in_commits}"
            " AND parent IN (SELECT value FROM json_each(:parents))",
            params,
        )
    units = q.TEST_UNITS.format(source=_COMMIT_TESTS_SRC, where=f"{_IN_COMMITS} AND {test_filter}")
    conn.execute(f"INSERT INTO test_commit_mixed {q.mixed_rows(units)}", params)
    units = q.FAMILY_UNITS.format(
        source=_COMMIT_FAMILY_SRC, where=f"{_IN_COMMITS} AND {family_filter}"
    )
    conn.execute(f"INSERT INTO family_commit_mixed {q.mixed_rows(units)}", params)


def drop_days_before(conn: sqlite3.Connection, day: str) -> int:
    """Delete the day rows before `day`; returns the rows deleted."""
    return sum(
        conn.execute(f"DELETE FROM {table} WHERE day < ?", (day,)).rowcount for table in SEQ_TABLES
    )
