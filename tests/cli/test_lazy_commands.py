"""The CLI imports a command's module only when that command runs, and knows every module."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import flaketui.cli.commands
from flaketui.cli import FlaketuiGroup


def test_every_command_module_is_listed() -> None:
    modules = {m.name for m in pkgutil.iter_modules(flaketui.cli.commands.__path__)}
    assert modules == set(FlaketuiGroup.lazy_commands.values())


def test_running_one_command_imports_only_its_module() -> None:
    code = (
        "import sys\n"
        "from flaketui.cli import cli\n"
        "try:\n"
        "    cli(['prune', '--help'], prog_name='flaketui')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('flaketui.cli.commands.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "['flaketui.cli.commands.prune']"


def test_ci_commands_run_without_sqlite_utils(tmp_path: Path) -> None:
    """A CI job runs `flaketui ingest`, `check`, `report` and `merge` once a run: sqlite-utils,
    which imports pandas and numpy where they are installed (0.3 s), stays unloaded, also when
    the ingest proposes an outage."""
    cases = "".join(
        f'<testcase classname="pkg.m" name="t{i}" time="0.01">{{{i}}}</testcase>' for i in range(10)
    )
    down = '<failure message="ConnectionError: db down"/>'
    for number, failing in enumerate((0, 6, 0)):
        body = cases.format(*([down] * failing + [""] * (10 - failing)))
        (tmp_path / f"r{number}.xml").write_text(f'<testsuite name="s">{body}</testsuite>\n')
    code = (
        "import sys\n"
        "from flaketui.cli import cli\n"
        "for number in range(3):\n"
        "    cli(['ingest', 'h.db', f'r{number}.xml', '--run-id', f'r{number}', '--timestamp',\n"
        "         f'2026-11-30T1{number}:00:00Z', '--no-detect'], standalone_mode=False)\n"
        "cli(['check', 'h.db', '--now', '2026-11-30T18:00:00Z'], standalone_mode=False)\n"
        "cli(['report', 'h.db', '--format', 'html', '-o', 'r.html', '--now',\n"
        "     '2026-11-30T18:00:00Z'], standalone_mode=False)\n"
        "for _ in range(2):  # a copy into a new file, then a merge row by row\n"
        "    cli(['merge', 'carried.db', 'h.db'], standalone_mode=False)\n"
        "print(sorted(m for m in ('sqlite_utils', 'pandas', 'numpy') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout
    assert "1 suspected outage excluded from scoring" in out
    assert "check passed" in out  # the outage's runs are out of scoring: nothing fails
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert "merged 1 history: 3 runs added" in out and "3 already present" in out
    assert out.strip().splitlines()[-1] == "[]"


def test_no_command_loads_sqlite_utils(tmp_path: Path) -> None:
    """The commands a developer or a nightly job runs on a history (decisions, incidents, the
    lifecycle, prune, re-signing, a test's evidence) open it without sqlite-utils too."""
    sample = Path(__file__).resolve().parents[2] / "sample_data" / "history.db"
    (tmp_path / "h.db").write_bytes(sample.read_bytes())
    flaky = "tests/search/test_ranking.py::test_rank_ties_stable"
    now = "2026-11-30T18:00:00Z"
    commands = [
        ["quarantine", "h.db", flaky, "--reason", "flaky", "--skip-file", "skip.toml",
         "--now", now],
        ["release", "h.db", flaky, "--skip-file", "skip.toml", "--now", now],
        ["incident", "add", "h.db", "down", "--from", "2026-11-02T00:00:00Z",
         "--to", "2026-11-02T01:00:00Z"],
        ["incident", "list", "h.db", "--now", now],
        ["incident", "remove", "h.db", "down"],
        ["lifecycle", "h.db", "--apply", "--no-gate", "--skip-file", "skip.toml", "--now", now],
        ["changes", "h.db", flaky, "--now", now],
        ["pivot", "h.db", flaky, "--now", now],
        ["resign", "h.db"],
        ["prune", "h.db", "--older-than", "365"],
    ]  # fmt: skip
    code = (
        "import sys\n"
        "from flaketui.cli import cli\n"
        f"for argv in {commands!r}:\n"
        "    cli(argv, standalone_mode=False)\n"
        "print(sorted(m for m in ('sqlite_utils', 'pandas', 'numpy') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout
    assert f"): {flaky}\nquarantined 1 test" in out and f"released: {flaky}" in out
    assert "incident down removed" in out and "Applied as of 2026-11-30T18:00:00Z" in out
    assert out.strip().splitlines()[-1] == "[]"
