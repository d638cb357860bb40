"""Replace a file atomically: readers see the old content or the new, never a mix."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from flaketui.core.errors import FlaketuiError


def _fsync_dir(folder: Path) -> None:
    """Make a rename durable; some platforms cannot open a directory, which is fine."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace path with data: temp file in the same folder, fsync, rename, fsync the folder."""
    folder = path.parent
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    except OSError as exc:
        raise FlaketuiError(f"{path}: cannot write ({exc.strerror})") from None
    try:
        fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise FlaketuiError(f"{path}: cannot write in {folder} ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        if isinstance(exc, OSError):
            raise FlaketuiError(f"{path}: cannot write ({exc.strerror})") from None
        raise
    _fsync_dir(folder)
