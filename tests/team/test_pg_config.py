"""A bad `[tool.flaketui]` value stops a sync from a server before the replica is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli import cli
from tests.core.cause_history import build


def test_a_bad_setting_stops_a_sync_before_the_replica_is_written(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    built = build(tmp_path / "built.db", seed=5, runs=40)
    assert CliRunner().invoke(cli, ["merge", pg_url, str(built)]).exit_code == 0
    (tmp_path / "pyproject.toml").write_text(
        '[tool.flaketui]\nsuite_thresholds = { integration = "0.4" }\n'
    )
    for args in (["sync", pg_url, "replica.db"], ["report", pg_url]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 1, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1, result.output
        assert "[tool.flaketui] suite_thresholds.integration must be" in lines[0]
    assert not (tmp_path / "replica.db").exists()
    assert not list((tmp_path / "cache").rglob("*.db"))
