"""Deferred runs folded together (rollups.fold_pending) leave every rollup table as a rebuild
from the raw rows leaves it, and every reader's results are the raw scorer's, whether the fold
appends a day's runs as one segment or recomputes the day; ingest defers its runs and folds
them FOLD_RUNS at a time."""

from __future__ import annotations

import random
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flaketui.core.config import Config
from flaketui.core.history.store import transaction
from flaketui.core.ingest import writer as writer_module
from flaketui.core.ingest.writer import RunRecorder, ingest_reports
from flaketui.core.models import Attempt, CaseResult, RunMeta
from flaketui.core.rollups import build as rollups
from flaketui.core.rollups import pending as rollups_pending
from tests.connections import open_connection, open_history
from tests.core.test_rollup_scoring import (
    assert_everything_agrees,
    assert_filtered_agrees,
    assert_maintained,
)

NOW = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)
TESTS = [
    "tests/t.py::test_a",
    "tests/t.py::test_p[1]",
    "tests/t.py::test_p[2]",
    "tests/u.py::test_u",
    "tests/v.py::test_skip",
]
# Appears late: test_u's parent becomes a family with a past.
LATE_MEMBER = "tests/u.py::test_u[late]"


def _outcomes(rng: random.Random) -> list[str]:
    return rng.choice([["pass"], ["pass"], ["fail"], ["fail", "pass"], ["error"]])


def _record(
    conn: sqlite3.Connection, run_id: str, ts: datetime, tests: list[str], rng: random.Random
) -> None:
    """One run a recorder writes and leaves to fold (several batches, some tests skipped)."""
    kind = rng.choice(["main", "main", "pr"])
    meta = RunMeta(
        run_id=run_id,
        suite=rng.choice(["ci", "ci", "nightly"]),
        branch="main" if kind == "main" else "feature/x",
        branch_kind=kind,
        ts=ts,
        commit_sha=f"c{rng.randrange(6)}",
        incident="outage" if rng.random() < 0.05 else None,
        changed_files=["tests/t.py"] if rng.random() < 0.1 else [],
    )
    recorder = RunRecorder(conn, meta, defer_rollups=True)
    for start in range(0, len(tests), 2):
        recorder.add(
            [
                CaseResult(
                    test_id,
                    test_id.split("::")[0],
                    [
                        Attempt("skipped" if "skip" in test_id else outcome, 1, f"boom {n % 2}")
                        for n, outcome in enumerate(_outcomes(rng))
                    ],
                )
                for test_id in tests[start : start + 2]
            ]
        )
    recorder.finish()


