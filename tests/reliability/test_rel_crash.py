"""Crash safety: an ingest or a skip-file write killed at many points leaves the old state or the
new one, never a mix, and never a damaged file.

Kill points are spread over the whole run three ways, with no hook in product code:
- after N test cases have been parsed (N evenly spaced over the report): the child wraps the
  writer's case stream and SIGKILLs itself, so the kill lands mid-transaction deterministically;
- at evenly spaced byte offsets of the files being written (RLIMIT_FSIZE with SIGXFSZ's default
  action kills the child inside the write that crosses the limit): the commit and checkpoint of
  the history, and the write of the skip file's new text;
- at evenly spaced delays over a measured run (plain SIGKILL from the parent).
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from reliability_support import (
    TS,
    fork_context,
    integrity,
    junit_case,
    large_report,
    run_counts,
    snapshot,
    write_report,
)

from flaketui.core.ingest import writer
from flaketui.core.ingest.writer import ingest_reports
from flaketui.core.models import RunMeta
from flaketui.core.skipfile import SkipEntry, read_skip_file, update_skip_file
from flaketui.core.store import open_history

pytestmark = pytest.mark.slow

CASES = 8_000
EXPECTED_ATTEMPTS = CASES
POINTS_PER_KIND = 6
RUN_ID = "big-run"


# ---- children (forked: they inherit the imports, so each costs milliseconds) ---------------


def _die_on_file_size(limit: int) -> None:
    """Make a write past `limit` bytes kill this process (Python ignores SIGXFSZ by default)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def _ingest_child(
    db: str, report: str, kill_after_cases: int, fsize_limit: int, ready: Any
) -> None:
    if kill_after_cases:
        real_iter_cases = writer.iter_cases

        def dying_iter_cases(path: Path) -> Iterator[Any]:
            for count, case in enumerate(real_iter_cases(path), start=1):
                if count > kill_after_cases:
                    os.kill(os.getpid(), signal.SIGKILL)
                yield case

        writer.iter_cases = dying_iter_cases
    history = open_history(db)
    if fsize_limit:
        _die_on_file_size(fsize_limit)
    ready.set()
    ingest_reports(history, [Path(report)], RunMeta(run_id=RUN_ID, suite="big", ts=TS))
    history.conn.close()


def _ingest_once(
    base: Path, work: Path, report: Path, *, kill_after: int = 0, fsize: int = 0, delay: float = -1
) -> tuple[int | None, float]:
    """Copy the base history to work, ingest report there in a child; (exit code, run seconds)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{work}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(base, work)
    ctx = fork_context()
    ready = ctx.Event()
    proc = ctx.Process(
        target=_ingest_child, args=(str(work), str(report), kill_after, fsize, ready)
    )
    proc.start()
    assert ready.wait(60)
    started = time.monotonic()
    if delay >= 0:
        time.sleep(delay)
        if proc.is_alive():
            os.kill(proc.pid, signal.SIGKILL)
    proc.join(120)
    return proc.exitcode, time.monotonic() - started


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A base history holding one earlier run, the large report, and one uninterrupted ingest."""
    folder = tmp_path_factory.mktemp("crash")
    base = folder / "base.db"
    earlier = write_report(
        folder / "earlier.xml",
        [junit_case("pkg.old", f"t{n}", "fail" if n % 3 else "pass") for n in range(60)],
    )
    history = open_history(base)
    ingest_reports(history, [earlier], RunMeta(run_id="earlier", ts=TS))
    history.conn.close()
    report = large_report(folder / "big.xml", CASES)
    full = folder / "full.db"
    code, seconds = _ingest_once(base, full, report)
    assert code == 0
    counts = run_counts(full, RUN_ID)
    assert counts == (EXPECTED_ATTEMPTS, CASES, 1)
    return {
        "folder": folder,
        "base": base,
        "base_rows": snapshot(base),
        "report": report,
        "seconds": seconds,
        "full_size": full.stat().st_size,
        "complete": counts,
    }


def _check_after_kill(setup: dict[str, Any], db: Path) -> str:
    """The history is intact and holds the whole run or none of it; which one."""
    assert integrity(db) == ("ok", [])
    counts = run_counts(db, RUN_ID)
    rows = snapshot(db)
    if counts is None:
        assert rows == setup["base_rows"], "a killed ingest left rows behind"
        return "absent"
    assert counts == setup["complete"], f"partial run: {counts}"
    for table, before in setup["base_rows"].items():
        if table != "tests":  # the big run adds tests; the earlier ones stay as they were
            assert before <= rows[table], table
    return "complete"


def test_killed_after_n_cases_leaves_no_trace(setup: dict[str, Any]) -> None:
    outcomes = []
    for index in range(1, POINTS_PER_KIND + 1):
        kill_after = CASES * index // (POINTS_PER_KIND + 1)
        db = setup["folder"] / f"cases-{index}.db"
        code, _ = _ingest_once(setup["base"], db, setup["report"], kill_after=kill_after)
        assert code == -signal.SIGKILL
        outcomes.append(_check_after_kill(setup, db))
    print("kill outcomes:", outcomes)
    assert outcomes == ["absent"] * POINTS_PER_KIND


