"""The list's columns: fitted to the width by priority, the sort marked, Since and Likely cause."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pilots import SAFETY_S, app_on, settle, until
from rich.cells import cell_len
from tui_history import AUTH, BILLING, NOW

from flaketui.tui import startup
from flaketui.tui.app import FlaketuiApp
from flaketui.tui.loaders import load_in_stages
from flaketui.tui.startup import make_source
from flaketui.tui.viewmodel import columns_for
from flaketui.tui.widgets.flake_table import CELL_PADDING, FlakeTable, fit_columns, fit_label


def _table(app: FlaketuiApp) -> FlakeTable:
    return app.main_screen.query_one(FlakeTable)


def _lines(app: FlaketuiApp) -> list[str]:
    table = _table(app)
    return [table.render_line(y).text for y in range(table.size.height)]


def _header(app: FlaketuiApp) -> list[str]:
    """The labels of the columns shown (a sort mark with its label), as the header draws them."""
    table = _table(app)
    labels = [table.header_cells()[i].plain for i in table.shown]
    line = _lines(app)[0]
    assert line.split() == " ".join(labels).split()
    return labels


def _cell(app: FlaketuiApp, test_id: str, key: str) -> str:
    table = _table(app)
    column = table.column_keys.index(key)
    return table.cells_of(f"t:{test_id}")[column].plain


# ---- fitting --------------------------------------------------------------------------------


def test_columns_drop_in_priority_order_before_the_test_id_is_cut() -> None:
    widths = [3, 70, 7, 6, 12, 10, 16]  # #, test, verdict, damage, cause, since, state
    priorities = [0, 0, 0, 0, 1, 2, 3]
    pad = 2 * CELL_PADDING

    def fitted(width: int) -> tuple[list[int], list[int]]:
        return fit_columns(widths, priorities, 1, width, want=60)

    everything = sum(widths) + pad * len(widths)
    assert fitted(everything) == (list(range(7)), widths)
    # One cell less: the test gives it up, down to 60 cells, before a column goes.
    assert fitted(everything - 1) == (list(range(7)), [3, 69, 7, 6, 12, 10, 16])
    assert fitted(everything - 10)[1][1] == 60
    shown, sizes = fitted(everything - 11)
    assert shown == [0, 1, 2, 3, 4, 5] and sizes[1] == 70
    # Narrower: columns go one by one while the test keeps 60 cells, then the test shrinks.
    always = 3 + 7 + 6 + 3 * pad
    assert fitted(always + 60 + pad + 12 + pad)[0] == [0, 1, 2, 3, 4]
    assert fitted(always + 60 + pad + 11 + pad) == ([0, 1, 2, 3], [3, 70, 7, 6])
    assert fitted(80) == ([0, 1, 2, 3], [3, 80 - always - pad, 7, 6])
    # Too narrow even for the columns always shown: the test keeps a floor, the list scrolls.
    assert fitted(30)[1][1] == 20
    # A column that would fit after one that does not is dropped too: a fixed order.
    assert fit_columns([3, 10, 50, 2], [0, 0, 1, 2], 1, 30)[0] == [0, 1]


@given(
    widths=st.lists(st.integers(1, 90), min_size=2, max_size=12),
    data=st.data(),
    width=st.integers(20, 300),
)
def test_fitted_columns_fill_no_more_than_the_width_unless_the_core_alone_does(
    widths: list[int], data: st.DataObject, width: int
) -> None:
    priorities = [0, 0] + [data.draw(st.integers(1, 12)) for _ in widths[2:]]
    shown, sizes = fit_columns(widths, priorities, 1, width)
    pad = 2 * CELL_PADDING
    assert [i for i, p in enumerate(priorities) if p == 0] == [i for i in shown if i < 2]
    total = sum(sizes) + pad * len(sizes)
    core = widths[0] + pad + min(widths[1], 20) + pad
    assert total <= max(width, core)
    dropped = [priorities[i] for i in range(len(widths)) if i not in shown]
    kept = [priorities[i] for i in shown if priorities[i]]
    assert not dropped or not kept or max(kept) <= min(dropped)


def test_a_cut_id_keeps_its_test_name_and_a_group_its_marker_and_count() -> None:
    test_id = "tests/integration/test_inventory_sync.py::test_inventory_sync_consistent"
    assert fit_label(test_id, 100) == test_id
    cut = fit_label(test_id, 40)
    assert cut == "…sync.py::test_inventory_sync_consistent" and cell_len(cut) == 40
    assert fit_label("  └ " + test_id, 30) == "  └ …inventory_sync_consistent"
    assert fit_label(f"▸ {test_id} (12)", 30) == "▸ …entory_sync_consistent (12)"
    message = "▾ TimeoutError: connect to db timed out after 30 s (3)"
    assert fit_label(message, 24, keep_tail=False) == "▾ TimeoutError: con… (3)"


# ---- the list at three sizes ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        ((80, 24), ["#▲", "Test", "Verdict", "Damage", "Likely cause"]),
        (
            (120, 36),
            ["#▲", "Test", "Verdict", "State", "Damage", "Since", "Likely cause", "Owner"],
        ),
    ],
)
async def test_a_narrow_list_drops_columns_and_keeps_the_test_ids_whole(
    history: Path, tmp_path: Path, size: tuple[int, int], expected: list[str]
) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        assert _header(app) == expected
        lines = _lines(app)
        assert all(len(line) == _table(app).size.width for line in lines)
        assert any(f"{AUTH} " in line for line in lines[1:])  # whole, not cut from the left
        # `s` walks the columns shown, not the ones the width left out.
        await pilot.press(*["s"] * (len(expected) + 1))
        await pilot.pause()
        assert app.main_screen.state.sort_column == "rank"


async def test_grouped_rows_name_their_column(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("f")
        await settle(pilot)
        assert _header(app)[1] == "Family / test"
        await pilot.press("f", "g")
        await settle(pilot)
        assert _header(app)[1] == "Signature / test"


async def test_the_sorted_column_and_its_direction_are_marked(
    history: Path, tmp_path: Path
) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert _header(app)[0] == "#▲"  # the natural ranking: rank 1 first
        await pilot.press("S")
        await pilot.pause()
        assert _header(app)[0] == "#▼"
        await pilot.press("s", "s")  # rank, then the test id
        await pilot.pause()
        header = _header(app)
        assert header[0] == "#" and header[1] == "Test▲"
        await pilot.press("s", "s", "s")  # verdict, state, damage: most damage first
        await pilot.pause()
        assert "Damage▼" in _header(app) and "Test" in _header(app)
        await pilot.press("S")
        await pilot.pause()
        assert "Damage▲" in _header(app)
        await pilot.press("3")  # the skip file's entries, by test id
        await settle(pilot)
        assert _header(app)[0] == "Test▲"
        await pilot.press("4")  # every test, most damage first: no rank order to mark
        await settle(pilot)
        header = _header(app)
        assert header[0] == "#" and "Damage▼" in header
        await pilot.press("S")
        await pilot.pause()
        assert "Damage▲" in _header(app)


# ---- Since and Likely cause -------------------------------------------------------------------


class _HeldCauses:
    """The staged load, its last step (the causes) held until the test releases it."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def __call__(self, source: Any, apart: Any = None) -> Iterator[object]:
        steps = iter(load_in_stages(source, apart))
        yield next(steps)
        yield next(steps)
        yield next(steps)
        assert self.release.wait(SAFETY_S)
        yield next(steps)


