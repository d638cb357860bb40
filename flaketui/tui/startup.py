"""Before the UI exists: resolve where the app reads and writes, and start reading.

Nothing here imports Textual: `flaketui open` checks its arguments and starts reading the
history before the UI loads.
"""

from __future__ import annotations

import os
import threading
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from flaketui.core.config import Config
from flaketui.core.errors import FlaketuiError
from flaketui.core.history.store import is_read_only
from flaketui.core.scoring.causes_apart import Apart
from flaketui.core.scoring.results import Report
from flaketui.tui.loaders import (
    Extras,
    MainData,
    Source,
    history_stamp,
    load_in_stages,
    quarantine_rows,
    read_skip,
)

if TYPE_CHECKING:
    from flaketui.tui.ranking_store import KeptRanking, OpenedRanking

T = TypeVar("T")
STEPS = 4  # the ranking, the complete report, the lifecycle states and suites, the causes


def make_source(
    path: str | Path,
    now: datetime | None = None,
    skip_file: str | Path | None = None,
    *,
    config: Config | None = None,
    codeowners: str | Path | None = None,
    display: str | None = None,
) -> Source:
    """The history, skip file, clock, config and CODEOWNERS of one app session; `display`
    names the history in the header (default: the path as given)."""
    from flaketui.core.owners import codeowners_text, find_repo_root, locate_codeowners
    from flaketui.core.quarantine.skipfile import resolve_skip_file

    config = config if config is not None else Config()
    history = Path(path).absolute()
    root = find_repo_root(Path.cwd())
    explicit = Path(codeowners).absolute() if codeowners else None
    owners = locate_codeowners(history, explicit=explicit)
    if owners is not None:
        codeowners_text(owners)  # one that is not UTF-8 is refused before the app starts
    skip_path = resolve_skip_file(skip_file, env=os.environ, config=config, root=root)
    return Source(
        path=history,
        skip_path=skip_path,
        display=display if display is not None else str(path),
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


class StagedRead:
    """The steps of loaders.load_in_stages, read from one snapshot in a thread of their own.

    `flaketui open` starts one before it imports the UI, so the history is read while Textual
    loads (SQLite runs its queries without holding the interpreter). The ranking is handed over
    as soon as it is read; each later step is read only once it is asked for (complete(),
    extras(), causes()), which the app does after painting the step before: a step's long
    Python loops never compete with a paint for the interpreter. A thread that holds the
    interpreter makes the UI thread wait for it at every turn of its event loop, so a paint
    beside a busy reader takes several times as long.
    """

    def __init__(self, source: Source, *, kept: bool = False) -> None:
        """Start reading `source` now.

        kept: hand over the ranking kept from the last opening (ranking_store) as the first
        step when there is one, marked provisional; the complete report replaces it, and is
        kept in turn (with its likely causes once read) for the next opening, when the read
        is stopped.
        """
        self.source = source
        self.kept = kept
        # The history's stamp as this read began (loaders.history_stamp, taken in the reading
        # thread before any step is handed over): a read that fails is tried again once the
        # history differs from it.
        self.stamp: tuple[int, ...] = ()
        # The stamp of the snapshot the steps are read from (load_in_stages' own, taken once
        # its reader has folded what an ingest left waiting): the watch's, once the new
        # ranking replaces a kept one.
        self.read_stamp: tuple[int, ...] | None = None
        self.done = [threading.Event() for _ in range(STEPS)]
        self.values: list[object] = [None] * STEPS
        self.errors: list[BaseException | None] = [None] * STEPS
        # asked[step]: the app wants that step read; asked[STEPS]: the read is stopped.
        self.asked = [threading.Event() for _ in range(STEPS + 1)]
        self.kept_asked = threading.Event()
        self.stopped = False
        # The child process that works out the likely causes of a big history, if any.
        self.apart = Apart()
        # A kept ranking is handed over as its flaky tests first (the first view), then whole.
        self.opened: OpenedRanking | None = None
        self.kept_whole: KeptRanking | None = None
        self.kept_read = threading.Event()
        # A daemon thread: quitting the app before the later steps are read must not wait.
        self.thread = threading.Thread(target=self.run, name="flaketui-read", daemon=True)
        self.thread.start()

    def run(self) -> None:
        """Read the steps in turn (the thread's body)."""
        self.stamp = history_stamp(self.source.path)
        try:
            if self.kept and self._hand_over_kept():
                # The rest of the kept ranking, then the new ranking, are read once the first
                # screen is painted, as the later steps are: until then the interpreter is the
                # paint's.
                self.kept_asked.wait()
                if self.stopped:
                    return
                self._read_kept_rest()
                self.asked[1].wait()  # the new ranking once the whole kept one is shown
            self.kept_read.set()
            stages = load_in_stages(self.source, self.apart)
            # A report is kept for the next opening once the app has shown it: the complete
            # report when the app asks for the next step (an app quit soon after still keeps
            # it), the one with its likely causes once the read is stopped. Written while the
            # app paints it, it would take the interpreter from that paint.
            to_keep: Report | None = None
            with closing(stages):
                for step in range(STEPS):
                    if step:
                        self.asked[step].wait()
                    if to_keep is not None:
                        self._keep(to_keep, with_causes=False)
                        to_keep = None
                    if self.stopped:
                        break
                    value = next(stages)
                    if isinstance(value, MainData):
                        self.read_stamp = value.stamp
                    if not self.done[step].is_set():
                        self.values[step] = value
                        self.done[step].set()
                    if self.kept and isinstance(value, Report):
                        to_keep = value
            if to_keep is not None:  # the history is closed by now
                self.asked[STEPS].wait()
                self._keep(to_keep, with_causes=True)
        except Exception as exc:  # raised again, in the reader's words, by the step asked for
            for step in range(STEPS):
                if not self.done[step].is_set():
                    self.errors[step] = exc
        finally:
            if self.opened is not None:
                self.opened.close()
            self.kept_read.set()
            for event in self.done:
                event.set()

    def _keep(self, report: Report, *, with_causes: bool) -> None:
        from flaketui.tui.ranking_store import keep_ranking

        keep_ranking(self.source, report, with_causes=with_causes)

    def _hand_over_kept(self) -> bool:
        """The kept ranking's flaky tests as the first step, when one is kept for this source.

        The list opens on them: the other tests and the groups (at 10 000 tests, most of the
        file to decode) are read after the first paint, by kept_rest().
        """
        # Imported here, in the reading thread: the UI thread is importing Textual meanwhile.
        from flaketui.tui.ranking_store import open_ranking

        opened = open_ranking(self.source)
        if opened is None:
            return False
        self.opened = opened
        skip, problem = read_skip(self.source.skip_path)
        self.values[0] = MainData(
            opened.first_view(),
            {},
            quarantine_rows(skip),
            [],
            history_stamp(self.source.path),
            problem,
            skip,
            groups_loaded=False,
            causes_loaded=opened.with_causes,
            provisional=True,
            verdicts=opened.verdicts,
        )
        self.done[0].set()
        return True

    def _read_kept_rest(self) -> None:
        opened, self.opened = self.opened, None
        if opened is not None:
            self.kept_whole = opened.rest()
        self.kept_read.set()

    def kept_rest(self) -> KeptRanking | None:
        """The whole kept ranking when the first step was its flaky tests, else None; asks
        for it if not asked yet."""
        self.kept_asked.set()
        self.kept_read.wait()
        whole, self.kept_whole = self.kept_whole, None
        return whole

    def ask(self, step: int) -> None:
        """Have the steps up to `step` read (without waiting for them)."""
        for event in self.asked[1 : step + 1]:
            event.set()

    def stop(self) -> None:
        """Read no further step (the one being read, if any, still ends; a child process
        working out the likely causes is killed).

        A report read to be kept is kept first: this is also how the app says it has shown
        the last step.
        """
        self.stopped = True
        self.apart.stop()
        self.kept_asked.set()
        for event in self.asked:
            event.set()

    def step(self, index: int, kind: type[T]) -> T:
        """Wait for step `index`; raise what reading it raised.

        A step's value is handed over, not kept: taking a step forgets the ones before it, and
        the last step forgets itself. The app keeps what it shows; a report kept here as well
        would double what every garbage collection of the app's objects walks through.
        """
        self.done[index].wait()
        error = self.errors[index]
        if error is not None:
            raise error
        value = self.values[index]
        if not isinstance(value, kind):  # stopped before this step
            raise FlaketuiError("the history was not read to the end")
        forget = index + 1 if index == STEPS - 1 else index
        self.values[:forget] = [None] * forget
        return value

    def first(self) -> MainData:
        """The ranking: the tests ranked, no groups yet."""
        return self.step(0, MainData)

    def complete(self) -> Report:
        """The complete report (groups, every daily series); asks for it if not asked yet."""
        self.ask(1)
        return self.step(1, Report)

    def extras(self) -> Extras:
        """The lifecycle states and suites; asks for them if not asked yet."""
        self.ask(2)
        return self.step(2, Extras)

    def causes(self) -> Report:
        """The complete report with the likely causes of its flaky tests and families; asks
        for it if not asked yet."""
        self.ask(3)
        return self.step(3, Report)
