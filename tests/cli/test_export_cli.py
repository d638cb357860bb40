"""`flaketui export`: the skip file's decisions joined with the history, in every format."""

from __future__ import annotations

import csv
import io
import json
import shlex
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from flaketui.cli.commands import cli
from tests.connections import open_history
from tests.core.history_builder import HistoryBuilder, utc

T0 = utc(2026, 2, 1)
NOW = "2026-03-01T12:00:00Z"
FLAKY = "tests/test_a.py::test_a"
RUN_ENTRY = "tests/test_b.py::test_b[it's a param]"
GONE = "tests/test_gone.py::test_gone"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with a history, a CODEOWNERS file and three decisions in its skip file."""
    (tmp_path / ".git").mkdir()  # enough for CODEOWNERS discovery; git itself is not needed
    (tmp_path / "CODEOWNERS").write_text("tests/test_a.py @team-a\n")
    db = open_history(tmp_path / "history.db")
    hb = HistoryBuilder(db)
    hb.sequence(FLAKY, "PRPPRPPPRPPRPPP", start=T0, step=timedelta(hours=12))
    hb.sequence(RUN_ENTRY, "PPPPPPPPPPPP", start=T0, step=timedelta(hours=12))
    db.conn.close()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLAKETUI_SKIP_FILE", raising=False)
    history = str(tmp_path / "history.db")
    for args in (
        (FLAKY, "--reason", "flaky on main", "--ticket", "https://example.org/3"),
        (RUN_ENTRY, "--reason", "watching", "--mode", "run"),
        (GONE, "--reason", "old", "--force", "--expires", "1"),
    ):
        result = invoke("quarantine", history, *args, "--now", "2026-02-20T00:00:00Z")
        assert result.exit_code == 0, result.output
    return tmp_path


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def export(repo: Path, *args: str) -> str:
    result = invoke("export", str(repo / "history.db"), "--now", NOW, *args)
    assert result.exit_code == 0, result.output
    return result.output


def test_json(repo: Path) -> None:
    doc = json.loads(export(repo, "--format", "json"))
    items = {item["test_id"]: item for item in doc["items"]}
    assert sorted(items) == sorted([FLAKY, RUN_ENTRY, GONE])
    assert items[FLAKY]["owner"] == "@team-a"
    assert items[FLAKY]["verdict"] == "flaky"
    assert items[FLAKY]["ticket"] == "https://example.org/3"
    assert items[RUN_ENTRY]["mode"] == "run"
    assert (items[GONE]["verdict"], items[GONE]["expired"]) == (None, True)


def test_csv(repo: Path) -> None:
    rows = list(csv.DictReader(io.StringIO(export(repo, "--format", "csv"))))
    by_id = {row["test_id"]: row for row in rows}
    assert by_id[FLAKY]["verdict"] == "flaky"
    assert by_id[FLAKY]["current_runs"] == "15"
    assert by_id[GONE]["expired"] == "true"


def test_markdown_groups_by_owner(repo: Path) -> None:
    text = export(repo, "--format", "markdown")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["## @team-a (1)", "## Unowned (2)"]
    assert f"| `{FLAKY}` | skip | flaky | flaky on main | https://example.org/3 |" in text


def test_deselect_holds_only_skip_entries_by_default(repo: Path) -> None:
    lines = export(repo, "--format", "deselect").splitlines()
    assert [shlex.split(line) for line in lines] == [["--deselect", FLAKY], ["--deselect", GONE]]
    everything = export(repo, "--format", "deselect", "--mode", "all").splitlines()
    assert ["--deselect", RUN_ENTRY] in [shlex.split(line) for line in everything]


def test_list_with_owner_filter(repo: Path) -> None:
    assert export(repo, "--format", "list").splitlines() == [FLAKY, GONE]
    assert export(repo, "--format", "list", "--owner", "@team-a").splitlines() == [FLAKY]
    assert export(repo, "--format", "list", "--mode", "run").splitlines() == [RUN_ENTRY]


def test_output_is_written_atomically(repo: Path) -> None:
    out = repo / "decisions.json"
    out.write_text("old")
    result = invoke(
        "export", str(repo / "history.db"), "--format", "json", "--output", str(out), "--now", NOW
    )
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["count"] == 3
    assert not list(repo.glob("*.tmp"))


def test_o_is_short_for_output_as_in_report(repo: Path) -> None:
    out = repo / "decisions.txt"
    result = invoke(
        "export", str(repo / "history.db"), "--format", "list", "-o", str(out), "--now", NOW
    )
    assert result.exit_code == 0, result.output
    assert out.read_text() == export(repo, "--format", "list") != ""
    assert "-o, --output PATH" in invoke("export", "--help").output


def test_no_skip_file_exports_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    open_history(tmp_path / "history.db").conn.close()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLAKETUI_SKIP_FILE", raising=False)
    result = invoke("export", str(tmp_path / "history.db"), "--format", "list")
    assert (result.exit_code, result.output) == (0, "")


def test_explicit_missing_or_broken_skip_file(repo: Path) -> None:
    (repo / "bad.json").write_text("{}")
    result = invoke(
        "export", str(repo / "history.db"), "--format", "list", "--skip-file", "bad.json"
    )
    assert result.exit_code == 1
    assert "not a flaketui skip file" in result.output
    missing = invoke(
        "export", str(repo / "history.db"), "--format", "list", "--skip-file", "x.json"
    )
    assert missing.exit_code == 1
    assert "x.json (--skip-file): file not found" in missing.output
