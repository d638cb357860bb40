"""The write path's shortcuts leave the history as the slow path would, the connection as found."""

from __future__ import annotations

import sqlite3
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from flaketui.core.errors import ReportError
from flaketui.core.history.derived_rows import refresh_test_runs
from flaketui.core.history.merge import merge_histories
from flaketui.core.history.store import fold_deferred, foreign_keys_off, transaction
from flaketui.core.ingest.run_journal import RunJournal
from flaketui.core.ingest.writer import IngestResult, RunRecorder, ingest_batch, ingest_reports
from flaketui.core.models import Attempt, CaseResult, RunMeta
from flaketui.core.rollups import build as rollups
from tests.connections import open_connection, open_history
from tests.core.test_rollup_scoring import assert_maintained
from tests.process_state import collector_off

TS = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def _meta(run_id: str, ts: datetime, commit: str | None) -> RunMeta:
    return RunMeta(
        run_id=run_id, suite="ci", branch="main", branch_kind="main", ts=ts, commit_sha=commit
    )


def _case(test_id: str, *outcomes: str) -> CaseResult:
    attempts = [Attempt(o, 1, "AssertionError: boom" if o == "fail" else None) for o in outcomes]
    return CaseResult(test_id, "tests/test_x.py", attempts)


@pytest.mark.parametrize("state", [0, 1])
def test_the_recorder_and_ingest_leave_foreign_keys_and_checks_as_they_found_them(
    tmp_path: Path, state: int
) -> None:
    conn = open_connection(tmp_path / "h.db")
    conn.execute(f"PRAGMA foreign_keys = {state}")
    conn.execute(f"PRAGMA ignore_check_constraints = {1 - state}")
    recorder = RunRecorder(conn, _meta("r1", TS, None))
    recorder.add([_case("tests/test_x.py::test_a", "pass")])
    recorder.add([_case("tests/test_x.py::test_b", "fail")])
    recorder.finish()
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == state
    assert conn.execute("PRAGMA ignore_check_constraints").fetchone()[0] == 1 - state
    report = tmp_path / "r.xml"
    report.write_text(
        '<testsuite name="s"><testcase classname="tests.test_x" name="test_a"/></testsuite>'
    )
    ingest_reports(conn, [report], _meta("r2", TS + timedelta(hours=1), None))
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == state
    assert conn.execute("PRAGMA ignore_check_constraints").fetchone()[0] == 1 - state
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


def test_the_writer_refuses_an_unknown_outcome_itself(tmp_path: Path) -> None:
    # The write leaves the outcome CHECK unevaluated: the writer's own check must hold.
    conn = open_connection(tmp_path / "h.db")
    recorder = RunRecorder(conn, _meta("r1", TS, None))
    recorder.add([_case("tests/test_x.py::test_a", "pass")])
    with pytest.raises(ReportError, match="unknown outcome 'passed'"):
        recorder.add([_case("tests/test_x.py::test_b", "passed")])
    assert conn.execute("SELECT DISTINCT outcome FROM results").fetchall() == [("pass",)]
    assert conn.execute("SELECT DISTINCT outcome FROM test_runs").fetchall() == [("pass",)]
    with pytest.raises(sqlite3.IntegrityError):  # the schema's CHECK is back in force
        conn.execute("UPDATE results SET outcome = 'passed'")


def test_a_commit_gets_mixed_rows_only_once_a_second_run_shares_it(tmp_path: Path) -> None:
    db = open_history(tmp_path / "h.db")
    for index, (commit, outcome) in enumerate([("c1", "fail"), ("c2", "pass"), ("c1", "pass")]):
        recorder = RunRecorder(db, _meta(f"r{index}", TS + timedelta(hours=index), commit))
        recorder.add([_case("tests/test_x.py::test_a", outcome)])
        recorder.add([_case("tests/test_x.py::test_p[1]", outcome)])
        recorder.finish()
        mixed = db.conn.execute("SELECT commit_sha FROM test_commit_mixed").fetchall()
        families = db.conn.execute("SELECT commit_sha FROM family_commit_mixed").fetchall()
        assert (mixed, families) == (([("c1",)] * 2, [("c1",)]) if index == 2 else ([], []))
    assert_maintained(db)


