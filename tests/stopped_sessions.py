"""Helpers for tests of diagnose sessions stopped midway: a test that says it runs and then waits
for ever, a history holding it, and the wait for a process's end.

A test waits for the moment a session's test runs (the test opens a FIFO the test process reads),
and for a process's end through a pidfd, which becomes readable when the process ends: never for
a time.
"""

from __future__ import annotations

import os
import select
from datetime import UTC, datetime
from pathlib import Path

from flaketui.core.ingest.writer import RunRecorder
from flaketui.core.models import Attempt, CaseResult, RunMeta
from tests.connections import open_history

CAN_WAIT_FOR_PROCESSES = hasattr(os, "pidfd_open")


def waiting_test(name: str, started: Path, fixture: str = "") -> str:
    """The source of test_NAME: it writes its process id into `started` (a FIFO: the reader
    waits for it) and then waits for ever; `fixture` names a fixture it takes."""
    return (
        "import os, threading\n\n\n"
        f"def test_{name}({fixture}):\n"
        f"    with open({str(started)!r}, 'w') as started:\n"
        "        started.write(str(os.getpid()))\n"
        "    threading.Event().wait()\n"
    )


def history_with_a_failure(path: Path, test_id: str) -> Path:
    """A history of one run in which test_id (of the file its id names) failed."""
    history = open_history(path)
    recorder = RunRecorder(history, RunMeta(run_id="r1", ts=datetime(2026, 11, 1, tzinfo=UTC)))
    test_file = test_id.split("::")[0]
    recorder.add([CaseResult(test_id, test_file, [Attempt("fail", 5, "boom")])])
    recorder.finish()
    history.conn.close()
    return path


def still_running(pid: int, within: float = 30.0) -> bool:
    """Whether the process still runs `within` seconds from now, unless it ends before (a
    process ended but not yet waited for by its parent has ended)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        ended, _, _ = select.select([fd], [], [], within)
    finally:
        os.close(fd)
    return not ended
