"""`flaketui report`: formats parse back, options apply, reads never write, errors are one line."""

from __future__ import annotations

import csv
import io
import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from flaketui.cli.commands import cli
from flaketui.core.history.dbhandle import Connected
from flaketui.core.scoring import causes
from flaketui.core.scoring.detail import Target
from tests.connections import open_history
from tests.core.history_builder import HistoryBuilder, utc

T0 = utc(2026, 10, 1)
NOW = "2026-11-01T00:00:00Z"
FLAKY = "tests/test_db.py::test_pool"
BROKEN = "tests/test_core.py::test_sum"


@pytest.fixture
def history(tmp_path: Path) -> Path:
    path = tmp_path / "history.db"
    db = open_history(path)
    hb = HistoryBuilder(db)
    for day in range(20):
        run = hb.run(ts=T0 + timedelta(days=day), commit=f"c{day:02d}")
        run.result(FLAKY, ["fail", "pass"] if day % 3 == 0 else ["pass"], message="Timeout 5s")
        run.result(f"{FLAKY}[x]", ["fail", "pass"] if day % 4 == 0 else ["pass"])
        run.result(BROKEN, ["fail"] if day >= 15 else ["pass"], message="assert 4 == 5")
    hb.sequence("tests/test_n.py::test_nightly", "PRPPR" * 3, start=T0, suite="nightly")
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.conn.close()
    return path


