"""A history without a run on the default branch: the report says so, and what to do.

Bad runs between good ones are flake evidence only on the default branch, so in a history whose
runs carry no default-branch run a test failing on and off without retries is judged healthy.
The verdicts stay as they are; the text, Markdown and JSON reports say why the list may look
clean.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli.commands import cli
from tests.core.history_builder import utc

T0 = utc(2026, 11, 1)
NOW = "2026-11-20T00:00:00Z"
FLIPPING = "tests/test_pool.py::test_acquire"
STEADY = "tests/test_pool.py::test_release"
BAD_RUNS = {2, 3, 8}  # two separate bad stretches, no retry, each on a commit of its own
NOTICE = "No run of the window is on the default branch"


def _junit(bad: bool) -> str:
    failure = '<failure message="Timeout 5s">Timeout 5s</failure>' if bad else ""
    return (
        '<?xml version="1.0"?>\n<testsuite name="pytest" tests="2">'
        f'<testcase classname="tests.test_pool" name="test_acquire" file="tests/test_pool.py">'
        f"{failure}</testcase>"
        '<testcase classname="tests.test_pool" name="test_release" file="tests/test_pool.py"/>'
        "</testsuite>\n"
    )


def branch_history(tmp_path: Path, branch: str | None) -> Path:
    """Twelve daily runs ingested from JUnit reports, each on `branch` (None: not recorded)."""
    lines = []
    for day in range(12):
        report = tmp_path / f"run{day:02d}.xml"
        report.write_text(_junit(day in BAD_RUNS), encoding="utf-8")
        line = {
            "run_id": f"r{day:02d}",
            "file": report.name,
            "commit": f"c{day:02d}",
            "timestamp": (T0 + timedelta(days=day)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        if branch is not None:
            line["branch"] = branch
        lines.append(json.dumps(line))
    manifest = tmp_path / "runs.jsonl"
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    db = tmp_path / "history.db"
    result = CliRunner().invoke(cli, ["ingest", str(db), "--manifest", str(manifest)])
    assert result.exit_code == 0, result.output
    return db


def _report(runner: CliRunner, db: Path, *args: str) -> str:
    result = runner.invoke(cli, ["report", str(db), "--now", NOW, *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("branch", [None, "trunk", "feature/x"])
def test_a_history_without_default_branch_runs_says_so(
    runner: CliRunner, tmp_path: Path, branch: str | None
) -> None:
    db = branch_history(tmp_path, branch)
    data = json.loads(_report(runner, db, "--format", "json"))
    verdicts = {t["test_id"]: t["verdict"] for t in data["tests"]}
    assert verdicts == {FLIPPING: "healthy", STEADY: "healthy"}  # unchanged: no flake evidence
    assert data["no_default_branch_runs"] is True
    table = _report(runner, db).splitlines()
    assert table[1] == (
        f"{NOTICE} (main or master): bad runs between good ones are flake evidence only there, "
        "so a test failing on and off without retries is listed as healthy. Record each run's "
        "branch (flaketui ingest --branch, or the CI variables flaketui reads) or name the "
        "team's branch in default_branches."
    )
    assert sum(NOTICE in line for line in table) == 1
    markdown = _report(runner, db, "--format", "markdown").splitlines()
    assert markdown[2].startswith(f"⚠ {NOTICE} \\(main or master\\): bad runs between")
    assert "default\\_branches." in markdown[2]


def test_the_notice_names_the_configured_default_branches(
    runner: CliRunner, tmp_path: Path
) -> None:
    db = branch_history(tmp_path, "develop")
    Path("pyproject.toml").write_text(
        '[tool.flaketui]\ndefault_branches = ["trunk"]\n', encoding="utf-8"
    )
    assert f"{NOTICE} (trunk): " in _report(runner, db)


def test_a_history_with_default_branch_runs_says_nothing_of_it(
    runner: CliRunner, tmp_path: Path
) -> None:
    db = branch_history(tmp_path, "main")
    data = json.loads(_report(runner, db, "--format", "json"))
    assert {t["test_id"]: t["verdict"] for t in data["tests"]}[FLIPPING] == "flaky"
    assert data["no_default_branch_runs"] is False
    assert NOTICE not in _report(runner, db)
    assert NOTICE not in _report(runner, db, "--format", "markdown")


def test_a_report_restricted_to_pull_requests_keeps_quiet_beside_default_branch_runs(
    runner: CliRunner, tmp_path: Path
) -> None:
    db = branch_history(tmp_path, "main")
    pr = ["--no-detect", "--branch", "x", "--run-id", "pr1", "--timestamp", "2026-11-15T00:00:00Z"]
    result = runner.invoke(cli, ["ingest", str(db), str(tmp_path / "run00.xml"), *pr])
    assert result.exit_code == 0, result.output
    data = json.loads(_report(runner, db, "--branch-kind", "pr", "--format", "json"))
    assert data["tests"] and data["no_default_branch_runs"] is False


def test_an_empty_window_says_nothing_of_the_default_branch(
    runner: CliRunner, tmp_path: Path
) -> None:
    db = branch_history(tmp_path, None)
    data = json.loads(_report(runner, db, "--format", "json", "--now", "2026-10-01T00:00:00Z"))
    assert data["tests"] == [] and data["no_default_branch_runs"] is False
