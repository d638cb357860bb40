"""Read the sequence rollups: evidence of tests, families and signature groups over a window.

Whole days of the window come from the day rows (flaketui.core.rollups.sequences), the partial edge
days (rollups.window_params: usually just the first) from the raw rows in the same shape.
`sequences` chains the days with a failure through pointers to the previous day with runs.
The result equals `flaketui.core.rollups.evidence.ANALYSIS` over the raw rows, except that
`last_good_commit` / `last_good_at` are only looked up when the default branch ends in a bad
streak (the only case a verdict reads them).
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from typing import Any

from flaketui.core.config import Config
from flaketui.core.rollups import build as rollups
from flaketui.core.rollups import sql as q
from flaketui.core.rollups.evidence import Evidence
from flaketui.core.timeutil import parse_iso

UNIX_EPOCH_JD = 2440587.5  # julianday('1970-01-01')

# Edge days: runs of the window's first (partial) day after its start and of its last day.
_EDGE_RUNS = f"{rollups.EDGE_RUNS} AND tr.ts > :start AND tr.ts <= :now"
_EDGE_TEST_SRC = "runs r CROSS JOIN test_runs tr ON tr.run = r.id"
_EDGE_FAMILY_SRC = (
    "runs r CROSS JOIN test_runs tr ON tr.run = r.id CROSS JOIN tests t ON t.id = tr.test"
)
_SEQ_SELECT = f"key, day, {q.SEQ_COLUMNS}"


@dataclass(frozen=True, slots=True)
class Window:
    """Named parameters of one window (start, now] for the rollup readers."""

    params: dict[str, Any]

    @classmethod
    def of(cls, conn: sqlite3.Connection, now: datetime, config: Config) -> Window:
        """The window of `config` ending at `now`."""
        params = rollups.window_params(conn, now, config)
        params["ln2_per_h"] = math.log(2.0) / config.half_life_days
        return cls(params)


def _rows(conn: sqlite3.Connection, sql: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    cursor = conn.execute(sql, params)
    names = [col[0] for col in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]


_TABLES = {"test": ("test_day_seq", "test"), "family": ("family_day_seq", "parent")}
_FAMILIES = "SELECT DISTINCT parent FROM tests WHERE test_id <> parent"


# What `sequences` reads of a day row (the recency sums and recoveries are family_base's).
_CHAIN_COLUMNS = (
    "runs, main_runs, failed_any_runs, main_bad, first_bad, last_bad, flips_in, tail_clean,"
    " main_first_bad, main_last_bad, main_starts_in, main_trail_bad, main_trail_flaky"
)


def _pointer(table: str, key: str, main: bool) -> str:
    """Correlated lookup of the key's latest day row before row `c` in the window (on the
    default branch: with a main run), as its day followed by its last (main) bad state.

    One seek gives both: a day is always 'YYYY-MM-DD' (10 characters), _chain_rows parts them.
    """
    only_main = " AND p.main_runs > 0" if main else ""
    bad = "main_last_bad" if main else "last_bad"
    return (
        f"(SELECT p.day || p.{bad} FROM {table} p WHERE p.{key} = c.key AND p.day < c.day"
        f" AND p.day >= :first_day{only_main} ORDER BY p.day DESC LIMIT 1)"
    )


def _edge_rows(
    conn: sqlite3.Connection, kind: str, keys: Sequence[Any] | None, window: Window
) -> dict[tuple[Any, str], dict[str, Any]]:
    """The raw edge days' rows by (key, day), reduced as rollup_sql.day_rows does (its
    _CHAIN_COLUMNS) but in Python: day_rows' five window functions cost about four times the
    units' read, and the first day's units are thousands when `now` is early in its day."""
    if keys is None:
        pick = f"t.parent IN ({_FAMILIES})"
    else:
        column = "tr.test" if kind == "test" else "t.parent"
        pick = f"{column} IN (SELECT value FROM json_each(:keys))"
    units_sql = q.TEST_UNITS if kind == "test" else q.FAMILY_UNITS
    source = _EDGE_TEST_SRC if kind == "test" else _EDGE_FAMILY_SRC
    units = units_sql.format(source=source, where=f"{_EDGE_RUNS} AND {pick}")
    params = dict(window.params)
    if keys is not None:
        params["keys"] = json.dumps(list(keys))
    by_day: dict[tuple[Any, str], list[tuple[str, int, int, int, int, int]]] = {}
    for key, ts, run, bad, flaky, failed_any, is_main in conn.execute(
        f"SELECT key, ts, run, bad, flaky, failed_any, is_main FROM ({units})", params
    ):
        by_day.setdefault((key, ts[:10]), []).append((ts, run, bad, flaky, failed_any, is_main))
    return {key_day: _day_row(*key_day, units) for key_day, units in by_day.items()}


def _day_row(
    key: Any, day: str, units: list[tuple[str, int, int, int, int, int]]
) -> dict[str, Any]:
    """One key's day row from its units (ts, run, bad, flaky, failed_any, is_main)."""
    units.sort()  # in time order, ties by run (day_rows' window order; a run is one unit)
    bads = [u[2] for u in units]
    main = [u for u in units if u[5]]
    fails = [i for i, u in enumerate(units) if u[4]]
    goods = [i for i, u in enumerate(main) if not u[2]]
    trail = main[goods[-1] + 1 :] if goods else main  # main units after the last good one
    return {
        "key": key,
        "day": day,
        "raw": 1,
        "runs": len(units),
        "main_runs": len(main),
        "failed_runs": sum(bads),
        "failed_any_runs": sum(u[4] for u in units),
        "main_bad": sum(1 for u in main if u[2]),
        "first_bad": bads[0],
        "last_bad": bads[-1],
        "flips_in": sum(1 for a, b in pairwise(bads) if a != b),
        "tail_clean": len(units) - 1 - fails[-1] if fails else len(units),
        "main_first_bad": main[0][2] if main else None,
        "main_last_bad": main[-1][2] if main else None,
        "main_starts_in": sum(1 for a, b in pairwise(main) if b[2] and a[2] == 0),
        "main_trail_bad": len(trail),
        "main_trail_flaky": sum(u[3] for u in trail),
    }


