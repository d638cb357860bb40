"""A first sync interrupted part-way leaves no replica a reader would trust; the next sync
completes it."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from flaketui.cli import cli
from flaketui.core.history.pg import sync

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "history.db"
NOW = ("--now", "2026-11-30T18:00:00Z")


def invoke(*args: object, code: int = 0) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result.output


def test_an_interrupted_first_sync_leaves_no_replica(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    invoke("merge", pg_url, SAMPLE)  # 49 103 results: three batches
    land = sync._Puller.apply
    landed: list[int] = []

    def interrupted(self: Any, rows: list[tuple[Any, ...]]) -> list[int]:
        if landed:
            raise KeyboardInterrupt  # Ctrl-C after the first batch landed
        landed.append(len(rows))
        return land(self, rows)

    with monkeypatch.context() as patch:
        patch.setattr(sync._Puller, "apply", interrupted)
        result = CliRunner().invoke(cli, ["sync", pg_url, str(tmp_path / "replica.db")])
    assert result.exit_code != 0 and landed == [sync.BATCH_ROWS]
    replica = tmp_path / "replica.db"
    assert not replica.exists()
    for reader in ("report", "check"):
        out = invoke(reader, replica, *NOW, code=1)
        assert len(out.strip().splitlines()) == 1, out
    # The next sync resumes and completes it; it reads as a replica synced in one go.
    invoke("sync", pg_url, replica)
    invoke("sync", pg_url, tmp_path / "fresh.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.db", "replica.db"]
    report = ("report", "--format", "csv", *NOW)
    assert invoke(report[0], replica, *report[1:]) == invoke(
        report[0], tmp_path / "fresh.db", *report[1:]
    )


REPORTS = SAMPLE.parent / "reports"
TABLES = ("runs", "results")


def interrupt_before_the_end(monkeypatch: pytest.MonkeyPatch, url: str, history: Path) -> None:
    """A sync of history stopped by Ctrl-C once every result landed, before it completed."""

    def interrupted(self: Any, low: int, high: int) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(sync._Puller, "finish", interrupted)
        result = CliRunner().invoke(cli, ["sync", url, str(history)])
    assert result.exit_code != 0


def small_server(url: str) -> None:
    for name in ("main-unit.xml", "outage-unit.xml"):
        invoke("ingest", url, REPORTS / name, "--run-id", name, "--no-detect")


def test_an_interrupted_first_sync_leaves_an_empty_file_as_it_was(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small_server(pg_url)
    replica = tmp_path / "replica.db"
    replica.touch(mode=0o600)
    interrupt_before_the_end(monkeypatch, pg_url, replica)
    assert replica.read_bytes() == b""
    for reader in ("report", "check"):
        out = invoke(reader, replica, *NOW, code=1)
        assert len(out.strip().splitlines()) == 1 and "is empty" in out, out
    # The next sync resumes and completes it, into the same file, private as it was.
    invoke("sync", pg_url, replica)
    invoke("sync", pg_url, tmp_path / "fresh.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.db", "replica.db"]
    assert replica.stat().st_mode & 0o777 == 0o600
    report = ("report", "--format", "csv", *NOW)
    assert invoke(report[0], replica, *report[1:]) == invoke(
        report[0], tmp_path / "fresh.db", *report[1:]
    )
    assert "0 runs and 0 results added" in invoke("sync", pg_url, replica)


def test_a_history_without_runs_keeps_what_it_holds_through_a_first_sync(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small_server(pg_url)
    # A history whose runs were all pruned; the quarantine decision recorded in it stays.
    history = tmp_path / "history.db"
    invoke("ingest", history, REPORTS / "main-unit.xml", "--run-id", "old", "--no-detect",
           "--timestamp", "2020-01-01T00:00:00Z")  # fmt: skip
    test = "tests/api/test_auth.py::test_login_ok"
    invoke("quarantine", history, test, "--reason", "r", "--skip-file", tmp_path / "q.json")
    invoke("prune", history, "--older-than", 30)
    before = history.read_bytes()
    interrupt_before_the_end(monkeypatch, pg_url, history)
    assert history.read_bytes() == before  # untouched: no half-filled history to read
    invoke("sync", pg_url, history)
    assert [p.name for p in tmp_path.glob("history.db*")] == ["history.db"]
    assert "2 runs and 333 results added" in invoke("sync", pg_url, tmp_path / "fresh.db")
    conn = sqlite3.connect(history)
    try:
        counts = [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES]
        assert conn.execute("SELECT test_id FROM audit_log").fetchall() == [(test,)]
    finally:
        conn.close()
    assert counts == [2, 333]
    # Complete now: the next sync adds nothing, in place.
    assert "0 runs and 0 results added" in invoke("sync", pg_url, history)


def test_a_replica_of_another_server_is_refused_and_left_alone(
    pg_url: str, pg_cluster: Any, tmp_path: Path
) -> None:
    other = pg_cluster.create_database()
    replica = tmp_path / "replica.db"
    invoke("sync", other, replica)  # a replica of a server without runs
    before = replica.read_bytes()
    small_server(pg_url)
    out = invoke("sync", pg_url, replica, code=1)
    assert "replica of another server history" in out and len(out.strip().splitlines()) == 1
    assert replica.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["replica.db"]


def test_a_pipe_or_a_device_is_refused_as_the_replica_never_replaced(
    pg_url: str, tmp_path: Path
) -> None:
    # A first sync renames the replica into place: over a named pipe, or /dev/null as root.
    small_server(pg_url)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    out = invoke("sync", pg_url, fifo, code=1)
    assert out == f"Error: {fifo}: not a regular file (a pipe or a device), not a history file\n"
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]
