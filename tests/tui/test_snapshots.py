"""Snapshots of the app on the committed sample history (fixed size, fixed now, no blink)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from flaketui.core.timeutil import parse_iso
from flaketui.tui.app import FlaketuiApp, make_app
from flaketui.tui.widgets.flake_table import FlakeTable

SIZE = (160, 48)
# The classic default terminal, a common laptop one, and a large one.
SIZES = pytest.mark.parametrize(
    "size", [(80, 24), (120, 36), (160, 48)], ids=lambda s: "x".join(map(str, s))
)
NOW = parse_iso("2026-11-30T18:00:00Z")


@pytest.fixture
def sample_app(
    sample_history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> FlaketuiApp:
    """The app on a copy of the sample history and its CODEOWNERS, by relative paths."""
    shutil.copyfile(sample_history, tmp_path / "history.db")
    shutil.copyfile(sample_history.with_name("CODEOWNERS"), tmp_path / "CODEOWNERS")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLAKETUI_SKIP_FILE", raising=False)
    return make_app(
        "history.db",
        now=NOW,
        skip_file="quarantine.json",
        cursor_blink=False,
        watch=False,
    )


async def _settle(pilot: Pilot[Any]) -> None:
    """Every step of the load shown (the complete report, lifecycle states, groups, likely
    causes) and no worker left: the picture no longer depends on timing. A loaded machine
    can take more rounds of workers starting workers than an idle one."""
    app: FlaketuiApp = pilot.app  # type: ignore[assignment]
    loaded = 0
    for _ in range(100):
        await app.workers.wait_for_complete()
        await pilot.pause()
        data = app.main_screen.data
        done = data is not None and data.extras_loaded and data.groups_loaded
        loaded = loaded + 1 if done and data is not None and data.causes_loaded else 0
        if loaded == 3:  # and the messages those steps posted, handled
            return
    raise AssertionError("the app did not finish loading")


async def _quiet(pilot: Pilot[Any]) -> None:
    """No toasts: whether one is still up at capture time would depend on machine speed."""
    pilot.app.clear_notifications()
    await pilot.pause()


async def _focus_row(pilot: Pilot[Any], needle: str) -> None:
    app: FlaketuiApp = pilot.app  # type: ignore[assignment]
    table = app.main_screen.query_one(FlakeTable)
    keys = table.row_order
    index = next(i for i, key in enumerate(keys) if needle in key)
    table.move_cursor(row=index, animate=False)
    await pilot.pause()


@SIZES
def test_main_list(snap_compare: Any, sample_app: FlaketuiApp, size: tuple[int, int]) -> None:
    assert snap_compare(sample_app, terminal_size=size, run_before=_settle)


def test_grouped_by_family(snap_compare: Any, sample_app: FlaketuiApp) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await _settle(pilot)
        await pilot.press("4", "f")
        await _settle(pilot)
        await _focus_row(pilot, "g:tests/billing/")
        await pilot.press("space")
        await _settle(pilot)
        await _quiet(pilot)

    assert snap_compare(sample_app, terminal_size=SIZE, run_before=run_before)


@SIZES
def test_detail_of_the_billing_family(
    snap_compare: Any, sample_app: FlaketuiApp, size: tuple[int, int]
) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await _settle(pilot)
        await pilot.press("4", "f")
        await _settle(pilot)
        await _focus_row(pilot, "g:tests/billing/")
        await pilot.press("enter")
        await _settle(pilot)
        await _quiet(pilot)

    assert snap_compare(sample_app, terminal_size=size, run_before=run_before)


def test_detail_suspects_with_the_pivot_by_worker_id(
    snap_compare: Any, sample_app: FlaketuiApp
) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await _settle(pilot)
        await pilot.press("4", "f")
        await _settle(pilot)
        await _focus_row(pilot, "g:tests/billing/")
        await pilot.press("enter")
        await _settle(pilot)
        await pilot.press("d")
        await _settle(pilot)
        await _quiet(pilot)

    assert snap_compare(sample_app, terminal_size=(160, 60), run_before=run_before)


@SIZES
def test_quarantine_modal(
    snap_compare: Any, sample_app: FlaketuiApp, size: tuple[int, int]
) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await _settle(pilot)
        await pilot.press("q")
        await pilot.pause()
        await _quiet(pilot)

    assert snap_compare(sample_app, terminal_size=size, run_before=run_before)
