"""Crash safety of a deferred fold: a fold killed midway leaves the rollups as they were and
every deferred run still listed, so readers keep scoring the raw rows, and the next fold
completes it exactly.

The child folds runs a recorder deferred and SIGKILLs itself just after the first, a middle and
the last step of the fold (a day appended or recomputed, inside the fold's one transaction), or
just before its commit. An ingest killed after its run's commit, before or inside the fold that
follows it, leaves the run whole and listed.
"""

from __future__ import annotations

import os
import random
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from reliability_support import integrity, run_child

from flaketui.core.config import Config
from flaketui.core.history import store
from flaketui.core.history.store import transaction
from flaketui.core.rollups import build as rollups
from tests.connections import open_connection, open_history
from tests.core.test_rollup_scoring import (
    _deferred_run,
    _snapshot,
    _write_history,
    assert_everything_agrees,
    assert_filtered_agrees,
    assert_maintained,
)

pytestmark = pytest.mark.slow

NOW = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)
DEFERRED = 5


def _history(path: Path) -> None:
    """Folded runs, then DEFERRED runs a recorder left to fold."""
    _write_history(open_history(path), NOW - timedelta(days=2), 12, "old")
    writer = open_connection(path, fold=False)
    rng = random.Random(7)
    for index in range(DEFERRED):
        # One a day, some later than every folded run of their day (appended), some not.
        _deferred_run(writer, f"deferred{index}", NOW - timedelta(hours=100 - 22 * index), rng)
    writer.close()


def _fold_child(path: str, kill_after: int, ready: Any) -> None:
    """Fold, SIGKILLed after `kill_after` steps (0: at the commit)."""
    conn = store.open_connection(path, fold=False)  # a child's: its process ends with it
    calls = [0]

    def step(real: Any) -> Any:
        def then_maybe_die(*args: Any) -> Any:
            done = real(*args)
            calls[0] += 1
            if calls[0] == kill_after:
                os.kill(os.getpid(), signal.SIGKILL)
            return done

        return then_maybe_die

    rollups._append_day = step(rollups._append_day)  # type: ignore[attr-defined]
    rollups._fold_day = step(rollups._fold_day)  # type: ignore[attr-defined]
    ready.set()
    conn.execute("BEGIN IMMEDIATE")
    rollups.fold_pending(conn)
    if kill_after == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    conn.execute("COMMIT")  # never reached


@pytest.mark.parametrize("kill_after", [1, DEFERRED // 2 + 1, DEFERRED, 0])
def test_a_fold_killed_midway_changes_nothing(tmp_path: Path, kill_after: int) -> None:
    path = tmp_path / "h.db"
    _history(path)
    conn = open_connection(path, fold=False)
    before = _snapshot(open_history_no_fold(path))
    listed = conn.execute(f"SELECT run FROM {rollups.PENDING_TABLE} ORDER BY run").fetchall()
    assert len(listed) == DEFERRED
    code, _ = run_child(_fold_child, (str(path), kill_after))
    assert code == -signal.SIGKILL, "the child was not killed inside the fold"
    assert integrity(path)[0] == "ok"
    # Rolled back: every run still waits, the rollup rows are those of before.
    assert conn.execute(f"SELECT run FROM {rollups.PENDING_TABLE} ORDER BY run").fetchall() == (
        listed
    )
    assert _snapshot(open_history_no_fold(path)) == before
    reader = open_history_no_fold(path)
    assert not rollups.answers(reader.conn, Config())
    assert_everything_agrees(reader, NOW, Config())
    # The next fold completes it: the rollups equal a rebuild and answer exactly again.
    with transaction(conn):
        assert rollups.fold_pending(conn) == DEFERRED
    db = open_history(path)
    assert rollups.answers(db.conn, Config())
    assert_everything_agrees(db, NOW, Config())
    assert_filtered_agrees(db, NOW, Config())
    assert_maintained(db)


def open_history_no_fold(path: Path) -> Any:
    """The history as a reader that may not write sees it (nothing folded on open)."""
    import sqlite_utils

    return sqlite_utils.Database(open_connection(path, fold=False))


def _ingest_child(path: str, report: str, kill_at: str, stage: bool, ready: Any) -> None:
    """Ingest one run with FOLD_RUNS 1, SIGKILLed as its fold starts or after its first step
    (`stage`: its per-test rows left waiting, as the command leaves them, so that the fold
    killed has filed them)."""
    from flaketui.core.ingest import writer
    from flaketui.core.ingest.writer import ingest_reports
    from flaketui.core.models import RunMeta

    writer.FOLD_RUNS = 1  # type: ignore[misc]
    if kill_at == "start":
        real = rollups.fold_pending

        def die_first(*args: Any) -> Any:
            os.kill(os.getpid(), signal.SIGKILL)
            return real(*args)

        rollups.fold_pending = die_first  # type: ignore[assignment]
    else:
        real_append = rollups._append_day

        def die_after(*args: Any) -> Any:
            real_append(*args)
            os.kill(os.getpid(), signal.SIGKILL)

        rollups._append_day = die_after  # type: ignore[attr-defined]
    ready.set()
    conn = store.open_connection(path, fold=False)  # a child's: its process ends with it
    meta = RunMeta(run_id="killed", ts=NOW - timedelta(hours=2))
    ingest_reports(conn, [Path(report)], meta, stage=stage)


@pytest.mark.parametrize("stage", [False, True], ids=["direct", "staged"])
@pytest.mark.parametrize("kill_at", ["start", "step"])
def test_an_ingest_killed_in_its_fold_leaves_its_run_whole_and_listed(
    tmp_path: Path, kill_at: str, stage: bool
) -> None:
    path = tmp_path / "h.db"
    _history(path)
    report = tmp_path / "r.xml"
    cases = "".join(
        f'<testcase classname="tests.test_x" name="test_{n}">'
        + ("<failure message='boom'/>" if n % 4 == 0 else "")
        + "</testcase>"
        for n in range(30)
    )
    report.write_text(f"<testsuite>{cases}</testsuite>")
    before = _snapshot(open_history_no_fold(path))
    code, _ = run_child(_ingest_child, (str(path), str(report), kill_at, stage))
    assert code == -signal.SIGKILL, "the child was not killed inside the fold"
    assert integrity(path)[0] == "ok"
    conn = open_connection(path, fold=False)
    run = conn.execute("SELECT id FROM runs WHERE run_id = 'killed'").fetchone()[0]
    assert conn.execute("SELECT count(*) FROM results WHERE run = ?", (run,)).fetchone() == (30,)
    # Its per-test rows all in one table, where its own commit left them.
    where = {
        table: conn.execute(f"SELECT count(*) FROM {table} WHERE run = ?", (run,)).fetchone()[0]
        for table in ("test_runs", "test_runs_waiting")
    }
    assert where == (
        {"test_runs": 0, "test_runs_waiting": 30}
        if stage
        else {"test_runs": 30, "test_runs_waiting": 0}
    )
    listed = {pk for (pk,) in conn.execute(f"SELECT run FROM {rollups.PENDING_TABLE}")}
    assert run in listed and len(listed) == DEFERRED + 1  # its run waits beside the others
    assert _snapshot(open_history_no_fold(path)) == before
    reader = open_history_no_fold(path)
    assert not rollups.answers(reader.conn, Config())
    assert_everything_agrees(reader, NOW, Config())
    db = open_history(path)  # the next opening folds everything waiting
    assert not rollups.pending(db.conn)
    assert_everything_agrees(db, NOW, Config())
    assert_maintained(db)
