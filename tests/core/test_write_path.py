"""The write path's shortcuts leave the history as the slow path would, the connection as found."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from flaketui.core import rollups
from flaketui.core.ingest.writer import RunRecorder, ingest_reports
from flaketui.core.models import Attempt, CaseResult, RunMeta
from flaketui.core.store import open_connection, open_history
from tests.core.test_rollup_scoring import assert_maintained

TS = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def _meta(run_id: str, ts: datetime, commit: str | None) -> RunMeta:
    return RunMeta(
        run_id=run_id, suite="ci", branch="main", branch_kind="main", ts=ts, commit_sha=commit
    )


def _case(test_id: str, *outcomes: str) -> CaseResult:
    attempts = [Attempt(o, 1, "AssertionError: boom" if o == "fail" else None) for o in outcomes]
    return CaseResult(test_id, "tests/test_x.py", attempts)


@pytest.mark.parametrize("state", [0, 1])
def test_the_recorder_and_ingest_leave_foreign_keys_as_they_found_them(
    tmp_path: Path, state: int
) -> None:
    conn = open_connection(tmp_path / "h.db")
    conn.execute(f"PRAGMA foreign_keys = {state}")
    recorder = RunRecorder(conn, _meta("r1", TS, None))
    recorder.add([_case("tests/test_x.py::test_a", "pass")])
    recorder.add([_case("tests/test_x.py::test_b", "fail")])
    recorder.finish()
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == state
    report = tmp_path / "r.xml"
    report.write_text(
        '<testsuite name="s"><testcase classname="tests.test_x" name="test_a"/></testsuite>'
    )
    ingest_reports(conn, [report], _meta("r2", TS + timedelta(hours=1), None))
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == state
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


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
