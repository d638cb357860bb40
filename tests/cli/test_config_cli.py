"""A bad `[tool.flaketui]` value is one line naming the setting, exit 1, for every command, and
leaves every file as it was."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from flaketui.cli.commands import cli
from flaketui.core.config import Config

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
NOW = "2026-12-01T00:00:00Z"

BAD_TABLES = {
    "suite_thresholds": 'suite_thresholds = { integration = "0.4" }',
    "mask_patterns": 'mask_patterns = ["order-[a-z+"]',
}


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLAKETUI_SKIP_FILE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    shutil.copy(SAMPLE / "history.db", tmp_path / "history.db")
    shutil.copy(SAMPLE / "history.db", tmp_path / "other.db")
    return tmp_path


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def assert_one_line(result: Result, *words: str) -> None:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: [tool.flaketui] "), result.output
    for word in words:
        assert word in lines[0], lines[0]


COMMANDS = {
    "lifecycle": ["lifecycle", "history.db", "--now", NOW],
    "lifecycle --apply": ["lifecycle", "history.db", "--now", NOW, "--apply"],
    "report json": ["report", "history.db", "--format", "json", "--now", NOW],
    "check": ["check", "history.db", "--now", NOW],
    "export": ["export", "history.db", "--format", "json", "--now", NOW],
    "ingest": [
        "ingest",
        "history.db",
        str(SAMPLE / "reports" / "main-unit.xml"),
        "--run-id",
        "x",
        "--no-detect",
    ],
    "ingest into a new file": [
        "ingest",
        "new.db",
        str(SAMPLE / "reports" / "main-unit.xml"),
        "--no-detect",
    ],
    "merge": ["merge", "history.db", "other.db"],
    "resign": ["resign", "history.db"],
    "open": ["open", "history.db", "--now", NOW],
}


@pytest.mark.parametrize("setting", BAD_TABLES)
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_refuses_a_bad_setting_before_writing(
    work: Path, command: str, setting: str
) -> None:
    (work / "pyproject.toml").write_text(f"[tool.flaketui]\n{BAD_TABLES[setting]}\n")
    before = snapshot(work)
    result = CliRunner().invoke(cli, COMMANDS[command])
    assert_one_line(result, setting)
    assert snapshot(work) == before


def wrong_literal(name: str) -> str:
    """A TOML value of a type the setting never takes."""
    default = getattr(Config(), name)
    if isinstance(default, bool):
        return '"yes"'
    if isinstance(default, int | float):
        return '"0.4"'
    if isinstance(default, tuple):
        return '"nightly"'
    if isinstance(default, dict):
        return '["a", "b"]'
    return "[1, 2]"  # a string setting


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(Config)])
def test_a_wrong_type_in_pyproject_names_the_setting(work: Path, name: str) -> None:
    (work / "pyproject.toml").write_text(
        f"[tool.flaketui]\n{name.replace('_', '-')} = {wrong_literal(name)}\n"
    )
    result = CliRunner().invoke(cli, ["report", "history.db", "--now", NOW])
    assert_one_line(result, name)


def test_a_setting_written_with_dashes_and_underscores_is_refused(work: Path) -> None:
    (work / "pyproject.toml").write_text("[tool.flaketui]\nwindow_days = 30\nwindow-days = 60\n")
    result = CliRunner().invoke(cli, ["report", "history.db", "--format", "json", "--now", NOW])
    assert_one_line(result, "window_days is set twice, as 'window_days' and 'window-days'")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[tool.flaketui\nwindow_days = 30\n", "cannot read (Expected ']'"),
        ("x = " + "[" * 100_000 + "]" * 100_000 + "\n", "cannot read (nested too deeply)"),
    ],
    ids=["broken", "nested"],
)
def test_a_pyproject_that_cannot_be_parsed_is_one_line(work: Path, text: str, problem: str) -> None:
    (work / "pyproject.toml").write_text(text)
    before = snapshot(work)
    result = CliRunner().invoke(cli, COMMANDS["lifecycle --apply"])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {work / 'pyproject.toml'}: {problem}")
    assert snapshot(work) == before