# A key's days in the window with a counted run: (day, runs, bad runs), in day order.
DayCounts = dict[Any, list[tuple[str, int, int]]]
# Per pooled group: the runs any member ran in, was bad, flaky, failed in (group_units).
GroupUnits = dict[str, tuple[set[int], set[int], set[int], set[int]]]


def _add_day(out: DayCounts, key: Any, day: str, runs: int, bad: int) -> None:
    if runs:
        out.setdefault(key, []).append((day, runs, bad))


def edge_test_days(
    conn: sqlite3.Connection,
    test_pks: Sequence[int],
    window: Window,
    filter_sql: str = "1",
    params: Mapping[str, Any] | None = None,
) -> DayCounts:
    """The tests' partial edge days from the raw rows, over the runs `filter_sql` keeps
    (conditions on `runs r`, with their `params`)."""
    units = q.TEST_UNITS.format(
        source=_EDGE_TEST_SRC,
        where=f"{_EDGE_RUNS} AND {filter_sql} AND tr.test IN (SELECT value FROM json_each(:keys))",
    )
    sql = f"SELECT key, substr(ts, 1, 10) AS day, count(*), sum(bad) FROM ({units}) GROUP BY 1, 2"
    out: DayCounts = {}
    bound = {**window.params, **(params or {}), "keys": json.dumps(sorted(set(test_pks)))}
    for key, day, runs, bad in conn.execute(sql, bound):
        _add_day(out, key, day, int(runs), int(bad))
    return out


def merge_days(whole: DayCounts, edges: DayCounts) -> DayCounts:
    """Whole days and edge days of each key, in day order (in place: returns `whole`)."""
    for key, days in edges.items():
        whole.setdefault(key, []).extend(days)
    for days in whole.values():
        days.sort()
    return whole


def test_days(conn: sqlite3.Connection, test_pks: Sequence[int], window: Window) -> DayCounts:
    """Each test's days in the window with counted runs and bad runs: whole days from
    test_day_seq, the edge days from the raw rows."""
    if not test_pks:
        return {}
    out: DayCounts = {}
    params = {**window.params, "keys": json.dumps(sorted(set(test_pks)))}
    # Tens of thousands of rows: appended in place (days without runs left out, as _add_day).
    for test, day, runs, bad in conn.execute(
        "SELECT test, day, runs, failed_runs FROM test_day_seq"
        " WHERE test IN (SELECT value FROM json_each(:keys))"
        " AND day >= :lo_day AND day <= :hi_day AND runs > 0",
        params,
    ):
        days = out.get(test)
        if days is None:
            days = out[test] = []
        days.append((day, runs, bad))
    return merge_days(out, edge_test_days(conn, test_pks, window))


