"""The collector paused from the console script's first line until the first screen is up."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tui_history import NOW

from flaketui import cli
from flaketui.cli import group as cli_group
from flaketui.tui import gcpause
from flaketui.tui.app import make_app


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    """Each test ends with the collector on and no start-up pause left."""
    yield
    gcpause.end_startup()
    gc.enable()


def test_the_startup_pause_nests_with_the_loads_and_ends_once() -> None:
    assert gc.isenabled()
    interval = sys.getswitchinterval()
    gcpause.pause_startup()
    gcpause.pause_startup()  # once
    assert not gc.isenabled()
    assert sys.getswitchinterval() == pytest.approx(gcpause.STARTUP_SWITCH_S)
    assert interval > gcpause.STARTUP_SWITCH_S
    with gcpause.gc_paused():
        pass
    assert not gc.isenabled()  # a load ending inside the start-up does not resume it
    with gcpause.gc_paused():
        gcpause.end_startup()
        assert not gc.isenabled()  # nor does the start-up ending inside a load
    assert gc.isenabled()
    assert sys.getswitchinterval() == interval
    gcpause.end_startup()  # again: nothing to end
    assert gc.isenabled() and sys.getswitchinterval() == interval


async def test_the_app_resumes_collection_once_its_first_screen_is_up(
    history: Path, tmp_path: Path
) -> None:
    gcpause.pause_startup()
    app = make_app(history, now=NOW, skip_file=tmp_path / "q.json", cursor_blink=False, watch=False)
    async with app.run_test(size=(160, 48)) as pilot:
        while app.main_screen.data is None:
            await pilot.pause()
        for _ in range(3):
            await app.workers.wait_for_complete()
            await pilot.pause()
        assert gc.isenabled()


def test_a_command_other_than_the_app_runs_with_the_collector_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[bool] = []
    monkeypatch.setattr(sys, "argv", ["flaketui", "--version"])
    monkeypatch.setattr(cli_group, "cli", lambda **kwargs: seen.append(gc.isenabled()))
    cli.main()
    assert seen == [True]
