"""Messages that thread workers post back to the UI thread."""

from __future__ import annotations

import threading
import weakref
from typing import Any

from textual.message import Message

from flaketui.tui.loaders import DetailData, MainData
from flaketui.tui.viewmodel import ViewState
from flaketui.tui.widgets.flake_table import PreparedRows


class MainLoaded(Message):
    """The ranked report is ready, with the rows built for the view state of `state`.

    `rest`, when given, is what the load waits for before it reads the rest (groups, lifecycle
    states): the screen sets it once these rows are painted. `load` numbers the load it comes
    from: the screen shows only its latest load's.
    """

    def __init__(
        self,
        data: MainData,
        state: ViewState,
        rows: PreparedRows,
        *,
        rest: threading.Event | None = None,
        load: int = 0,
    ) -> None:
        self.data = data
        self.state = state
        self.rows = rows
        self.rest = rest
        self.load = load
        super().__init__()


class RowsBuilt(Message):
    """Rows of `data` built in a worker for the view state `state` (a sort, a filter, a view)."""

    def __init__(self, data: MainData, state: ViewState, rows: PreparedRows) -> None:
        self.data = data
        self.state = state
        self.rows = rows
        super().__init__()


class ExtrasLoaded(Message):
    """More of what `before` showed is ready (the complete report, or lifecycle states and
    suites), merged into `data`.

    `before` is held weakly: a handled message lives on in the receiver's message loop until
    the next one arrives, and the data it replaced (a whole report) would stay alive with it
    for every garbage collection meanwhile.
    """

    def __init__(
        self, before: MainData, data: MainData, state: ViewState, rows: PreparedRows
    ) -> None:
        self._before = weakref.ref(before)
        self.data = data
        self.state = state
        self.rows = rows
        # Set once these rows are painted, or passed over: the load reads its next step then.
        self.shown = threading.Event()
        super().__init__()

    def follows(self, shown: MainData | None) -> bool:
        """Whether `shown` is the data this message's data follows (its `before`)."""
        return shown is not None and self._before() is shown


class DetailLoaded(Message):
    """One test's or family's detail is ready."""

    def __init__(self, data: DetailData) -> None:
        self.data = data
        super().__init__()


class DetailProgress(Message):
    """The detail's read finished step `done` of `steps`; `what` is the next one."""

    def __init__(self, done: int, steps: int, what: str) -> None:
        self.done = done
        self.steps = steps
        self.what = what
        super().__init__()


class VerdictChangesLoaded(Message):
    """The verdict changes of the test or family a detail screen shows."""

    def __init__(self, key: str, changes: list[Any]) -> None:
        self.key = key
        self.changes = changes
        super().__init__()


class LoadFailed(Message):
    """A read failed with a one-line message for the user; `stamp` is the history's as the
    list's read began (loaders.history_stamp), `load` numbers that load (see MainLoaded)."""

    def __init__(
        self, message: str, *, stamp: tuple[int, ...] | None = None, load: int = 0
    ) -> None:
        self.message = message
        self.stamp = stamp
        self.load = load
        super().__init__()


class HistoryChanged(Message):
    """The history file changed underneath the app (CI wrote into it); `stamp` is what
    loaders.history_stamp gave when the change was seen."""

    def __init__(self, stamp: tuple[int, ...]) -> None:
        self.stamp = stamp
        super().__init__()


class WriteDone(Message):
    """A quarantine, release or export finished; `ok` is False when it failed."""

    def __init__(self, text: str, *, ok: bool = True, reload: bool = True) -> None:
        self.text = text
        self.ok = ok
        self.reload = reload
        super().__init__()
