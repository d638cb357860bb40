"""A diagnosis session stopped midway (cancelled, past its time limit or the time budget, its
command stopped) runs its fixtures' teardowns and leaves no process behind, its pytest-xdist
workers included.

Real pytest sessions whose tests wait for ever; each test waits for the moment the tests run (a
FIFO per test the test opens), never for a time.
"""

from __future__ import annotations

import os
import signal
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from flaketui.core.config import load_config
from flaketui.core.diagnosis.experiments import Diagnoser
from flaketui.core.diagnosis.sessions import DiagnoseError, PytestSessions, SessionResult
from flaketui.core.history.store import history_file
from tests.stopped_sessions import (
    CAN_WAIT_FOR_PROCESSES,
    history_with_a_failure,
    still_running,
    waiting_test,
)

CONFTEST = """
import os
from pathlib import Path

import pytest


@pytest.fixture
def server():
    yield
    Path({torn!r}, str(os.getpid())).touch()
"""


@pytest.fixture
def hanging_repo(tmp_path: Path) -> tuple[Path, list[Path], Path]:
    """A repository of two tests that wait for ever, each once it has said it runs; their
    fixture's teardown leaves a file named by its process id in the torn-down folder."""
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    torn = tmp_path / "torn-down"
    torn.mkdir()
    (root / "tests" / "conftest.py").write_text(CONFTEST.format(torn=str(torn)))
    fifos = []
    for name in ("one", "two"):
        fifo = tmp_path / f"{name}-started"
        os.mkfifo(fifo)
        fifos.append(fifo)
        test = waiting_test(name, fifo, fixture="server")
        (root / "tests" / f"test_{name}.py").write_text(test)
    return root, fifos, torn


@pytest.mark.skipif(not CAN_WAIT_FOR_PROCESSES, reason="waits for processes by pidfd")
@pytest.mark.parametrize("workers", [1, 2])
def test_a_cancelled_session_tears_down_and_leaves_no_process(
    hanging_repo: tuple[Path, list[Path], Path], workers: int
) -> None:
    repo, fifos, torn = hanging_repo
    sessions = PytestSessions(repo)
    node_ids = ["tests/test_one.py::test_one", "tests/test_two.py::test_two"][:workers]
    cancel = threading.Event()
    results: list[SessionResult] = []
    session = threading.Thread(
        target=lambda: results.append(sessions.run(node_ids, workers=workers, cancel=cancel))
    )
    session.start()
    pids = []
    try:
        for fifo in fifos[:workers]:  # each opens once its test runs
            with fifo.open() as started:
                pids.append(int(started.read()))
    finally:
        cancel.set()
        session.join(timeout=120)
    assert not session.is_alive()
    assert results[0].cancelled
    assert [pid for pid in pids if still_running(pid)] == []
    assert sorted(path.name for path in torn.iterdir()) == sorted(map(str, pids))


@pytest.mark.skipif(not CAN_WAIT_FOR_PROCESSES, reason="waits for processes by pidfd")
def test_the_time_budget_stops_the_session_that_runs(tmp_path: Path) -> None:
    """`--minutes` ends a session still running when it is up (it once waited for the session's
    own 10-minute limit); that session is neither counted nor stored."""
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    pid_file = tmp_path / "session-pid"  # a plain file: the budget may end before the test
    (repo / "tests" / "test_one.py").write_text(waiting_test("one", pid_file))
    test_id = "tests/test_one.py::test_one"
    db = history_with_a_failure(tmp_path / "history.db", test_id)
    refusals: list[DiagnoseError] = []

    def diagnose() -> None:
        with history_file(db, create=False) as history:
            diagnoser = Diagnoser(
                history,
                PytestSessions(repo),
                runs=2,
                minutes=0.1,
                config=load_config(repo),
                now=datetime(2026, 11, 2, tzinfo=UTC),
            )
            try:
                diagnoser.diagnose(test_id)
            except DiagnoseError as refusal:
                refusals.append(refusal)

    worker = threading.Thread(target=diagnose)
    worker.start()
    worker.join(timeout=120)
    session = int(pid_file.read_text())  # the first session's test ran
    try:
        assert not worker.is_alive()
        assert [r.message for r in refusals] == [
            f"{test_id}: the time budget of 0.1 minutes ran out before any session finished; "
            "nothing was stored"
        ]
        assert not still_running(session)
    finally:
        if still_running(session):
            os.kill(session, signal.SIGKILL)
    with history_file(db, create=False, readonly=True) as history:
        stored = history.conn.execute("SELECT count(*) FROM runs WHERE source = 'diagnose'")
        assert stored.fetchone()[0] == 0
