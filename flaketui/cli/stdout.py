"""Standard output that its reader may stop reading: `flaketui report DB | head -1`.

When the reader of a pipe goes away, what the command still prints is dropped, quietly, and the
command finishes as it would have: the same files written and the same exit status (a finding
of `check` stays status 1, a passing one 0). click's own answer to a broken pipe, status 1 with
nothing said and the command stopped half-way, would hide a gate's verdict.

Output that cannot be written at all (`flaketui report DB > out.txt` on a full disk, an I/O
error) is the command's error: UnwritableOutput, one line naming standard output and the
system's reason, status 1.
"""

from __future__ import annotations

import io
import os
import sys
from typing import Any

STDOUT_NAME = "standard output"


class UnwritableOutput(OSError):
    """Standard output refused what the command printed (ENOSPC, EIO, EFBIG, ...): an OSError
    naming it as its file, so that it reads as any path the system refuses."""


class _PipeWriter(io.RawIOBase):
    """Writes to a file descriptor; once its reader is gone, the descriptor is /dev/null."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data: Any) -> int:
        try:
            return os.write(self._fd, data)
        except BrokenPipeError:
            # Everything else that writes to the descriptor (the interpreter's last flush, a
            # child process) writes to /dev/null from now on, without an error either.
            self._to_devnull()
            return memoryview(data).nbytes
        except OSError as exc:
            # The command stops with this error; what is still buffered goes to /dev/null,
            # so that the interpreter's last flush does not fail again on its way out.
            self._to_devnull()
            raise UnwritableOutput(exc.errno, exc.strerror, STDOUT_NAME) from None

    def _to_devnull(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._fd)
        finally:
            os.close(devnull)


def drop_output_once_unread() -> None:
    """Make sys.stdout drop what it is given once its reader is gone (a pipe into `head`).

    A terminal, or a stream without a file descriptor (a test's), is left as it is.
    """
    stream = sys.stdout
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    if os.isatty(fd):
        return
    stream.flush()
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(_PipeWriter(fd)),
        encoding=stream.encoding,
        errors=stream.errors,
        line_buffering=bool(getattr(stream, "line_buffering", False)),
    )