def family_days(conn: sqlite3.Connection, parents: Iterable[str], window: Window) -> DayCounts:
    """Each family's days in the window with counted runs and bad runs, pooled by run: whole
    days from family_day_seq, the edge days from the raw rows."""
    keys = json.dumps(sorted(set(parents)))
    if keys == "[]":
        return {}
    out: DayCounts = {}
    params = {**window.params, "keys": keys}
    for parent, day, runs, bad in conn.execute(
        "SELECT parent, day, runs, failed_runs FROM family_day_seq"
        " WHERE parent IN (SELECT value FROM json_each(:keys))"
        " AND day >= :lo_day AND day <= :hi_day",
        params,
    ):
        _add_day(out, parent, day, int(runs), int(bad))
    units = q.FAMILY_UNITS.format(
        source=_EDGE_FAMILY_SRC,
        where=f"{_EDGE_RUNS} AND t.parent IN (SELECT value FROM json_each(:keys))"
        f" AND t.parent IN ({_FAMILIES})",
    )
    edges: DayCounts = {}
    for parent, day, runs, bad in conn.execute(
        f"SELECT key, substr(ts, 1, 10) AS day, count(*), sum(bad) FROM ({units}) GROUP BY 1, 2",
        params,
    ):
        _add_day(edges, parent, day, int(runs), int(bad))
    return merge_days(out, edges)


def group_days(
    conn: sqlite3.Connection,
    members: Mapping[int, str],
    window: Window,
    day_of: Mapping[int, str] | None = None,
    units: GroupUnits | None = None,
) -> DayCounts:
    """Each pooled group's days (`members` maps tests.id to a group key) with the runs any
    member ran in and the runs any member was bad in, from the day rows' run lists
    (group_units). `day_of`: run id -> day of the runs to count (default: the window's).
    `units`: group_units of the same window for these groups and maybe others, when the
    caller has them (a group's sets only depend on its own members)."""
    if units is None:
        groups = group_units(conn, members, window)
    else:
        wanted = set(members.values())
        groups = {key: sets for key, sets in units.items() if key in wanted}
    if day_of is None:
        day_of = dict(
            conn.execute(
                "SELECT id, substr(ts, 1, 10) FROM runs WHERE ts > :start AND ts <= :now",
                window.params,
            )
        )
    out: DayCounts = {}
    for key, (runs, bad, _flaky, _failed) in groups.items():
        counts: dict[str, list[int]] = {}
        for run in runs:
            day = day_of.get(run)
            if day is not None:
                counts.setdefault(day, [0, 0])[0] += 1
        for run in bad:
            day = day_of.get(run)
            if day is not None:
                counts[day][1] += 1
        if counts:
            out[key] = sorted((day, n, k) for day, (n, k) in counts.items())
    return out


def _chain_rows(
    conn: sqlite3.Connection, kind: str, keys: Sequence[Any] | None, window: Window
) -> list[dict[str, Any]]:
    """Day rows with a failure inside the window, plus the raw edge-day rows, with pointers.

    Each row carries its previous day with counted runs in the window (prev_day) and that
    day's last bad state (prev_bad), and the same for the default branch (prev_main_*, only
    on rows with a main run: no other row reads them): a day without a failure has no row
    here, and all its runs are good.
    """
    table, key = _TABLES[kind]
    if keys is None:
        pick = f"{key} IN ({_FAMILIES})"
    else:
        pick = f"{key} IN (SELECT value FROM json_each(:keys))"
    edges = _edge_rows(conn, kind, keys, window)
    # The edge rows take part by (key, day, main runs) only, for their pointers and order.
    edge_columns = ", ".join(
        "json_extract(value, '$[2]')" if name == "main_runs" else "NULL"
        for name in _CHAIN_COLUMNS.split(", ")
    )
    sql = f"""
    WITH c AS (
        SELECT {key} AS key, day, {_CHAIN_COLUMNS}, 0 AS raw FROM {table}
        WHERE {pick} AND day >= :lo_day AND day <= :hi_day AND failed_any_runs > 0
        UNION ALL
        SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), {edge_columns}, 1
        FROM json_each(:edges)
    ),
    linked AS MATERIALIZED (
        SELECT c.*, {_pointer(table, key, False)} AS prev,
            CASE WHEN c.main_runs > 0 THEN {_pointer(table, key, True)} END AS prev_main
        FROM c
    )
    SELECT {_CHAIN_COLUMNS}, key, day, raw,
        substr(prev, 1, 10) AS prev_day, CAST(substr(prev, 11) AS INTEGER) AS prev_bad,
        substr(prev_main, 1, 10) AS prev_main_day,
        CAST(substr(prev_main, 11) AS INTEGER) AS prev_main_bad
    FROM linked ORDER BY key, day"""
    params = dict(window.params)
    if keys is not None:
        params["keys"] = json.dumps(list(keys))
    params["edges"] = json.dumps([[k, day, row["main_runs"]] for (k, day), row in edges.items()])
    rows = _rows(conn, sql, params)
    for row in rows:
        if row["raw"]:
            row.update(edges[row["key"], row["day"]])
    return rows


