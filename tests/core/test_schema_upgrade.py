"""Upgrading a history to the current schema keeps every row and every score, and the per-run
table stays in the order its readers need without a second test-major tree."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
import sqlite_utils

from flaketui.core.history import store
from flaketui.core.history.derived_rows import refresh_test_runs
from flaketui.core.output.formats import render_json
from flaketui.core.scoring.report import build_report
from flaketui.core.timeutil import parse_iso
from tests.connections import open_history

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "history.db"
NOW_ISO = "2026-12-01T00:00:00Z"
ROWS = (
    "SELECT test, run, ts, outcome, bad, attempts, failed_attempts, worker_id, signature, edited"
    " FROM test_runs ORDER BY test, run"
)


def _audit_log_as_version_5(conn: sqlite3.Connection) -> None:
    """Rebuild audit_log as versions 1 to 5 laid it out: no written_at."""
    ddl = re.search(r"CREATE TABLE audit_log \(.*?\n\);", store.SCHEMA_V1, re.S)
    index = re.search(r"CREATE INDEX audit_log_test ON .*?;", store.SCHEMA_V1)
    assert ddl is not None and index is not None
    conn.execute("DROP TABLE audit_log")
    conn.execute(ddl.group(0))
    conn.execute(index.group(0))


FIRST_ATTEMPT_COLUMNS = ("first_duration_ms", "first_timeout_ms", "first_position")


def _as_version_9(conn: sqlite3.Connection) -> None:
    """The history as versions 1 to 9 laid it out: no index of the failed per-run rows, and no
    count of each run's tests for the outage search."""
    conn.execute("DROP INDEX IF EXISTS test_runs_failed")
    if conn.execute(
        "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'ran_at_least'"
    ).fetchone()[0]:
        conn.execute("ALTER TABLE runs DROP COLUMN ran_at_least")


def _test_runs_as_version_8(conn: sqlite3.Connection) -> None:
    """test_runs as versions 3 to 8 laid it out: no first attempt's fields."""
    _as_version_9(conn)
    for column in FIRST_ATTEMPT_COLUMNS:
        conn.execute(f"ALTER TABLE test_runs DROP COLUMN {column}")


def _results_as_version_7(conn: sqlite3.Connection) -> None:
    """results as versions 1 to 7 laid it out: no origin (and test_runs as version 8 did)."""
    _as_version_9(conn)
    conn.execute("ALTER TABLE results DROP COLUMN origin")
    if conn.execute(
        "SELECT count(*) FROM pragma_table_info('test_runs') WHERE name = 'first_position'"
    ).fetchone()[0]:
        _test_runs_as_version_8(conn)


def _results_as_version_6(conn: sqlite3.Connection) -> None:
    """results as versions 1 to 6 laid it out: no leg, no origin."""
    _results_as_version_7(conn)
    conn.execute("ALTER TABLE results DROP COLUMN leg")


def _test_runs_as_version_2(path: Path) -> None:
    """Rebuild test_runs as version 2 laid it out: keyed by (test, run), two indexes."""
    ddl = re.search(r"CREATE TABLE test_runs \(.*?\) WITHOUT ROWID;", store.SCHEMA_V1, re.S)
    indexes = re.findall(r"CREATE INDEX test_runs_\w+ ON test_runs \(.*?\);", store.SCHEMA_V1)
    assert ddl is not None and len(indexes) == 2
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute("ALTER TABLE test_runs RENAME TO current_test_runs")
    conn.execute(ddl.group(0))
    columns = "test, run, ts, outcome, bad, attempts, failed_attempts, worker_id, signature, edited"
    conn.execute(f"INSERT INTO test_runs ({columns}) SELECT {columns} FROM current_test_runs")
    conn.execute("DROP TABLE current_test_runs")
    for index in indexes:
        conn.execute(index)
    conn.execute("DROP TABLE attempt_journal")  # from version 4
    conn.execute("CREATE INDEX results_test ON results (test)")  # dropped by version 5
    _audit_log_as_version_5(conn)  # written_at comes with version 6
    _results_as_version_6(conn)  # leg comes with version 7
    conn.execute("PRAGMA user_version = 2")
    conn.execute("COMMIT")
    conn.close()


