"""A run `flaketui ingest` leaves waiting keeps its per-test rows by run (test_runs_waiting)
until a fold files them into test_runs: every writer and reader then sees what it would have
seen had the rows gone to test_runs at once."""

from __future__ import annotations

import gc
import os
import shutil
import sqlite3
import stat
import tempfile
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flaketui.cli import cli
from flaketui.core.config import Config
from flaketui.core.history import store
from flaketui.core.history.merge import merge_histories
from flaketui.core.history.outages import find_outages
from flaketui.core.history.prune import prune_history
from flaketui.core.history.store import transaction
from flaketui.core.ingest.resign import resign
from flaketui.core.ingest.writer import RunRecorder, ingest_reports
from flaketui.core.models import Attempt, CaseResult, RunMeta
from flaketui.core.rollups import build as rollups
from flaketui.core.rollups.pending import WAITING_TABLE, file_waiting, pending_runs
from flaketui.core.scoring.report import build_report
from flaketui.tui.history_access import check_history, open_reader
from flaketui.tui.loaders import history_stamp
from tests.connections import closed_at_exit, open_connection, open_history
from tests.core.test_rollup_scoring import _snapshot, assert_maintained

NOW = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)
# Every table a writer keeps, beside the rollup tables (_snapshot); the waiting table and the
# list of waiting runs are compared apart (both empty once folded).
RAW = ("runs", "tests", "signatures", "results", "test_runs", "incidents")

# One case: (test name, file or None, outcomes of its attempts); a name may repeat in a report
# (a repeat of the test), and the same name may name another file in a later run (a move).
Case = tuple[str, str | None, tuple[str, ...]]


def _report(path: Path, cases: list[Case]) -> Path:
    body = []
    for name, test_file, outcomes in cases:
        where = f' file="{test_file}"' if test_file else ""
        for outcome in outcomes:
            inner = {
                "pass": "",
                "fail": '<failure message="boom at 0x1f">AssertionError: boom</failure>',
                "error": '<error message="conn reset">ConnectionError: reset</error>',
                "skipped": "<skipped/>",
            }[outcome]
            body.append(f'<testcase classname="pkg.mod" name="{name}"{where}>{inner}</testcase>')
    path.write_text(f'<?xml version="1.0"?>\n<testsuite name="s">{"".join(body)}</testsuite>\n')
    return path


def _meta(run_id: str, hours: float, commit: str = "c1") -> RunMeta:
    return RunMeta(
        run_id=run_id,
        suite="ci",
        branch="main",
        branch_kind="main",
        ts=NOW - timedelta(hours=hours),
        commit_sha=commit,
    )


def _kept(conn: sqlite3.Connection) -> dict[str, list[tuple[Any, ...]]]:
    raw = {table: sorted(conn.execute(f"SELECT * FROM {table}").fetchall()) for table in RAW}
    return raw | _snapshot(sqlite_utils.Database(conn))


def _fold(conn: sqlite3.Connection) -> None:
    with transaction(conn):
        rollups.fold_pending(conn)
    assert not conn.execute(f"SELECT 1 FROM {WAITING_TABLE}").fetchall()
    assert pending_runs(conn) == 0


def _ingest_all(path: Path, runs: list[tuple[Path, RunMeta]], *, stage: bool) -> sqlite3.Connection:
    conn = open_connection(path)
    for report, meta in runs:
        ingest_reports(conn, [report], meta, stage=stage)
    return conn


def test_a_staged_run_keeps_its_rows_by_run_until_the_fold_files_them(tmp_path: Path) -> None:
    conn = open_connection(tmp_path / "h.db")
    report = _report(tmp_path / "r.xml", [("test_a", None, ("pass",)), ("test_b", None, ("fail",))])
    result = ingest_reports(conn, [report], _meta("r1", 2), stage=True)
    assert result.tests == 2  # counted where the rows are
    assert conn.execute("SELECT count(*) FROM test_runs").fetchone() == (0,)
    assert conn.execute(f"SELECT count(*) FROM {WAITING_TABLE}").fetchone() == (2,)
    assert pending_runs(conn) == 1
    _fold(conn)
    assert conn.execute("SELECT count(*) FROM test_runs").fetchone() == (2,)
    assert_maintained(open_history(tmp_path / "h.db"))


