"""Helpers for tests that read this process's own state (Linux /proc), which other objects of
the process can change behind their back.

Every sqlite3 connection sits in a reference cycle (through its statement cache): one a test
leaves open is closed by the garbage collector, at any later moment of the same process, and
closing the last connection to a WAL history writes its WAL back into the file. A test that
counts the process's writes or descriptors holds the collector off while it counts.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def collector_off() -> Iterator[None]:
    """Collect what is already garbage, then keep the collector off for the block."""
    gc.collect()
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def handles_on(path: Path) -> int:
    """How many of this process's open file descriptors are on the file at path."""
    target = path.resolve()
    return sum(1 for fd in Path("/proc/self/fd").iterdir() if fd.resolve() == target)