def _upgraded_from(
    tmp_path: Path, version: int, layout: Callable[[sqlite3.Connection], None]
) -> tuple[sqlite_utils.Database, list[tuple[object, ...]]]:
    """A copy of the sample laid out as `version` left it (`layout`) and marked so, opened
    (which upgrades it), with the per-run rows it held before."""
    path = tmp_path / "history.db"
    shutil.copy(SAMPLE, path)
    conn = sqlite3.connect(path, isolation_level=None)
    layout(conn)
    conn.execute(f"PRAGMA user_version = {version}")
    rows = conn.execute(ROWS).fetchall()
    conn.close()
    db = open_history(path)
    assert store.schema_version(db.conn) == store.SCHEMA_VERSION
    return db, rows


def _indexes(conn: sqlite3.Connection, table: str) -> list[str]:
    """The indexes of a table other than its primary key."""
    return [
        str(name)
        for (name,) in conn.execute(
            f"SELECT name FROM pragma_index_list('{table}') WHERE origin <> 'pk'"
        )
    ]


def _key(conn: sqlite3.Connection, table: str) -> list[str]:
    """The primary key columns of a table, in key order."""
    columns = conn.execute(f"SELECT name, pk FROM pragma_table_info('{table}')").fetchall()
    return [name for name, pk in sorted(columns, key=lambda row: row[1]) if pk]


def test_a_version_2_history_keeps_its_rows_and_scores_through_the_upgrade(
    tmp_path: Path,
) -> None:
    path = tmp_path / "history.db"
    shutil.copy(SAMPLE, path)
    plain = sqlite3.connect(path)
    rows = plain.execute(ROWS).fetchall()
    now = parse_iso(str(plain.execute("SELECT max(ts) FROM runs").fetchone()[0]))
    plain.close()
    now += timedelta(hours=1)
    expected = render_json(build_report(open_history(SAMPLE, readonly=True), now=now))
    _test_runs_as_version_2(path)
    check = sqlite3.connect(path)
    assert _key(check, "test_runs") == ["test", "run"]
    check.close()

    db = open_history(path)
    assert store.schema_version(db.conn) == store.SCHEMA_VERSION
    assert db.conn.execute(ROWS).fetchall() == rows
    assert _key(db.conn, "test_runs") == ["test", "ts", "run"]
    assert _indexes(db.conn, "results") == []
    assert render_json(build_report(db, now=now)) == expected


def test_test_runs_has_one_test_major_tree_and_its_window_reads_follow_it(
    tmp_path: Path,
) -> None:
    """A run's commit writes a page per test into every test-major tree of test_runs: its key is
    that order, so no index may repeat it; a test's window is then one range of the key.
    results, keyed by run, has no test-major tree at all: a test's attempts are found through
    test_runs and the results key."""
    db = open_history(tmp_path / "history.db")
    conn = db.conn
    assert _key(conn, "test_runs") == ["test", "ts", "run"]
    assert _key(conn, "results") == ["run", "test", "attempt"]
    assert _indexes(conn, "results") == []
    for (name,) in conn.execute(
        "SELECT name FROM pragma_index_list('test_runs') WHERE origin <> 'pk'"
    ):
        first = conn.execute(f"SELECT name FROM pragma_index_info('{name}')").fetchone()
        assert first is None or first[0] != "test", name
    plan = " ".join(
        str(row[3])
        for row in conn.execute(
            "EXPLAIN QUERY PLAN SELECT run, outcome FROM test_runs"
            " WHERE test = ? AND ts > ? AND ts <= ? ORDER BY ts",
            (1, "2026-01-01", "2026-02-01"),
        )
    )
    assert "USING PRIMARY KEY (test=? AND ts>? AND ts<?)" in plan
    assert "TEMP B-TREE" not in plan