def _suffixes(
    conn: sqlite3.Connection, kind: str, cuts: list[tuple[Any, str, str]], window: Window
) -> dict[Any, tuple[int, int]]:
    """Per key: counted runs on the rollup days after day d1, and whether (1) or not (0) a
    main run is on one after day d2 (`sequences` only asks whether there is none)."""
    if not cuts:
        return {}
    table, key = _TABLES[kind]
    # Materialized: else the cut's json_extract runs again for every day row read. The main
    # runs' existence stops at the first day with one, the runs' sum reads every day.
    sql = f"""
    WITH cut AS MATERIALIZED (
        SELECT json_extract(value, '$[0]') AS k, json_extract(value, '$[1]') AS d1,
            json_extract(value, '$[2]') AS d2
        FROM json_each(:cuts)
    )
    SELECT k,
        (SELECT total(runs) FROM {table} WHERE {key} = k AND day > d1 AND day <= :hi_day),
        EXISTS (
            SELECT 1 FROM {table}
            WHERE {key} = k AND day > d2 AND day <= :hi_day AND main_runs > 0
        )
    FROM cut"""
    params = {**window.params, "cuts": json.dumps(cuts)}
    return {k: (int(a), int(b)) for k, a, b in conn.execute(sql, params)}


def _state(
    row: Mapping[str, Any], first: Mapping[str, Any] | None, raw_first: str | None, main: bool
) -> int | None:
    """Bad state of the unit before the row's first (main) unit; None at the window's start."""
    day = row["prev_main_day" if main else "prev_day"]
    if day is None:
        return None
    if day == raw_first:  # the partial first day: its raw row, if it has units
        if first is None:
            return None
        first_state: int | None = first["main_last_bad" if main else "last_bad"]
        return first_state
    state: int | None = row["prev_main_bad" if main else "prev_bad"]
    return state


