"""A first sync interrupted part-way leaves no replica a reader would trust; the next sync
completes it."""

from __future__ import annotations

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
