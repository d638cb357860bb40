"""The app's co-failure grouping, the detail's order view and its replay of a recorded order."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pilots import app_on, settle
from textual.widgets import DataTable, Static

from flaketui.core.ingest.writer import RunRecorder
from flaketui.core.models import Attempt, CaseResult, RunMeta
from flaketui.core.scoring.cofailure import group_key
from flaketui.tui.app import FlaketuiApp, make_app
from flaketui.tui.screens.detail import DetailScreen
from flaketui.tui.screens.order_modal import OrderModal
from flaketui.tui.widgets.flake_table import FlakeTable
from flaketui.tui.widgets.selection import FittedText
from tests.connections import open_history

NOW = datetime(2026, 11, 30, tzinfo=UTC)
SIZE = (160, 48)
LEAKER = "tests/test_clock.py::test_freezes_time"
VICTIMS = [f"tests/test_dates.py::test_victim_{n}" for n in range(3)]
STEADY = [f"tests/test_fill.py::test_{n:02d}" for n in range(8)]
RUNS = 120


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """Serial runs shuffled by pytest-randomly (seed recorded): in half of them the leaker leaves
    time frozen and every victim after it fails."""
    rng = random.Random(5)
    path = tmp_path / "history.db"
    db = open_history(path)
    for number in range(RUNS):
        order = [LEAKER, *VICTIMS, *STEADY]
        rng.shuffle(order)
        leaks = rng.random() < 0.5
        cases = []
        for position, test in enumerate(order, start=1):
            fails = test in VICTIMS and leaks and order.index(LEAKER) < position - 1
            previous = order[position - 2] if position > 1 else None
            attempts = [Attempt("fail" if fails else "pass", 5, "boom", None, previous, position)]
            if fails:
                attempts.append(Attempt("pass", 5, None, None, test, position))
            cases.append(CaseResult(test, test.split("::")[0], attempts))
        meta = RunMeta(
            run_id=f"run-{number:03d}",
            suite="unit",
            branch_kind="main",
            ts=NOW - timedelta(days=25) + timedelta(hours=4 * number),
            worker_count=1,
            order_seed=f"randomly:{9000 + number}",
        )
        recorder = RunRecorder(db, meta)
        recorder.add(cases)
        recorder.finish()
    db.conn.close()
    return path


def _rows(app: FlaketuiApp) -> list[tuple[str, str]]:
    table = app.main_screen.query_one(FlakeTable)
    return [(table.rows_by_key[key].kind, table.rows_by_key[key].target) for key in table.row_order]


def _latest_bad_run(history: Path, test_id: str) -> str:
    conn = open_history(history, readonly=True).conn
    row = conn.execute(
        "SELECT r.run_id FROM runs r JOIN results a ON a.run = r.id JOIN tests t ON t.id = a.test"
        " WHERE t.test_id = ? AND a.attempt = 1 AND a.outcome = 'fail'"
        " ORDER BY r.ts DESC LIMIT 1",
        (test_id,),
    ).fetchone()
    return str(row[0])


async def _open_order_view(pilot: Any) -> tuple[OrderModal, DataTable]:
    """Press `p` on a detail screen: the order view, loaded, and its table."""
    await pilot.press("p")
    await settle(pilot)
    modal = pilot.app.screen
    assert isinstance(modal, OrderModal) and modal.view is not None
    return modal, modal.query_one("#order-table", DataTable)


def _check_role_styles(table: DataTable) -> list[float]:
    """A role is in colour only where its p-value makes it a finding; chance is dim. The
    p-values of the rows."""
    roles = [table.get_row_at(row)[1] for row in range(table.row_count)]
    p_values = [float(str(table.get_row_at(row)[2])) for row in range(table.row_count)]
    assert str(roles[0].style) == "bold red"
    for role, p_value in zip(roles, p_values, strict=True):
        assert (str(role.style) == "dim") is (p_value > 0.05 or "explained by" in str(role))
    return p_values


async def test_the_sample_shows_its_polluter_and_dims_the_roles_chance_gives(
    tmp_path: Path,
) -> None:
    sample = Path(__file__).resolve().parents[2] / "sample_data" / "history.db"
    victim = "tests/storage/test_cache.py::test_cache_invalidate_on_write"
    app = make_app(
        sample,
        now=datetime(2026, 11, 30, 18, tzinfo=UTC),
        skip_file=tmp_path / "quarantine.json",
        cursor_blink=False,
        watch=False,
    )
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.main_screen.query_one(FlakeTable)
        table.move_cursor(row=[t for _, t in _rows(app)].index(victim))
        await pilot.press("enter")
        await settle(pilot)
        _modal, order = await _open_order_view(pilot)
        first = [str(cell) for cell in order.get_row_at(0)]
        assert first[0] == "tests/storage/test_cache.py::test_cache_ttl"
        assert first[1] == "polluter, suspect"
        assert max(_check_role_styles(order)) > 0.05  # most candidates are chance here
        # At 160 columns a long test id is shown whole (the column once stopped at 48).
        long_id = "tests/storage/test_cache.py::test_cache_eviction_under_pressure"
        assert len(long_id) > 48
        ids = [str(order.get_row_at(row)[0]) for row in range(order.row_count)]
        assert long_id in ids


async def test_cofailure_grouping_order_view_and_seed_replay(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert [kind for kind, _ in _rows(app)] == ["test"] * 3
        await pilot.press("w")
        await settle(pilot)
        # The three victims are one problem, under the cause they share.
        assert _rows(app) == [("group", group_key(VICTIMS))]
        label = app.main_screen.query_one(FlakeTable).rows_by_key[f"g:{group_key(VICTIMS)}"]
        assert "fail together after test_freezes_time (3)" in label.cells[1]
        line = app.main_screen.query_one("#selected", FittedText).text
        assert line == "fail together after test_freezes_time"
        await pilot.press("space")
        await settle(pilot)
        assert sorted(target for kind, target in _rows(app) if kind == "member") == VICTIMS
        await pilot.press("down", "enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DetailScreen) and screen.data is not None
        assert screen.key in VICTIMS
        # The reproduction command replays the order of its latest bad run.
        run_id = _latest_bad_run(history, screen.key)
        seed = 9000 + int(run_id.removeprefix("run-"))
        assert screen.data.repro == f"pytest -p randomly --randomly-seed={seed}"
        repro = str(screen.query_one("#repro", Static).content)
        assert f"replays the order of run {run_id}" in repro
        # `p` shows the order view (its candidate polluters): the leaker first, ran before it in
        # every bad run.
        modal, table = await _open_order_view(pilot)
        first = [str(cell) for cell in table.get_row_at(0)]
        assert first[0] == LEAKER
        assert first[3] == f"{modal.view.bad_runs}/{modal.view.bad_runs}"
        assert first[1].startswith("polluter, suspect")
        _check_role_styles(table)
        last = [str(cell) for cell in table.get_row_at(table.row_count - 1)]
        assert last[1].endswith("explained by test_freezes_time")
        summary = str(modal.query_one("#order-summary", Static).content)
        assert f"{RUNS} counted runs with their order recorded" in summary
        assert "replay run" in summary
        await pilot.press("escape")
        assert app.screen is screen
        await pilot.press("escape", "w")
        await settle(pilot)
        assert [kind for kind, _ in _rows(app)] == ["test"] * 3  # ungrouped again