def sequences(
    conn: sqlite3.Connection, kind: str, keys: Sequence[Any] | None, window: Window
) -> dict[Any, dict[str, Any]]:
    """Sequence facts of tests (kind "test", keys: tests.id) or families (keys None: all).

    flips = 2 x bad stretches - [first unit bad] - [last unit bad], and the same on the
    default branch; a bad stretch starts inside a day (from the day's flips) or at its first
    unit when the unit before it (prev_*) was not bad. Good days only matter through their
    runs: counted by the suffix sums after the last failure (clean tail) and main run.
    """
    rows = _chain_rows(conn, kind, keys, window)
    first_day, last_day = window.params["first_day"], window.params["last_day"]
    # The first day's rollup row also holds runs before the window: its raw row stands in.
    raw_first = first_day if window.params["raw_first"] else None
    raw_last = window.params["raw_last"] and first_day != last_day
    by_key: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        by_key.setdefault(row["key"], []).append(row)
    partial: dict[Any, dict[str, Any]] = {}
    cuts = []
    for key, days in by_key.items():
        first = days[0] if days[0]["raw"] and days[0]["day"] == raw_first else None
        stretches = starts_bad = m_stretches = m_starts_bad = main_bad = 0
        last_fail = last_main = None
        by_day = {}
        for row in days:
            by_day[row["day"]] = row
            prev = _state(row, first, raw_first, False)
            starts_in = (row["flips_in"] + row["last_bad"] - row["first_bad"]) // 2
            stretches += starts_in + (row["first_bad"] == 1 and prev != 1)
            starts_bad += row["first_bad"] == 1 and prev is None
            if row["failed_any_runs"]:
                last_fail = row
            if row["main_runs"]:
                m_prev = _state(row, first, raw_first, True)
                m_stretches += row["main_starts_in"] + (row["main_first_bad"] == 1 and m_prev != 1)
                m_starts_bad += row["main_first_bad"] == 1 and m_prev is None
                main_bad += row["main_bad"]
                last_main = row
        partial[key] = {
            "days": days, "by_day": by_day, "first": first, "last_fail": last_fail,
            "last_main": last_main, "stretches": stretches, "starts_bad": starts_bad,
            "m_stretches": m_stretches, "m_starts_bad": m_starts_bad, "main_bad": main_bad,
        }  # fmt: skip
        cuts.append(
            (
                key,
                last_fail["day"] if last_fail else last_day,
                last_main["day"] if last_main else last_day,
            )
        )
    after = _suffixes(conn, kind, cuts, window)
    out = {}
    for key, p in partial.items():
        days = p["days"]
        end = days[-1] if raw_last and days[-1]["raw"] and days[-1]["day"] == last_day else None
        runs_after, main_after = after.get(key, (0, 0))  # main_after: 0 or more than 0
        last_fail, last_main = p["last_fail"], p["last_main"]
        # The raw end-day row comes after every rollup day.
        if end is not None and last_fail is not None and last_fail is not end:
            runs_after += end["runs"]
        if end is not None and last_main is not None and last_main is not end:
            main_after += end["main_runs"]
        if last_fail is None:
            clean_tail = None  # the caller knows the runs; no failure means all clean
            ends_bad = 0
        else:
            clean_tail = last_fail["tail_clean"] + runs_after
            ends_bad = (
                int(runs_after == 0 and last_fail["last_bad"] == 1)
                if (last_fail is days[-1])
                else 0
            )
        m_ends_bad = int(
            last_main is not None and main_after == 0 and last_main["main_last_bad"] == 1
        )
        streak = streak_flaky = 0
        has_good = True
        if m_ends_bad:
            row = last_main
            streak, streak_flaky = row["main_trail_bad"], row["main_trail_flaky"]
            while row["main_trail_bad"] == row["main_runs"]:  # an all-bad main day: go back
                prev_day = row["prev_main_day"]
                if prev_day is None or (prev_day == raw_first and p["first"] is None):
                    has_good = False
                    break
                row = p["first"] if prev_day == raw_first else p["by_day"].get(prev_day)
                if row is None:  # a day without failure: its main runs are all good
                    break
                streak += row["main_trail_bad"]
                streak_flaky += row["main_trail_flaky"]
        out[key] = {
            "flips": 2 * p["stretches"] - p["starts_bad"] - ends_bad,
            "clean_tail": clean_tail,
            "main_bad": p["main_bad"],
            "main_bad_streaks": p["m_stretches"],
            "main_recoveries": p["m_stretches"] - m_ends_bad,
            "main_flips": 2 * p["m_stretches"] - p["m_starts_bad"] - m_ends_bad,
            "streak": streak,
            "streak_flaky": streak_flaky,
            "has_good": has_good,
        }
    return out


def family_base(conn: sqlite3.Connection, window: Window) -> dict[str, dict[str, Any]]:
    """Pooled counts and recency sums of every family with a counted run in the window."""
    families = "SELECT DISTINCT parent FROM tests WHERE test_id <> parent"
    units = q.FAMILY_UNITS.format(
        source=_EDGE_FAMILY_SRC, where=f"{_EDGE_RUNS} AND t.parent IN ({families})"
    )
    sql = f"""
    SELECT key, sum(runs) AS runs, sum(flaky_runs) AS flaky_runs,
        sum(failed_runs) AS failed_runs, sum(failed_any_runs) AS failed_any_runs,
        sum(main_runs) AS main_runs,
        total(f * (:main_weight * main_w_bad + :other_weight * other_w_bad)) AS weighted_bad,
        total(f * (:main_weight * main_w + :other_weight * other_w)) AS weighted_total
    FROM (
        SELECT *, exp(-:ln2_per_h * (:now_jd - julianday(day))) AS f FROM (
            SELECT parent AS key, day, {q.SEQ_COLUMNS} FROM family_day_seq
            WHERE day >= :lo_day AND day <= :hi_day
            UNION ALL
            SELECT {_SEQ_SELECT} FROM ({q.day_rows(units, False)})
        )
    )
    GROUP BY key"""
    return {row["key"]: row for row in _rows(conn, sql, window.params)}


