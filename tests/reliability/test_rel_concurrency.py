"""Concurrency: eight ingests into one history all land; reading while ingest writes never errors;
two skip-file writers never lose an entry."""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from reliability_support import (
    TS,
    integrity,
    junit_case,
    large_report,
    run_counts,
    write_report,
)

from flaketui.cli.commands import cli
from flaketui.core.history.store import open_history
from flaketui.core.ingest.writer import ingest_reports
from flaketui.core.models import RunMeta
from flaketui.core.quarantine.skipfile import (
    SkipEntry,
    SkipFileError,
    read_skip_file,
    update_skip_file,
)
from flaketui.core.scoring.report import build_report
from tests.child_processes import child_context

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
    ctx = child_context()
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


def _ingest_runs_child(db: str, reports: list[str], seen: Any, changed: Any, errors: Any) -> None:
    try:
        for number, report in enumerate(reports):
            # Each run lands once a read has seen the one before: the reads interleave with the
            # runs however long a read takes (one scores raw rows while runs wait to be folded).
            with changed:
                assert changed.wait_for(lambda n=number: seen.value >= n + 1, timeout=120)
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
    ctx = child_context()
    errors = ctx.Queue()
    seen, changed = ctx.Value("i", 0), ctx.Condition()
    proc = ctx.Process(target=_ingest_runs_child, args=(str(db), reports, seen, changed, errors))
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
        with changed:
            seen.value = runs
            changed.notify_all()
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
    ctx = child_context()
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


def test_the_app_loading_while_ingest_writes_never_errors(tmp_path: Path) -> None:
    """The app's own loader (report, lifecycle, skip file) on read-only connections, in a loop,
    while another process ingests runs: no error, and every load sees whole runs only."""
    from flaketui.tui.loaders import Source, load_main

    db = tmp_path / "history.db"
    history = open_history(db)
    seed = write_report(tmp_path / "seed.xml", [junit_case("pkg.seed", "t0")])
    ingest_reports(history, [seed], RunMeta(run_id="seed", ts=TS))
    history.conn.close()
    reports = [
        str(large_report(tmp_path / f"w{n}.xml", READ_RUN_CASES, tag=f"w{n}"))
        for n in range(READ_RUNS)
    ]
    source = Source(path=db, skip_path=tmp_path / ".quarantine.json", requested_now=TS)
    ctx = child_context()
    errors = ctx.Queue()
    landed, changed = ctx.Value("i", 0), ctx.Condition()
    proc = ctx.Process(target=_ingest_runs_child, args=(str(db), reports, landed, changed, errors))
    proc.start()
    seen: list[int] = []
    while proc.is_alive() or not seen:
        data = load_main(source, suite=None, branch_kind=None)
        whole_runs, partial = divmod(len(data.report.tests) - 1, LISTED_PER_RUN)
        assert partial == 0, f"a load saw part of a run: {len(data.report.tests)} tests"
        seen.append(whole_runs)
        with changed:
            landed.value = whole_runs + 1  # the seed's run counts too
            changed.notify_all()
    proc.join(60)
    assert [errors.get() for _ in range(errors.qsize())] == []
    assert proc.exitcode == 0
    print("runs seen by successive app loads:", seen)
    assert seen == sorted(seen)
    assert len(set(seen)) >= 2, "no load happened while runs were landing"
    final = load_main(source, suite=None, branch_kind=None)
    assert len(final.report.tests) == 1 + LISTED_PER_RUN * READ_RUNS


# ---- two `flaketui quarantine` processes started together, many times ---------------

QUARANTINE_ROUNDS = 12
PRESENT_ENTRIES = 300  # a skip file a real repository could have: each update re-reads it all
NOW = "2026-11-02T00:00:00Z"


def _quarantine_cli(db: str, skip: str, test_id: str, barrier: Any, results: Any) -> None:
    barrier.wait(60)
    args = ["quarantine", db, test_id, "--reason", "race", "--skip-file", skip, "--now", NOW]
    result = CliRunner().invoke(cli, args)
    results.put((test_id, result.exit_code, result.output))


