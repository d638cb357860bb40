"""`flaketui prune` says the same of a server as of a history file."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli import cli

REPORTS = Path(__file__).resolve().parents[2] / "sample_data" / "reports"


def lines(*args: object) -> list[str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


@pytest.mark.parametrize(
    ("days", "note"),
    [
        ("30", "note: 30 days is inside the scoring window (90 days)"),
        ("1", "note: 1 day is inside the scoring window (90 days)"),
        ("90", None),
        ("365", None),
    ],
)
def test_a_server_and_a_file_get_the_same_window_note(
    pg_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    days: str,
    note: str | None,
) -> None:
    monkeypatch.chdir(tmp_path)  # default configuration: a 90-day window
    history = tmp_path / "history.db"
    for db in (pg_url, history):
        lines(
            "ingest", db, REPORTS / "main-unit.xml", "--run-id", "old",
            "--timestamp", "2020-01-01T00:00:00Z", "--no-detect",
        )  # fmt: skip
    on_server = lines("prune", pg_url, "--older-than", days)
    on_file = lines("prune", history, "--older-than", days)
    assert on_server[0].startswith("pruned 1 run before ")
    assert on_file[0].startswith("pruned 1 run before ")
    assert on_server[1:] == on_file[1:] == ([note] if note else [])


def test_the_help_says_db_may_be_a_server() -> None:
    text = " ".join(" ".join(lines("prune", "--help")).split())  # unwrapped
    assert "DB may be a postgresql:// URL" in text