def test_a_version_3_history_gains_the_attempt_journal(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    shutil.copy(SAMPLE, path)
    conn = sqlite3.connect(path, isolation_level=None)
    rows = conn.execute(ROWS).fetchall()
    conn.execute("DROP TABLE attempt_journal")
    _audit_log_as_version_5(conn)
    _results_as_version_6(conn)
    conn.execute("PRAGMA user_version = 3")
    conn.close()
    db = open_history(path)
    assert store.schema_version(db.conn) == store.SCHEMA_VERSION
    assert _key(db.conn, "attempt_journal") == ["id"]
    assert db.conn.execute("SELECT count(*) FROM attempt_journal").fetchone() == (0,)
    assert db.conn.execute(ROWS).fetchall() == rows


AUDIT = "SELECT id, ts, who, action, test_id, mode, reason, ticket, scores, source FROM audit_log"


def test_a_version_5_history_gains_written_at_equal_to_each_rows_date(tmp_path: Path) -> None:
    """Rows written before the column existed have no other moment than their ts; ids stay, so
    a replica's count of the audit rows it sent stays right."""
    path = tmp_path / "history.db"
    shutil.copy(SAMPLE, path)
    conn = sqlite3.connect(path, isolation_level=None)
    _audit_log_as_version_5(conn)
    _results_as_version_6(conn)
    conn.executemany(
        "INSERT INTO audit_log (id, ts, who, action, test_id, reason, source)"
        " VALUES (?, ?, 'me', ?, 'tests/test_a.py::test_a', 'r', ?)",
        [
            (3, "2026-10-07T23:59:59Z", "quarantine", "lifecycle"),
            (7, "2026-11-02T09:00:00Z", "release", "cli"),
        ],
    )
    conn.execute("PRAGMA user_version = 5")
    before = conn.execute(AUDIT + " ORDER BY id").fetchall()
    conn.close()

    db = open_history(path)
    assert store.schema_version(db.conn) == store.SCHEMA_VERSION
    assert db.conn.execute(AUDIT + " ORDER BY id").fetchall() == before
    assert db.conn.execute("SELECT id, written_at FROM audit_log ORDER BY id").fetchall() == [
        (3, "2026-10-07T23:59:59Z"),
        (7, "2026-11-02T09:00:00Z"),
    ]
    assert sorted(_indexes(db.conn, "audit_log")) == ["audit_log_test", "audit_log_written"]
    with pytest.raises(sqlite3.IntegrityError, match="written_at"):
        db.conn.execute(
            "INSERT INTO audit_log (ts, who, action, test_id) VALUES ('x', 'me', 'release', 't')"
        )


def test_a_version_6_history_gains_legs_and_keeps_its_per_run_rows(tmp_path: Path) -> None:
    """Attempts stored before legs existed have none (NULL): they stay one leg, so recomputing a
    run's rows gives what they were; a new report into an old run is a leg of its own."""
    db, rows = _upgraded_from(tmp_path, 6, _results_as_version_6)
    assert db.conn.execute("SELECT count(*) FROM results WHERE leg IS NOT NULL").fetchone() == (0,)
    runs = [(int(r), str(t)) for r, t in db.conn.execute("SELECT id, ts FROM runs")]
    with store.transaction(db.conn):
        for run, ts in runs:
            refresh_test_runs(db.conn, run, ts)
    assert db.conn.execute(ROWS).fetchall() == rows


def test_a_version_7_history_gains_origins_and_its_plain_ids_join_later_shards(
    tmp_path: Path,
) -> None:
    """Attempts stored before origins existed name no file (NULL): their per-run rows stay, and
    a later shard's same-named case of a known file joins such a test as a leg, as it did."""
    path = tmp_path / "history.db"
    shutil.copy(SAMPLE, path)
    conn = sqlite3.connect(path, isolation_level=None)
    _results_as_version_7(conn)
    conn.execute("PRAGMA user_version = 7")
    rows = conn.execute(ROWS).fetchall()
    run, test_id, ts = conn.execute(
        "SELECT r.run_id, t.test_id, r.ts FROM test_runs tr JOIN runs r ON r.id = tr.run"
        " JOIN tests t ON t.id = tr.test ORDER BY tr.run, tr.test LIMIT 1"
    ).fetchone()
    conn.close()

    db = open_history(path)
    assert store.schema_version(db.conn) == store.SCHEMA_VERSION
    assert db.conn.execute("SELECT count(*) FROM results WHERE origin IS NOT NULL").fetchone() == (
        0,
    )
    assert db.conn.execute(ROWS).fetchall() == rows
    from flaketui.core.ingest.writer import ingest_reports
    from flaketui.core.models import RunMeta

    classname, _, name = str(test_id).rpartition("::")
    shard = tmp_path / "shard.xml"
    shard.write_text(
        f'<testsuite name="s"><testcase classname="{classname}" name="{name}"'
        ' file="src/other.test.js"/></testsuite>'
    )
    meta = RunMeta(run_id=str(run), ts=parse_iso(str(ts)))
    attempts = "SELECT count(*) FROM results x JOIN tests t ON t.id = x.test WHERE t.test_id = ?"
    before = db.conn.execute(attempts, (test_id,)).fetchone()[0]
    ingest_reports(db, [shard], meta)
    assert db.conn.execute(attempts, (test_id,)).fetchone()[0] == before + 1


FIRST_ATTEMPTS = (
    "SELECT test, run, first_duration_ms, first_timeout_ms, first_position FROM test_runs"
    " ORDER BY test, run"
)
# The same fields read from results, as cause analysis once joined them: the attempt numbered
# lowest of each test in each run.
FIRST_ATTEMPTS_FROM_RESULTS = """
SELECT tr.test, tr.run, a.duration_ms, a.timeout_ms, a.position FROM test_runs tr
JOIN results a ON a.run = tr.run AND a.test = tr.test
    AND a.attempt = (SELECT min(attempt) FROM results b WHERE b.run = tr.run AND b.test = tr.test)
ORDER BY tr.test, tr.run
"""


def test_a_version_8_history_gains_each_runs_first_attempt_fields_from_its_results(
    tmp_path: Path,
) -> None:
    """The per-run rows written before the fields existed are filled from the stored attempts,
    as the writer fills them; everything else in them stays."""
    path = tmp_path / "history.db"
    shutil.copy(SAMPLE, path)
    conn = sqlite3.connect(path, isolation_level=None)
    written = conn.execute(FIRST_ATTEMPTS).fetchall()
    rows = conn.execute(ROWS).fetchall()
    _test_runs_as_version_8(conn)
    conn.execute("PRAGMA user_version = 8")
    conn.close()

    db = open_history(path)
    assert store.schema_version(db.conn) == store.SCHEMA_VERSION
    assert db.conn.execute(ROWS).fetchall() == rows
    assert db.conn.execute(FIRST_ATTEMPTS).fetchall() == written
    # The sample holds each kind: durations on (nearly) every row, positions where the recorder
    # wrote them; and they agree with the attempts themselves.
    durations, positions = db.conn.execute(
        "SELECT count(first_duration_ms), count(first_position) FROM test_runs"
    ).fetchone()
    assert durations > 0.9 * len(rows) and positions > 0
    assert written == db.conn.execute(FIRST_ATTEMPTS_FROM_RESULTS).fetchall()


def test_a_version_9_history_gains_the_failures_index_and_proposes_the_same_outages(
    tmp_path: Path,
) -> None:
    """The index of failed per-run rows is built from the stored rows, and the runs' counts
    start unknown: the outage search finds the same clusters before and after, counts the runs
    it needs once, and finds them again from the counts it kept."""
    from flaketui.core.config import Config
    from flaketui.core.history.outages import find_outages

    now = parse_iso("2026-11-30T18:00:00Z")
    db, rows = _upgraded_from(tmp_path, 9, _as_version_9)
    assert db.conn.execute(ROWS).fetchall() == rows
    assert "test_runs_failed" in _indexes(db.conn, "test_runs")
    assert db.conn.execute("SELECT count(ran_at_least) FROM runs").fetchone() == (0,)

    def clusters() -> list[tuple[object, ...]]:
        found = find_outages(db.conn, now=now, config=Config(), remember=True)
        return [(o.tag, o.run_ids, o.failed_tests, o.tests, o.status) for o in found]

    with store.transaction(db.conn):
        first = clusters()
    counted = db.conn.execute("SELECT count(ran_at_least) FROM runs").fetchone()[0]
    assert first and counted > 0
    with store.transaction(db.conn):
        assert clusters() == first
    assert db.conn.execute("SELECT count(ran_at_least) FROM runs").fetchone()[0] == counted


def test_the_command_line_says_once_that_it_upgrades_a_history(tmp_path: Path) -> None:
    """An upgrade takes a while on a big history: the command says so on stderr as it starts,
    the first time only, and its output is what it would be anyway."""
    path = tmp_path / "history.db"
    shutil.copy(SAMPLE, path)
    conn = sqlite3.connect(path, isolation_level=None)
    _test_runs_as_version_8(conn)
    conn.execute("PRAGMA user_version = 8")
    conn.close()
    command = [sys.executable, "-m", "flaketui", "report", str(path), "--now", NOW_ISO]
    first = subprocess.run(command, capture_output=True, text=True, check=True, cwd=tmp_path)
    assert first.stderr == (
        f"{path}: upgrading the history for this version of flaketui (once; about a minute per"
        " 10 M results)\n"
    )
    again = subprocess.run(command, capture_output=True, text=True, check=True, cwd=tmp_path)
    assert again.stderr == ""
    assert again.stdout == first.stdout