@pytest.mark.parametrize("histories", ["one shared history", "a history each"])
def test_two_quarantine_commands_started_together_always_both_land(
    tmp_path: Path, histories: str
) -> None:
    reports = [
        write_report(tmp_path / f"{side}.xml", [junit_case(f"pkg.{side}", "t", "fail")])
        for side in ("left", "right")
    ]
    dbs = [tmp_path / "left.db", tmp_path / "right.db"]
    if histories == "one shared history":
        dbs = [tmp_path / "shared.db"] * 2
    for number, (db, report) in enumerate(zip(dbs, reports, strict=True)):
        history = open_history(db)
        ingest_reports(history, [report], RunMeta(run_id=f"r{number}", ts=TS))
        history.conn.close()
    present = tmp_path / "present.json"
    update_skip_file(
        present,
        lambda entries: entries.update(
            {
                f"tests/old.py::t{n}": SkipEntry(f"tests/old.py::t{n}", reason="old")
                for n in range(PRESENT_ENTRIES)
            }
        ),
    )
    ctx = child_context()
    unreadable: list[str] = []
    for round_no in range(QUARANTINE_ROUNDS):
        skip = tmp_path / f"round{round_no}.json"
        skip.write_bytes(present.read_bytes())
        barrier = ctx.Barrier(2)
        results = ctx.Queue()
        procs = [
            ctx.Process(
                target=_quarantine_cli,
                args=(str(db), str(skip), f"pkg.{side}::t", barrier, results),
            )
            for db, side in zip(dbs, ("left", "right"), strict=True)
        ]
        for proc in procs:
            proc.start()
        while any(proc.is_alive() for proc in procs):  # the file parses at every moment
            try:
                read_skip_file(skip, explicit=True)
            except SkipFileError as exc:
                unreadable.append(exc.message)
        for proc in procs:
            proc.join(60)
        outcomes = sorted(results.get(timeout=5) for _ in procs)
        assert [(tid, code) for tid, code, _ in outcomes] == [
            ("pkg.left::t", 0),
            ("pkg.right::t", 0),
        ], outcomes
        landed = read_skip_file(skip, explicit=True)
        assert landed is not None
        assert {"pkg.left::t", "pkg.right::t"} <= set(landed.entries), f"round {round_no}"
        assert len(landed.entries) == PRESENT_ENTRIES + 2
    assert unreadable == []


def _ingest_one_run(db: str, report: str, run_id: str) -> None:
    history = open_history(db)
    ingest_reports(history, [Path(report)], RunMeta(run_id=run_id, suite="rw", ts=TS))
    history.conn.close()  # the last connection checkpoints the run into the main file


def _ingest_as_its_writer(db: str, report: str, run_id: str) -> None:
    """_ingest_one_run by a user who may write the file (its owner, say), where the reader
    may not: flaketui writes no history whose mode has no write bit, even as root."""
    os.chmod(db, 0o644)
    try:
        _ingest_one_run(db, report, run_id)
    finally:
        os.chmod(db, 0o444)


def test_a_history_the_app_cannot_write_is_read_consistently_while_another_process_writes(
    tmp_path: Path,
) -> None:
    """The app's reader on a mode-444 history, holding its connection while another process
    (its writer: a CI user owning a shared history in real life) ingests a run into it."""
    from flaketui.tui.history_access import reading

    db = tmp_path / "history.db"
    history = open_history(db)
    seed = large_report(tmp_path / "seed.xml", READ_RUN_CASES, tag="seed")
    ingest_reports(history, [seed], RunMeta(run_id="seed", ts=TS))
    history.conn.close()
    db.chmod(0o444)
    ctx = child_context()
    for number in range(3):
        report = large_report(tmp_path / f"w{number}.xml", READ_RUN_CASES, tag=f"w{number}")
        with reading(db) as reader:
            runs = reader.conn.execute("SELECT count(*) FROM runs").fetchone()[0]
            writer = ctx.Process(
                target=_ingest_as_its_writer, args=(str(db), str(report), f"w{number}")
            )
            writer.start()
            writer.join(60)
            assert writer.exitcode == 0
            # Old snapshot or new, but whole and readable.
            assert reader.conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
            results = reader.conn.execute("SELECT count(*) FROM results").fetchone()[0]
            assert results in (READ_RUN_CASES * runs, READ_RUN_CASES * (runs + 1))
