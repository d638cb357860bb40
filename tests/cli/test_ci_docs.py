"""docs/ci.md: every `flaketui`, `pytest` and `mkdir` command of every example runs, in order,
against a small history in a scratch workspace (one per example), as a CI job would run them."""

from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli.commands import cli
from tests.connections import open_history
from tests.core.history_builder import HistoryBuilder

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ci.md"
CORPUS = ROOT / "tests" / "corpus"
CI_PREFIXES = ("GITHUB_", "GITLAB", "CI_", "BUILDKITE", "CIRCLE", "JENKINS", "BUILD_", "GIT_")
# A fenced example, with its language; `text` fences hold synopses, not commands.
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
DEMO_TESTS = """
def test_adds():
    assert 1 + 1 == 2


def test_joins():
    assert "-".join("ab") == "a-b"
"""
JUNIT = """<?xml version="1.0"?>
<testsuite name="web"><testcase classname="web.Cart" name="adds"/>
<testcase classname="web.Cart" name="pays"><failure message="timeout"/></testcase>
</testsuite>
"""


def commands(block: str) -> list[list[str]]:
    """The flaketui, pytest and mkdir commands of one example, in order, as argument lists."""
    found = []
    lines = block.replace("\\\n", " ").splitlines()
    for line in lines:
        text = line.strip().removeprefix("- ").strip()
        text = text.removeprefix("run:").strip()
        if not text.startswith(("flaketui ", "pytest ", "mkdir ")):
            continue
        found.append(shlex.split(text, comments=True))
    return found


def examples() -> list[list[list[str]]]:
    """Each fenced example of the page that holds a command."""
    fences = _FENCE.findall(DOC.read_text())
    blocks = [commands(block) for language, block in fences if language != "text"]
    return [block for block in blocks if block]


def small_history(path: Path) -> None:
    """20 days of main runs ending now: one flaky test, one regression, one healthy."""
    db = open_history(path)
    hb = HistoryBuilder(db)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=20)
    for day in range(20):
        run = hb.run(ts=start + timedelta(days=day), commit=f"c{day:02d}", run_id=f"old-{day}")
        run.result("tests/test_api.py::test_pool", ["fail", "pass"] if day % 3 else ["pass"])
        run.result("tests/test_api.py::test_sum", ["fail"] if day >= 15 else ["pass"])
        run.result("tests/test_api.py::test_ok", ["pass"])
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.conn.close()


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout as a CI job sees it: tests, reports, the history a previous run left."""
    for name in list(os.environ):
        if name.startswith(CI_PREFIXES) or name in ("CI", "FLAKETUI_SKIP_FILE"):
            monkeypatch.delenv(name)
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "tests" / "test_demo.py").write_text(DEMO_TESTS)
    (ws / "reports").mkdir()
    (ws / "reports" / "web.xml").write_text(JUNIT)
    (ws / "ctrf").mkdir()
    shutil.copy(CORPUS / "ctrf" / "comprehensive.json", ws / "ctrf" / "ctrf-report.json")
    (ws / "previous").mkdir()
    small_history(ws / "previous" / "history.db")
    shutil.copy(ws / "previous" / "history.db", ws / "history.db")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "step-summary.md"))
    monkeypatch.chdir(ws)
    return ws


def expand(args: list[str]) -> list[str]:
    """Environment variables and globs, as the shell would."""
    out: list[str] = []
    for arg in args:
        arg = os.path.expandvars(arg)
        out.extend(sorted(glob.glob(arg)) or [arg] if "*" in arg else [arg])
    return out


def run_command(args: list[str], ws: Path) -> None:
    """One command of an example, as its CI job would run it."""
    if args[0] == "pytest":
        run_pytest(args, ws)
    elif args[0] == "mkdir":
        for folder in args[1:]:
            if not folder.startswith("-"):
                (ws / folder).mkdir(parents=True, exist_ok=True)
    else:
        run_flaketui(args)


def run_pytest(args: list[str], ws: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    done = subprocess.run(
        [sys.executable, "-m", *args, "-p", "no:cacheprovider", "-q"],
        cwd=ws,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def run_flaketui(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args[1:])
    shown = " ".join(args)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        shown,
        result.output,
    )
    assert "Traceback" not in result.output
    allowed = {0, 1} if args[1] == "check" else {0}  # check fails a job on purpose
    assert result.exit_code in allowed, (shown, result.output)


def test_the_page_has_its_examples() -> None:
    found = examples()
    assert len(found) >= 6
    every = [" ".join(args[:2]) for block in found for args in block]
    for needed in (
        "flaketui ingest",
        "flaketui merge",
        "flaketui check",
        "flaketui report",
        "flaketui lifecycle",
        "pytest --flaketui-db",
    ):
        assert needed in every, needed


@pytest.mark.parametrize("index", range(len(examples())))
def test_example_commands_run(workspace: Path, index: int) -> None:
    for args in examples()[index]:
        run_command(expand(args), workspace)
    summary = Path(os.environ["GITHUB_STEP_SUMMARY"])
    for written in [*workspace.glob("**/*.html"), *workspace.glob("*.md"), summary]:
        if written.exists():
            assert written.stat().st_size > 0, written


def test_github_example_leaves_a_summary_and_a_report(workspace: Path) -> None:
    github = next(b for b in examples() if any("$GITHUB_STEP_SUMMARY" in args for args in b))
    for args in github:
        run_command(expand(args), workspace)
    summary = Path(os.environ["GITHUB_STEP_SUMMARY"]).read_text()
    assert summary.startswith("### flaketui check fails")
    assert "tests/test\\_api.py::test\\_sum" in summary  # the open regression
    page = (workspace / "flaketui-report.html").read_text().replace("<wbr>", "")
    assert "test_demo.py::test_adds" in page  # this run, merged into the history
    assert "tests/test_api.py::test_pool" in page  # earlier runs