def test_killed_inside_a_write_at_spread_byte_offsets(setup: dict[str, Any]) -> None:
    outcomes = []
    for index in range(1, POINTS_PER_KIND + 1):
        limit = setup["full_size"] * index // (POINTS_PER_KIND + 1)
        db = setup["folder"] / f"bytes-{index}.db"
        code, _ = _ingest_once(setup["base"], db, setup["report"], fsize=limit)
        assert code == -signal.SIGXFSZ, code
        outcomes.append(_check_after_kill(setup, db))
    # A killed commit may be rolled back or, once its last WAL frame is down, kept whole.
    print("kill outcomes:", outcomes)
    assert set(outcomes) <= {"absent", "complete"}


def test_killed_at_evenly_spaced_moments(setup: dict[str, Any]) -> None:
    outcomes = []
    for index in range(POINTS_PER_KIND):
        # The last point is the measured end of the run: the commit, checkpoint and close.
        delay = setup["seconds"] * (index + 1) / POINTS_PER_KIND
        db = setup["folder"] / f"timed-{index}.db"
        code, _ = _ingest_once(setup["base"], db, setup["report"], delay=delay)
        assert code in (0, -signal.SIGKILL)
        outcomes.append(_check_after_kill(setup, db))
    print("kill outcomes:", outcomes)
    # Whatever was killed, the next ingest of the same report lands whole.
    history = open_history(db)
    ingest_reports(history, [setup["report"]], RunMeta(run_id=RUN_ID, suite="big", ts=TS))
    history.conn.close()
    assert run_counts(db, RUN_ID) == setup["complete"]
    assert integrity(db) == ("ok", [])


# ---- skip file ---------------------------------------------------------------------------------

BASE_ENTRIES = 500


def _entry(test_id: str) -> SkipEntry:
    return SkipEntry(test_id=test_id, reason="flaky: " + "x" * 200, owner="@team", ticket="T-1")


def _adder(test_id: str) -> Callable[[dict[str, SkipEntry]], None]:
    """A skip-file mutation adding one entry."""

    def add(entries: dict[str, SkipEntry]) -> None:
        entries[test_id] = _entry(test_id)

    return add


def _skip_writer_child(path: str, fsize_limit: int, ready: Any) -> None:
    """Add new/0, new/1, ... one update each, forever (or until killed)."""
    skip_path = Path(path)
    if fsize_limit:
        _die_on_file_size(fsize_limit)
    ready.set()
    number = 0
    while True:
        test_id = f"tests/new.py::t{number:05d}"
        update_skip_file(skip_path, _adder(test_id))
        number += 1


def _check_skip_file(path: Path) -> int:
    """The file parses and holds the base entries plus new/0..new/k-1; return k."""
    skip = read_skip_file(path, explicit=True)
    assert skip is not None
    new = sorted(tid for tid in skip.entries if tid.startswith("tests/new.py::"))
    assert len(skip.entries) - len(new) == BASE_ENTRIES
    assert new == [f"tests/new.py::t{n:05d}" for n in range(len(new))]
    return len(new)


def test_skip_file_writer_killed_anywhere_leaves_the_old_or_the_new_set(tmp_path: Path) -> None:
    path = tmp_path / ".quarantine.json"
    update_skip_file(
        path,
        lambda entries: entries.update(
            {f"tests/base.py::t{n}": _entry(f"tests/base.py::t{n}") for n in range(BASE_ENTRIES)}
        ),
    )
    size = path.stat().st_size
    started = time.monotonic()
    update_skip_file(path, lambda entries: None)  # one update's read, merge and render
    update_seconds = time.monotonic() - started
    ctx = fork_context()
    counts = [_check_skip_file(path)]
    # Inside the write of the new text: at evenly spaced byte offsets of the file being written.
    for index in range(1, POINTS_PER_KIND + 1):
        ready = ctx.Event()
        limit = size * index // (POINTS_PER_KIND + 1)
        proc = ctx.Process(target=_skip_writer_child, args=(str(path), limit, ready))
        proc.start()
        proc.join(60)
        assert proc.exitcode == -signal.SIGXFSZ
        counts.append(_check_skip_file(path))
    assert counts == [0] * (POINTS_PER_KIND + 1)  # each died inside its first write
    # At evenly spaced moments over the first few updates of a writer looping over updates.
    for index in range(POINTS_PER_KIND):
        ready = ctx.Event()
        proc = ctx.Process(target=_skip_writer_child, args=(str(path), 0, ready))
        proc.start()
        assert ready.wait(60)
        time.sleep(update_seconds * (1 + 6 * index / POINTS_PER_KIND))
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(60)
        counts.append(_check_skip_file(path))
    print("skip-file entries after each kill:", counts)
    assert counts == sorted(counts)  # entries are only ever added, never lost
    assert counts[-1] > 0  # the looping writers did land updates (and never left the lock held)
