"""A command stopped by SIGTERM or SIGHUP cleans up, then ends by that signal.

Real processes: the console script's entry point, sent real signals. Each test waits for the
moment it stops the command at (a FIFO the command's work opens), never for a time.
"""

from __future__ import annotations

import fcntl
import os
import select
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from flaketui.cli.stopping import unwinding_on_stop
from tests.stopped_sessions import (
    CAN_WAIT_FOR_PROCESSES,
    history_with_a_failure,
    still_running,
    waiting_test,
)

VICTIM = "tests/test_a.py::test_one"
SAMPLE = Path(__file__).parents[2] / "sample_data" / "history.db"
LEAVE_FULL_SCREEN = b"\x1b[?1049l"  # the terminal's alternate screen left

# Where a block stopped by a signal says it cleaned up.
STOPPED_BLOCK = """
import os, signal, sys
from flaketui.cli.stopping import unwinding_on_stop

# As a terminal starts it (a test may run under nohup, which ignores SIGHUP), or as nohup does.
start = signal.SIG_IGN if sys.argv[2] == "ignored" else signal.SIG_DFL
signal.signal(signal.SIGHUP, start)
with unwinding_on_stop():
    try:
        os.kill(os.getpid(), getattr(signal, sys.argv[1]))
        print("went on", flush=True)
    finally:
        print("cleaned up", flush=True)
print("after the block", flush=True)
"""


def _run_block(name: str, start: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", STOPPED_BLOCK, name, start],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP"])
def test_a_stop_signal_runs_the_cleanup_then_ends_the_process_by_it(name: str) -> None:
    done = _run_block(name, "default")
    assert done.stdout == "cleaned up\n"
    assert done.returncode == -getattr(signal, name)
    assert done.stderr == ""


def test_a_second_signal_during_the_cleanup_ends_the_process_at_once() -> None:
    code = STOPPED_BLOCK.replace(
        'print("cleaned up", flush=True)',
        'os.kill(os.getpid(), signal.SIGTERM)\n        print("cleaned up", flush=True)',
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "SIGTERM", "default"], capture_output=True, text=True
    )
    assert done.stdout == ""
    assert done.returncode == -signal.SIGTERM


def test_a_signal_ignored_at_the_start_stays_ignored() -> None:
    """`nohup flaketui ...` keeps running when its terminal closes."""
    done = _run_block("SIGHUP", "ignored")
    assert done.stdout == "went on\ncleaned up\nafter the block\n"
    assert done.returncode == 0


# A command stopped while it reads a query's rows one by one: the unwound frames still hold
# the query's cursor when the history is closed.
STOPPED_READING = """
import os, signal, sys
from pathlib import Path
from flaketui.cli.stopping import unwinding_on_stop
from flaketui.core.history.store import history_file, transaction

def rows(conn):
    cursor = conn.execute("SELECT id FROM runs UNION ALL SELECT id FROM runs")
    for row in cursor:
        os.kill(os.getpid(), signal.SIGTERM)
        yield row

with unwinding_on_stop():
    with history_file(Path(sys.argv[1])) as history:
        with transaction(history.conn):
            history.conn.execute("UPDATE runs SET ci_url = 'kept'")
        with transaction(history.conn):
            history.conn.execute("UPDATE runs SET ci_url = 'rolled back'")
            list(rows(history.conn))
"""