def mixed_counts(conn: sqlite3.Connection, kind: str, window: Window) -> dict[Any, int]:
    """Commits with a good and a bad counted run in the window, per test or family."""
    table, key = (
        ("test_commit_mixed", "test") if kind == "test" else ("family_commit_mixed", "parent")
    )
    params = window.params
    inside = "first_ts > :start AND last_ts <= :now"
    out: dict[Any, int] = dict(
        conn.execute(f"SELECT {key}, count(*) FROM {table} WHERE {inside} GROUP BY {key}", params)
    )
    # Pairs whose runs straddle the window's start or end: recount them from the raw rows.
    straddling = conn.execute(
        f"SELECT {key}, commit_sha FROM {table}"
        f" WHERE last_ts > :start AND first_ts <= :now AND NOT ({inside})",
        params,
    ).fetchall()
    if kind == "test":
        units, pick = q.TEST_UNITS, "tr.test = :key"
        source = "runs r CROSS JOIN test_runs tr ON tr.run = r.id"
    else:
        units, pick = q.FAMILY_UNITS, "t.parent = :key"
        source = _EDGE_FAMILY_SRC
    sql = q.mixed_rows(
        units.format(
            source=source,
            where=f"r.commit_sha = :commit AND {pick} AND tr.ts > :start AND tr.ts <= :now",
        )
    )
    for pair_key, commit in straddling:
        if conn.execute(sql, {**params, "key": pair_key, "commit": commit}).fetchone():
            out[pair_key] = out.get(pair_key, 0) + 1
    return out


def signature_counts(
    conn: sqlite3.Connection, tests: Sequence[int], window: Window
) -> list[tuple[int, str, str, int, str]]:
    """(tests.id, signature hash, text, counted runs with it, latest ts) per test and signature."""
    if not tests:
        return []
    edge = q.SIGNATURE_ROWS.format(
        source=_EDGE_TEST_SRC,
        where=f"{_EDGE_RUNS} AND tr.test IN (SELECT value FROM json_each(:keys))",
    )
    # Grouped before the join: the signatures' texts are read once per pair, not per day.
    sql = f"""
    SELECT g.test, s.hash, s.text, g.runs, g.last_ts
    FROM (
        SELECT test, signature, sum(runs) AS runs, max(last_ts) AS last_ts
        FROM (
            SELECT test, signature, runs, last_ts FROM test_day_signatures
            WHERE test IN (SELECT value FROM json_each(:keys))
              AND day >= :lo_day AND day <= :hi_day
            UNION ALL
            SELECT test, signature, runs, last_ts FROM ({edge})
        )
        GROUP BY test, signature
    ) g JOIN signatures s ON s.id = g.signature"""
    params = {**window.params, "keys": json.dumps(list(tests))}
    return [
        (int(t), str(h), str(x), int(n), str(ts)) for t, h, x, n, ts in conn.execute(sql, params)
    ]


# Default-branch units of one test (or family, pooled by run), newest first.
_MAIN_UNITS_DESC = {
    "test": f"""
    SELECT tr.run, tr.ts, tr.bad, r.commit_sha
    FROM test_runs tr CROSS JOIN runs r ON r.id = tr.run
    WHERE tr.test = :key AND tr.ts > :start AND tr.ts <= :now AND r.branch_kind = 'main'
      AND {q.COUNTED}
    ORDER BY tr.ts DESC, tr.run DESC""",
    "family": f"""
    SELECT tr.run, min(tr.ts) AS ts, max(tr.bad) AS bad, min(r.commit_sha)
    FROM tests t CROSS JOIN test_runs tr ON tr.test = t.id CROSS JOIN runs r ON r.id = tr.run
    WHERE t.parent = :key AND tr.ts > :start AND tr.ts <= :now AND r.branch_kind = 'main'
      AND {q.COUNTED}
    GROUP BY tr.run ORDER BY ts DESC, tr.run DESC""",
}


