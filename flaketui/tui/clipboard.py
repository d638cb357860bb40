"""Copying text out of the app honestly: what was sent where, and a copy that surely lands.

The app cannot know whether a copy reached the system clipboard: it sends the text to the
terminal as an OSC 52 escape sequence, which many terminals take, and which tmux passes on
only when its `set-clipboard` option is `on` (its default, `external`, keeps it). So each copy
is also written to a file in the user's cache directory, and, inside tmux, loaded into tmux's
paste buffer (`prefix ]` pastes it; `load-buffer -w` passes it on to the outer terminal where
tmux may). The notification says which of these happened.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from flaketui.core.atomic import write_atomically
from flaketui.core.errors import FlaketuiError
from flaketui.tui.cache import cache_home, shown

TMUX_TIMEOUT_SECONDS = 5
COPY_FILE = "copied.txt"


@dataclass(slots=True)
class CopyOutcome:
    """Where a copied text went, besides the OSC 52 sequence sent to the terminal."""

    file: Path | None
    tmux_buffer: bool

    def message(self, text: str) -> str:
        """The notification body: the text, then where else it is."""
        places: list[str] = []
        if self.tmux_buffer:
            places.append("in tmux's paste buffer (prefix ])")
        if self.file is not None:
            places.append(f"in {shown(self.file)}")
        if not places:
            return f"{text}\nIf the terminal did not take it, select it on the screen."
        return f"{text}\nIf the terminal did not take it, it is also {' and '.join(places)}."


TITLE = "Sent to the terminal's clipboard (OSC 52)"


def copy_file() -> Path:
    """The file that holds the last copied text."""
    return cache_home() / "flaketui" / COPY_FILE


def save_copy(text: str, env: Mapping[str, str] | None = None) -> CopyOutcome:
    """Write the text to the copy file and, inside tmux, to tmux's paste buffer."""
    env = os.environ if env is None else env
    target: Path | None = copy_file()
    try:
        copy_file().parent.mkdir(parents=True, exist_ok=True)
        write_atomically(copy_file(), (text + "\n").encode())
    except (OSError, FlaketuiError):
        target = None
    return CopyOutcome(file=target, tmux_buffer=bool(env.get("TMUX")) and _to_tmux(text, env))


def _to_tmux(text: str, env: Mapping[str, str]) -> bool:
    """Load the text into the tmux server this app runs in; False when that fails."""
    tmux = shutil.which("tmux", path=env.get("PATH"))
    if tmux is None:
        return False
    try:
        done = subprocess.run(
            [tmux, "load-buffer", "-w", "-"],
            input=text.encode(),
            env=dict(env),
            capture_output=True,
            timeout=TMUX_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0
