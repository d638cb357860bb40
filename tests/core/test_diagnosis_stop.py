"""A diagnosis session stopped midway (cancelled, past its time limit, its command stopped) runs
its fixtures' teardowns and leaves no process behind, its pytest-xdist workers included.

Real pytest sessions whose tests wait for ever; each test waits for the moment the tests run (a
FIFO per test the test opens), never for a time.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from flaketui.core.diagnosis.sessions import PytestSessions, SessionResult

CONFTEST = """
import os
from pathlib import Path

import pytest


@pytest.fixture
def server():
    yield
    Path({torn!r}, str(os.getpid())).touch()
"""

HANGING_TEST = """
import os, threading


def test_{name}(server):
    with open({fifo!r}, "w") as started:
        started.write(str(os.getpid()))
    threading.Event().wait()
"""


def _alive(pid: int) -> bool:
    """Whether the process runs (a zombie waiting for its parent counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


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
        test = HANGING_TEST.format(name=name, fifo=str(fifo))
        (root / "tests" / f"test_{name}.py").write_text(test)
    return root, fifos, torn


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process states from /proc")
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
    assert [pid for pid in pids if _alive(pid)] == []
    assert sorted(path.name for path in torn.iterdir()) == sorted(map(str, pids))
