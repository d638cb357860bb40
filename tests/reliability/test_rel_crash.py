"""Crash safety: an ingest or a skip-file write killed at many points leaves the old state or the
new one, never a mix, and never a damaged file.

Kill points are spread evenly over the whole run, with no hook in product code (the children
patch module attributes or set resource limits; the kill itself is SIGKILL or SIGXFSZ):

ingest (40 kills)
- after N test cases have been parsed, N at 12 evenly spaced points of the report: the child
  wraps the writer's case stream and SIGKILLs itself, so the kill lands mid-transaction;
- at 12 evenly spaced byte offsets of the history's write-ahead log (RLIMIT_FSIZE with SIGXFSZ's
  default action kills the child inside the write that crosses the limit);
- at 8 evenly spaced byte offsets of the checkpoint that copies the committed run into the main
  file (the limit is set once the commit has returned): the run must survive whole every time;
- at 8 evenly spaced moments of a measured run (plain SIGKILL from the parent).

skip file (30 kills)
- just before and just after each of the 7 steps of one update (read, temp file, fsync, chmod,
  rename, directory fsync, unlock): 14 deterministic kills, old set before the rename, new after;
- at 8 evenly spaced byte offsets of the new text being written;
- at 8 evenly spaced moments of a writer looping over updates.
After each, the file parses, holds the old set or the new one, and the next writer gets the lock.
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
    integrity,
    junit_case,
    large_report,
    run_child,
    run_counts,
    snapshot,
    write_report,
)

from flaketui.core.history.store import open_history
from flaketui.core.ingest import writer
from flaketui.core.ingest.writer import ingest_reports
from flaketui.core.models import RunMeta
from flaketui.core.quarantine import skipfile
from flaketui.core.quarantine.skipfile import SkipEntry, read_skip_file, update_skip_file
from tests.child_processes import child_context

pytestmark = pytest.mark.slow

CASES = 8_000
EXPECTED_ATTEMPTS = CASES
CASE_POINTS = 12
WAL_BYTE_POINTS = 12
CHECKPOINT_POINTS = 8
TIMED_POINTS = 8
SKIP_BYTE_POINTS = 8
SKIP_TIMED_POINTS = 8
RUN_ID = "big-run"


# ---- children (tests/child_processes.py: each patches what it needs itself) ---------------


def _die_on_file_size(limit: int) -> None:
    """Make a write past `limit` bytes kill this process (Python ignores SIGXFSZ by default)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def _ingest_child(
    db: str, report: str, kill_after_cases: int, fsize_limit: int, checkpoint_limit: int, ready: Any
) -> None:
    if kill_after_cases:
        real_iter_cases = writer.iter_cases

        def dying_iter_cases(
            path: Path, report_format: str | None = None, names: Any = None
        ) -> Iterator[Any]:
            for count, case in enumerate(real_iter_cases(path, report_format, names), start=1):
                if count > kill_after_cases:
                    os.kill(os.getpid(), signal.SIGKILL)
                yield case

        writer.iter_cases = dying_iter_cases
    history = open_history(db)
    if checkpoint_limit:
        history.conn.execute("PRAGMA wal_autocheckpoint = 0")  # no checkpoint inside the commit
    if fsize_limit:
        _die_on_file_size(fsize_limit)
    ready.set()
    ingest_reports(history, [Path(report)], RunMeta(run_id=RUN_ID, suite="big", ts=TS))
    if checkpoint_limit:
        # Committed: now die while the checkpoint copies the run into the main file.
        _die_on_file_size(checkpoint_limit)
        history.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    history.conn.close()


