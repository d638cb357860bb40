"""The console script starts the app's first load before click; `open` takes it if it fits."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tui_history import NOW

from flaketui.cli import LAZY_COMMANDS
from flaketui.tui import early
from flaketui.tui.early import open_arguments, open_source, start_early, take_early
from flaketui.tui.loaders import load_main

NOW_TEXT = "2026-11-30T18:00:00Z"


@pytest.fixture(autouse=True)
def _no_early_load_left() -> Iterator[None]:
    """Each test starts and ends without a pending early load."""
    yield
    left, early._early = early._early, None
    if left is not None:
        left.close()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["h.db"], (Path("h.db"), None, None, None)),
        (
            ["open", "h.db", "--now", NOW_TEXT, "--skip-file=q.json"],
            (Path("h.db"), NOW_TEXT, Path("q.json"), None),
        ),
        (["open", "--codeowners", "CO", "h.db"], (Path("h.db"), None, None, Path("CO"))),
        (["h.db", "--now="], (Path("h.db"), "", None, None)),
    ],
)
def test_plain_app_requests_are_understood(args: list[str], expected: tuple[object, ...]) -> None:
    assert open_arguments(args, LAZY_COMMANDS) == expected


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["open"],
        ["report", "h.db"],
        ["--version"],
        ["--codeowners", "CO", "h.db"],  # a group option click refuses
        ["open", "h.db", "-h"],
        ["open", "h.db", "--now"],
        ["open", "h.db", "--unknown", "x"],
        ["open", "a.db", "b.db"],
        ["open", "--", "h.db"],
    ],
)
def test_anything_else_is_left_to_click(args: list[str]) -> None:
    assert open_arguments(args, LAZY_COMMANDS) is None


def _args(history: Path, tmp_path: Path) -> list[str]:
    return [str(history), "--now", NOW_TEXT, "--skip-file", str(tmp_path / "q.json")]


def test_open_takes_the_early_load_once_when_it_reads_the_same(
    history: Path, tmp_path: Path
) -> None:
    start_early(_args(history, tmp_path), LAZY_COMMANDS)
    source = open_source(history, NOW, tmp_path / "q.json", None)
    preload = take_early(source)
    assert preload is not None and preload.source == source
    direct = load_main(source, suite=None, branch_kind=None).report
    assert [t.test_id for t in preload.result().report.tests] == [t.test_id for t in direct.tests]
    assert preload.extras() is not None
    assert take_early(source) is None  # taken once


def test_an_early_load_for_other_arguments_is_stopped(history: Path, tmp_path: Path) -> None:
    start_early(_args(history, tmp_path), LAZY_COMMANDS)
    started = early._early
    assert started is not None
    other = open_source(history, None, tmp_path / "q.json", None)  # no --now: another source
    assert take_early(other) is None
    assert started._child is None  # a forked child was killed and reaped


def test_nothing_starts_for_a_missing_history_or_a_bad_now(tmp_path: Path) -> None:
    start_early([str(tmp_path / "missing.db")], LAZY_COMMANDS)
    assert early._early is None
    bad = tmp_path / "h.db"
    bad.write_bytes(b"")
    start_early([str(bad), "--now", "yesterday"], LAZY_COMMANDS)
    assert early._early is None


CONSOLE_SCRIPT = """
import json, sys
import flaketui.tui.app as app_module

app_module.FlaketuiApp.run = lambda self: print(json.dumps(
    {"click": "click" in sys.modules, "forked": self.preload.forked,
     "source": str(self.source.path), "tests": len(self.preload.result().report.tests)}))
sys.argv = ["flaketui", *sys.argv[1:]]
from flaketui.cli import main
main()
"""

BEFORE_CLICK = """
import sys
from flaketui.cli import LAZY_COMMANDS
from flaketui.tui import early
early.start_early(sys.argv[1:], LAZY_COMMANDS)
print(early._early is not None, "click" in sys.modules)
"""


def _console(code: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


@pytest.mark.skipif(sys.platform != "linux", reason="the forked preload is Linux-only")
def test_the_console_script_reads_before_importing_click_and_the_app_runs_on_it(
    history: Path, tmp_path: Path
) -> None:
    args = _args(history, tmp_path)
    assert _console(BEFORE_CLICK, args, tmp_path).stdout.split() == ["True", "False"]
    done = _console(CONSOLE_SCRIPT, args, tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    # The app ran on the early, forked load, and click was never needed for it.
    assert out["forked"] is True and out["tests"] > 0 and out["click"] is False
    assert out["source"] == str(history)


@pytest.mark.parametrize("content", [b"not a database at all", b""])
def test_a_history_open_refuses_still_gets_clicks_one_line_error(
    tmp_path: Path, content: bytes
) -> None:
    # The early load starts for any existing file; `open`'s check of it is what refuses, in
    # click's words, before any screen (the app is never built).
    bad = tmp_path / "history.db"
    bad.write_bytes(content)
    done = _console(CONSOLE_SCRIPT, [str(bad), "--now", NOW_TEXT], tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    assert "Traceback" not in done.stderr


RAISING_APP = """
import sys
import flaketui.tui.app as app_module
from flaketui.core.errors import FlaketuiError

def run(self):
    raise {raised}

app_module.FlaketuiApp.run = run
sys.argv = ["flaketui", *sys.argv[1:]]
from flaketui.cli import main
main()
"""


@pytest.mark.parametrize(
    ("raised", "line"),
    [('FlaketuiError("history.db: gone")', "Error: history.db: gone"),
     ("KeyboardInterrupt()", "Error: interrupted")],
)  # fmt: skip
def test_a_user_error_while_the_app_runs_is_one_line_as_under_click(
    history: Path, tmp_path: Path, raised: str, line: str
) -> None:
    done = _console(RAISING_APP.format(raised=raised), _args(history, tmp_path), tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [line]


def test_the_early_read_imports_only_what_the_reading_needs() -> None:
    # The forked reader starts from what is imported by then: click, Textual, Rich and the
    # view modules would only delay the first ranking.
    probe = (
        "import sys, flaketui.cli, flaketui.tui.early\n"
        "late = ('click', 'textual', 'rich', 'flaketui.tui.viewmodel', 'flaketui.tui.actionmodel',"
        " 'flaketui.cli.group', 'flaketui.cli.commands')\n"
        "print(sorted(m for m in late if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"
