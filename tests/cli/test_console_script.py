"""The `flaketui` console script: `flaketui HISTORY` opens the app; user errors are one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.connections import open_history

NOW_TEXT = "2026-11-30T18:00:00Z"

# The console script, with the app's run replaced by a report of what it would show.
SHOWN_APP = """
import json, sys
import flaketui.tui.app as app_module

app_module.FlaketuiApp.run = lambda self: print(json.dumps(
    {"source": str(self.source.path), "now": str(self.source.requested_now),
     "skip": self.source.skip_path.name}))
sys.argv = ["flaketui", *sys.argv[1:]]
from flaketui.cli import main
main()
"""

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


def _console(code: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


@pytest.fixture
def empty_history(tmp_path: Path) -> Path:
    """A valid history with no runs."""
    path = tmp_path / "history.db"
    open_history(path).conn.close()
    return path


@pytest.mark.parametrize("prefix", [[], ["open"]])
def test_history_alone_or_after_open_runs_the_app(
    empty_history: Path, tmp_path: Path, prefix: list[str]
) -> None:
    args = [*prefix, str(empty_history), "--now", NOW_TEXT, "--skip-file", "q.json"]
    done = _console(SHOWN_APP, args, tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {
        "source": str(empty_history),
        "now": "2026-11-30 18:00:00+00:00",
        "skip": "q.json",
    }


@pytest.mark.parametrize("content", [b"not a database at all", b""])
def test_a_history_open_refuses_is_one_line_before_any_screen(
    tmp_path: Path, content: bytes
) -> None:
    bad = tmp_path / "history.db"
    bad.write_bytes(content)
    done = _console(SHOWN_APP, [str(bad), "--now", NOW_TEXT], tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr


@pytest.mark.parametrize(
    ("raised", "line"),
    [('FlaketuiError("history.db: gone")', "Error: history.db: gone"),
     ("KeyboardInterrupt()", "Error: interrupted")],
)  # fmt: skip
def test_a_user_error_while_the_app_runs_is_one_line(
    empty_history: Path, tmp_path: Path, raised: str, line: str
) -> None:
    args = [str(empty_history), "--now", NOW_TEXT]
    done = _console(RAISING_APP.format(raised=raised), args, tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [line]


def test_options_and_commands_still_reach_click(tmp_path: Path) -> None:
    done = _console(SHOWN_APP, ["--version"], tmp_path)
    assert done.returncode == 0 and "flaketui" in done.stdout
    done = _console(SHOWN_APP, ["report", "--help"], tmp_path)
    assert done.returncode == 0 and "Usage: flaketui report" in done.stdout
    done = _console(SHOWN_APP, ["--bogus"], tmp_path)
    assert done.returncode == 2 and "No such option" in done.stderr


SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "history.db"


@pytest.mark.parametrize(
    "args",
    [
        ["incident", "list", "h.db"],
        ["report", "h.db", "--now", NOW_TEXT],
        ["export", "h.db", "--now", NOW_TEXT, "--format", "csv"],
        ["lifecycle", "h.db", "--now", NOW_TEXT],
        ["check", "h.db", "--now", NOW_TEXT],
        ["check", "h.db", "--now", NOW_TEXT, "--fail-on", ""],
        ["--help"],
    ],
    ids=" ".join,
)
def test_a_reader_that_stops_reading_changes_neither_status_nor_stderr(
    tmp_path: Path, args: list[str]
) -> None:
    """`flaketui ... | head -1`: the output is cut, quietly; the status is the command's own."""
    shutil.copy(SAMPLE, tmp_path / "h.db")
    command = [sys.executable, "-m", "flaketui", *args]
    read = subprocess.run(command, capture_output=True, timeout=120, cwd=tmp_path)
    assert read.stdout, read.stderr
    reader, writer = os.pipe()
    os.close(reader)  # the reader is gone before the first line: every write finds no reader
    try:
        unread = subprocess.run(
            command, stdout=writer, stderr=subprocess.PIPE, timeout=120, cwd=tmp_path
        )
    finally:
        os.close(writer)
    assert unread.stderr == read.stderr
    assert unread.returncode == read.returncode


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    "args",
    [
        ["report", "h.db", "--now", NOW_TEXT],
        ["report", "h.db", "--now", NOW_TEXT, "--format", "json"],
        ["export", "h.db", "--now", NOW_TEXT, "--format", "csv"],
        ["lifecycle", "h.db", "--now", NOW_TEXT],
        ["check", "h.db", "--now", NOW_TEXT],
        ["report", "--help"],
        ["--help"],
        ["--version"],
    ],
    ids=" ".join,
)
def test_output_the_disk_refuses_is_one_error_line(tmp_path: Path, args: list[str]) -> None:
    """`flaketui report DB > out.txt` on a full disk: one line naming standard output and the
    reason, status 1, and the history as it was."""
    shutil.copy(SAMPLE, tmp_path / "h.db")
    before = (tmp_path / "h.db").read_bytes()
    command = [sys.executable, "-m", "flaketui", *args]
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            command, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120, cwd=tmp_path
        )
    assert done.stderr == "Error: standard output: no space left on device\n"
    assert done.returncode == 1
    assert (tmp_path / "h.db").read_bytes() == before
