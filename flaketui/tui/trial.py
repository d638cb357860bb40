"""A history that git tracks is tried, not changed: the app's writes go to a trial copy.

Opening the committed sample of a clone (or any history committed to a repository) and pressing
`q` or `u` must not leave the work tree dirty: the audit rows would change the tracked file (and
switch it to write-ahead logging), and the skip file would appear beside it. So when the history
is a file git tracks, the session is a trial: its first quarantine or release copies the history
and the skip file into the user's cache directory and writes there, and every later read and
write of the session uses those copies. Each session starts its trial afresh from the tracked
file. To keep the writes, work on a copy of the history outside the work tree (or untrack it).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from flaketui.core.atomic import write_atomically
from flaketui.core.errors import FlaketuiError
from flaketui.tui.cache import cache_home, shown
from flaketui.tui.history_access import open_reader
from flaketui.tui.loaders import Source

GIT_TIMEOUT_SECONDS = 5


def tracked_by_git(path: Path) -> bool:
    """Whether `path` is a file of a git work tree's index (False when git cannot tell)."""
    if shutil.which("git") is None:
        return False
    try:
        done = subprocess.run(
            ["git", "ls-files", "--error-unmatch", "--", path.name],
            cwd=path.parent,
            capture_output=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def trial_home(history: Path) -> Path:
    """Where the trial copies of one history live (one folder per tracked file)."""
    digest = hashlib.sha256(str(history.resolve()).encode()).hexdigest()[:10]
    return cache_home() / "flaketui" / "trial" / f"{history.stem}-{digest}"


@dataclass(slots=True)
class Trial:
    """The copies one session writes to, instead of a history git tracks and its skip file."""

    tracked: Path  # the tracked history, never written
    skip_file: Path  # the skip file the session would write outside a trial
    home: Path
    display: str = ""  # the tracked history as the user named it
    started: bool = False

    @property
    def history(self) -> Path:
        """The trial copy of the history."""
        return self.home / self.tracked.name

    @property
    def skip_copy(self) -> Path:
        """The trial copy of the skip file."""
        return self.home / self.skip_file.name

    def notice(self) -> str:
        """What the app says once the trial is known."""
        return (
            f"{self.display or self.tracked.name} is tracked by git, so quarantine and release "
            f"write to a trial copy in {shown(self.home)} (made afresh each session): the work "
            "tree stays as it is"
        )

    def start(self, source: Source) -> None:
        """Copy the history and the skip file (once a session); point `source` at the copies."""
        if self.started:
            return
        try:
            self.home.mkdir(parents=True, exist_ok=True)
            for name in (self.history.name + "-wal", self.history.name + "-shm"):
                (self.home / name).unlink(missing_ok=True)
            _copy_history(self.tracked, self.history)
            skip = self.skip_file.read_bytes() if self.skip_file.is_file() else None
            if skip is None:
                self.skip_copy.unlink(missing_ok=True)
            else:
                write_atomically(self.skip_copy, skip)
        except OSError as exc:
            raise FlaketuiError(f"{shown(self.home)}: cannot make the trial copy ({exc})") from exc
        source.path = self.history
        source.skip_path = self.skip_copy
        source.skip_display = f"{shown(self.skip_copy)} (trial copy)"
        self.started = True


def _copy_history(tracked: Path, target: Path) -> None:
    """A consistent copy of the history through SQLite's backup API, swapped in whole."""
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    with closing(open_reader(tracked).conn) as src, closing(sqlite3.connect(partial)) as dst:
        src.backup(dst)
    os.replace(partial, target)


def trial_for(source: Source) -> Trial | None:
    """The trial of a session whose history git tracks; None for any other history."""
    if not tracked_by_git(source.path):
        return None
    return Trial(
        tracked=source.path,
        skip_file=source.skip_path,
        home=trial_home(source.path),
        display=source.display,
    )