def test_the_recorders_first_batch_on_a_new_history_is_maintained(tmp_path: Path) -> None:
    db = open_history(tmp_path / "h.db")
    assert not rollups.enabled(db.conn)
    recorder = RunRecorder(db, _meta("r1", TS, "c1"))
    recorder.add([_case("tests/test_x.py::test_a", "fail", "pass"), _case("tests/test_x.py::t[1]")])
    assert rollups.enabled(db.conn)
    recorder.add([_case("tests/test_x.py::t[2]", "fail"), _case("tests/test_x.py::test_a", "pass")])
    recorder.finish()
    assert_maintained(db)


def _report(path: Path, *cases: tuple[str, str]) -> Path:
    body = "".join(
        f'<testcase classname="tests.test_x" name="{name}">'
        + ("<failure message='boom'>boom</failure>" if outcome == "fail" else "")
        + "</testcase>"
        for name, outcome in cases
    )
    path.write_text(f'<testsuite name="s">{body}</testsuite>')
    return path


def test_ingested_runs_new_and_extended_by_later_shards_are_maintained(tmp_path: Path) -> None:
    db = open_history(tmp_path / "h.db")
    for index in range(3):  # earlier runs of the same day
        path = _report(tmp_path / f"r{index}.xml", ("test_a", "pass"), ("test_p[1]", "fail"))
        ingest_reports(db, [path], _meta(f"r{index}", TS + timedelta(hours=index), "c1"))
    # A new run with a repeated test (two attempts), then a second shard of the same run that
    # repeats a test again and brings a new one.
    late = _meta("late", TS + timedelta(hours=5), "c2")
    first = _report(
        tmp_path / "s1.xml", ("test_a", "fail"), ("test_a", "pass"), ("test_p[1]", "pass")
    )
    ingest_reports(db, [first], late)
    assert_maintained(db)
    second = _report(tmp_path / "s2.xml", ("test_p[1]", "fail"), ("test_p[2]", "pass"))
    ingest_reports(db, [second], late)
    assert_maintained(db)


def test_a_first_passing_attempt_stores_nulls_and_edited_like_any_row(tmp_path: Path) -> None:
    db = open_history(tmp_path / "h.db")
    meta = RunMeta(run_id="R", ts=TS, changed_files=["tests/test_x.py"])
    recorder = RunRecorder(db, meta)
    recorder.add(
        [
            _case("tests/test_x.py::test_a", "pass"),  # the shortcut, in an edited file
            CaseResult("tests/test_y.py::test_b", "tests/test_y.py", [Attempt("pass", 7)]),
            CaseResult("tests/test_y.py::test_c", None, [Attempt("pass", None, None, "gw1")]),
            CaseResult("tests/test_y.py::test_d", None, [Attempt("pass", 3, None, "gw0")]),
        ]
    )
    stored = db.conn.execute(
        "SELECT t.test_id, r.attempt, r.outcome, r.worker_id, r.duration_ms, r.message,"
        " r.signature, tr.outcome, tr.bad, tr.attempts, tr.failed_attempts, tr.worker_id,"
        " tr.signature, tr.edited, tr.ts FROM results r JOIN tests t ON t.id = r.test"
        " JOIN test_runs tr ON tr.test = r.test AND tr.run = r.run ORDER BY t.test_id"
    ).fetchall()
    ts = "2026-11-01T12:00:00Z"
    nulls = (None, None, "pass", 0, 1, 0)
    assert stored == [
        ("tests/test_x.py::test_a", 1, "pass", None, 1, *nulls, None, None, 1, ts),
        ("tests/test_y.py::test_b", 1, "pass", None, 7, *nulls, None, None, 0, ts),
        ("tests/test_y.py::test_c", 1, "pass", "gw1", None, *nulls, "gw1", None, 0, ts),
        ("tests/test_y.py::test_d", 1, "pass", "gw0", 3, *nulls, "gw0", None, 0, ts),
    ]


