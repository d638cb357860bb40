"""Crash safety of a backfill, which commits runs in batches (a savepoint per run): killed at
any moment or after any number of parsed cases, the history is intact, every run in it is whole,
the runs in it are whole batches in manifest order, and a second pass lands the rest.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reliability_support import integrity, junit_case, run_child, run_counts, write_report

from flaketui.core.history.store import open_history
from flaketui.core.ingest import manifest as manifest_module
from flaketui.core.ingest import writer
from flaketui.core.ingest.manifest import ingest_manifest

pytestmark = pytest.mark.slow

RUNS = 20
BATCH = 6  # runs per transaction here (the product's is larger): 4 batches, the last partial
CASES = 300
KILL_POINTS = 8


def _child(db: str, manifest: str, kill_after_cases: int, ready: Any) -> None:
    manifest_module.BATCH_RUNS = BATCH
    if kill_after_cases:
        real_iter_cases = writer.iter_cases
        seen = 0

        def dying_iter_cases(
            path: Path, report_format: str | None = None, names: Any = None
        ) -> Iterator[Any]:
            nonlocal seen
            for case in real_iter_cases(path, report_format, names):
                seen += 1
                if seen > kill_after_cases:
                    os.kill(os.getpid(), signal.SIGKILL)
                yield case

        writer.iter_cases = dying_iter_cases
    history = open_history(db)
    ready.set()
    ingest_manifest(history, Path(manifest))
    history.conn.close()


def _backfill(
    db: Path, manifest: Path, *, kill_after: int = 0, delay: float = -1
) -> tuple[int | None, float]:
    """Backfill in a child; (exit code, seconds from its start of work to its end)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    return run_child(_child, (str(db), str(manifest), kill_after), delay=delay)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("backfill")
    lines = []
    for index in range(RUNS):
        # Each run adds tests of its own too, so a rolled-back run would leave tests behind.
        cases = [
            junit_case("pkg.shared", f"t{n}", "fail" if (n + index) % 7 == 0 else "pass")
            for n in range(CASES - 20)
        ]
        cases += [junit_case(f"pkg.run{index}", f"own{n}") for n in range(20)]
        report = write_report(folder / f"run-{index}.xml", cases)
        lines.append(
            json.dumps(
                {"file": report.name, "run_id": f"r{index:02d}",
                 "timestamp": f"2026-11-{1 + index:02d}T10:00:00Z", "branch_kind": "main"}
            )
        )  # fmt: skip
    manifest = folder / "runs.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    code, seconds = _backfill(folder / "full.db", manifest)
    assert code == 0
    return {"folder": folder, "manifest": manifest, "seconds": seconds}


def _check(db: Path) -> int:
    """Intact, every present run whole, present runs a prefix of whole batches; how many."""
    assert integrity(db) == ("ok", [])
    present = [run_counts(db, f"r{index:02d}") for index in range(RUNS)]
    landed = sum(counts is not None for counts in present)
    assert all(counts is not None for counts in present[:landed]), present
    assert all(counts == (CASES, CASES, 1) for counts in present[:landed]), present
    assert landed % BATCH == 0 or landed == RUNS, landed
    conn = sqlite3.connect(db)
    try:
        own = {
            row[0] for row in conn.execute("SELECT test_id FROM tests WHERE test_id LIKE '%own%'")
        }
    finally:
        conn.close()
    assert {t.split(".")[1].split("::")[0] for t in own} == {f"run{i}" for i in range(landed)}
    return landed


def test_killed_after_n_cases_keeps_whole_batches(setup: dict[str, Any]) -> None:
    landed = []
    total = RUNS * CASES
    for index in range(KILL_POINTS):
        kill_after = total * (index + 1) // (KILL_POINTS + 1)
        db = setup["folder"] / f"cases-{index}.db"
        assert _backfill(db, setup["manifest"], kill_after=kill_after)[0] == -signal.SIGKILL
        landed.append(_check(db))
    print(f"runs landed before the kill: {landed}")
    assert landed == sorted(landed) and landed[0] < RUNS


def test_killed_at_moments_then_a_second_pass_lands_everything(setup: dict[str, Any]) -> None:
    landed = []
    for index in range(KILL_POINTS):
        delay = setup["seconds"] * (index + 1) / (KILL_POINTS + 1)
        db = setup["folder"] / f"timed-{index}.db"
        assert _backfill(db, setup["manifest"], delay=delay)[0] in (0, -signal.SIGKILL)
        landed.append(_check(db))
        history = open_history(db)
        summary = ingest_manifest(history, setup["manifest"])
        history.conn.close()
        assert summary.runs_landed + summary.runs_already_present == RUNS
        assert _check(db) == RUNS
    print(f"runs landed before the kill: {landed}")
