"""Before the UI exists: resolve where the app reads and writes, and start reading the ranking.

Nothing here imports Textual, so `flaketui open` can start the first load in a thread and only
then import the UI: the history is read while Textual starts (first ranked screen).
"""

from __future__ import annotations

import atexit
import contextlib
import copyreg
import dataclasses
import gc
import operator
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from flaketui.core.config import Config
from flaketui.core.errors import FlaketuiError
from flaketui.core.scoring.results import GroupVerdict, Report, Scores, TestVerdict
from flaketui.tui.gcpause import gc_paused
from flaketui.tui.history_access import is_read_only
from flaketui.tui.loaders import Extras, MainData, Source, load_in_stages

T = TypeVar("T")
BACKGROUND_NICENESS = 10  # the loading child, once the ranking is sent (see Preload._fork)
STEPS = 3  # ranking, complete report, extras (loaders.load_in_stages)
PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent ends


def make_source(
    path: str | Path,
    now: datetime | None = None,
    skip_file: str | Path | None = None,
    *,
    config: Config | None = None,
    codeowners: str | Path | None = None,
) -> Source:
    """The history, skip file, clock, config and CODEOWNERS of one app session."""
    from flaketui.core.owners import find_repo_root, locate_codeowners
    from flaketui.core.quarantine.skipfile import resolve_skip_file

    config = config if config is not None else Config()
    history = Path(path).absolute()
    root = find_repo_root(Path.cwd())
    explicit = Path(codeowners).absolute() if codeowners else None
    owners = locate_codeowners(history, explicit=explicit)
    skip_path = resolve_skip_file(skip_file, env=os.environ, config=config, root=root)
    return Source(
        path=history,
        skip_path=skip_path,
        display=str(path),
        skip_display=shown_path(skip_path),
        requested_now=now,
        config=config,
        readonly=is_read_only(history),
        owners_from=owners,
        owners_display=shown_path(owners) if owners else "",
    )


def shown_path(path: Path) -> str:
    """A path relative to the current directory when it lies inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


class Preload:
    """The first ranking (all suites, all branch kinds), then the rest, read at once.

    Three steps from one read snapshot (loaders.load_in_stages): the ranked tests, the
    complete report (groups, every daily series), the lifecycle states and suites.
    On Linux, while the process has a single thread (before Textual starts), the reading runs
    in a forked child process: scoring and the lifecycle replay are long pure-Python loops, and
    in a thread they would hold the GIL the event loop needs, stalling the first screens.
    The child sends the results back pickled over a pipe and exits. Elsewhere, or
    once threads exist, a daemon thread does the same work in this process.
    """

    def __init__(self, source: Source, *, allow_fork: bool = True) -> None:
        """Start reading; the app's first load workers collect the results."""
        self.source = source
        self._done = [threading.Event() for _ in range(STEPS)]
        self._outcomes: list[_Outcome] = [None] * STEPS
        self._child: int | None = None
        self._child_lock = threading.Lock()
        self._forked = False
        # The later steps are read (unpickled, or made in the thread) once asked for: before,
        # their work would take the GIL from the first paint of the ranked list.
        self._wanted = threading.Event()
        if allow_fork and _can_fork():
            self._fork()
        else:
            # A daemon thread: quitting before the load ends must not wait for it.
            threading.Thread(target=self._in_thread, name="flaketui-preload", daemon=True).start()

    @property
    def forked(self) -> bool:
        """Whether the reading runs (or ran) in a child process."""
        return self._forked

    def _arrived(self, step: int, outcome: _Outcome) -> bool:
        """Record one step's outcome; after a failure the later steps never come."""
        self._outcomes[step] = outcome
        self._done[step].set()
        if outcome is not None and outcome[0] == "ok":
            return True
        for later in self._done[step + 1 :]:
            later.set()
        return False

    # ---- in a thread ------------------------------------------------------------------------

    def _in_thread(self) -> None:
        stages = load_in_stages(self.source)
        with contextlib.closing(stages):
            for step in range(STEPS):
                if step:
                    self._wanted.wait()
                if not self._arrived(step, _attempt(lambda: next(stages))):
                    break

    # ---- in a child process -----------------------------------------------------------------

    def _fork(self) -> None:
        read_end, write_end = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: read, send, leave without running the parent's cleanup
            try:
                os.close(read_end)
                _silence_output()  # the terminal is the app's: a stray warning would garble it
                gc.disable()  # a short-lived process: let it allocate without collections
                # sqlite-utils imports pandas and numpy when installed (0.3-1 s), for value
                # types this read-only child never meets: tell Python they are absent here.
                for optional in ("pandas", "numpy"):
                    sys.modules.setdefault(optional, None)  # type: ignore[arg-type]
                stages = load_in_stages(self.source)
                with os.fdopen(write_end, "wb") as out, contextlib.closing(stages):
                    for step in range(STEPS):
                        outcome = _attempt(lambda: next(stages))
                        _dump(outcome, out)
                        out.flush()
                        if outcome[0] != "ok":
                            break
                        if step == 0:
                            # The first screen is drawing now: the groups and the lifecycle
                            # replay must not take the CPU the event loop needs.
                            with contextlib.suppress(OSError):
                                os.nice(BACKGROUND_NICENESS)
                            _end_with(parent)
            finally:
                os._exit(0)
        os.close(write_end)
        self._child = pid
        self._forked = True
        atexit.register(self.close)
        reader = threading.Thread(
            target=self._receive, args=(read_end,), name="flaketui-preload", daemon=True
        )
        reader.start()

    def _receive(self, read_end: int) -> None:
        with os.fdopen(read_end, "rb") as incoming:
            for step in range(STEPS):
                if step:
                    self._wanted.wait()
                # Unpickling a large report allocates enough to start collections in the middle.
                with gc_paused():
                    outcome = _unpickle(incoming)
                if not self._arrived(step, outcome):
                    break
        self._reap()

    def _reap(self) -> None:
        with self._child_lock:  # the reader thread and atexit may both get here
            pid, self._child = self._child, None
        if pid is not None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            atexit.unregister(self.close)

    def close(self) -> None:
        """Stop a child still reading (the app quit first) and reap it."""
        self._wanted.set()  # the reader thread reads the end of the pipe and ends
        with self._child_lock:
            if self._child is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._child, signal.SIGTERM)
        self._reap()

    # ---- results ----------------------------------------------------------------------------

    def result(self) -> MainData:
        """Wait for the ranking; raise what reading it raised (called from a worker thread)."""
        self._done[0].wait()
        return _value(self._outcomes[0], MainData)

    def complete(self) -> Report | None:
        """Wait for the complete report (None when an earlier step failed)."""
        return self._later(1, Report)

    def extras(self) -> Extras | None:
        """Wait for the lifecycle states and suites (None when an earlier step failed)."""
        return self._later(2, Extras)

    def _later(self, step: int, kind: type[T]) -> T | None:
        self._wanted.set()
        self._done[step].wait()
        outcome = self._outcomes[step]
        return None if outcome is None else _value(outcome, kind)


