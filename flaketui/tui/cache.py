"""The app's own files outside any work tree: the user's cache directory, and how it is named."""

from __future__ import annotations

import os
from pathlib import Path


def cache_home() -> Path:
    """The user's cache directory: $XDG_CACHE_HOME, else ~/.cache."""
    base = os.environ.get("XDG_CACHE_HOME")
    return Path(base) if base else Path.home() / ".cache"


def export_folder() -> Path:
    """Where the app's export dialog proposes to write: never a work tree, always writable.

    The current directory is usually a clone, where an export would be an untracked file.
    """
    return cache_home() / "flaketui" / "exports"


def shown(path: Path) -> str:
    """A path as the app names it: under the home directory as `~/...`."""
    try:
        return f"~/{path.relative_to(Path.home())}"
    except ValueError:
        return str(path)