def _ingest_once(
    base: Path,
    work: Path,
    report: Path,
    *,
    kill_after: int = 0,
    fsize: int = 0,
    checkpoint: int = 0,
    delay: float = -1,
) -> tuple[int | None, float]:
    """Copy the base history to work, ingest report there in a child; (exit code, run seconds)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{work}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(base, work)
    args = (str(work), str(report), kill_after, fsize, checkpoint)
    return run_child(_ingest_child, args, delay=delay)


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
        "base_size": base.stat().st_size,
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


def _spread(low: int, high: int, points: int) -> list[int]:
    """`points` evenly spaced values strictly between low and high."""
    return [low + (high - low) * index // (points + 1) for index in range(1, points + 1)]


def test_killed_after_n_cases_leaves_no_trace(setup: dict[str, Any]) -> None:
    outcomes = []
    for index, kill_after in enumerate(_spread(0, CASES, CASE_POINTS)):
        db = setup["folder"] / f"cases-{index}.db"
        code, _ = _ingest_once(setup["base"], db, setup["report"], kill_after=kill_after)
        assert code == -signal.SIGKILL, "the child was not killed: did the writer's parser change?"
        outcomes.append(_check_after_kill(setup, db))
    print(f"kills after N cases: {len(outcomes)} survived: {outcomes}")
    assert outcomes == ["absent"] * CASE_POINTS


def test_killed_inside_a_wal_write_at_spread_byte_offsets(setup: dict[str, Any]) -> None:
    outcomes = []
    # The WAL the run writes is about the size of the full history.
    for index, limit in enumerate(_spread(0, setup["full_size"], WAL_BYTE_POINTS)):
        db = setup["folder"] / f"bytes-{index}.db"
        code, _ = _ingest_once(setup["base"], db, setup["report"], fsize=limit)
        assert code == -signal.SIGXFSZ, code
        outcomes.append(_check_after_kill(setup, db))
    print(f"kills inside WAL writes: {len(outcomes)} survived: {outcomes}")
    # A killed commit may be rolled back or, once its last WAL frame is down, kept whole.
    assert set(outcomes) <= {"absent", "complete"}


def test_killed_inside_the_checkpoint_keeps_the_committed_run(setup: dict[str, Any]) -> None:
    outcomes = []
    spread = _spread(setup["base_size"], setup["full_size"], CHECKPOINT_POINTS)
    for index, limit in enumerate(spread):
        db = setup["folder"] / f"checkpoint-{index}.db"
        code, _ = _ingest_once(setup["base"], db, setup["report"], checkpoint=limit)
        assert code == -signal.SIGXFSZ, code
        outcomes.append(_check_after_kill(setup, db))
    print(f"kills inside the checkpoint: {len(outcomes)} survived: {outcomes}")
    assert outcomes == ["complete"] * CHECKPOINT_POINTS  # committed means kept


def test_killed_at_evenly_spaced_moments(setup: dict[str, Any]) -> None:
    outcomes = []
    for index in range(TIMED_POINTS):
        # The last point is the measured end of the run: the commit, checkpoint and close.
        delay = setup["seconds"] * (index + 1) / TIMED_POINTS
        db = setup["folder"] / f"timed-{index}.db"
        code, _ = _ingest_once(setup["base"], db, setup["report"], delay=delay)
        assert code in (0, -signal.SIGKILL)
        outcomes.append(_check_after_kill(setup, db))
    print(f"kills at timed moments: {len(outcomes)} survived: {outcomes}")
    # Whatever was killed, the next ingest of the same report lands whole.
    history = open_history(db)
    ingest_reports(history, [setup["report"]], RunMeta(run_id=RUN_ID, suite="big", ts=TS))
    history.conn.close()
    assert run_counts(db, RUN_ID) == setup["complete"]
    assert integrity(db) == ("ok", [])


# ---- skip file ---------------------------------------------------------------------------------

BASE_ENTRIES = 500
# The steps of one update, as (module, function): the child dies just before or just after one.
STEPS = [
    (skipfile, "read_skip_file"),
    ("tempfile", "mkstemp"),
    ("os", "fsync"),
    ("os", "chmod"),
    ("os", "replace"),
    ("flaketui.core.atomic", "_fsync_dir"),
    ("filelock", "release"),
]


def _entry(test_id: str) -> SkipEntry:
    return SkipEntry(test_id=test_id, reason="flaky: " + "x" * 200, owner="@team", ticket="T-1")


def _adder(test_id: str) -> Callable[[dict[str, SkipEntry]], None]:
    """A skip-file mutation adding one entry."""

    def add(entries: dict[str, SkipEntry]) -> None:
        entries[test_id] = _entry(test_id)

    return add


def _kill_at(module: Any, name: str, after: bool) -> None:
    """Make the first call of module.name SIGKILL this process, just before or just after it."""
    import importlib

    if isinstance(module, str):
        module = importlib.import_module(module)
    if name == "release":  # filelock's release is a method: patch the lock class
        module, name = skipfile.skip_file_lock(Path("x")).__class__, "release"
    real = getattr(module, name)

    def dying(*args: Any, **kwargs: Any) -> Any:
        if not after:
            os.kill(os.getpid(), signal.SIGKILL)
        result = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(module, name, dying)


def _skip_writer_child(path: str, fsize_limit: int, step: int, after: bool, ready: Any) -> None:
    """Add new/0, new/1, ... one update each, forever (or until killed)."""
    skip_path = Path(path)
    if step >= 0:
        _kill_at(*STEPS[step], after)
    if fsize_limit:
        _die_on_file_size(fsize_limit)
    ready.set()
    number = 0
    while True:
        test_id = f"tests/new.py::t{number:05d}"
        update_skip_file(skip_path, _adder(test_id))
        number += 1


def _check_skip_file(path: Path) -> int:
    """The file parses and holds the base entries plus new/0..new/k-1, and the lock is free;
    return k."""
    skip = read_skip_file(path, explicit=True)
    assert skip is not None
    new = sorted(tid for tid in skip.entries if tid.startswith("tests/new.py::"))
    assert len(skip.entries) - len(new) == BASE_ENTRIES
    assert new == [f"tests/new.py::t{n:05d}" for n in range(len(new))]
    with skipfile.skip_file_lock(path).acquire(timeout=5):
        pass  # a killed writer never leaves the lock held
    return len(new)


@pytest.fixture
def base_skip_file(tmp_path: Path) -> tuple[Path, bytes]:
    """A skip file of BASE_ENTRIES entries, and its bytes."""
    path = tmp_path / ".quarantine.json"
    update_skip_file(
        path,
        lambda entries: entries.update(
            {f"tests/base.py::t{n}": _entry(f"tests/base.py::t{n}") for n in range(BASE_ENTRIES)}
        ),
    )
    return path, path.read_bytes()


def _start_writer(path: Path, *, fsize: int = 0, step: int = -1, after: bool = False) -> Any:
    ctx = child_context()
    ready = ctx.Event()
    proc = ctx.Process(target=_skip_writer_child, args=(str(path), fsize, step, after, ready))
    proc.start()
    assert ready.wait(60)
    return proc


def test_skip_file_writer_killed_at_each_step_of_an_update(
    base_skip_file: tuple[Path, bytes],
) -> None:
    path, base = base_skip_file
    found = {}
    for step, (_module, name) in enumerate(STEPS):
        for after in (False, True):
            path.write_bytes(base)
            proc = _start_writer(path, step=step, after=after)
            proc.join(20)
            if proc.is_alive():  # the step never happened: the writer kept on updating
                proc.kill()
                proc.join()
            assert proc.exitcode == -signal.SIGKILL, (
                f"no kill {'after' if after else 'before'} {name}"
            )
            found[f"{'after' if after else 'before'} {name}"] = _check_skip_file(path)
    print(f"skip-file kills at update steps: {len(found)} survived: {found}")
    renamed = {"after replace", "before _fsync_dir", "after _fsync_dir"}
    renamed |= {"before release", "after release"}
    assert found == {key: int(key in renamed) for key in found}


def test_skip_file_writer_killed_anywhere_leaves_the_old_or_the_new_set(
    base_skip_file: tuple[Path, bytes],
) -> None:
    path, _ = base_skip_file
    size = path.stat().st_size
    started = time.monotonic()
    update_skip_file(path, lambda entries: None)  # one update's read, merge and render
    update_seconds = time.monotonic() - started
    counts = [_check_skip_file(path)]
    # Inside the write of the new text: at evenly spaced byte offsets of the file being written.
    for limit in _spread(0, size, SKIP_BYTE_POINTS):
        proc = _start_writer(path, fsize=limit)
        proc.join(60)
        assert proc.exitcode == -signal.SIGXFSZ
        counts.append(_check_skip_file(path))
    assert counts == [0] * (SKIP_BYTE_POINTS + 1)  # each died inside its first write
    # At evenly spaced moments over the first few updates of a writer looping over updates.
    for index in range(SKIP_TIMED_POINTS):
        proc = _start_writer(path)
        if index == SKIP_TIMED_POINTS - 1:
            # However slow the machine, one writer is killed after it has landed an update:
            # the looping writers do land updates (and never leave the lock held).
            _wait_for_new_entries(path, counts[-1] + 1)
        time.sleep(update_seconds * (1 + 4 * index / SKIP_TIMED_POINTS))
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(60)
        counts.append(_check_skip_file(path))
    print(f"skip-file kills at byte offsets and moments: {len(counts) - 1} survived: {counts}")
    assert counts == sorted(counts)  # entries are only ever added, never lost


def _wait_for_new_entries(path: Path, count: int) -> None:
    """Until the skip file holds `count` new/ entries (a minute at most)."""
    deadline = time.monotonic() + 60
    while True:
        skip = read_skip_file(path, explicit=True)
        assert skip is not None
        if sum(tid.startswith("tests/new.py::") for tid in skip.entries) >= count:
            return
        assert time.monotonic() < deadline, f"no update landed: {count - 1} new entries"
        time.sleep(0.01)