async def test_likely_causes_fill_their_column_when_they_arrive(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = _HeldCauses()
    monkeypatch.setattr(startup, "load_in_stages", held)
    app = FlaketuiApp(make_source(history, NOW, tmp_path / "q.json"), cursor_blink=False)
    auth = AUTH
    async with app.run_test(size=(160, 48)) as pilot:
        # The list, with its lifecycle states, is up while the causes are still read.
        await until(
            pilot,
            lambda: app.main_screen.data is not None and app.main_screen.data.extras_loaded,
        )
        await pilot.pause()
        assert _table(app).row_count and _cell(app, auth, "cause") == "…"
        assert _cell(app, auth, "since") == "2026-11-01"
        held.release.set()
        await settle(pilot)
        assert _cell(app, auth, "cause") == "4 workers"
        assert _cell(app, f"{BILLING}[eur]", "cause") == "16 workers"
        assert "…" not in [
            _cell(app, key.split(":", 1)[1], "cause") for key in _table(app).row_order
        ]
        assert any("4 workers" in line and auth in line for line in _lines(app))
        await pilot.press("4")  # All: a healthy test has neither onset nor cause
        await settle(pilot)
        cart = "tests/test_cart.py::test_total"
        assert (_cell(app, cart, "since"), _cell(app, cart, "cause")) == ("—", "—")


def test_the_score_views_offer_since_and_likely_cause() -> None:
    keys = [c.key for c in columns_for("flaky")]
    assert keys.index("since") < keys.index("cause")
    assert {c.key: c.priority for c in columns_for("all")}["cause"] == 1
    assert [c.label for c in columns_for("flaky", "family")][1] == "Family / test"
