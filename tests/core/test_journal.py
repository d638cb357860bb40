"""The attempt journal: what the recorder appends is stored exactly as the writer stores it."""

from __future__ import annotations

import sqlite3
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flaketui.core.config import Config
from flaketui.core.errors import HistoryError
from flaketui.core.history import journal
from flaketui.core.history.journal import JournalRow
from flaketui.core.history.store import read_header, transaction
from flaketui.core.ingest.writer import RunRecorder
from flaketui.core.models import Attempt, CaseResult, RunMeta
from tests.connections import open_connection
from tests.process_state import collector_off, handles_on

TS = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
TESTS = ["a/test_x.py::test_one", "a/test_x.py::test_p[1]", "a/test_x.py::test_p[2]", "t.txt::doc"]
PREDECESSORS = [None, *TESTS, "b/test_y.py::test_elsewhere"]
MESSAGES = [
    None,
    "AssertionError: assert 1 == 2",
    "ConnectionError: https://deploy:hunter42@db.internal/x refused after 0x7f00 ms",
    "TimeoutError: token=abc123 expired at 2026-11-01T12:00:00",
]

ATTEMPT = st.tuples(
    st.sampled_from(TESTS),
    st.sampled_from(["pass", "pass", "fail", "error", "skipped"]),
    st.none() | st.integers(0, 10_000),
    st.sampled_from(MESSAGES),
    st.sampled_from([None, "gw0", "gw1"]),
    st.sampled_from(PREDECESSORS),
    st.none() | st.integers(1, 50),
    st.none() | st.integers(1, 60_000),
)
# A session: runs (a run id may repeat, as sharded sessions share one), each a list of batches;
# after a batch a reader may store what is journaled so far.
SESSION = st.lists(
    st.tuples(
        st.sampled_from(["r1", "r2"]),
        st.lists(st.tuples(st.lists(ATTEMPT, min_size=1, max_size=8), st.booleans()), max_size=4),
    ),
    min_size=1,
    max_size=3,
)


def _cases(batch: list[tuple[Any, ...]]) -> list[CaseResult]:
    """A batch as the writer takes it: attempts grouped by test, in order."""
    cases: dict[str, CaseResult] = {}
    for test_id, outcome, duration, message, worker, before, position, timeout in batch:
        case = cases.setdefault(test_id, CaseResult(test_id, test_id.split("::", 1)[0], []))
        case.attempts.append(Attempt(outcome, duration, message, worker, before, position, timeout))
    return list(cases.values())


def _rows(batch: list[tuple[Any, ...]]) -> list[JournalRow]:
    """The same batch as journal rows, as the pytest recorder queues them."""
    return [
        (test_id, outcome, duration, position, before, timeout, worker, message, None, None)
        if message is not None or worker is not None
        else (test_id, outcome, duration, position, before, timeout)
        if timeout is not None
        else (test_id, outcome, duration, position, before)
        for test_id, outcome, duration, message, worker, before, position, timeout in batch
    ]


TABLES = {
    "tests": "SELECT test_id, parent, test_file, first_seen FROM tests ORDER BY test_id",
    "runs": "SELECT run_id, ts, finished FROM runs ORDER BY run_id",
    "results": (
        "SELECT u.run_id, t.test_id, r.attempt, r.outcome, r.worker_id, r.duration_ms,"
        " r.message, s.hash, p.test_id, r.position, r.timeout_ms"
        " FROM results r JOIN runs u ON u.id = r.run JOIN tests t ON t.id = r.test"
        " LEFT JOIN signatures s ON s.id = r.signature LEFT JOIN tests p ON p.id = r.predecessor"
        " ORDER BY 1, 2, 3"
    ),
    "test_runs": (
        "SELECT u.run_id, t.test_id, tr.ts, tr.outcome, tr.bad, tr.attempts,"
        " tr.failed_attempts, tr.worker_id, s.hash, tr.edited"
        " FROM test_runs tr JOIN runs u ON u.id = tr.run JOIN tests t ON t.id = tr.test"
        " LEFT JOIN signatures s ON s.id = tr.signature ORDER BY 1, 2"
    ),
    "signatures": "SELECT hash, text, example FROM signatures ORDER BY hash",
    "pending": "SELECT u.run_id FROM rollup_pending p JOIN runs u ON u.id = p.run ORDER BY 1",
}


def _tables(conn: sqlite3.Connection) -> dict[str, list[tuple[Any, ...]]]:
    found = {}
    for name, sql in TABLES.items():
        try:
            found[name] = [tuple(r) for r in conn.execute(sql)]
        except sqlite3.OperationalError:  # rollup_pending: made by the first deferred run
            found[name] = []
    return found


def _meta(run_id: str, index: int) -> RunMeta:
    return RunMeta(run_id=run_id, ts=TS + timedelta(hours=index), changed_files=["a/test_x.py"])