_Outcome = tuple[str, Any] | None


def _can_fork() -> bool:
    """Fork only on Linux and only while this is the process's one thread."""
    return sys.platform == "linux" and threading.active_count() == 1


def _end_with(parent: int) -> None:
    """Have Linux end this child when the app's process ends, even killed (no atexit then).

    Otherwise a killed app leaves its reader computing the lifecycle for seconds, until its
    next write finds the pipe closed. Asked after the first step: ctypes is not free.
    """
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it ended before the request took effect
        os._exit(0)


def _silence_output() -> None:
    """Point the child's stdout and stderr at /dev/null (results go through the pipe)."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


def _attempt(job: Callable[[], Any]) -> tuple[str, Any]:
    """("ok", value), or ("error", one-line message) for a user error, ("crash", text)."""
    try:
        return "ok", job()
    except FlaketuiError as exc:
        return "error", exc.message
    except Exception as exc:  # reported by the app as an error, never a traceback
        return "crash", f"{type(exc).__name__}: {exc}"


def _dump(outcome: tuple[str, Any], out: BinaryIO) -> None:
    """Pickle one step's outcome, the report's items as their field values (see _by_fields)."""
    pickler = pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _by_fields()
    pickler.dump(outcome)


def _by_fields() -> dict[type, Any]:
    """Reducers for the report's many small dataclasses: a tuple of field values each.

    Pickle's default for a slotted dataclass is a state of (name, value) pairs per object:
    on the first ranking of a 1 M-result history about 7 ms to pickle in the reader and 5 ms
    to unpickle in the app, both on the way to the first ranked screen; as tuples,
    about 3 and 2.5. Rebuilt through the class's __init__, so only for classes whose fields
    all go through it and which have no __post_init__ to run again.
    """
    table: dict[type, Any] = dict(copyreg.dispatch_table)
    for cls in (Scores, TestVerdict, GroupVerdict):
        if rebuilt_by_fields(cls):
            names = [f.name for f in dataclasses.fields(cls)]
            table[cls] = partial(_reduce, cls, operator.attrgetter(*names))
    return table


def rebuilt_by_fields(cls: type) -> bool:
    """Whether `cls(*field values)` gives the object back: every field positional in __init__."""
    if not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__"):
        return False
    fields = dataclasses.fields(cls)
    return len(fields) > 1 and all(f.init and not f.kw_only for f in fields)


def _reduce(cls: type, values: Callable[[Any], tuple[Any, ...]], obj: Any) -> tuple[Any, ...]:
    return (_rebuild, (cls, values(obj)))


def _rebuild(cls: type[T], values: tuple[Any, ...]) -> T:
    """An object pickled by _by_fields' reducers."""
    return cls(*values)


def _unpickle(incoming: BinaryIO) -> tuple[str, Any]:
    try:
        outcome: tuple[str, Any] = pickle.load(incoming)
    except (EOFError, pickle.UnpicklingError, OSError) as exc:
        return "crash", f"the loading process ended early ({type(exc).__name__})"
    return outcome


def _value(outcome: _Outcome, kind: type[T]) -> T:
    if outcome is None:
        raise FlaketuiError("the history could not be read")
    status, value = outcome
    if status == "ok" and isinstance(value, kind):
        return value
    raise FlaketuiError(str(value))
