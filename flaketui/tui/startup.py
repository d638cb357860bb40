"""Before the UI exists: resolve where the app reads and writes, and start reading the ranking.

Nothing here imports Textual, so `flaketui open` can start the first load in a thread and only
then import the UI: the history is read while Textual starts (SPEC §9, first ranked screen).
"""

from __future__ import annotations

import os
import threading
from datetime import datetime
from pathlib import Path

from flaketui.core.config import Config
from flaketui.tui.history_access import is_read_only
from flaketui.tui.loaders import MainData, Source, load_main
from flaketui.tui.viewmodel import shown_path


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
    from flaketui.core.skipfile import resolve_skip_file

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


class Preload:
    """The first ranking (all suites, all branch kinds), read in a daemon thread at once."""

    def __init__(self, source: Source) -> None:
        """Start reading; the app's first load worker collects the result."""
        self.source = source
        self._done = threading.Event()
        self._data: MainData | None = None
        self._error: BaseException | None = None
        # A daemon thread: quitting before the load ends must not wait for it.
        threading.Thread(target=self._run, name="flaketui-preload", daemon=True).start()

    def _run(self) -> None:
        try:
            self._data = load_main(self.source, suite=None, branch_kind=None)
        except BaseException as exc:  # handed to the worker that collects it
            self._error = exc
        finally:
            self._done.set()

    def result(self) -> MainData:
        """Wait for the load; raise what it raised (called from a worker thread)."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._data is not None
        return self._data
