"""Fixtures the command tests share."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """A runner in an empty folder (tmp_path/work): no pyproject.toml or skip file above it
    and no FLAKETUI_SKIP_FILE, so every command runs on its defaults. A file whose commands
    need more (a configuration, a cache folder) defines its own."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("FLAKETUI_SKIP_FILE", raising=False)
    return CliRunner()