_NAMES = ["test_a", "test_b", "test_c", "test_p[1]", "test_p[2]"]
_CASE = st.tuples(
    st.sampled_from(_NAMES),
    st.sampled_from([None, "tests/one.py", "tests/two.py"]),
    st.lists(st.sampled_from(["pass", "fail", "error", "skipped"]), min_size=1, max_size=3).map(
        tuple
    ),
)
# A run: its cases, and whether it is a later shard of the run before it (same run id).
_RUN = st.tuples(st.lists(_CASE, min_size=1, max_size=6), st.booleans())


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(runs=st.lists(_RUN, min_size=1, max_size=6))
def test_staged_and_direct_ingests_leave_the_same_history(
    tmp_path_factory: pytest.TempPathFactory, runs: list[tuple[list[Case], bool]]
) -> None:
    """Repeats, tests taking another file, later shards of a waiting run: once folded, a
    history written by staged ingests equals one written straight into test_runs."""
    folder = tmp_path_factory.mktemp("runs")
    plan = []
    run_id = "r0"
    for index, (cases, shard) in enumerate(runs):
        if not shard or index == 0:
            run_id = f"r{index}"
        plan.append(
            (_report(folder / f"{index}.xml", cases), _meta(run_id, 20 - index, f"c{index % 2}"))
        )
    with closed_at_exit():
        staged = _ingest_all(folder / "staged.db", plan, stage=True)
        direct = _ingest_all(folder / "direct.db", plan, stage=False)
        assert not direct.execute(f"SELECT 1 FROM {WAITING_TABLE}").fetchall()
        _fold(staged)
        _fold(direct)
        assert _kept(staged) == _kept(direct)


def _outage_plan(tmp_path: Path) -> list[tuple[Path, RunMeta]]:
    """Four good runs of ten tests, then one where eight fail with one message, then a good one."""
    names = [f"test_{n}" for n in range(10)]
    plan = []
    for index in range(6):
        bad = index == 4
        cases = [
            (name, None, ("error" if bad and n < 8 else "pass",)) for n, name in enumerate(names)
        ]
        plan.append((_report(tmp_path / f"{index}.xml", cases), _meta(f"r{index}", 12 - 2 * index)))
    return plan


def test_the_outage_search_after_an_ingest_sees_its_waiting_run(tmp_path: Path) -> None:
    staged = _ingest_all(tmp_path / "staged.db", _outage_plan(tmp_path), stage=True)
    assert staged.execute(f"SELECT count(*) FROM {WAITING_TABLE}").fetchone() == (60,)
    found = find_outages(staged, now=NOW, config=Config())
    assert [(o.failed_tests, o.tests, len(o.run_pks)) for o in found] == [(8, 10, 1)]
    with transaction(staged):
        file_waiting(staged)
    assert find_outages(staged, now=NOW, config=Config()) == found


def _report_of(path: Path) -> list[Any]:
    """Every test's and family's verdict, scores and explanation, as a command reads them."""
    db = open_history(path, readonly=True)
    try:
        report = build_report(db, now=NOW, config=Config())
    finally:
        db.conn.close()
    return [*report.tests, *report.families]


def _twins(tmp_path: Path) -> tuple[Path, Path]:
    """The outage plan ingested staged (runs left waiting) and straight into test_runs."""
    plan = _outage_plan(tmp_path)
    for name, stage in (("staged.db", True), ("direct.db", False)):
        _ingest_all(tmp_path / name, plan, stage=stage).close()
    return tmp_path / "staged.db", tmp_path / "direct.db"


def test_a_reader_that_may_write_files_the_waiting_rows_when_it_opens(tmp_path: Path) -> None:
    staged, direct = _twins(tmp_path)
    assert _report_of(staged) == _report_of(direct)
    conn = sqlite3.connect(staged)
    assert conn.execute(f"SELECT count(*) FROM {WAITING_TABLE}").fetchone() == (0,)
    conn.close()


