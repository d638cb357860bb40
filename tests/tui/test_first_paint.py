"""The first paint: the ranked rows when the first load is ready, else the loading line first."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from pilots import SAFETY_S, settle, until
from textual.widgets import Static
from tui_history import NOW

from flaketui.core.errors import FlaketuiError
from flaketui.core.scoring.results import Report
from flaketui.tui import startup
from flaketui.tui.app import FlaketuiApp
from flaketui.tui.loaders import load_in_stages
from flaketui.tui.screens import main as main_screen
from flaketui.tui.startup import make_source
from flaketui.tui.widgets.flake_table import FlakeTable
from flaketui.tui.widgets.viewtabs import ViewTabs

SIZE = (160, 48)


class _Stages:
    """The staged load, its ranking given when the test releases it (at once when `ready`)."""

    def __init__(self, *, ready: bool, error: str | None = None) -> None:
        self.release = threading.Event()
        if ready:
            self.release.set()
        self.error = error
        self.asked: list[str] = []

    def __call__(self, source: Any, apart: Any = None) -> Iterator[object]:
        steps = iter(load_in_stages(source, apart)) if self.error is None else iter([])
        assert self.release.wait(SAFETY_S)
        if self.error is not None:
            raise FlaketuiError(self.error)
        yield next(steps)
        self.asked.append("complete")
        yield next(steps)
        yield next(steps)
        yield next(steps)


def _record_paints(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[int]]:
    """The table's row count at each of its renders, and the prepared rows of each show()."""
    painted: list[int] = []
    shown: list[int] = []
    render_lines = FlakeTable.render_lines
    show = FlakeTable.show

    def rendering(self: FlakeTable, crop: Any) -> Any:
        painted.append(self.row_count)
        return render_lines(self, crop)

    def showing(self: FlakeTable, prepared: Any, *args: Any, **kwargs: Any) -> None:
        shown.append(id(prepared))
        show(self, prepared, *args, **kwargs)

    monkeypatch.setattr(FlakeTable, "render_lines", rendering)
    monkeypatch.setattr(FlakeTable, "show", showing)
    return painted, shown


def _app(
    history: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    ready: bool,
    error: str | None = None,
) -> tuple[FlaketuiApp, _Stages]:
    source = make_source(history, NOW, tmp_path / "quarantine.json")
    stages = _Stages(ready=ready, error=error)
    monkeypatch.setattr(startup, "load_in_stages", stages)
    return FlaketuiApp(source, cursor_blink=False, watch=False), stages


