"""Several runs in one transaction (backfills): the same rows as one ingest per run, and a run
refused for its input leaves nothing while its neighbours land."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlite_utils

from flaketui.core.errors import ReportError
from flaketui.core.history.store import transaction
from flaketui.core.ingest.rows import BATCH_CASES
from flaketui.core.ingest.runmeta import RunMetaError
from flaketui.core.ingest.writer import IngestResult, ingest_batch, ingest_reports
from flaketui.core.models import RunMeta
from flaketui.core.rollups import build as rollups
from tests.connections import open_history

T0 = datetime(2026, 11, 1, 6, 0, tzinfo=UTC)


def _dump(db: sqlite_utils.Database) -> list[str]:
    return list(db.conn.iterdump())


def _reports(folder: Path, runs: int, seed: int) -> list[tuple[list[Path], RunMeta]]:
    """Runs of 40 tests (families, failures with volatile messages, retries), some at midnight."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for index in range(runs):
        cases = []
        for number in range(40):
            name = f"test_p[{number % 4}]" if number < 12 else f"test_{number}"
            inner = ""
            if rng.random() < 0.2:
                inner = f'<failure message="boom {rng.randint(0, 99999)} at 0x{index:x}"/>'
            elif rng.random() < 0.05:
                inner = '<skipped message="no"/>'
            head = f'<testcase classname="pkg.m{number % 3}" name="{name}" time="0.1">'
            cases.append(f"{head}{inner}</testcase>")
        path = folder / f"run-{index}.xml"
        path.write_text(
            f'<?xml version="1.0"?>\n<testsuite name="s">{"".join(cases)}</testsuite>\n'
        )
        ts = (
            T0 + timedelta(hours=9 * index)
            if index % 5
            else T0.replace(hour=0) + timedelta(days=index)
        )
        kind = rng.choice(["main", "pr", "release"])
        out.append(
            (
                [path],
                RunMeta(run_id=f"r{index}", ts=ts, branch_kind=kind, commit_sha=f"c{index // 2}"),
            )
        )
    return out


def _fold(db: sqlite_utils.Database) -> None:
    """Fold the runs single ingests left waiting (the next reader would)."""
    with transaction(db.conn):
        rollups.fold_pending(db.conn)


@pytest.mark.parametrize("seed", range(3))
def test_a_batch_stores_what_one_ingest_per_run_stores(tmp_path: Path, seed: int) -> None:
    runs = _reports(tmp_path / "reports", 12, seed)
    one_by_one = open_history(tmp_path / "a.db")
    for paths, meta in runs:
        ingest_reports(one_by_one, paths, meta)
    batched = open_history(tmp_path / "b.db")
    outcomes = ingest_batch(batched, runs[:5])
    outcomes += ingest_batch(batched, runs[5:])
    assert all(isinstance(o, IngestResult) and o.created for o in outcomes)
    assert not rollups.pending(batched.conn)  # a batch folds its runs in its transaction
    _fold(one_by_one)
    assert _dump(batched) == _dump(one_by_one)  # raw rows, rollups, signatures, meta
    # Idempotent: the same batch again adds nothing.
    again = ingest_batch(batched, runs)
    assert all(isinstance(o, IngestResult) and not o.created and o.results == 0 for o in again)
    assert _dump(batched) == _dump(one_by_one)


def test_a_refused_run_is_rolled_back_alone(tmp_path: Path) -> None:
    runs = _reports(tmp_path / "reports", 6, seed=7)
    # More cases than the writer's batch (rows written before the parser fails), then cut.
    many = "".join(f'<testcase classname="cut.M" name="t{n}"/>' for n in range(BATCH_CASES + 500))
    truncated = tmp_path / "bad.xml"
    truncated.write_text(f"<testsuite>{many}<testcase name='x'")
    missing = tmp_path / "gone.xml"
    bad_meta = RunMeta(run_id="m", ts=T0, branch_kind="feature")
    batch = [
        runs[0],
        runs[1],
        ([truncated], RunMeta(run_id="cut", ts=T0)),
        runs[3],
        ([missing], RunMeta(run_id="missing", ts=T0)),
        ([runs[4][0][0]], bad_meta),
        runs[5],
    ]
    batched = open_history(tmp_path / "b.db")
    outcomes = ingest_batch(batched, batch)
    assert [type(o) for o in outcomes] == [
        IngestResult,
        IngestResult,
        ReportError,
        IngestResult,
        ReportError,
        RunMetaError,
        IngestResult,
    ]
    reference = open_history(tmp_path / "a.db")
    for paths, meta in (runs[0], runs[1], runs[3], runs[5]):
        ingest_reports(reference, paths, meta)
    _fold(reference)
    assert _dump(batched) == _dump(reference)


def test_an_unexpected_error_rolls_the_whole_batch_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = _reports(tmp_path / "reports", 4, seed=3)
    db = open_history(tmp_path / "h.db")
    ingest_batch(db, runs[:1])
    before = _dump(db)
    from flaketui.core.ingest import writer

    real = writer.iter_cases
    calls = []

    def failing(path: Path, report_format: str | None = None, names=None):
        calls.append(path)
        if len(calls) == 3:
            raise OSError("disk went away")
        return real(path, report_format, names)

    monkeypatch.setattr(writer, "iter_cases", failing)
    with pytest.raises(OSError):
        ingest_batch(db, runs[1:])
    assert _dump(db) == before
