"""Likely causes worked out in a child process, for the app and for the commands.

Cause analysis reads every member's counted runs of every flaky test, family and co-failure
group: minutes at 10 M results, allocating as it goes. A child process (`python -P -m` this
module: the core alone, no UI, no command line) takes a list of targets on its stdin and
answers with what causes.find_causes returns for them, so a result is the same either way.
- The app hands a big analysis (CHILD_MIN_ROWS test-runs or more) to a child and waits on a
  pipe, holding nothing: in its own process the work would hold the interpreter beside the UI
  thread, and its garbage collections would pause the UI as long as they walk the app's
  objects. Smaller ones are analysed in the app's reading thread, where starting an
  interpreter would cost more than the analysis.
- A command (`flaketui report`) shares a big analysis (SHARE_MIN_ROWS or more, on a machine
  with two cores or more for it) with one child: each analyses about half the test-runs, side
  by side (find_causes_shared).

The child reads the history as it is when it opens it. The app reads the history again anyway
when it was written since; a command compares the history's data version before and after,
and analyses the child's targets itself when another connection wrote meanwhile, so that its
causes are read as they would be in one process. A child ends when its work is done, when it
is killed (Apart.stop), or when its parent goes: the parent holds the child's stdin open until
the answer is in, and the child leaves as soon as that pipe closes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from flaketui.core.config import Config
from flaketui.core.errors import FlaketuiError
from flaketui.core.scoring.results import Suspect

if TYPE_CHECKING:
    from flaketui.core.history.dbhandle import Connected
    from flaketui.core.scoring.causes import CauseTarget, FoundCauses

CHILD_MIN_ROWS = 500_000  # test-runs to analyse (causes.cause_rows) from which a child does it
# Test-runs from which a command shares its analysis with a child. 200 000 are about 0.6 s of
# analysis at 1 M results: below that, the child's start (an interpreter, the window's runs
# read again) would take much of what sharing saves.
SHARE_MIN_ROWS = 200_000
LENGTH_BYTES = 8


class ChildFailed(FlaketuiError):
    """The child gave no answer (killed, or it failed): the caller analyses in-process."""


class Apart:
    """The child of one load, if any: stop() kills it (the load was replaced, the app quits)
    and keeps any later one from starting."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._child: subprocess.Popen[bytes] | None = None
        self.stopped = False

    def started(self, child: subprocess.Popen[bytes]) -> None:
        """Note the running child (killed at once if the load was stopped meanwhile)."""
        with self._lock:
            self._child = child
            if self.stopped:
                child.kill()

    def stop(self) -> None:
        """Kill the child, if one runs; no child starts after this."""
        with self._lock:
            self.stopped = True
            if self._child is not None and self._child.poll() is None:
                self._child.kill()