def invoke(runner: CliRunner, *args: str) -> str:
    result = runner.invoke(cli, ["report", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_json_parses_and_is_byte_stable(runner: CliRunner, history: Path) -> None:
    first = invoke(runner, str(history), "--now", NOW, "--format", "json")
    second = invoke(runner, str(history), "--now", NOW, "--format", "json")
    assert first == second
    data = json.loads(first)
    assert data["now"] == NOW
    ranked = {t["test_id"]: (t["verdict"], t["rank"], t["regression_rank"]) for t in data["tests"]}
    assert ranked[BROKEN] == ("regression", None, 1)
    assert ranked[FLAKY][0] == "flaky" and ranked[FLAKY][1] is not None


def test_csv_parses_back(runner: CliRunner, history: Path) -> None:
    out = invoke(runner, str(history), "--now", NOW, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    data = json.loads(invoke(runner, str(history), "--now", NOW, "--format", "json"))
    assert [r["test_id"] for r in rows] == [t["test_id"] for t in data["tests"]]
    broken = next(r for r in rows if r["test_id"] == BROKEN)
    assert (broken["rank"], broken["regression_rank"]) == ("", "1")
    assert broken["first_bad_commit"] == "c15"
    assert float(broken["fail_rate"]) == pytest.approx(0.25)


def test_markdown_and_table(runner: CliRunner, history: Path) -> None:
    markdown = invoke(runner, str(history), "--now", NOW, "--format", "markdown")
    assert "| Rank |" in markdown and f"`{FLAKY}`" in markdown
    table = invoke(runner, str(history), "--now", NOW)
    assert table.startswith(f"flaketui report as of {NOW}")
    assert BROKEN in table


def test_only_outputs_showing_causes_read_them(
    runner: CliRunner, history: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test's or family's causes appear in json, csv and html only: a table or Markdown
    report does not read every flaky test's and family's runs for them."""
    kinds: list[str] = []
    load_units = causes.load_units

    def counting(db: Connected, target: Target, **kwargs: Any) -> list[causes.Unit]:
        kinds.append(target.kind)
        return load_units(db, target, **kwargs)

    monkeypatch.setattr(causes, "load_units", counting)
    for fmt in ("table", "markdown"):
        invoke(runner, str(history), "--now", NOW, "--format", fmt)
    assert not {"test", "family"} & set(kinds)
    for fmt in ("json", "csv"):
        kinds.clear()
        invoke(runner, str(history), "--now", NOW, "--format", fmt)
        assert "test" in kinds


def test_limit_suite_and_group_by(runner: CliRunner, history: Path) -> None:
    data = json.loads(
        invoke(
            runner,
            str(history),
            "--now",
            NOW,
            "--format",
            "json",
            "--suite",
            "nightly",
            "--limit",
            "1",
        )
    )
    assert [(t["test_id"], t["rank"]) for t in data["tests"]] == [
        ("tests/test_n.py::test_nightly", 1)
    ]
    rows = list(
        csv.DictReader(
            io.StringIO(
                invoke(
                    runner, str(history), "--now", NOW, "--format", "csv", "--group-by", "family"
                )
            )
        )
    )
    assert [(r["parent"], r["params"]) for r in rows] == [(FLAKY, "2")]
    pr_only = runner.invoke(
        cli, ["report", str(history), "--now", NOW, "--format", "json", "--branch-kind", "pr"]
    )
    assert pr_only.exit_code == 0, pr_only.output
    assert json.loads(pr_only.stdout)["tests"] == []
    assert pr_only.stderr == "flaketui: no 'pr' run in the history; its branch kinds: 'main'\n"


def test_config_from_pyproject_is_used_and_reported(
    runner: CliRunner, history: Path, tmp_path: Path
) -> None:
    (tmp_path / "work" / "pyproject.toml").write_text("[tool.flaketui]\nn_min = 50\n")
    data = json.loads(invoke(runner, str(history), "--now", NOW, "--format", "json"))
    assert data["config"]["n_min"] == 50
    assert {t["verdict"] for t in data["tests"]} == {"insufficient"}


def test_reading_never_writes(runner: CliRunner, history: Path) -> None:
    before = history.read_bytes()
    mtime = os.stat(history).st_mtime_ns
    invoke(runner, str(history), "--now", NOW, "--format", "json")
    assert history.read_bytes() == before
    assert os.stat(history).st_mtime_ns == mtime


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.db"], "does not exist"),
        (["{db}", "--now", "yesterday"], "not an ISO 8601 timestamp"),
    ],
)
def test_bad_input_is_one_line(
    runner: CliRunner, history: Path, args: list[str], message: str
) -> None:
    result = runner.invoke(cli, ["report", *[a.format(db=history) for a in args]])
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_not_a_database_is_refused(runner: CliRunner, tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.db"
    bogus.write_text("hello")
    result = runner.invoke(cli, ["report", str(bogus)])
    assert result.exit_code == 1
    assert "not a SQLite database" in result.output
    assert bogus.read_text() == "hello"


def test_limit_must_be_positive(runner: CliRunner, history: Path) -> None:
    result = runner.invoke(cli, ["report", str(history), "--limit", "0"])
    assert result.exit_code == 1


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ("", "clean for the last 12 runs over 1 day, 12 runs and 3 days needed"),
        (
            "resolved_min_days = 1\n",
            "clean for the last 12 runs over 1 day, 12 runs and 1 day needed",
        ),
    ],
)
def test_a_quiet_spell_of_one_day_is_one_day(
    runner: CliRunner, tmp_path: Path, settings: str, words: str
) -> None:
    # Bad runs up to the evening before, then a morning of clean runs: "over 1 day", and a
    # resolved_min_days of 1 is "1 day" too.
    Path("pyproject.toml").write_text(f"[tool.flaketui]\n{settings}")
    path = tmp_path / "quiet.db"
    db = open_history(path)
    hb = HistoryBuilder(db)
    starts = [T0 + timedelta(hours=12 * run) for run in range(20)]
    starts += [starts[-1] + timedelta(hours=4 + hour) for hour in range(12)]
    for number, start in enumerate(starts):
        bad = number < 20 and number % 3 == 1
        hb.run(ts=start, commit=f"c{number:02d}").result(FLAKY, ["fail"] if bad else ["pass"])
    db.conn.close()
    output = invoke(runner, str(path), "--now", "2026-10-11T12:00:00Z", "--format", "json")
    (test,) = json.loads(output)["tests"]
    assert words in test["reason"]


@pytest.mark.parametrize(
    ("group_by", "words"),
    [
        ("family", "(no parametrized families in the window)"),
        ("signature", "(no failure signatures in the window)"),
        ("cofailure", "(no co-failure groups in the window: no flaky tests that fail together)"),
    ],
)
@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_no_group_is_not_said_to_be_no_test(
    runner: CliRunner, tmp_path: Path, group_by: str, words: str, fmt: str
) -> None:
    # Tests with counted runs, none parametrized, none failing: the empty list names the groups.
    path = tmp_path / "steady.db"
    db = open_history(path)
    hb = HistoryBuilder(db)
    for day in range(12):
        hb.run(ts=T0 + timedelta(days=day)).result(BROKEN, ["pass"]).result(FLAKY, ["pass"])
    db.conn.close()
    output = invoke(runner, str(path), "--now", NOW, "--group-by", group_by, "--format", fmt)
    assert words in output
    assert "no tests with counted runs" not in output


NOT_UTF8 = {
    "binary": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    "latin-1": "# Équipe données\ntests/ @team-data\n".encode("latin-1"),
}


@pytest.mark.parametrize("command", ["report", "check", "export", "open"])
@pytest.mark.parametrize("kind", sorted(NOT_UTF8))
def test_a_codeowners_file_that_is_not_utf8_is_one_line_and_writes_nothing(
    runner: CliRunner, history: Path, tmp_path: Path, command: str, kind: str
) -> None:
    wrong = tmp_path / "wrong"
    wrong.write_bytes(NOT_UTF8[kind])
    args = {
        "report": ["--output", "out.json", "--format", "json"],
        "check": ["--summary-file", "out.json"],
        "export": ["--output", "out.json", "--format", "json"],
        "open": [],
    }[command]
    before = history.read_bytes()
    # The app is given a missing history: were the file let through, that is refused instead
    # of the app starting.
    target = "absent.db" if command == "open" else str(history)
    result = runner.invoke(cli, [command, target, "--now", NOW, "--codeowners", str(wrong), *args])
    bad = NOT_UTF8[kind][:40].decode("utf-8", errors="replace").index("\ufffd")
    byte = NOT_UTF8[kind][bad]
    assert result.exit_code == 1, result.output
    assert result.output == (
        f"Error: {wrong}: not valid UTF-8 (byte 0x{byte:02X} at offset {bad}); "
        "a CODEOWNERS file is UTF-8 text\n"
    )
    assert not (tmp_path / "work" / "out.json").exists()
    assert history.read_bytes() == before


@pytest.mark.parametrize(
    ("name", "problem"),
    [("adir", "is a directory, not a CODEOWNERS file"), ("absent", "does not exist")],
)
def test_a_codeowners_directory_or_missing_file_is_one_line(
    runner: CliRunner, history: Path, tmp_path: Path, name: str, problem: str
) -> None:
    (tmp_path / "adir").mkdir()
    given = tmp_path / name
    result = runner.invoke(cli, ["report", str(history), "--now", NOW, "--codeowners", str(given)])
    assert result.exit_code == 1, result.output
    assert result.output == f"Error: {given}: {problem}\n"


def test_a_codeowners_beside_the_history_that_is_not_utf8_is_named(
    runner: CliRunner, history: Path, tmp_path: Path
) -> None:
    (tmp_path / "CODEOWNERS").write_bytes(NOT_UTF8["latin-1"])
    result = runner.invoke(cli, ["report", str(history), "--now", NOW, "-o", "out.txt"])
    assert result.exit_code == 1, result.output
    assert result.output == (
        f"Error: {tmp_path / 'CODEOWNERS'}: not valid UTF-8 (byte 0xC9 at offset 2); "
        "a CODEOWNERS file is UTF-8 text\n"
    )
    assert not (tmp_path / "work" / "out.txt").exists()
