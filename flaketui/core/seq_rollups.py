"""Maintenance of the sequence rollups (flaketui.core.rollup_sql) beside test_day_rollups.

Tables (created with the rollups, refreshed in the caller's transaction by flaketui.core.rollups):
- test_day_seq (test, day): per-day sequence facts of a test, with the day's run ids (all,
  bad, flaky, failed) so signature groups can be pooled by run at read time;
- family_day_seq (parent, day): the same for parametrized families, pooled by run;
- test_commit_mixed / family_commit_mixed: (key, commit) pairs with a good and a bad run;
- test_day_signatures (test, day, signature): counted runs per first-failure signature.
Each refresh recomputes its rows from the raw rows, so it is exact whatever happened before.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from datetime import date, timedelta

from flaketui.core import rollup_sql as q

FAMILIES = "SELECT DISTINCT parent FROM tests WHERE test_id <> parent"
SEQ_TABLES = ("test_day_seq", "family_day_seq", "test_day_signatures")
MIXED_TABLES = ("test_commit_mixed", "family_commit_mixed")

_SCHEMA = (
    q.seq_schema("test_day_seq", "test", "INTEGER", lists=True),
    q.seq_schema("family_day_seq", "parent", "TEXT", lists=False),
    q.mixed_schema("test_commit_mixed", "test", "INTEGER"),
    q.mixed_schema("family_commit_mixed", "parent", "TEXT"),
    q.SIGNATURE_SCHEMA,
    # Commits' runs are looked up on every write (mixed-commit pairs of the written run).
    "CREATE INDEX IF NOT EXISTS runs_commit ON runs (commit_sha)",
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
    """Create the tables (and the commit index) when missing."""
    for statement in _SCHEMA:
        conn.execute(statement)


def rebuild(conn: sqlite3.Connection, ln2_per_h: float) -> None:
    """Recompute every row from the raw rows (inside the caller's transaction)."""
    ensure_schema(conn)
    for table in (*SEQ_TABLES, *MIXED_TABLES):
        conn.execute(f"DELETE FROM {table}")
    params = {"ln2_per_h": ln2_per_h}
    test_units = q.TEST_UNITS.format(source=q.TEST_SOURCE, where="1")
    family_units = q.FAMILY_UNITS.format(source=q.FAMILY_SOURCE, where=f"t.parent IN ({FAMILIES})")
    conn.execute(f"INSERT INTO test_day_seq ({_TEST_COLS}) {q.day_rows(test_units, True)}", params)
    conn.execute(
        f"INSERT INTO family_day_seq ({_FAMILY_COLS}) {q.day_rows(family_units, False)}", params
    )
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


def refresh_day(conn: sqlite3.Connection, day: str, tests: Iterable[int], ln2_per_h: float) -> None:
    """Recompute the rows of `tests` (and of their families) on one day."""
    tests_json = json.dumps(sorted(set(tests)))
    next_day = (date.fromisoformat(day) + timedelta(days=1)).isoformat()
    params = {"day": day, "next_day": next_day, "tests": tests_json, "ln2_per_h": ln2_per_h}
    in_tests = "test IN (SELECT value FROM json_each(:tests))"
    for table in ("test_day_seq", "test_day_signatures"):
        conn.execute(f"DELETE FROM {table} WHERE day = :day AND {in_tests}", params)
    units = q.TEST_UNITS.format(source=_TESTS_SRC, where=_DAY)
    conn.execute(f"INSERT INTO test_day_seq ({_TEST_COLS}) {q.day_rows(units, True)}", params)
    conn.execute(
        "INSERT INTO test_day_signatures " + q.SIGNATURE_ROWS.format(source=_TESTS_SRC, where=_DAY),
        params,
    )
    parents = _families_of(conn, tests_json)
    if not parents:
        return
    # A parent that just became a family (its first parametrized member) has no rows yet.
    new = [
        p
        for p in parents
        if conn.execute("SELECT 1 FROM family_day_seq WHERE parent = ? LIMIT 1", (p,)).fetchone()
        is None
    ]
    if new:
        refresh_families(conn, new, ln2_per_h)
    old = sorted(set(parents) - set(new))
    if old:
        fparams = {**params, "parents": json.dumps(old)}
        conn.execute(
            "DELETE FROM family_day_seq WHERE day = :day"
            " AND parent IN (SELECT value FROM json_each(:parents))",
            fparams,
        )
        units = q.FAMILY_UNITS.format(source=_PARENTS_SRC, where=_DAY)
        conn.execute(
            f"INSERT INTO family_day_seq ({_FAMILY_COLS}) {q.day_rows(units, False)}", fparams
        )


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