@settings(max_examples=60, deadline=None)
@given(SESSION)
def test_stored_attempts_are_the_writers_rows(session: list[Any]) -> None:
    config = Config(mask_patterns=(r"0x[0-9a-f]+",))
    with tempfile.TemporaryDirectory() as tmp:
        written = open_connection(Path(tmp) / "written.db", fold=False)
        journaled = open_connection(Path(tmp) / "journaled.db", fold=False)
        for index, (run_id, batches) in enumerate(session):
            writer = RunRecorder(written, _meta(run_id, index), config=config, defer_rollups=True)
            recorder = RunRecorder(journaled, _meta(run_id, index), config=config)
            for batch, reader_stores in batches:
                writer.add(_cases(batch))
                recorder.append(_rows(batch))
                if reader_stores:
                    with transaction(journaled):
                        journal.land(journaled)
            writer.finish()
            recorder.finish()
        with transaction(journaled):
            journal.land(journaled)
        assert journal.waiting(journaled) == 0
        assert _tables(journaled) == _tables(written)
        written.close()
        journaled.close()


def _recorded(path: Path) -> RunRecorder:
    conn = open_connection(path, fold=False)
    recorder = RunRecorder(conn, RunMeta(run_id="session", ts=TS))
    bad = ("test_a.py::test_bad", "fail", 5, "AssertionError: no")
    recorder.append(
        [
            ("test_a.py::test_ok", "pass", 3, None, None, None, None, None, 1, None),
            (*bad, None, None, None, None, 2, None),
        ]
    )
    recorder.finish()
    return recorder


def test_opening_the_history_stores_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    _recorded(path).conn.close()
    raw = sqlite3.connect(path)
    assert raw.execute("SELECT count(*) FROM results").fetchone() == (0,)
    assert journal.waiting(raw) == 2
    raw.close()
    for readonly in (True, False):  # a reader stores them as a writer does
        conn = open_connection(path, readonly=readonly)
        assert conn.execute("SELECT count(*) FROM results").fetchone() == (2,)
        assert journal.waiting(conn) == 0
        conn.close()


def test_a_read_only_history_with_journaled_attempts_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    _recorded(path).conn.close()
    path.chmod(0o444)
    try:
        with pytest.raises(HistoryError) as refused:
            open_connection(path, readonly=True)
    finally:
        path.chmod(0o644)
    assert str(refused.value) == (
        f"{path}: holds 2 attempts recorded by pytest and not stored yet, and is read-only "
        "here; open it once where it can be written (any flaketui command stores them)"
    )
    raw = sqlite3.connect(path)
    assert journal.waiting(raw) == 2
    raw.close()


def test_a_storing_that_fails_midway_keeps_the_journal_whole(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    recorder = _recorded(path)
    conn = recorder.conn
    # A row the results table refuses (its outcome check), after good ones.
    with transaction(conn):
        odd = ("test_a.py::test_odd", "exploded", None, 3, None)
        journal.append(conn, 1, [odd])
    with pytest.raises(sqlite3.IntegrityError), transaction(conn):
        journal.land(conn)
    assert journal.waiting(conn) == 3
    for table in ("results", "test_runs", "tests", "signatures"):
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,), table
    assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'rollup_pending'").fetchall()
    conn.close()


def test_a_journal_that_cannot_be_stored_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    conn = _recorded(path).conn
    with transaction(conn):
        conn.execute('INSERT INTO attempt_journal (run, attempts) VALUES (1, \'[["t", "pass"\')')
    conn.close()
    for readonly in (True, False):
        with pytest.raises(HistoryError, match=r"cannot store the recorded attempts \(malformed"):
            open_connection(path, readonly=readonly)
    raw = sqlite3.connect(path)
    assert raw.execute("SELECT count(*) FROM attempt_journal").fetchone() == (2,)  # kept
    raw.close()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd")
@pytest.mark.parametrize("refusal", ["read-only", "malformed, reading", "malformed, writing"])
def test_a_refused_storing_leaves_the_history_open_nowhere(tmp_path: Path, refusal: str) -> None:
    path = tmp_path / "history.db"
    conn = _recorded(path).conn
    if refusal.startswith("malformed"):
        with transaction(conn):
            conn.execute("INSERT INTO attempt_journal (run, attempts) VALUES (1, '[')")
    conn.close()
    if refusal == "read-only":
        path.chmod(0o444)
    read_header(path, 1)  # the descriptor kept for reading its header counts in both
    before = handles_on(path)
    try:
        with collector_off():
            with pytest.raises(HistoryError, match="recorded"):
                open_connection(path, readonly=refusal != "malformed, writing")
            assert handles_on(path) == before
    finally:
        path.chmod(0o644)


def test_merging_a_recorded_history_takes_its_journaled_attempts(tmp_path: Path) -> None:
    from flaketui.core.history.merge import merge_histories
    from tests.connections import open_history

    source = tmp_path / "artifact.db"
    _recorded(source).conn.close()
    dest = open_history(tmp_path / "desk.db")
    merge_histories(dest, [source])
    rows = dest.conn.execute(
        "SELECT t.test_id, r.outcome FROM results r JOIN tests t ON t.id = r.test ORDER BY 1"
    ).fetchall()
    assert rows == [("test_a.py::test_bad", "fail"), ("test_a.py::test_ok", "pass")]
    dest.conn.close()