def test_a_command_stopped_amid_a_query_closes_the_history(tmp_path: Path) -> None:
    """The history's -wal and -shm files go, as when the command ends: the last connection
    to close removes them, and a connection whose query was cut short closes only once the
    query's cursor is released."""
    history = history_with_a_failure(tmp_path / "history.db", VICTIM)
    done = subprocess.run(
        [sys.executable, "-c", STOPPED_READING, str(history)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (-signal.SIGTERM, "")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["history.db"]
    with sqlite3.connect(history) as conn:
        assert conn.execute("SELECT ci_url FROM runs").fetchall() == [("kept",)]
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()


# The console script, stopped by SIGTERM at the first test-run a fold of rollups adds up.
STOPPED_FOLD = """
import os, signal, sys
from flaketui.cli import main
from flaketui.core.rollups import sequences

unit = sequences.add_unit

def add_unit(*args):
    sequences.add_unit = unit
    os.kill(os.getpid(), signal.SIGTERM)
    return unit(*args)

sequences.add_unit = add_unit
sys.argv = ["flaketui", *sys.argv[1:]]
main()
"""

REPORT = """<testsuite name="unit" tests="2" timestamp="2026-11-01T{hour}:00:00">
<testcase classname="tests.test_a" name="test_one" file="tests/test_a.py"/>
<testcase classname="tests.test_a" name="test_two" file="tests/test_a.py">
<failure message="boom">boom</failure></testcase></testsuite>
"""


def test_a_backfill_stopped_while_it_folds_ends_by_the_signal(tmp_path: Path) -> None:
    """The fold of the runs an ingest left waiting, which a backfill makes as it opens the
    history, is cut short by the signal: the history is left as it was and the command ends
    by the signal (the error of the fold's clean-up once stood in for it: the opening carried
    on without the fold, and the backfill landed its runs)."""
    reports = tmp_path / "reports"
    reports.mkdir()
    for hour in ("10", "11"):
        (reports / f"{hour}.xml").write_text(REPORT.format(hour=hour))
    manifest = reports / "runs.jsonl"
    manifest.write_text('{"file": "11.xml", "run_id": "r2"}\n')
    folder = tmp_path / "history"
    folder.mkdir()
    history = folder / "history.db"
    ingest = [sys.executable, "-m", "flaketui", "ingest", str(history)]
    subprocess.run([*ingest, str(reports / "10.xml"), "--no-detect", "--run-id", "r1"], check=True)
    done = subprocess.run(
        [sys.executable, "-c", STOPPED_FOLD, "ingest", str(history), "--manifest", str(manifest)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (-signal.SIGTERM, "", "")
    assert [path.name for path in folder.iterdir()] == ["history.db"]
    with sqlite3.connect(history) as conn:
        assert conn.execute("SELECT run_id FROM runs").fetchall() == [("r1",)]
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()


@pytest.fixture
def waiting_repo(tmp_path: Path) -> tuple[Path, Path]:
    """A repository whose test writes its process id into a FIFO, then waits for ever."""
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_a.py").write_text(waiting_test("one", fifo))
    return root, fifo


def _ours(temp: Path) -> list[str]:
    """flaketui's entries in the temporary folder (the killed session's plugins may leave
    theirs)."""
    return [path.name for path in temp.iterdir() if path.name.startswith("flaketui-")]


@pytest.mark.skipif(not CAN_WAIT_FOR_PROCESSES, reason="waits for processes by pidfd")
def test_a_stopped_diagnosis_leaves_no_session_running_and_no_scratch_folder(
    tmp_path: Path, waiting_repo: tuple[Path, Path]
) -> None:
    """SIGTERM, as a cancelled CI job sends it (SIGHUP takes the same path, tested above: a
    test run under nohup could not send it here)."""
    stop = signal.SIGTERM
    repo, fifo = waiting_repo
    history = history_with_a_failure(tmp_path / "history.db", VICTIM)
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    command = [sys.executable, "-m", "flaketui", "diagnose", str(history), VICTIM]
    with subprocess.Popen(
        [*command, "--repo", str(repo), "--runs", "2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as flaketui:
        with fifo.open() as started:  # opens once the first session's test runs
            session = int(started.read())
        try:
            assert _ours(temp) != []
            flaketui.send_signal(stop)
            out, err = flaketui.communicate(timeout=60)
            assert flaketui.returncode == -stop
            assert (out, err) == ("", "")
            assert not still_running(session)
            assert _ours(temp) == []
        finally:
            if still_running(session, within=0):
                os.kill(session, signal.SIGKILL)


def _read_until(fd: int, seen: bytearray, done: Callable[[bytes], bool]) -> None:
    """Read the terminal into `seen` until done(seen) or the terminal closes."""
    while not done(bytes(seen)):
        ready, _, _ = select.select([fd], [], [], 60)
        assert ready, f"nothing more drawn; so far: {bytes(seen[-500:])!r}"
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:  # the terminal's only process has gone
            return
        if not chunk:
            return
        seen += chunk


@contextmanager
def _app_on_terminal(history: Path, cwd: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The app on `history`, on a pseudo-terminal of 80x24: the process and the terminal."""
    fd, terminal = os.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    try:
        app = subprocess.Popen(
            [sys.executable, "-m", "flaketui", str(history)],
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            cwd=cwd,
            env={**os.environ, "TERM": "xterm-256color", "XDG_CACHE_HOME": str(cwd)},
            start_new_session=True,
        )
    finally:
        os.close(terminal)
    try:
        yield app, fd
    finally:
        app.kill()
        app.wait()
        os.close(fd)


def test_the_app_stopped_by_a_signal_gives_the_terminal_back(tmp_path: Path) -> None:
    """The app leaves its full-screen mode (and the keyboard modes it set) as when it quits."""
    stop = signal.SIGTERM
    history = tmp_path / "history.db"
    shutil.copy(SAMPLE, history)
    seen = bytearray()
    with _app_on_terminal(history, tmp_path) as (app, fd):
        _read_until(fd, seen, lambda drawn: b"Quarantine" in drawn)
        drawn = len(seen)
        app.send_signal(stop)
        # Read on until the terminal closes: the app draws on meanwhile, and on a terminal no
        # one reads its writes, and so its exit, would wait for ever.
        _read_until(fd, seen, lambda drawn: False)
        assert app.wait(timeout=60) == -stop
    assert LEAVE_FULL_SCREEN in seen[drawn:]


@pytest.mark.skipif(not CAN_WAIT_FOR_PROCESSES, reason="waits for processes by pidfd")
def test_the_app_quit_during_a_diagnose_ends_with_its_session(
    tmp_path: Path, waiting_repo: tuple[Path, Path]
) -> None:
    """Quitting cancels the detail's diagnose (its session once kept the quit app's process
    running, on a blank terminal, for as long as the session ran)."""
    repo, fifo = waiting_repo
    history = history_with_a_failure(tmp_path / "history.db", VICTIM)
    seen = bytearray()
    with _app_on_terminal(history, repo) as (app, fd):
        _read_until(fd, seen, lambda drawn: b"Quarantine" in drawn)
        os.write(fd, b"4")  # every test: this one has failed once only
        _read_until(fd, seen, lambda drawn: b"test_one" in drawn)
        os.write(fd, b"\r")
        _read_until(fd, seen, lambda drawn: b"Diagnose" in drawn)
        os.write(fd, b"D")
        with fifo.open() as started:  # opens once the session's test runs
            session = int(started.read())
        try:
            os.write(fd, b"\x11")  # ctrl+q
            _read_until(fd, seen, lambda drawn: False)
            assert app.wait(timeout=60) == 0
            assert not still_running(session)
        finally:
            if still_running(session, within=0):
                os.kill(session, signal.SIGKILL)


def test_outside_the_main_thread_the_signals_are_left_as_they_are() -> None:
    """The console script's entry point called from another thread runs, unwinding nothing."""
    ran: list[object] = []

    def block() -> None:
        before = signal.getsignal(signal.SIGTERM)
        with unwinding_on_stop():
            ran.append(signal.getsignal(signal.SIGTERM) is before)

    thread = threading.Thread(target=block)
    thread.start()
    thread.join()
    assert ran == [True]


# The console script with Ctrl-C's handler, which a suite run in the background lacks.
WITH_CTRL_C = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'flaketui'; from flaketui.cli import main; main()"
)


@pytest.mark.skipif(not CAN_WAIT_FOR_PROCESSES, reason="waits for processes by pidfd")
def test_ctrl_c_during_a_diagnosis_says_so_on_a_line_of_its_own(
    tmp_path: Path, waiting_repo: tuple[Path, Path]
) -> None:
    """The error follows the progress line shown on a terminal, not on the end of it."""
    repo, fifo = waiting_repo
    history = history_with_a_failure(tmp_path / "history.db", VICTIM)
    fd, terminal = os.openpty()
    try:
        flaketui = subprocess.Popen(
            [sys.executable, "-c", WITH_CTRL_C, "diagnose", str(history), VICTIM],
            cwd=repo,
            stdout=subprocess.DEVNULL,
            stderr=terminal,
        )
    finally:
        os.close(terminal)
    try:
        with fifo.open() as started:  # opens once the first session's test runs
            session = int(started.read())
        flaketui.send_signal(signal.SIGINT)
        assert flaketui.wait(timeout=60) == 1
        seen = bytearray()
        _read_until(fd, seen, lambda drawn: False)
    finally:
        flaketui.kill()
        flaketui.wait()
        os.close(fd)
    lines = bytes(seen).decode().replace("\r\n", "\n").split("\n")
    assert lines[-2:] == ["Error: interrupted", ""]
    assert lines[-3].startswith("\r[0/")  # the progress line, ended
    assert not still_running(session)
