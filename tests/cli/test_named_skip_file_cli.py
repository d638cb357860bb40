"""A skip file named by --skip-file, FLAKETUI_SKIP_FILE or [tool.flaketui] skip_file must exist
for the commands that read it; the default .quarantine.json may be absent."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli.commands import cli

SAMPLE = Path(__file__).parents[2] / "sample_data" / "history.db"
NOW = "2026-11-30T18:00:00Z"
READERS = [
    ["check", "h.db", "--now", NOW, "--fail-on", "quarantine-expired"],
    ["export", "h.db", "--format", "json", "--now", NOW],
    ["lifecycle", "h.db", "--now", NOW, "--no-gate"],
]


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLAKETUI_SKIP_FILE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    shutil.copy(SAMPLE, tmp_path / "h.db")
    return tmp_path


@pytest.mark.parametrize("args", READERS, ids=lambda a: a[0])
@pytest.mark.parametrize("named_by", ["--skip-file", "FLAKETUI_SKIP_FILE", "[tool.flaketui]"])
def test_a_named_skip_file_that_is_missing_is_an_error(
    work: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], named_by: str
) -> None:
    if named_by == "--skip-file":
        args = [*args, "--skip-file", "q.jsn"]
    elif named_by == "FLAKETUI_SKIP_FILE":
        monkeypatch.setenv("FLAKETUI_SKIP_FILE", "q.jsn")
    else:
        (work / "pyproject.toml").write_text('[tool.flaketui]\nskip_file = "q.jsn"\n')
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    label = "[tool.flaketui] skip_file" if named_by.startswith("[") else named_by
    assert result.output == f"Error: {work / 'q.jsn'} ({label}): file not found\n"
    assert not (work / "q.jsn").exists()


@pytest.mark.parametrize("args", READERS, ids=lambda a: a[0])
def test_the_default_skip_file_may_be_absent(work: Path, args: list[str]) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert not (work / ".quarantine.json").exists()


def test_lifecycle_apply_creates_a_named_skip_file(work: Path) -> None:
    result = CliRunner().invoke(cli, [*READERS[2], "--apply", "--skip-file", "new.json"])
    assert result.exit_code == 0, result.output
    assert "Error" not in result.output