def find_causes_apart(
    path: Path,
    targets: list[CauseTarget],
    *,
    now: datetime,
    config: Config,
    started: Callable[[subprocess.Popen[bytes]], None] | None = None,
) -> FoundCauses:
    """scoring.causes.find_causes on the history at path, in a child process.

    started: called with the child once it runs (Apart.started, so that it can be killed).
    ChildFailed when the child cannot start or ends without a whole answer (it failed, or was
    killed).
    """
    request = json.dumps(
        {
            "path": str(path),
            "targets": targets,
            "now": now.isoformat(),
            "config": config.as_dict(),
        }
    ).encode()
    try:
        child = subprocess.Popen(
            # -P: the working directory is not put first on the module path, so a folder named
            # flaketui where the app was started cannot stand in for the installed package.
            [sys.executable, "-P", "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except (OSError, ValueError) as exc:
        raise ChildFailed(f"cannot start the cause analysis ({exc})") from None
    assert child.stdin is not None and child.stdout is not None
    if started is not None:
        started(child)
    try:
        with contextlib.suppress(BrokenPipeError):
            child.stdin.write(len(request).to_bytes(LENGTH_BYTES, "big") + request)
            child.stdin.flush()
        answer = child.stdout.read()  # to the end: the child exits once it has written it
    finally:
        with contextlib.suppress(OSError):
            child.stdin.close()
        child.stdout.close()
        child.wait()
    # The answer is whole or it is none: a child killed while writing leaves cut JSON.
    try:
        return {
            (kind, key): tuple(Suspect(*fields) for fields in suspects)
            for kind, key, suspects in json.loads(answer)
        }
    except (ValueError, TypeError) as exc:
        raise ChildFailed("the cause analysis ended without an answer") from exc


def find_causes_shared(
    db: Connected,
    path: Path,
    targets: list[CauseTarget],
    rows: list[int],
    *,
    now: datetime,
    config: Config,
) -> FoundCauses:
    """causes.find_causes(db, targets), shared with a child process reading the history at
    path when the analysis is big (SHARE_MIN_ROWS of `rows`, each target's test-runs) and two
    cores are free for it; the same answer either way.

    The child takes the targets after the first half of the test-runs. Its answer is used only
    when no other connection wrote to the history meanwhile (PRAGMA data_version the same
    before and after); else, or when it gives none, this process analyses its targets too.
    """
    from flaketui.core.scoring.causes import find_causes

    total = sum(rows)
    if total < SHARE_MIN_ROWS or _cores() < 2 or len(targets) < 2:
        return find_causes(db, targets, now=now, config=config)
    split, counted = 0, 0
    while split < len(targets) - 1 and counted + rows[split] <= total / 2:
        counted += rows[split]
        split += 1
    mine, theirs = targets[: max(split, 1)], targets[max(split, 1) :]
    version = _data_version(db)
    apart = Apart()
    answer: list[FoundCauses] = []

    def ask() -> None:
        # Whatever keeps the child from answering (ChildFailed, or the request failing on its
        # way), this process analyses its targets instead, as it would without a child.
        with contextlib.suppress(Exception):
            answer.append(
                find_causes_apart(path, theirs, now=now, config=config, started=apart.started)
            )

    child = threading.Thread(target=ask, name="flaketui-causes-child", daemon=True)
    child.start()
    try:
        found = find_causes(db, mine, now=now, config=config)
        child.join()
    finally:
        apart.stop()  # an analysis cut short here leaves no child behind
        child.join()
    if answer and _data_version(db) == version:
        found.update(answer[0])
    else:
        found.update(find_causes(db, theirs, now=now, config=config))
    return found


def _data_version(db: Connected) -> int:
    """The history's data version on this connection: it changes when another one commits."""
    return int(db.conn.execute("PRAGMA data_version").fetchone()[0])


def _cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _config(data: dict[str, object]) -> Config:
    """Config.as_dict() read back (JSON gives lists where the config holds tuples)."""
    defaults = Config()
    return dataclasses.replace(
        defaults,
        **{
            name: tuple(value) if isinstance(getattr(defaults, name), tuple) else value  # type: ignore[arg-type]
            for name, value in data.items()
        },
    )


def _read_exactly(stream: BinaryIO, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError
    return data


def _leave_when_orphaned(fd: int) -> None:
    """Exit the process as soon as the parent closes the request pipe (or dies).

    It reads the file descriptor itself: a thread blocked in the buffered sys.stdin would hold
    its lock, and the interpreter aborts when it finds that lock held as it shuts down.
    """
    while os.read(fd, 4096):
        pass
    signal.raise_signal(signal.SIGTERM)  # the whole process, at once, by its default action


def main() -> None:
    """The child: read one request from stdin, write its answer to stdout."""
    from flaketui.core.history.store import history_file
    from flaketui.core.scoring.causes import find_causes

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    try:
        size = int.from_bytes(_read_exactly(stdin, LENGTH_BYTES), "big")
        request = json.loads(_read_exactly(stdin, size))
    except EOFError:
        sys.exit(1)
    threading.Thread(target=_leave_when_orphaned, args=(stdin.fileno(),), daemon=True).start()
    targets = [(kind, key, tuple(members)) for kind, key, members in request["targets"]]
    with history_file(Path(request["path"]), create=False, readonly=True) as db:
        found = find_causes(
            db,
            targets,
            now=datetime.fromisoformat(request["now"]),
            config=_config(request["config"]),
        )
    answer = [
        [kind, key, [dataclasses.astuple(suspect) for suspect in suspects]]
        for (kind, key), suspects in found.items()
    ]
    stdout.write(json.dumps(answer).encode())
    stdout.flush()


if __name__ == "__main__":
    main()
