"""The app on a test history, and the waits of its tests: for events (the workers done, a
condition met), never for a length of time; a bounded wait fails the test when it runs out."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.app import App
from textual.pilot import Pilot
from tui_history import NOW

from flaketui.tui.app import FlaketuiApp, make_app

SAFETY_S = 60  # a bound on a wait, for a failing test to end: never reached when it passes


def app_on(history: Path | str, tmp_path: Path) -> FlaketuiApp:
    """The app on `history` as of NOW, its skip file quarantine.json in `tmp_path`, with no
    cursor blink and no watch of the history (a test reloads when it means to)."""
    return make_app(
        history, now=NOW, skip_file=tmp_path / "quarantine.json", cursor_blink=False, watch=False
    )


def notices_stay(app: App[Any]) -> None:
    """Every notification the app raises stays up until the test ends: whether one of a few
    seconds is still up when the test looks for it would depend on the machine's speed."""
    notify = app.notify

    def staying(*args: Any, **kwargs: Any) -> None:
        notify(*args, **{**kwargs, "timeout": 10 * SAFETY_S})

    app.notify = staying  # type: ignore[method-assign]


async def settle(pilot: Pilot[Any], rounds: int = 3) -> None:
    """Until every worker is done and the messages they posted are handled, `rounds` times
    over: a load's step starts the next step's worker, so one round is not the whole load."""
    for _ in range(rounds):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


async def until(pilot: Pilot[Any], condition: Callable[[], bool], within: float = SAFETY_S) -> None:
    """Let the app run until `condition()` holds, checked after each pause of the pilot; the
    test fails if it does not hold within `within` seconds."""

    async def held() -> None:
        while not condition():
            await pilot.pause()

    try:
        await asyncio.wait_for(held(), within)
    except TimeoutError:
        raise AssertionError(f"the condition did not hold within {within:g}s") from None