def _read_only(path: Path) -> None:
    path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)


def test_a_reader_that_may_not_write_reads_a_filed_copy_and_leaves_the_file(
    tmp_path: Path,
) -> None:
    staged, direct = _twins(tmp_path)
    _read_only(staged)
    before = staged.read_bytes()
    assert _report_of(staged) == _report_of(direct)
    assert staged.read_bytes() == before


def test_the_filed_copy_goes_with_its_connection(tmp_path: Path) -> None:
    staged, _ = _twins(tmp_path)
    _read_only(staged)
    conn = open_connection(staged, readonly=True)
    assert store.is_filed_copy(conn)
    copy = Path(conn.execute("PRAGMA database_list").fetchone()[2])
    assert copy.parent.exists() and copy.parent != tmp_path
    assert conn.execute(f"SELECT count(*) FROM {WAITING_TABLE}").fetchone() == (0,)
    with pytest.raises(sqlite3.OperationalError):  # read-only, as the file is
        conn.execute("DELETE FROM runs")
    conn.close()
    del conn
    gc.collect()
    assert not copy.parent.exists()


def test_closing_the_filed_copy_removes_its_folder_at_once(tmp_path: Path) -> None:
    """Closed, the copy leaves nothing for the garbage collector: its folder is gone while
    the connection is still referenced, and collecting the connection warns of nothing."""
    staged, _ = _twins(tmp_path)
    _read_only(staged)
    conn = open_connection(staged, readonly=True)
    assert store.is_filed_copy(conn)
    copy = Path(conn.execute("PRAGMA database_list").fetchone()[2])
    conn.close()
    assert not copy.parent.exists()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del conn
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_a_reader_facing_a_writer_that_holds_the_file_reads_a_filed_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    staged, direct = _twins(tmp_path)
    monkeypatch.setattr(store, "FOLD_WAIT_S", 0.01)
    holder = sqlite3.connect(staged, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        conn = open_connection(staged, readonly=True)
        assert store.is_filed_copy(conn)
        conn.close()
        assert _report_of(staged) == _report_of(direct)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    conn = sqlite3.connect(staged)
    assert conn.execute(f"SELECT count(*) FROM {WAITING_TABLE}").fetchone()[0]  # left as is
    conn.close()


def test_a_reader_with_no_room_for_a_filed_copy_gets_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    staged, _ = _twins(tmp_path)
    _read_only(staged)
    before = staged.read_bytes()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-folder"))
    result = CliRunner().invoke(cli, ["report", str(staged)])
    assert result.exit_code != 0
    assert result.output.startswith(f"Error: {staged}: holds runs whose rows wait to be filed")
    assert "TMPDIR" in result.output and result.output.count("\n") == 1, result.output
    assert staged.read_bytes() == before


def test_the_apps_reader_sees_the_waiting_runs(tmp_path: Path) -> None:
    staged, direct = _twins(tmp_path)
    _read_only(staged)
    db = open_reader(staged)
    try:
        assert store.is_filed_copy(db.conn)
        got = build_report(db, now=NOW, config=Config())
    finally:
        db.conn.close()
    assert [*got.tests, *got.families] == _report_of(direct)
    os.chmod(staged, stat.S_IRUSR | stat.S_IWUSR)
    db = open_reader(staged)  # may write: files and folds them in place
    try:
        assert not store.is_filed_copy(db.conn)
        assert db.conn.execute(f"SELECT count(*) FROM {WAITING_TABLE}").fetchone() == (0,)
        assert pending_runs(db.conn) == 0  # the rollups answer: no scoring from raw rows
        assert rollups.answers(db.conn, Config())
    finally:
        db.conn.close()


def test_the_apps_start_check_leaves_the_waiting_runs_to_its_first_read(tmp_path: Path) -> None:
    """`flaketui open` checks the history before any screen without folding: the fold is the
    first read's, in its thread, once the ranking kept from the last opening is shown."""
    staged, _ = _twins(tmp_path)
    conn = sqlite3.connect(staged)
    waiting = conn.execute(f"SELECT count(*) FROM {WAITING_TABLE}").fetchone()[0]
    runs = pending_runs(conn)
    conn.close()
    assert waiting and runs
    check_history(staged)
    conn = sqlite3.connect(staged)
    assert conn.execute(f"SELECT count(*) FROM {WAITING_TABLE}").fetchone()[0] == waiting
    assert pending_runs(conn) == runs
    conn.close()


def test_a_readers_fold_is_in_the_file_before_the_reader_opens(tmp_path: Path) -> None:
    """The app notes the history's state once its reader is open, and reloads when it
    changes: the fold the reader runs as it opens must be wholly in the file by then (WAL
    copied in and gone), or the reader's close would change the file and look like a write."""
    staged, _ = _twins(tmp_path)
    wal = staged.with_name(staged.name + "-wal")
    db = open_reader(staged)
    try:
        assert not wal.exists() or wal.stat().st_size == 0
        shutil.copyfile(staged, tmp_path / "file-alone.db")
        alone = sqlite3.connect(tmp_path / "file-alone.db")
        assert alone.execute(f"SELECT count(*) FROM {WAITING_TABLE}").fetchone() == (0,)
        assert alone.execute("SELECT count(*) FROM test_runs").fetchone() == (60,)
        alone.close()
        stamp = history_stamp(staged)
    finally:
        db.conn.close()
    assert history_stamp(staged) == stamp


def test_the_recorder_adding_to_a_waiting_run_files_it_first(tmp_path: Path) -> None:
    report = _report(tmp_path / "r.xml", [("test_a", None, ("fail",)), ("test_b", None, ("pass",))])
    histories = {}
    for name, stage in (("staged.db", True), ("direct.db", False)):
        conn = open_connection(tmp_path / name)
        ingest_reports(conn, [report], _meta("shared", 3), stage=stage)
        recorder = RunRecorder(conn, _meta("shared", 3))
        recorder.add(
            [
                CaseResult("pkg.mod::test_a", None, [Attempt("pass", 1, None)]),
                CaseResult("pkg.mod::test_c", None, [Attempt("fail", 1, "boom")]),
            ]
        )
        recorder.finish()
        _fold(conn)
        histories[name] = _kept(conn)
    assert histories["staged.db"] == histories["direct.db"]


@pytest.mark.parametrize("what", ["prune", "resign", "merge"])
def test_other_writers_file_the_waiting_rows_first(tmp_path: Path, what: str) -> None:
    """A prune, a re-signing or a merge into a history whose runs wait (the oldest holding
    the only run of a test, the newest the only run of another) leaves what it leaves after
    direct ingests."""
    oldie = _report(tmp_path / "old.xml", [("test_old", None, ("pass",))])
    newcomer = _report(
        tmp_path / "new.xml", [("test_new", None, ("fail",)), ("test_0", None, ("pass",))]
    )
    plan = [(oldie, _meta("r-old", 30)), *_outage_plan(tmp_path), (newcomer, _meta("r-new", 1))]
    kept = {}
    for name, stage in (("staged.db", True), ("direct.db", False)):
        _ingest_all(tmp_path / name, plan, stage=stage).close()
        # Opened without folding, as a writer racing the ingest meets the waiting runs.
        db = open_history(tmp_path / name, fold_later=True)
        if what == "prune":
            prune_history(db, 0.35, now=NOW)
        elif what == "resign":
            resign(db, [r"0x[0-9a-f]+", "reset"])
        else:
            target = tmp_path / f"into-{name}"
            shutil.copy(tmp_path / name, target)
            into = open_history(target, fold_later=True)
            other = tmp_path / f"other-{name}"
            _ingest_all(other, [(plan[0][0], _meta("other", 30))], stage=stage).close()
            merge_histories(into, [other])
            db = into
        _fold(db.conn)
        kept[name] = _kept(db.conn)
    assert kept["staged.db"] == kept["direct.db"]