def test_a_parent_becoming_a_family_in_the_latest_run_keeps_its_past(tmp_path: Path) -> None:
    db = open_history(tmp_path / "h.db")
    for index in range(3):  # the plain test runs first, failing now and then
        recorder = RunRecorder(db, _meta(f"r{index}", TS + timedelta(hours=index), f"c{index}"))
        recorder.add([_case("tests/test_x.py::test_f", "fail" if index == 1 else "pass")])
        recorder.finish()
    # The latest run brings its first parameter (appended, not recomputed, for new families).
    recorder = RunRecorder(db, _meta("r3", TS + timedelta(hours=3), "c3"))
    recorder.add(
        [_case("tests/test_x.py::test_f[1]", "pass"), _case("tests/test_x.py::g[1]", "pass")]
    )
    recorder.finish()
    assert db.conn.execute(
        "SELECT parent, runs FROM family_day_seq ORDER BY parent"
    ).fetchall() == [
        ("tests/test_x.py::g", 1),
        ("tests/test_x.py::test_f", 4),
    ]
    assert_maintained(db)


def test_appending_a_run_provides_exp_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite builds without math functions get Python's exp before the append uses it."""
    db = open_history(tmp_path / "h.db")
    recorder = RunRecorder(db, _meta("r1", TS, None))
    recorder.add([_case("tests/test_x.py::test_a", "pass")])
    calls: list[object] = []
    monkeypatch.setattr(rollups, "ensure_sql_functions", calls.append)
    recorder.add([_case("tests/test_x.py::test_b", "pass")])  # appended to the day rows
    assert calls == [db.conn]