async def test_a_ranking_ready_at_mount_is_in_the_first_paint_and_shown_once(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The ranking is read as the app mounts; however long a busy machine takes to read it,
    # the wait for it must not run out first, or the rows come after an empty paint instead.
    monkeypatch.setattr(main_screen, "FIRST_PAINT_HOLD_S", SAFETY_S)
    painted, shown = _record_paints(monkeypatch)
    app, _stages = _app(history, tmp_path, monkeypatch, ready=True)
    async with app.run_test(size=SIZE) as pilot:
        await asyncio.wait_for(settle(pilot), SAFETY_S)
        assert app.main_screen.data is not None
        # Never an empty list on screen: the table's first render had the rows already.
        assert painted and painted[0] > 0
        # The load's rows were shown once, though its message was posted too.
        assert len(shown) == len(set(shown))
        assert not app.main_screen.query_one("#loading", Static).display


async def test_a_ranking_still_reading_shows_the_loading_line_first(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(main_screen, "FIRST_PAINT_HOLD_S", 0.0)  # the wait gives up at once
    painted, shown = _record_paints(monkeypatch)
    app, stages = _app(history, tmp_path, monkeypatch, ready=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        loading = app.main_screen.query_one("#loading", Static)
        assert loading.display and "reading" in str(loading.render())
        assert app.main_screen.data is None and painted and painted[0] == 0
        stages.release.set()
        await asyncio.wait_for(settle(pilot), SAFETY_S)
        assert app.main_screen.data is not None and painted[-1] > 0
        assert not loading.display
        assert len(shown) == len(set(shown))


async def test_a_failed_first_load_ends_the_wait_with_its_error(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A wait the failure did not end would outlast the safety timeout below.
    monkeypatch.setattr(main_screen, "FIRST_PAINT_HOLD_S", 10 * SAFETY_S)
    error = "history.db: not a flaketui history"
    app, _stages = _app(history, tmp_path, monkeypatch, ready=True, error=error)
    notified: list[str] = []
    monkeypatch.setattr(app, "notify", lambda message, **kw: notified.append(message))

    async def started() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert notified == [error]
            assert not app.main_screen.query_one("#loading", Static).display

    await asyncio.wait_for(started(), SAFETY_S)


async def test_the_rest_is_read_once_the_ranked_rows_are_painted(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The groups and lifecycle states (their reading, their rows) would take the CPU from the
    # first paint: they are asked for after it.
    app, stages = _app(history, tmp_path, monkeypatch, ready=True)
    order: list[str] = []
    render_lines = FlakeTable.render_lines

    def rendering(self: FlakeTable, crop: Any) -> Any:
        if self.row_count and "paint" not in order:
            order.append("paint")
        return render_lines(self, crop)

    monkeypatch.setattr(FlakeTable, "render_lines", rendering)
    stages.asked = order
    async with app.run_test(size=SIZE) as pilot:
        await asyncio.wait_for(settle(pilot), SAFETY_S)
        assert app.main_screen.data is not None and app.main_screen.data.extras_loaded
    assert order == ["paint", "complete"]


async def test_the_first_screen_parses_only_its_own_css(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The detail screen's and the dialogs' rules load with them, not before the first paint.
    from flaketui.tui.screens.detail import DetailScreen

    app, _stages = _app(history, tmp_path, monkeypatch, ready=True)
    sheets = Path(main_screen.__file__).parent.parent
    async with app.run_test(size=SIZE) as pilot:
        await asyncio.wait_for(settle(pilot), SAFETY_S)
        loaded = {Path(path).name for path, _ in app.stylesheet.source if path.endswith(".tcss")}
        assert loaded == {"app.tcss"}
        await pilot.press("enter")
        await asyncio.wait_for(settle(pilot), SAFETY_S)
        assert isinstance(app.screen, DetailScreen)
        assert app.stylesheet.has_source(str((sheets / "detail.tcss").resolve()))


async def test_while_the_causes_are_read_only_the_shown_report_is_alive(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load keeps no report that a later step replaced: every one still alive lengthens
    each full garbage collection, a pause of the whole app, for the rest of the load."""
    causes = threading.Event()

    def held(source: Any, apart: Any = None) -> Iterator[object]:
        """load_in_stages, the causes not read until the test lets them."""
        steps = load_in_stages(source, apart)
        yield next(steps)
        yield next(steps)
        yield next(steps)
        assert causes.wait(SAFETY_S)
        yield next(steps)

    monkeypatch.setattr(startup, "load_in_stages", held)
    # Reports alive before the app starts are not its own (a failed test's frames, say, are
    # kept for the debugger); they are set aside, held here as they are held already.
    gc.collect()
    earlier = [o for o in gc.get_objects() if isinstance(o, Report)]
    source = make_source(history, NOW, tmp_path / "quarantine.json")
    app = FlaketuiApp(source, cursor_blink=False, watch=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(
            pilot,
            lambda: app.main_screen.data is not None and app.main_screen.data.extras_loaded,
        )
        gc.collect()
        alive = [
            o
            for o in gc.get_objects()
            if isinstance(o, Report) and not any(o is e for e in earlier)
        ]
        causes.set()
        assert alive == [app.main_screen.data.report]
        await asyncio.wait_for(settle(pilot), SAFETY_S)
        assert app.main_screen.data.causes_loaded


async def test_the_tabs_name_what_the_load_still_reads_until_its_last_step(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The list works while the later columns are read: the user is told they are coming,
    and the note goes when the last step is in, or when the load fails."""
    release = [threading.Event() for _ in range(4)]
    fail_causes = threading.Event()

    def held(source: Any, apart: Any = None) -> Iterator[object]:
        """load_in_stages, each step after the first held until the test releases it."""
        with closing(load_in_stages(source, apart)) as steps:  # closed in the reading thread
            yield next(steps)
            for step in (1, 2, 3):
                assert release[step].wait(SAFETY_S)
                if step == 3 and fail_causes.is_set():
                    raise FlaketuiError("the history went away")
                yield next(steps)

    monkeypatch.setattr(startup, "load_in_stages", held)
    source = make_source(history, NOW, tmp_path / "quarantine.json")
    app = FlaketuiApp(source, cursor_blink=False, watch=False)
    async with app.run_test(size=SIZE) as pilot:
        tabs = app.main_screen.query_one(ViewTabs)
        await until(pilot, lambda: app.main_screen.data is not None)
        assert tabs.note == "⏳ reading groups, states, causes…"
        release[1].set()
        await until(pilot, lambda: tabs.note == "⏳ reading states, causes…")
        release[2].set()
        await until(pilot, lambda: tabs.note == "⏳ reading causes…")
        line = app.main_screen.query_one(ViewTabs).render_line(0).text
        assert line.rstrip().endswith("⏳ reading causes…")
        release[3].set()
        await until(pilot, lambda: app.main_screen.data.causes_loaded)
        await settle(pilot)
        assert tabs.note == ""
        # A reload whose last step fails: its note goes with the error.
        for event in release:
            event.clear()
        fail_causes.set()
        app.main_screen.reload()
        await until(pilot, lambda: tabs.note == "⏳ reading groups, states, causes…")
        release[1].set()
        release[2].set()
        await until(pilot, lambda: tabs.note == "⏳ reading causes…")
        release[3].set()
        await until(pilot, lambda: tabs.note == "")


async def test_the_load_goes_on_while_another_screen_covers_the_list(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each later step waits for a paint before the next is read: under a detail screen the
    list is not what is painted, and the load still goes on to its end."""
    monkeypatch.setattr(main_screen, "PAINT_WAIT_S", 10 * SAFETY_S)  # only a paint ends a wait
    release = threading.Event()

    def held(source: Any, apart: Any = None) -> Iterator[object]:
        """load_in_stages, the later steps held until the detail screen is up."""
        with closing(load_in_stages(source, apart)) as steps:
            yield next(steps)
            assert release.wait(SAFETY_S)
            yield from steps

    monkeypatch.setattr(startup, "load_in_stages", held)
    source = make_source(history, NOW, tmp_path / "quarantine.json")
    app = FlaketuiApp(source, cursor_blink=False, watch=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main_screen.data is not None)
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is not app.main_screen)
        release.set()
        await until(pilot, lambda: app.main_screen.data.causes_loaded)
        assert app.screen is not app.main_screen
        await pilot.press("backspace")
        await until(pilot, lambda: app.screen is app.main_screen)
        assert app.main_screen.query_one(ViewTabs).note == ""


async def test_at_80_columns_a_long_note_gives_way_to_its_short_form(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()

    def held(source: Any, apart: Any = None) -> Iterator[object]:
        with closing(load_in_stages(source, apart)) as steps:
            yield next(steps)
            assert release.wait(SAFETY_S)
            yield next(steps)
            yield from steps

    monkeypatch.setattr(startup, "load_in_stages", held)
    source = make_source(history, NOW, tmp_path / "quarantine.json")
    app = FlaketuiApp(source, cursor_blink=False, watch=False)
    async with app.run_test(size=(80, 24)) as pilot:
        tabs = app.main_screen.query_one(ViewTabs)
        await until(pilot, lambda: tabs.note == "⏳ reading groups, states, causes…")
        line = tabs.render_line(0).text
        assert line.startswith(" 1 Flaky  2 Regressions  3 Quarantined  4 All  ")
        assert line.endswith("  ⏳ reading… ")
        release.set()
        await until(pilot, lambda: app.main_screen.data.causes_loaded)
        await settle(pilot)
        assert tabs.render_line(0).text.rstrip().endswith("4 All")
