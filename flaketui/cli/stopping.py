"""A command stopped by a signal cleans up before it ends: `kill`, a cancelled CI job, a closed
terminal.

SIGTERM and SIGHUP end a Python process at once by default: no `finally` block runs, so a
command stopped midway left what it was building behind (a diagnosis's scratch folder in the
temporary directory, the private copy a reader files waiting runs into, the half-written
replica of `flaketui sync`, a pytest session still running on its own). Here either signal
unwinds the command as an exception instead: each transaction rolls back, each temporary
file and folder goes, each child process is killed. The process then ends by the same signal,
so whoever sent it sees the status it expects (143 for SIGTERM in a shell).

A second signal while the command cleans up ends it at once, by the signal's default action.
A signal the command was started with ignored (`nohup` ignores SIGHUP) stays ignored.
"""

from __future__ import annotations

import signal
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Stopped(SystemExit):
    """A stop signal unwinding the command.

    A SystemExit, so that what catches exceptions to report them (the app's workers, an event
    loop's callbacks) lets it through, as it does an exit; its status is the shell's for a
    process ended by the signal.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


def stop_signals() -> tuple[signal.Signals, ...]:
    """The signals that stop a command: SIGTERM, and SIGHUP where the system has it."""
    hangup = getattr(signal, "SIGHUP", None)
    return (signal.SIGTERM,) if hangup is None else (signal.SIGTERM, hangup)


def _stop(signum: int, frame: FrameType | None) -> None:
    for each in stop_signals():
        if signal.getsignal(each) is _stop:
            signal.signal(each, signal.SIG_DFL)  # a second signal ends the process at once
    raise Stopped(signum)


@contextmanager
def unwinding_on_stop() -> Iterator[None]:
    """Run the block with SIGTERM and SIGHUP unwinding it, then end the process by the signal
    that arrived, if one did. Signals already handled or ignored are left as they are, and so
    is every signal when the block runs outside the main thread (only it can handle them)."""
    taken = []
    if threading.current_thread() is threading.main_thread():  # where handlers can be set
        taken = [each for each in stop_signals() if signal.getsignal(each) is signal.SIG_DFL]
    for each in taken:
        signal.signal(each, _stop)
    try:
        yield
    except Stopped as stopped:
        _release_unwound(stopped)
        signal.signal(stopped.signum, signal.SIG_DFL)
        signal.raise_signal(stopped.signum)
        raise  # only where the signal's default action does not end the process
    finally:
        for each in taken:
            if signal.getsignal(each) is _stop:
                signal.signal(each, signal.SIG_DFL)


def _release_unwound(stopped: BaseException) -> None:
    """Free what the unwound frames still hold before the signal ends the process: their local
    variables live on in the exception's traceback (and in those of the exceptions it was
    raised while handling), and what is finished only once freed would end with the process,
    unfinished. A history closed while a cursor of one of its queries was still held (a
    command stopped amid the query's rows) closes, removing its -wal and -shm files, only when
    the cursor goes."""
    seen: set[int] = set()
    exc: BaseException | None = stopped
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__context__
