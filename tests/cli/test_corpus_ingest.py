"""Every file of the shared JUnit corpus through `flaketui ingest` into one history.

A file the pinned table (tests/core/corpus_table.py) expects to land adds exactly its counts; a
refused file gives a one-line error, a non-zero exit and leaves the database unchanged.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli.commands import cli
from tests.connections import open_history

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "junit-corpus"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))

pytestmark = pytest.mark.skipif(
    not CORPUS.is_dir(), reason=f"the shared JUnit corpus is not at {CORPUS}"
)
NOT_REPORTS = {"README.md", "SOURCES.md"}


def _table() -> dict[str, object]:
    from corpus_table import CORPUS as TABLE

    return dict(TABLE)


def _counts(conn: sqlite3.Connection) -> tuple[int, dict[str, int]]:
    outcomes = dict(conn.execute("SELECT outcome, count(*) FROM results GROUP BY outcome"))
    total = int(conn.execute("SELECT count(*) FROM results").fetchone()[0])
    return total, outcomes


def test_every_corpus_file_is_pinned() -> None:
    files = {
        p.relative_to(CORPUS).as_posix()
        for p in CORPUS.rglob("*")
        if p.is_file() and p.name not in NOT_REPORTS
    }
    assert files - set(_table()) == set()


def test_corpus_ingests_or_is_refused_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "corpus.db"
    open_history(db).conn.close()
    runner = CliRunner()
    for relative, expected in sorted(_table().items()):
        path = CORPUS / relative
        if not path.is_file():
            pytest.fail(f"{relative}: pinned but missing from the corpus")
        conn = sqlite3.connect(db)
        before_dump = list(conn.iterdump())
        before_results, before_outcomes = _counts(conn)
        conn.close()
        result = runner.invoke(
            cli, ["ingest", str(db), str(path), "--run-id", relative, "--no-detect"]
        )
        conn = sqlite3.connect(db)
        try:
            if expected == "refused":
                assert result.exit_code != 0, f"{relative}: {result.output}"
                assert result.output.startswith("Error: "), relative
                assert result.output.count("\n") == 1, f"{relative}: {result.output}"
                assert list(conn.iterdump()) == before_dump, relative
                continue
            assert result.exit_code == 0, f"{relative}: {result.output}"
            tests, attempts, outcomes = expected  # type: ignore[misc]
            if tests == 0:
                assert "no test cases" in result.output, relative
                assert list(conn.iterdump()) == before_dump, relative
                continue
            # The run's per-test rows, filed or still waiting to be (`flaketui ingest` leaves
            # its run to the next fold).
            [(run_tests,)] = conn.execute(
                "SELECT count(*) FROM (SELECT run FROM test_runs UNION ALL"
                " SELECT run FROM test_runs_waiting) tr JOIN runs ON runs.id = tr.run"
                " WHERE runs.run_id = ?",
                (relative,),
            ).fetchall()
            after_results, after_outcomes = _counts(conn)
            added = {
                key: after_outcomes.get(key, 0) - before_outcomes.get(key, 0)
                for key in after_outcomes
            }
            assert run_tests == tests, relative
            assert after_results - before_results == attempts, relative
            assert {k: v for k, v in added.items() if v} == outcomes, relative
        finally:
            conn.close()
