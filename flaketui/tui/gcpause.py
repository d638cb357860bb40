"""Pause Python's cyclic garbage collector while a worker builds a large report, and at start.

A load allocates millions of short-lived objects; each allocation burst can trigger a full
collection, which walks every tracked object holding the GIL, and the event loop feels that
walk as a stall of hundreds of milliseconds (the target: no stall over 100 ms while loading).
The collector is paused while any load runs and resumed when the last one ends, with what
survived frozen; reference counting still frees everything that is not in a cycle meanwhile.

The console script also pauses it from its first line until the app's first screen is up
(pause_startup, end_startup): importing Textual and building the screen make some 80
collections that find almost nothing to free, about 15 ms of the first ranked screen. Until
then the GIL also changes hands more often: the thread writing the first screen to the
terminal waited up to a whole switch interval (5 ms) for a busy event loop to let it run.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_active = 0
_was_enabled = True
_startup = False  # pause_startup's pause is on
STARTUP_SWITCH_S = 0.0005  # sys.setswitchinterval while starting up
_switch_interval = sys.getswitchinterval()


def _pause() -> None:
    global _active, _was_enabled
    with _lock:
        if _active == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _active += 1


def _resume() -> None:
    global _active
    with _lock:
        _active -= 1
        if _active == 0 and _was_enabled:
            # Everything alive now (the loaded report, the app) moves to the permanent
            # generation: re-enabling would otherwise start a full collection over all of it
            # at once, itself a stall of a few hundred milliseconds on a large history.
            gc.freeze()
            gc.enable()


@contextmanager
def gc_paused() -> Iterator[None]:
    """No automatic cyclic collection while the block runs (nestable, thread-safe)."""
    _pause()
    try:
        yield
    finally:
        _resume()


def pause_startup() -> None:
    """Pause collection, shorten the GIL's turns, until end_startup (once; loads nest inside)."""
    global _startup, _switch_interval
    if not _startup:
        _startup = True
        _pause()
        _switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(STARTUP_SWITCH_S)


def end_startup() -> None:
    """End pause_startup's pause, if it is on (the app calls this once its first screen is up)."""
    global _startup
    if _startup:
        _startup = False
        sys.setswitchinterval(_switch_interval)
        _resume()