def change_points(
    conn: sqlite3.Connection, kind: str, keys: Sequence[Any], window: Window
) -> dict[Any, dict[str, Any]]:
    """First bad and last good default-branch run of keys ending in a bad streak.

    Walks the key's main runs backwards from now to its last good one (the streak's length).
    """
    out = {}
    for key in keys:
        first_bad = last_good = None
        for _run, ts, bad, commit in conn.execute(
            _MAIN_UNITS_DESC[kind], {**window.params, "key": key}
        ):
            if bad:
                first_bad = (commit, ts)
            else:
                last_good = (commit, ts)
                break
        out[key] = {
            "first_bad_commit": first_bad[0] if first_bad else None,
            "first_bad_at": first_bad[1] if first_bad else None,
            "last_good_commit": last_good[0] if last_good else None,
            "last_good_at": last_good[1] if last_good else None,
        }
    return out


# ---- signature groups: pooled by run from the day rows' run lists --------------------------


@dataclass(slots=True)
class WindowRun:
    """One counted-eligible run of a window: what pooling and weighting read of it."""

    ts: str
    commit: str | None
    is_main: bool
    suite: str
    gating: bool
    weight: float


def window_runs(
    conn: sqlite3.Connection,
    window: Window,
    config: Config,
    suite: str | None = None,
    branch_kind: str | None = None,
) -> dict[int, WindowRun]:
    """The counted-eligible runs of the window (no incident), with their recency weights;
    only those of one suite and/or branch kind when given."""
    now = parse_iso(window.params["now"])
    ln2_per_h = window.params["ln2_per_h"]
    only = "".join(
        f" AND {column} = :{column}"
        for column, value in (("suite", suite), ("branch_kind", branch_kind))
        if value is not None
    )
    out = {}
    for pk, ts, commit, kind, suite_name in conn.execute(
        "SELECT id, ts, commit_sha, branch_kind, suite FROM runs"
        " WHERE ts > :start AND ts <= :now AND incident IS NULL AND source <> 'diagnose'" + only,
        {**window.params, "suite": suite, "branch_kind": branch_kind},
    ):
        age = max(0.0, (now - parse_iso(ts)).total_seconds() / 86400.0)
        is_main = kind == "main"
        branch = config.main_weight if is_main else config.other_weight
        out[int(pk)] = WindowRun(
            ts, commit, is_main, suite_name, suite_name not in config.non_gating_suites,
            math.exp(-ln2_per_h * age) * branch,
        )  # fmt: skip
    return out


def _ids(text: str | None) -> Iterable[int]:
    return map(int, text.split(",")) if text else ()


def group_units(conn: sqlite3.Connection, members: Mapping[int, str], window: Window) -> GroupUnits:
    """Per group: the runs any member ran in, was bad, flaky, failed in (within the window)."""
    groups: GroupUnits = {}
    for sig in set(members.values()):
        groups[sig] = (set(), set(), set(), set())
    params = {
        **window.params,
        "keys": json.dumps(sorted(members)),
        "members": json.dumps({str(test): sig for test, sig in members.items()}),
    }
    # Members of a group mostly ran in the same runs on a day: read each distinct list once.
    rows = "json_each(:members) m CROSS JOIN test_day_seq s ON s.test = CAST(m.key AS INTEGER)"
    days = "s.day >= :lo_day AND s.day <= :hi_day"
    # The same list text recurs across groups and days' tests: each is parsed once.
    parsed: dict[str | None, tuple[int, ...]] = {}

    def ids(text: str | None) -> tuple[int, ...]:
        found = parsed.get(text)
        if found is None:
            found = parsed[text] = tuple(_ids(text))
        return found

    for sig, runs in conn.execute(
        f"SELECT DISTINCT m.value, s.run_list FROM {rows} WHERE {days}", params
    ):
        groups[sig][0].update(ids(runs))
    for sig, bad, flaky, fail in conn.execute(
        f"SELECT m.value, s.bad_list, s.flaky_list, s.fail_list FROM {rows}"
        f" WHERE {days} AND s.failed_any_runs > 0",
        params,
    ):
        sets = groups[sig]
        sets[1].update(ids(bad))
        sets[2].update(ids(flaky))
        sets[3].update(ids(fail))
    units = q.TEST_UNITS.format(
        source=_EDGE_TEST_SRC,
        where=f"{_EDGE_RUNS} AND tr.test IN (SELECT value FROM json_each(:keys))",
    )
    for test, run, bad, flaky, failed_any in conn.execute(
        f"SELECT key, run, bad, flaky, failed_any FROM ({units})", params
    ):
        sets = groups[members[test]]
        sets[0].add(run)
        for flag, target in ((bad, sets[1]), (flaky, sets[2]), (failed_any, sets[3])):
            if flag:
                target.add(run)
    return groups