def _bytes_written() -> int:
    """The bytes this process has handed to write calls so far (Linux)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise AssertionError("no wchar in /proc/self/io")


TESTS_PAST_SPILL = 3_000  # a run of these fills test_runs pages well past 64 KiB


def _history_of_one_run(tmp_path: Path, *, files: bool = False) -> tuple[sqlite3.Connection, Path]:
    """A history holding one run of TESTS_PAST_SPILL passing tests, and its report."""
    named = ' file="tests/test_x.py"' if files else ""
    cases = "".join(
        f'<testcase classname="tests.test_x" name="test_{i}"{named} time="0.01"/>'
        for i in range(TESTS_PAST_SPILL)
    )
    report = tmp_path / "r.xml"
    report.write_text(f'<testsuite name="s">{cases}</testsuite>')
    conn = open_connection(tmp_path / "h.db")
    ingest_reports(conn, [report], _meta("r1", TS, None))
    return conn, report


class _BytesWritten:
    """Per statement (its first words), the most bytes written while it ran: read as each
    statement starts (a trace callback), while watching (a `with` block, the collector held
    off: the count is the process's). Inside a transaction whose pages fit SQLite's cache, a
    statement writes only to a statement journal or a temporary table."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.written: dict[str, int] = {}
        self.previous = ""
        self.at_start = 0
        self.watching = ExitStack()

    def __enter__(self) -> _BytesWritten:
        self.watching.enter_context(collector_off())
        self.at_start = _bytes_written()
        self.conn.set_trace_callback(self)
        self.watching.callback(self.conn.set_trace_callback, None)
        return self

    def __exit__(self, *exc: object) -> None:
        self.watching.close()

    def __call__(self, sql: str) -> None:
        now = _bytes_written()
        self.written[self.previous] = max(self.written.get(self.previous, 0), now - self.at_start)
        self.previous = " ".join(sql.split()[:5])
        self.at_start = _bytes_written()

    def assert_none_wrote(self) -> None:
        """The statements that changed test_runs (and the others changing a table of the
        history, not a temporary one) wrote nothing."""
        writes = {
            sql: written
            for sql, written in self.written.items()
            if sql.startswith(("INSERT", "DELETE")) and "temp." not in sql
        }
        assert any("test_runs" in sql for sql in writes), writes
        assert all(written == 0 for written in writes.values()), writes


@pytest.mark.skipif(not Path("/proc/self/io").is_file(), reason="reads /proc/self/io")
@pytest.mark.parametrize("files", [False, True])
def test_a_runs_passing_rows_keep_no_statement_journal(tmp_path: Path, files: bool) -> None:
    # Each passing row lands in a page of test_runs an earlier run filled: a statement that may
    # abort halfway would copy every such page to a temporary file first (past 64 KiB), which
    # on a big history is as much writing again as the run's own pages.
    conn, report = _history_of_one_run(tmp_path, files=files)
    with _BytesWritten(conn) as spy:
        ingest_reports(conn, [report], _meta("r2", TS + timedelta(hours=1), None))
    spy.assert_none_wrote()
    assert conn.execute("SELECT count(*) FROM test_runs WHERE run = 2").fetchone()[0] == (
        TESTS_PAST_SPILL
    )


@pytest.mark.skipif(not Path("/proc/self/io").is_file(), reason="reads /proc/self/io")
def test_a_batch_of_runs_keeps_no_savepoint_journal(tmp_path: Path) -> None:
    # A savepoint per run would copy every page changed after it to a temporary file: the
    # batch is written without one unless a run is refused (see test_ingest_batch).
    conn, report = _history_of_one_run(tmp_path)
    with _BytesWritten(conn) as spy:
        outcomes = ingest_batch(
            conn,
            [([report], _meta(f"r{n}", TS + timedelta(hours=n), None)) for n in (2, 3)],
        )
    spy.assert_none_wrote()
    assert [o.results for o in outcomes if isinstance(o, IngestResult)] == [TESTS_PAST_SPILL] * 2


@pytest.mark.skipif(not Path("/proc/self/io").is_file(), reason="reads /proc/self/io")
def test_storing_a_recorded_run_keeps_no_statement_journal(tmp_path: Path) -> None:
    # What the next reader of a history does with the attempts pytest recorded in it.
    conn, _ = _history_of_one_run(tmp_path)
    conn.close()
    path = tmp_path / "h.db"
    recorder = open_connection(path, fold=False)
    run = RunJournal(recorder, _meta("recorded", TS + timedelta(hours=1), None), source="pytest")
    run.append(
        [(f"tests.test_x::test_{i}", "pass", 10, i + 1, None) for i in range(TESTS_PAST_SPILL)]
    )
    run.finish()
    recorder.close()
    conn = open_connection(path, fold=False)
    with _BytesWritten(conn) as spy:
        fold_deferred(conn, path, readonly=False, fold_waiting=False)
    spy.assert_none_wrote()
    assert (
        conn.execute(
            "SELECT count(*) FROM test_runs JOIN runs r ON r.id = run WHERE r.run_id = 'recorded'"
        ).fetchone()[0]
        == TESTS_PAST_SPILL
    )
    assert conn.execute("SELECT count(*) FROM tests").fetchone()[0] == TESTS_PAST_SPILL  # theirs
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1  # as it was


@pytest.mark.skipif(not Path("/proc/self/io").is_file(), reason="reads /proc/self/io")
@pytest.mark.parametrize("some", [False, True])
def test_refreshing_a_runs_rows_keeps_no_statement_journal(tmp_path: Path, some: bool) -> None:
    # Its writers (the writer's repeated cases, stored recordings) check no references.
    conn, report = _history_of_one_run(tmp_path)
    ingest_reports(conn, [report], _meta("r2", TS + timedelta(hours=1), None))
    before = conn.execute("SELECT * FROM test_runs ORDER BY test, ts, run").fetchall()
    run_pk, ts = conn.execute("SELECT id, ts FROM runs WHERE run_id = 'r2'").fetchone()
    tests = range(1, TESTS_PAST_SPILL + 1, 2) if some else None
    with _BytesWritten(conn) as spy, foreign_keys_off(conn, unchecked=False), transaction(conn):
        refresh_test_runs(conn, run_pk, ts, tests)
    spy.assert_none_wrote()
    assert conn.execute("SELECT * FROM test_runs ORDER BY test, ts, run").fetchall() == before


@pytest.mark.skipif(not Path("/proc/self/io").is_file(), reason="reads /proc/self/io")
def test_merging_runs_keeps_no_statement_journal(tmp_path: Path) -> None:
    # A merge's rows land in pages of test_runs DEST's runs filled, as an ingest's do; every id
    # it stores is one it mapped, so it checks no references either.
    conn, report = _history_of_one_run(tmp_path)
    conn.close()
    source = tmp_path / "source.db"
    for hour in (1, 2):
        ingest_reports(
            open_history(source), [report], _meta(f"s{hour}", TS + timedelta(hours=hour), None)
        )
    open_connection(source).close()  # its runs folded, as any reader would
    dest = open_history(tmp_path / "h.db")
    with _BytesWritten(dest.conn) as spy:
        summary = merge_histories(dest, [source])
    spy.assert_none_wrote()
    assert summary.results_added == 2 * TESTS_PAST_SPILL
    assert dest.conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert dest.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1  # as it was
    assert_maintained(dest)
