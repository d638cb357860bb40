"""Drive the real app under tmux on the sample history and check the screen text at each step.

Usage: python tests/tui/smoke_tmux.py [--history sample_data/history.db] [--keep]

Opens a copy of the history (the committed file is never touched) with a temporary skip file,
moves, drills down, quarantines and quits; exits non-zero naming the step that failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SESSION = f"flaketui-smoke-{os.getpid()}"  # two runs at once never share one
NOW = "2026-11-30T18:00:00Z"
TIMEOUT_S = 90.0
SELECTION = re.compile(r"^ [^\s\d]\S*::")
FIRST_ROW = re.compile(r"^\s*1\s{2,}\S")


def tmux(*args: str) -> str:
    """Run one tmux command and return its output."""
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def screen() -> str:
    """The visible text of the app."""
    return tmux("capture-pane", "-p", "-t", SESSION)


def wait_for(step: str, *needles: str) -> str:
    """Poll the screen until every needle is on it, or fail the step."""
    deadline = time.monotonic() + TIMEOUT_S
    text = ""
    while time.monotonic() < deadline:
        text = screen()
        if all(needle in text for needle in needles):
            print(f"ok   {step}")
            return text
        time.sleep(0.25)
    print(f"FAIL {step}: missing {[n for n in needles if n not in text]}\n{text}")
    raise SystemExit(1)


def selection_line(text: str) -> str:
    """The line under the table that names the highlighted test: it starts with the test's
    id (the table's rows start with their rank), and may wrap, as the key bar below it may."""
    lines = [line for line in text.splitlines() if SELECTION.match(line)]
    return lines[-1] if lines else ""


def moved_to(before: str) -> None:
    """Wait until the highlighted test changed."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        if selection_line(screen()) != before:
            print("ok   move: another test highlighted")
            return
        time.sleep(0.25)
    print(f"FAIL move: the highlighted test did not change\n{screen()}")
    raise SystemExit(1)


def wait_for_file(path: Path) -> list[str]:
    """Wait until the skip file exists and return its test ids."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        if path.exists():
            doc = json.loads(path.read_text(encoding="utf-8"))
            entries = doc.get("tests", doc)
            print("ok   quarantine: skip file written")
            return sorted(entries)
        time.sleep(0.25)
    print(f"FAIL quarantine: {path} was never written\n{screen()}")
    raise SystemExit(1)


def keys(*names: str) -> None:
    """Send keys to the app."""
    tmux("send-keys", "-t", SESSION, *names)


def main(argv: list[str] | None = None) -> int:
    """Run the smoke scenario."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--history", type=Path, default=ROOT / "sample_data" / "history.db")
    parser.add_argument("--keep", action="store_true", help="leave the tmux session running")
    args = parser.parse_args(argv)
    if shutil.which("tmux") is None:
        print("tmux is not installed")
        return 2
    flaketui = Path(sys.executable).with_name("flaketui")
    with tempfile.TemporaryDirectory(prefix="flaketui-smoke-") as tmp:
        work = Path(tmp)
        shutil.copyfile(args.history, work / "history.db")
        owners = args.history.with_name("CODEOWNERS")
        if owners.exists():  # the sample keeps its CODEOWNERS beside the history
            shutil.copyfile(owners, work / "CODEOWNERS")
        skip_file = work / "q.json"
        command = f"cd {work} && {flaketui} history.db --now {NOW} --skip-file q.json"
        subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)
        tmux("new-session", "-d", "-s", SESSION, "-x", "160", "-y", "48", command)
        try:
            wait_for("open: header", "as of 2026-11-30T18:00:00Z", "1 Flaky")
            text = wait_for("open: ranked list", " 1  ", "flaky ")
            if owners.exists():
                wait_for("open: owners from the CODEOWNERS beside the history", "@acme/")
            # The rank column is right-aligned: "  1  tests/…" once ranks reach two digits.
            first_line = next(line for line in text.splitlines() if FIRST_ROW.match(line))
            before = selection_line(text)
            keys("Down")
            moved_to(before)
            keys("Up", "Enter")
            wait_for("drill down: detail screen", "Outcome sequence", "Likely causes", "workers")
            keys("Escape")
            back = wait_for("back to the list", "1 Flaky", "Damage")
            # The line under the table names the highlighted test in full (list cells are
            # trimmed, and their width may still change while the rows are filled in).
            selected = selection_line(back)
            keys("q")
            wait_for("quarantine dialog", "Quarantine ", "writes q.json", "Expires in")
            keys("C-s")
            entries = wait_for_file(skip_file)
            wait_for("quarantine confirmed", "Done")
            keys("3")
            wait_for("quarantined view lists it", "Days left", "30d")
            if len(entries) != 1 or entries[0] not in selected.split():
                print(f"FAIL quarantine: {entries} is not the highlighted test ({selected})")
                return 1
            print(f"ok   skip file holds the highlighted test: {entries}")
            keys("C-q")
            deadline = time.monotonic() + TIMEOUT_S
            while time.monotonic() < deadline:
                if (
                    SESSION
                    not in subprocess.run(["tmux", "ls"], capture_output=True, text=True).stdout
                ):
                    break
                time.sleep(0.2)
            else:
                print("FAIL quit: the app is still running")
                return 1
            print("ok   quit")
            left = sorted(p.name for p in work.glob("history.db-*"))
            if left:
                print(f"FAIL quit: the app left {left} beside the history")
                return 1
            print("ok   no -wal/-shm left beside the history")
            print(f"(first row was: {first_line.strip()[:100]})")
        finally:
            if not args.keep:
                subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
