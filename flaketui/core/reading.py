"""Read a file named by the user whole, up to a size: a pipe or a device is a stream with no end.

`Path.read_bytes` reads until the end of the file, and some files have none: `/dev/zero` or a
pipe left open fills memory until the system kills the process. The size a file reports is
no guard (a stream reports 0), so the read itself stops one byte past the limit. A named pipe
is worse: opening it waits for a writer. A file read again later, or written back, cannot be a
pipe at all; its reader refuses one first (is_pipe). A terminal (`/dev/tty`) has an end, but
reading it waits for someone to type: it is refused once opened, before any read (IsTerminal),
while `/dev/null` stays a file with nothing in it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class TooLarge(Exception):
    """The file holds more than `limit` bytes (it may never end)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"larger than {size_text(limit)}")
        self.limit = limit


class IsTerminal(Exception):
    """The file is a terminal: reading it would wait for someone to type."""

    def __init__(self) -> None:
        super().__init__("is a terminal, not a file")


def size_text(limit: int) -> str:
    """A limit in the largest binary unit that divides it: '3 MiB', '512 MiB', '100 bytes'."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if limit >= size and limit % size == 0:
            return f"{limit // size} {unit}"
    return f"{limit} bytes"


def is_pipe(path: Path) -> bool:
    """Whether the file is a pipe or a socket, told by stat(): opening a named pipe waits for a
    writer, forever if none comes. False when stat() fails (reading the file says why)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


# Opening never waits (a serial line without a carrier would) and never makes a terminal the
# process's controlling one; reads block again once the file is known to be no terminal.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_NONBLOCK", 0)


def read_at_most(path: Path, limit: int) -> bytes:
    """The file's bytes, or TooLarge once it holds more than `limit`; IsTerminal for a terminal,
    told from the open descriptor before anything is read; OSError as `open`."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        if os.isatty(fd):
            raise IsTerminal()
        if stat.S_ISDIR(os.fstat(fd).st_mode):  # open() refuses a directory; os.open does not
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        os.set_blocking(fd, True)
        with open(fd, "rb", closefd=False) as stream:
            data = stream.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise TooLarge(limit)
    return data
