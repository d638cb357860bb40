"""The files export, report and check write: never one the same command reads."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from flaketui.cli.commands import cli
from tests.connections import open_history
from tests.core.history_builder import HistoryBuilder, utc

FLAKY = "tests/test_a.py::test_a"
NOW = "2026-03-01T12:00:00Z"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with a history, a CODEOWNERS file and a skip file quarantining one test."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "CODEOWNERS").write_text("tests/test_a.py @team-a\n")
    db = open_history(tmp_path / "history.db")
    HistoryBuilder(db).sequence(
        FLAKY, "PRPPRPPPRPPRPPP", start=utc(2026, 2, 1), step=timedelta(hours=12)
    )
    db.conn.close()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLAKETUI_SKIP_FILE", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    result = invoke("quarantine", "history.db", FLAKY, "--reason", "flaky", "--skip-file", "q.json")
    assert result.exit_code == 0, result.output
    return tmp_path


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


# Each command writing a file, with the option naming it.
COMMANDS: dict[str, tuple[str, ...]] = {
    "export": ("export", "history.db", "--format", "csv", "--skip-file", "q.json", "--output"),
    "report": ("report", "history.db", "--codeowners", "CODEOWNERS", "--output"),
    "check": ("check", "history.db", "--skip-file", "q.json", "--summary-file"),
}
OPTION = {"export": "--output", "report": "--output", "check": "--summary-file"}
READS = {
    "export": ("history.db", "q.json", "CODEOWNERS"),
    "report": ("history.db", "CODEOWNERS"),
    "check": ("history.db", "q.json", "CODEOWNERS"),
}
WHAT = {"history.db": "history", "q.json": "skip file", "CODEOWNERS": "CODEOWNERS file"}


def as_typed(_repo: Path, name: str) -> str:
    return name


def absolute(repo: Path, name: str) -> str:
    return str(repo / "sub" / ".." / name)


def symlink(repo: Path, name: str) -> str:
    (repo / "link").symlink_to(repo / name)
    return "link"


def hard_link(repo: Path, name: str) -> str:
    os.link(repo / name, repo / "hard")
    return "hard"


@pytest.mark.parametrize("spelling", [as_typed, absolute, symlink, hard_link])
@pytest.mark.parametrize(
    ("command", "read"), [(command, read) for command in COMMANDS for read in READS[command]]
)
def test_an_output_that_is_a_file_read_is_refused(
    repo: Path, command: str, read: str, spelling: Callable[[Path, str], str]
) -> None:
    (repo / "sub").mkdir()
    before = {path.name: path.read_bytes() for path in repo.iterdir() if path.is_file()}
    output = spelling(repo, read)
    result = invoke(*COMMANDS[command], output, "--now", NOW)
    assert result.exit_code == 1
    assert result.output == (
        f"Error: {Path(output)}: {OPTION[command]} names the {WHAT[read]} this command reads; "
        "write to another file\n"
    )
    after = {path.name: path.read_bytes() for path in repo.iterdir() if path.is_file()}
    assert {name: after[name] for name in before} == before
    assert set(after) - set(before) <= {"link", "hard"}


@pytest.mark.parametrize("command", COMMANDS)
def test_another_output_is_written(repo: Path, command: str) -> None:
    result = invoke(*COMMANDS[command], "out.txt", "--now", NOW)
    assert result.exit_code in (0, 1), result.output
    assert (repo / "out.txt").read_text()


def test_the_replica_of_a_server_history_is_a_file_read(repo: Path) -> None:
    from flaketui.cli.commands.sync import replica_path

    url = "postgresql://flaketui:secret@127.0.0.1:1/none"
    replica = replica_path(url)
    result = invoke("report", url, "--output", str(replica))
    assert result.exit_code == 1
    assert "--output names the history this command reads" in result.output
    assert "secret" not in result.output
    assert not replica.exists()


@pytest.mark.parametrize("command", ["export", "report"])
def test_a_dash_is_standard_output(repo: Path, command: str) -> None:
    to_stdout = invoke(*COMMANDS[command][:-1], "--now", NOW)
    dash = invoke(*COMMANDS[command], "-", "--now", NOW)
    assert dash.exit_code == 0, dash.output
    assert (dash.stdout, dash.stderr) == (to_stdout.stdout, to_stdout.stderr)
    assert FLAKY in dash.stdout
    assert not (repo / "-").exists()


def test_a_dash_is_standard_output_for_the_summary(repo: Path) -> None:
    (repo / "summary.md").write_text("")
    to_file = invoke(*COMMANDS["check"], "summary.md", "--now", NOW)
    dash = invoke(*COMMANDS["check"], "-", "--now", NOW)
    assert dash.exit_code == to_file.exit_code
    # The summary alone on stdout, and what the command says besides on stderr.
    assert dash.stdout == (repo / "summary.md").read_text()
    assert dash.stdout.startswith("#")
    assert dash.stderr == to_file.stdout
    assert not (repo / "-").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_a_file_named_dash_is_written_as_dot_slash_dash(repo: Path, command: str) -> None:
    result = invoke(*COMMANDS[command], "./-", "--now", NOW)
    assert result.exit_code in (0, 1), result.output
    assert (repo / "-").read_text()