def _count_paths(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many days each fold appended as a segment, and how many slices it recomputed."""
    counts = {"appended": 0, "recomputed": 0}
    append_day, fold_day = rollups._append_day, rollups._fold_day

    def appended(*args: Any) -> bool:
        done = append_day(*args)
        counts["appended"] += done
        return done

    def recomputed(*args: Any) -> None:
        counts["recomputed"] += 1
        fold_day(*args)

    monkeypatch.setattr(rollups, "_append_day", appended)
    monkeypatch.setattr(rollups, "_fold_day", recomputed)
    return counts


@pytest.mark.parametrize("seed", range(4))
def test_folds_of_many_runs_equal_a_rebuild(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs folded in chunks: mostly in time order (appended), some late and some extended
    after their fold (recomputed), a parent becoming a family, incidents, edits, skips."""
    counts = _count_paths(monkeypatch)
    rng = random.Random(seed)
    path = tmp_path / "h.db"
    open_history(path).conn.close()
    conn = open_connection(path, fold=False)
    db = open_history(path)
    hours = sorted(rng.uniform(0, 24 * 10) for _ in range(48))
    for index in rng.sample(range(48), 6):  # late arrivals: written out of time order
        hours[index] -= rng.uniform(1, 30)
    start = NOW - timedelta(days=11)
    written: list[tuple[str, datetime]] = []
    index = 0
    while index < len(hours):
        for _ in range(rng.randint(1, 7)):
            if index == len(hours):
                break
            tests = TESTS + ([LATE_MEMBER] if index > 30 else [])
            if written and rng.random() < 0.15:  # more attempts for a run already written
                run_id, ts = rng.choice(written)
                _record(conn, run_id, ts, rng.sample(tests, 2), rng)
            else:
                ts = start + timedelta(hours=hours[index])
                _record(conn, f"r{index}", ts, tests, rng)
                written.append((f"r{index}", ts))
                index += 1
        assert rollups.pending(conn)
        with transaction(conn):
            assert rollups.fold_pending(conn) >= 1
        assert not rollups.pending(conn)
        assert_maintained(db)
    assert_everything_agrees(db, NOW, Config())
    assert_filtered_agrees(db, NOW, Config())
    assert counts["appended"] and counts["recomputed"]


# One run of a segment: its hour of the day, suite, branch kind, incident, and per test its
# attempts (outcome and message), or None when the run did not run it.
_ATTEMPTS = st.lists(
    st.tuples(st.sampled_from(["pass", "fail", "error", "skipped"]), st.sampled_from(["a", "b"])),
    min_size=1,
    max_size=3,
)
_SEGMENT_RUN = st.tuples(
    st.integers(1, 22),
    st.sampled_from(["ci", "ci", "nightly"]),
    st.sampled_from(["main", "main", "pr"]),
    st.booleans(),
    st.lists(_ATTEMPTS | st.none(), min_size=len(TESTS), max_size=len(TESTS)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs=st.lists(_SEGMENT_RUN, min_size=3, max_size=8), earlier=st.booleans())
def test_a_segment_adds_what_a_rebuild_counts(
    runs: list[tuple[int, str, str, bool, list[list[tuple[str, str]] | None]]], earlier: bool
) -> None:
    """A day's waiting runs appended as one segment (one ordered pass over their test-runs)
    leave every rollup table as a rebuild does: several runs of a test in a segment, each with
    its attempts, suite, branch and first failure's message, some runs an incident, after an
    earlier run of the day folded before or not."""
    import tempfile

    day = NOW.replace(hour=0) - timedelta(days=1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "h.db"
        open_history(path).conn.close()
        conn = open_connection(path, fold=False)
        with transaction(conn):
            rollups.rebuild(conn)
        if earlier:  # a run of the day already folded: the segment adds to its rows
            _record(conn, "first", day, TESTS, random.Random(3))
            with transaction(conn):
                rollups.fold_pending(conn)
        for index, (hour, suite, kind, incident, tests) in enumerate(
            sorted(runs, key=lambda run: run[0])
        ):
            meta = RunMeta(
                run_id=f"r{index}",
                suite=suite,
                branch="main" if kind == "main" else "feature/x",
                branch_kind=kind,
                ts=day + timedelta(hours=hour, minutes=index),
                commit_sha=f"c{index % 2}",
                incident="outage" if incident else None,
            )
            recorder = RunRecorder(conn, meta, defer_rollups=True)
            recorder.add(
                CaseResult(test_id, test_id.split("::")[0], [Attempt(o, 1, m) for o, m in got])
                for test_id, got in zip(TESTS, tests, strict=True)
                if got is not None
            )
            recorder.finish()
        with pytest.MonkeyPatch.context() as patch:
            counts = _count_paths(patch)
            with transaction(conn):
                rollups.fold_pending(conn)
        assert counts["recomputed"] == 0  # appended as one segment (when a run has a test)
        db = open_history(path)
        assert_maintained(db)
        assert_everything_agrees(db, NOW, Config())
        db.conn.close()
        conn.close()


def test_a_fold_never_appends_a_run_counted_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run folded, then given more attempts and deferred again, is recomputed: appending it
    would count its first test-runs twice."""
    counts = _count_paths(monkeypatch)
    path = tmp_path / "h.db"
    open_history(path).conn.close()
    conn = open_connection(path, fold=False)
    with transaction(conn):
        rollups.rebuild(conn)  # a deferring recorder leaves a new history without rollups
    rng = random.Random(5)
    _record(conn, "early", NOW - timedelta(hours=5), TESTS, rng)
    _record(conn, "late", NOW - timedelta(hours=2), TESTS, rng)
    with transaction(conn):
        rollups.fold_pending(conn)
    assert counts == {"appended": 1, "recomputed": 0}
    _record(conn, "late", NOW - timedelta(hours=2), TESTS[:3], rng)  # the latest run again
    with transaction(conn):
        rollups.fold_pending(conn)
    assert counts == {"appended": 1, "recomputed": 1}
    db = open_history(path)
    assert_maintained(db)
    assert_everything_agrees(db, NOW, Config())


def _report(path: Path, rng: random.Random) -> Path:
    cases = []
    for number in range(12):
        name = f"test_p[{number % 3}]" if number < 6 else f"test_{number}"
        inner = '<failure message="boom 0x1f"/>' if rng.random() < 0.2 else ""
        cases.append(f'<testcase classname="pkg.m{number % 2}" name="{name}">{inner}</testcase>')
    path.write_text(f'<?xml version="1.0"?>\n<testsuite name="s">{"".join(cases)}</testsuite>\n')
    return path


def test_ingest_folds_its_runs_a_batch_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ingest lands its run whole and lists it; every FOLD_RUNS-th folds those waiting.
    Meanwhile readers score the raw rows, with the raw scorer's results."""
    monkeypatch.setattr(writer_module, "FOLD_RUNS", 3)
    rng = random.Random(2)
    db = open_history(tmp_path / "h.db")
    reader = open_connection(tmp_path / "h.db", readonly=True, fold=False)
    import sqlite_utils

    for index in range(8):
        ts = NOW - timedelta(hours=40 - 4 * index + (6 if index == 5 else 0))  # one late
        meta = RunMeta(run_id=f"r{index}", ts=ts, commit_sha=f"c{index // 2}")
        result = ingest_reports(db, [_report(tmp_path / f"{index}.xml", rng)], meta)
        assert result.results == 12
        assert rollups_pending.pending_runs(db.conn) == (index + 1) % 3
        assert rollups.answers(db.conn, Config()) == ((index + 1) % 3 == 0)
        assert_everything_agrees(sqlite_utils.Database(reader), NOW, Config())
    assert_maintained(db)
    assert_everything_agrees(db, NOW, Config())


def test_the_ingest_command_leaves_its_runs_to_the_same_cadence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`flaketui ingest` folds neither the runs waiting when it starts nor its own (its second
    opening, for outage proposals, neither): every FOLD_RUNS-th command folds them together.
    What a pytest session journaled is still stored before the command's run."""
    import sqlite_utils
    from click.testing import CliRunner

    from flaketui.cli.commands import cli
    from flaketui.core.history import journal

    monkeypatch.setattr(writer_module, "FOLD_RUNS", 3)
    monkeypatch.chdir(tmp_path)  # no pyproject.toml: the default configuration
    path = tmp_path / "h.db"
    conn = open_connection(path, fold=False)
    recorder = RunRecorder(conn, RunMeta(run_id="session", ts=NOW - timedelta(hours=50)))
    recorder.append([("pkg/m0.py::test_t0", "pass", 3, None, None, None, None, None, 1, None)])
    recorder.finish()
    conn.close()
    rng = random.Random(3)
    for index in range(5):
        ts = NOW - timedelta(hours=40 - 4 * index)
        result = CliRunner().invoke(
            cli,
            [
                "ingest", str(path), str(_report(tmp_path / f"{index}.xml", rng)),
                "--run-id", f"r{index}", "--timestamp", ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "--no-detect",
            ],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        reader = open_connection(path, readonly=True, fold=False)
        assert journal.waiting(reader) == 0
        assert reader.execute(
            "SELECT count(*) FROM results JOIN runs r ON r.id = run WHERE r.run_id = 'session'"
        ).fetchone() == (1,)
        assert rollups_pending.pending_runs(reader) == (index + 1) % 3
        assert_everything_agrees(sqlite_utils.Database(reader), NOW, Config())
        reader.close()
    db = open_history(path)  # a reader folds what waits
    assert not rollups_pending.pending(db.conn)
    assert_maintained(db)
    assert_everything_agrees(db, NOW, Config())
    db.conn.close()


def test_a_big_ingest_folds_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "FOLD_RESULTS", 12)
    db = open_history(tmp_path / "h.db")
    meta = RunMeta(run_id="big", ts=NOW - timedelta(hours=1))
    ingest_reports(db, [_report(tmp_path / "big.xml", random.Random(1))], meta)
    assert not rollups.pending(db.conn)
    assert rollups.answers(db.conn, Config())
    assert_maintained(db)


def test_tagging_an_incident_folds_the_waiting_runs_first(tmp_path: Path) -> None:
    """Recomputing a tagged run's day counts the waiting runs of that day (a family pools its
    members' runs): they are folded before, never appended after."""
    from flaketui.core.history.incidents import add_incident

    path = tmp_path / "h.db"
    db = open_history(path)
    conn = open_connection(path, fold=False)
    rng = random.Random(4)
    day = NOW.replace(hour=0) - timedelta(days=1)
    _record(conn, "tagged", day + timedelta(hours=10), [TESTS[0], TESTS[1]], rng)
    with transaction(conn):
        rollups.fold_pending(conn)
    _record(conn, "waiting", day + timedelta(hours=12), [TESTS[2]], rng)  # the other member
    add_incident(db, "outage", start=day + timedelta(hours=9), end=day + timedelta(hours=11))
    assert_maintained(db)
    assert_everything_agrees(db, NOW, Config())


def test_a_waiting_run_pruned_before_its_fold_leaves_nothing_listed(tmp_path: Path) -> None:
    from flaketui.core.history.prune import prune_history

    path = tmp_path / "h.db"
    db = open_history(path)
    conn = open_connection(path, fold=False)
    rng = random.Random(6)
    _record(conn, "old", NOW - timedelta(days=20), TESTS, rng)
    _record(conn, "new", NOW - timedelta(hours=3), TESTS, rng)
    with transaction(conn):
        rollups.fold_pending(conn)
    _record(conn, "old-again", NOW - timedelta(days=19), TESTS, rng)
    prune_history(db, 10, now=NOW)  # removes the waiting run
    assert db.conn.execute("SELECT count(*) FROM runs").fetchone() == (1,)
    with transaction(conn):
        assert rollups.fold_pending(conn) == 0
    assert not rollups.pending(conn)
    assert rollups.answers(db.conn, Config())
    assert_maintained(db)


def _shard_ids(tmp_path: Path, name: str, *cases: tuple[str, str, str]) -> Path:
    from tests.core.junit_shards import file_shard

    return file_shard(tmp_path / name, *cases)


def test_a_later_shard_moving_attempts_counts_no_waiting_run_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's second shard shares a test id with its first: the first's attempts move to
    their file's id, and the day of the id they left is recomputed from the raw rows, which
    pool a waiting run of the same family. That run is folded first, never appended after."""
    monkeypatch.setattr(writer_module, "FOLD_RUNS", 100)  # every run waits
    db = open_history(tmp_path / "h.db")
    day = NOW - timedelta(days=1)
    first = _shard_ids(
        tmp_path, "1.xml", ("a.test.js", "t[1]", "pass"), ("a.test.js", "t[2]", "fail")
    )
    ingest_reports(db, [first], RunMeta(run_id="sharded", ts=day))
    other = _shard_ids(
        tmp_path, "o.xml", ("a.test.js", "t[2]", "fail"), ("a.test.js", "t[3]", "pass")
    )
    ingest_reports(db, [other], RunMeta(run_id="other", ts=day + timedelta(hours=1)))
    second = _shard_ids(tmp_path, "2.xml", ("b.test.js", "t[1]", "fail"))
    ingest_reports(db, [second], RunMeta(run_id="sharded", ts=day))
    assert db.conn.execute(
        "SELECT count(*) FROM tests WHERE test_id LIKE '%.test.js::%'"
    ).fetchone() == (2,)  # the shared id became two tests
    assert_maintained(db)
    assert_everything_agrees(db, NOW, Config())


def _merge_source(tmp_path: Path, hours: list[int]) -> Path:
    """A history of runs `hours` after a day's start, each of the same tests (some failing)."""
    rng = random.Random(7)
    path = tmp_path / "source.db"
    source = open_history(path)
    for hour in hours:
        ingest_reports(
            source,
            [_report(tmp_path / f"s{hour}.xml", rng)],
            RunMeta(run_id=f"s{hour}", ts=NOW - timedelta(days=1, hours=12 - hour)),
        )
    with transaction(source.conn):
        rollups.fold_pending(source.conn)  # opening it to read would fold them
    source.conn.close()
    return path


def test_a_merge_folds_the_sources_runs_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runs a merge copies are folded once, together, in its transaction: a day's runs
    later than the ones there are one appended segment, not a refresh per run."""
    from flaketui.core.history.merge import merge_histories

    source = _merge_source(tmp_path, [3, 4, 5, 6])
    db = open_history(tmp_path / "h.db")
    ingest_reports(
        db,
        [_report(tmp_path / "d.xml", random.Random(8))],
        RunMeta(run_id="there", ts=NOW - timedelta(days=1, hours=12)),
    )
    with transaction(db.conn):
        rollups.fold_pending(db.conn)
    counts = _count_paths(monkeypatch)
    summary = merge_histories(db, [source])
    assert summary.runs_added == 4
    assert counts == {"appended": 1, "recomputed": 0}
    assert not rollups.pending(db.conn)  # exact when the merge commits
    assert_maintained(db)
    assert_everything_agrees(db, NOW, Config())


def test_a_merge_moving_attempts_counts_none_of_its_runs_twice(tmp_path: Path) -> None:
    """A merged run's copy in DEST shares a test id with the source's copy: DEST's attempts
    move while the merge's earlier runs of the day, of the same family, still wait."""
    from flaketui.core.history.merge import merge_histories

    day = NOW - timedelta(days=1)
    source = open_history(tmp_path / "source.db")
    early = _shard_ids(
        tmp_path, "e.xml", ("a.test.js", "t[2]", "fail"), ("a.test.js", "t[3]", "pass")
    )
    ingest_reports(source, [early], RunMeta(run_id="early", ts=day))
    theirs = _shard_ids(tmp_path, "2.xml", ("b.test.js", "t[1]", "fail"))
    ingest_reports(source, [theirs], RunMeta(run_id="sharded", ts=day + timedelta(hours=1)))
    source.conn.close()
    db = open_history(tmp_path / "h.db")
    ours = _shard_ids(
        tmp_path, "1.xml", ("a.test.js", "t[1]", "pass"), ("a.test.js", "t[2]", "fail")
    )
    ingest_reports(db, [ours], RunMeta(run_id="sharded", ts=day + timedelta(hours=1)))
    merge_histories(db, [tmp_path / "source.db"])
    assert db.conn.execute(
        "SELECT count(*) FROM tests WHERE test_id LIKE '%.test.js::%'"
    ).fetchone() == (2,)
    assert_maintained(db)
    assert_everything_agrees(db, NOW, Config())


def test_a_prune_recounting_its_cutoff_day_counts_a_waiting_run_once(tmp_path: Path) -> None:
    """A prune recounts the rollups of its cutoff's day from the raw rows that stay, which
    hold a run of that day still waiting to be folded, of a family whose other member it
    recounts: the run is folded first, never appended after."""
    from flaketui.core.history.prune import prune_history

    path = tmp_path / "h.db"
    db = open_history(path)
    conn = open_connection(path, fold=False)
    rng = random.Random(9)
    cut = NOW - timedelta(days=10)
    _record(conn, "before", cut - timedelta(hours=1), [TESTS[0], TESTS[1]], rng)
    _record(conn, "after", cut + timedelta(hours=1), [TESTS[1]], rng)
    with transaction(conn):
        rollups.fold_pending(conn)
    _record(conn, "waiting", cut + timedelta(hours=2), [TESTS[2]], rng)  # test_p's other member
    prune_history(db, 10, now=NOW)
    assert db.conn.execute("SELECT count(*) FROM runs").fetchone() == (2,)
    assert_maintained(db)
    assert_everything_agrees(db, NOW, Config())