def pooled_evidence(
    key: Any,
    sets: tuple[set[int], set[int], set[int], set[int]],
    runs: Mapping[int, WindowRun],
    max_attempts: int,
) -> Evidence | None:
    """`_ANALYSIS` of one pooled key in Python, from its run sets (runs outside are ignored)."""
    present, bad_set, flaky_set, fail_set = sets
    units = sorted((runs[r].ts, r) for r in present if r in runs)
    if not units:
        return None
    flips = clean_tail = 0
    prev: int | None = None
    w_bad = w_total = 0.0
    last_failure = None
    mixed: dict[str, set[int]] = {}
    main: list[tuple[int, int, str | None, str]] = []  # (bad, flaky, commit, ts)
    gates_main = gates_branch = 0
    suites = set()
    for ts, r in units:
        info = runs[r]
        bad = int(r in bad_set)
        if prev is not None and prev != bad:
            flips += 1
        prev = bad
        if r in fail_set:
            clean_tail = 0
            last_failure = ts
            w_bad += info.weight
        else:
            clean_tail += 1
        w_total += info.weight
        if info.commit is not None:
            mixed.setdefault(info.commit, set()).add(bad)
        if info.is_main:
            main.append((bad, int(r in flaky_set), info.commit, ts))
            gates_main |= info.gating
        else:
            gates_branch |= info.gating
        suites.add(info.suite)
    if last_failure is None:
        clean_tail = len(units)
    main_bad = sum(m[0] for m in main)
    starts = sum(1 for i, m in enumerate(main) if m[0] and (i == 0 or not main[i - 1][0]))
    recoveries = sum(1 for i, m in enumerate(main) if i and not m[0] and main[i - 1][0])
    main_flips = sum(1 for i, m in enumerate(main) if i and m[0] != main[i - 1][0])
    good_rn = max((i + 1 for i, m in enumerate(main) if not m[0]), default=0)
    tail = main[good_rn:]
    first_bad = tail[0] if tail else None
    last_good = main[good_rn - 1] if good_rn and tail else None
    return Evidence(
        key=key,
        runs=len(units),
        flaky_runs=sum(1 for _, r in units if r in flaky_set),
        failed_runs=sum(1 for _, r in units if r in bad_set),
        flips=flips,
        clean_tail=clean_tail,
        weighted_bad=w_bad,
        weighted_total=w_total,
        first_ts=units[0][0],
        last_ts=units[-1][0],
        last_failure_at=last_failure,
        max_attempts=max_attempts,
        gates_main=int(gates_main),
        gates_branch=int(gates_branch),
        mixed_commits=sum(1 for states in mixed.values() if len(states) == 2),
        main_runs=len(main),
        main_bad=main_bad,
        main_bad_streaks=starts,
        main_recoveries=recoveries,
        main_flips=main_flips,
        good_rn=good_rn,
        streak=len(tail),
        streak_flaky=sum(m[1] for m in tail),
        first_bad_commit=first_bad[2] if first_bad else None,
        first_bad_at=first_bad[3] if first_bad else None,
        last_good_commit=last_good[2] if last_good else None,
        last_good_at=last_good[3] if last_good else None,
        suite_min=min(suites),
        suite_max=max(suites),
    )


def signature_group_evidence(
    conn: sqlite3.Connection,
    members: Mapping[int, str],
    max_attempts: Mapping[int, int],
    window: Window,
    config: Config,
    suite: str | None = None,
    branch_kind: str | None = None,
    units: GroupUnits | None = None,
) -> dict[str, Evidence]:
    """Evidence per signature group, pooled by run (members: tests.id -> signature hash),
    over the runs of one suite and/or branch kind when given; `units`: group_units of these
    members over the window, when the caller has them."""
    if not members:
        return {}
    runs = window_runs(conn, window, config, suite, branch_kind)
    most: dict[str, int] = {}
    for test, sig in members.items():
        most[sig] = max(most.get(sig, 0), max_attempts.get(test, 0))
    out = {}
    if units is None:
        units = group_units(conn, members, window)
    for sig, sets in units.items():
        ev = pooled_evidence(sig, sets, runs, most[sig])
        if ev is not None:
            out[sig] = ev
    return out
