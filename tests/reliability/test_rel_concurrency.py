"""Concurrency: eight ingests into one history all land; reading while ingest writes never errors;
two skip-file writers never lose an entry."""

from __future__ import annotations

import traceback
from collections.abc import Callable
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
    write_report,
)

from flaketui.core.ingest.writer import ingest_reports
from flaketui.core.models import RunMeta
from flaketui.core.report import build_report
from flaketui.core.skipfile import SkipEntry, read_skip_file, update_skip_file
from flaketui.core.store import open_history

INGESTERS = 8
CASES_PER_RUN = 1_500
READ_RUNS = 4
READ_RUN_CASES = 2_000
LISTED_PER_RUN = READ_RUN_CASES * 9 // 10  # large_report skips one case in ten


def _ingest_child(db: str, report: str, run_id: str, barrier: Any, errors: Any) -> None:
    try:
        barrier.wait(60)  # all eight open and write at the same moment
        history = open_history(db)
        ingest_reports(history, [Path(report)], RunMeta(run_id=run_id, suite="par", ts=TS))
        history.conn.close()
    except BaseException:
        errors.put(f"{run_id}: {traceback.format_exc()}")
        raise


@pytest.mark.parametrize("history", ["existing", "new"])
def test_eight_concurrent_ingests_all_land(tmp_path: Path, history: str) -> None:
    db = tmp_path / "history.db"
    if history == "existing":
        open_history(db).conn.close()
    reports = [
        large_report(tmp_path / f"r{n}.xml", CASES_PER_RUN, tag=f"w{n}") for n in range(INGESTERS)
    ]
    ctx = fork_context()
    barrier = ctx.Barrier(INGESTERS)
    errors = ctx.Queue()
    procs = [
        ctx.Process(target=_ingest_child, args=(str(db), str(r), f"run-{n}", barrier, errors))
        for n, r in enumerate(reports)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(180)
    problems = [errors.get() for _ in range(errors.qsize())]
    assert problems == []
    assert [proc.exitcode for proc in procs] == [0] * INGESTERS
    assert integrity(db) == ("ok", [])
    for n in range(INGESTERS):
        assert run_counts(db, f"run-{n}") == (CASES_PER_RUN, CASES_PER_RUN, 1)


def _ingest_runs_child(db: str, reports: list[str], errors: Any) -> None:
    try:
        for number, report in enumerate(reports):
            history = open_history(db)
            ingest_reports(
                history, [Path(report)], RunMeta(run_id=f"w-{number}", suite="rw", ts=TS)
            )
            history.conn.close()
    except BaseException:
        errors.put(traceback.format_exc())
        raise


def test_reading_while_ingest_writes_never_errors(tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    history = open_history(db)
    seed = write_report(tmp_path / "seed.xml", [junit_case("pkg.seed", "t0")])
    ingest_reports(history, [seed], RunMeta(run_id="seed", ts=TS))
    history.conn.close()
    reports = [
        str(large_report(tmp_path / f"w{n}.xml", READ_RUN_CASES, tag=f"w{n}"))
        for n in range(READ_RUNS)
    ]
    ctx = fork_context()
    errors = ctx.Queue()
    proc = ctx.Process(target=_ingest_runs_child, args=(str(db), reports, errors))
    proc.start()
    seen_runs: list[int] = []
    while proc.is_alive() or not seen_runs:
        reader = open_history(db, create=False, readonly=True)
        try:
            reader.conn.execute("BEGIN")  # one snapshot for the report and the count
            report = build_report(reader, now=TS)
            runs = int(reader.conn.execute("SELECT count(*) FROM runs").fetchone()[0])
            reader.conn.execute("ROLLBACK")
        finally:
            reader.conn.close()
        # Each read sees whole runs only: the seed's test plus every non-skipped test per run.
        assert len(report.tests) == 1 + LISTED_PER_RUN * (runs - 1), runs
        seen_runs.append(runs)
    proc.join(60)
    assert [errors.get() for _ in range(errors.qsize())] == []
    assert proc.exitcode == 0
    print("runs seen by successive reads:", seen_runs)
    assert len(seen_runs) >= 3, "the reader never overlapped the writer"
    assert seen_runs == sorted(seen_runs)
    assert len(set(seen_runs)) >= 2, "no read happened while runs were landing"


def _adder(entry: SkipEntry) -> Callable[[dict[str, SkipEntry]], None]:
    """A skip-file mutation adding one entry."""

    def add(entries: dict[str, SkipEntry]) -> None:
        entries[entry.test_id] = entry

    return add


def _skip_writer(path: str, name: str, entries: int, barrier: Any, errors: Any) -> None:
    try:
        barrier.wait(60)
        for number in range(entries):
            test_id = f"tests/test_{name}.py::t{number}"
            update_skip_file(Path(path), _adder(SkipEntry(test_id=test_id, reason=f"by {name}")))
    except BaseException:
        errors.put(f"{name}: {traceback.format_exc()}")
        raise


@pytest.mark.parametrize(("writers", "entries"), [(2, 40), (4, 12)])
def test_concurrent_skip_file_writers_never_lose_an_entry(
    tmp_path: Path, writers: int, entries: int
) -> None:
    path = tmp_path / ".quarantine.json"
    ctx = fork_context()
    barrier = ctx.Barrier(writers)
    errors = ctx.Queue()
    names = [f"w{n}" for n in range(writers)]
    procs = [
        ctx.Process(target=_skip_writer, args=(str(path), name, entries, barrier, errors))
        for name in names
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
    assert [errors.get() for _ in range(errors.qsize())] == []
    assert [proc.exitcode for proc in procs] == [0] * writers
    skip = read_skip_file(path, explicit=True)
    assert skip is not None
    assert sorted(skip.entries) == sorted(
        f"tests/test_{name}.py::t{n}" for name in names for n in range(entries)
    )
