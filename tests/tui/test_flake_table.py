"""The ranked list: rows drawn as they come on screen, cursor, keys, mouse, widths, restyling."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pilots import app_on, settle
from rich.text import Text
from textual.app import App, ComposeResult
from tui_history import NOW

from flaketui.tui.viewmodel import Column, Row
from flaketui.tui.widgets.flake_table import (
    FIRST_ROWS,
    FlakeTable,
    LazyCells,
    PreparedRows,
    prepare_rows,
)

COLUMNS = [
    Column("rank", "#", lambda i, c: i, lambda i, c: str(i)),
    Column("test", "Test", lambda i, c: i, lambda i, c: str(i)),
]
COUNT = 1007
SIZE = (80, 30)  # 29 rows below the header


def _prepared(count: int, prefix: str = "t") -> PreparedRows:
    rows = [
        Row(f"t:{prefix}{i}", "test", f"{prefix}{i}", (str(i), f"{prefix}{i}"), "flaky")
        for i in range(count)
    ]
    return PreparedRows(rows, [[Text(c) for c in row.cells] for row in rows])


class _Host(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[object] = []

    def compose(self) -> ComposeResult:
        yield FlakeTable(id="table")

    def on_flake_table_row_highlighted(self, event: FlakeTable.RowHighlighted) -> None:
        self.messages.append(("highlighted", event.row.key if event.row else None))

    def on_flake_table_row_selected(self, event: FlakeTable.RowSelected) -> None:
        self.messages.append(("selected", event.row.key))

    def on_flake_table_header_selected(self, event: FlakeTable.HeaderSelected) -> None:
        self.messages.append(("header", event.column_key))


def _screen_lines(app: App[None]) -> list[str]:
    """The table's lines as plain text."""
    table = app.query_one(FlakeTable)
    return [table.render_line(y).text for y in range(table.size.height)]


async def test_every_row_is_in_the_list_at_once_and_only_drawn_rows_are_styled() -> None:
    made: list[int] = []

    def counted(i: int) -> Callable[[], tuple[str, str]]:
        def make() -> tuple[str, str]:
            made.append(i)
            return (str(i), f"t{i}")

        return make

    rows = [Row(f"t:t{i}", "test", f"t{i}", counted(i), "flaky") for i in range(COUNT)]
    prepared = PreparedRows(rows, LazyCells(rows, ("rank", "test")))
    app = _Host()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(FlakeTable)
        table.show(prepared, COLUMNS, sort_key=None)
        await pilot.pause()
        assert table.row_count == COUNT and table.row_order[-1] == f"t:t{COUNT - 1}"
        # The rows on screen were made to draw them; the others were not.
        assert sorted(set(made)) == list(range(29))
        await pilot.press("ctrl+end")
        await pilot.pause()
        assert table.current_row is not None and table.current_row.target == f"t{COUNT - 1}"
        assert f"t{COUNT - 1}" in _screen_lines(app)[-1]
        assert len(made) < 100  # each row's cells made once, when first drawn


async def test_the_header_stays_on_top_and_the_cursor_in_view() -> None:
    app = _Host()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(FlakeTable)
        table.show(_prepared(COUNT), COLUMNS, sort_key="rank")
        await pilot.pause()
        lines = _screen_lines(app)
        assert lines[0].split() == ["#▲", "Test"] and lines[1].split() == ["0", "t0"]
        await pilot.press("pagedown")
        await pilot.pause()
        assert table.cursor_row == 29
        assert any(line.split()[:2] == ["29", "t29"] for line in _screen_lines(app)[1:])
        for _ in range(40):
            await pilot.press("down")
        await pilot.pause()
        lines = _screen_lines(app)
        assert lines[0].split()[0] == "#▲" and lines[-1].split() == ["69", "t69"]
        await pilot.press("pageup", "ctrl+home")
        await pilot.pause()
        assert table.cursor_row == 0 and _screen_lines(app)[1].split() == ["0", "t0"]
        await pilot.press("up")  # at the top already: the cursor stays
        assert table.cursor_row == 0


async def test_keys_and_clicks_post_the_tables_messages() -> None:
    app = _Host()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(FlakeTable)
        table.show(_prepared(10), COLUMNS, sort_key=None)
        table.focus()
        await pilot.pause()
        await pilot.press("down", "enter")
        await pilot.click(FlakeTable, offset=(5, 4))  # the row of t3: the cursor goes there
        await pilot.click(FlakeTable, offset=(5, 4))  # again: it is selected
        await pilot.click(FlakeTable, offset=(6, 0))  # the header of the Test column
        await pilot.pause()
        assert app.messages == [
            ("highlighted", "t:t1"),
            ("selected", "t:t1"),
            ("highlighted", "t:t3"),
            ("selected", "t:t3"),
            ("header", "test"),
        ]


async def test_cursor_stays_on_its_row_through_a_new_show() -> None:
    app = _Host()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(FlakeTable)
        table.show(_prepared(COUNT), COLUMNS, sort_key=None)
        target = FIRST_ROWS + 503
        table.move_cursor(row=table.index_of(f"t:t{target}"), animate=False)
        await pilot.pause()
        forward = _prepared(COUNT)
        reordered = PreparedRows(forward.rows[::-1], list(forward.cells)[::-1])
        table.show(reordered, COLUMNS, sort_key=None)  # e.g. another sort
        await pilot.pause()
        assert table.current_row is not None and table.current_row.target == f"t{target}"
        assert any(f"t{target}" in line for line in _screen_lines(app)[1:])
        table.show(_prepared(5, "new"), COLUMNS, sort_key=None)  # its row is gone: the top
        assert table.row_order == [f"t:new{i}" for i in range(5)] and table.cursor_row == 0


async def test_lifecycle_states_fill_in_after_the_first_screen(
    history: Path, tmp_path: Path
) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, rounds=4)
        data = app.main_screen.data
        assert data is not None and data.extras_loaded and data.suites == ["unit"]
        table = app.main_screen.query_one(FlakeTable)
        state_column = table.column_keys.index("lifecycle")
        shown = {row.target: row.cells[state_column] for row in table.rows_by_key.values()}
        assert shown == {t: data.lifecycle.get(t, "—") for t in shown}
        assert set(shown.values()) - {"—"}  # some test is in a lifecycle state
        drawn = {table.cells_of(key)[state_column].plain for key in table.row_order}
        assert drawn == set(shown.values())


async def test_show_changes_keeps_cursor_and_scroll_and_shows_the_new_cells() -> None:
    app = _Host()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(FlakeTable)
        table.show(_prepared(COUNT), COLUMNS, sort_key=None)
        table.move_cursor(row=40, animate=False)
        await pilot.pause()
        scrolled = table.scroll_y
        after = _prepared(COUNT)
        after.cells[40][1] = Text("changed 40")
        table.show_changes(after, COLUMNS, sort_key=None)
        await pilot.pause()
        assert table.cursor_row == 40 and table.scroll_y == scrolled > 0
        assert any("changed 40" in line for line in _screen_lines(app))


async def test_columns_fit_the_widest_cell_and_narrow_when_it_goes() -> None:
    app = _Host()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(FlakeTable)
        before = _prepared(20)
        before.cells[3][1] = Text("x" * 50)
        table.show(before, COLUMNS, sort_key=None)
        await pilot.pause()
        assert table.widths[1] == 50 and table.virtual_size.width == (2 + 2) + (50 + 2)
        after = _prepared(20)
        table.show_changes(after, COLUMNS, sort_key=None)
        await pilot.pause()
        assert table.widths[1] == max(len("Test"), *(len(cells[1].plain) for cells in after.cells))


async def test_a_lazy_view_widens_its_columns_for_the_rows_drawn_later() -> None:
    rows = [
        Row(f"t:t{i}", "test", f"t{i}", (str(i), "y" * (5 if i < 40 else 30)), "flaky")
        for i in range(100)
    ]
    prepared = PreparedRows(rows, LazyCells(rows, ("rank", "test")))
    prepared.cells.make(10)  # type: ignore[attr-defined]
    prepared.widths = None
    app = _Host()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(FlakeTable)
        table.show(prepared, COLUMNS, sort_key=None)
        await pilot.pause()
        assert table.widths[1] == 5
        table.move_cursor(row=60)
        await pilot.pause()
        await pilot.pause()
        assert table.widths[1] == 30


def test_a_worker_measures_a_small_view_and_styles_its_first_screen_only(
    history: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load's worker sizes the columns of a small view from all its rows, but makes the
    styled cells (a Text and two lists each, for every full collection to walk) of the first
    screen only; the others are made as they are drawn. A big view is left lazy."""
    from flaketui.tui.loaders import load_main
    from flaketui.tui.startup import make_source
    from flaketui.tui.viewmodel import ViewState
    from flaketui.tui.widgets import flake_table

    first = 3
    monkeypatch.setattr(flake_table, "FIRST_ROWS", first)
    data = load_main(make_source(history, NOW), suite=None, branch_kind=None)
    small = prepare_rows(data, ViewState(view="all"))
    assert len(small.rows) > first
    assert small.cells.made_count() == first  # type: ignore[attr-defined]
    columns = len(small.cells[0])
    every = list(small.cells)  # all made now
    assert small.widths == [max(len(c[i].plain) for c in every) for i in range(columns)]
    lazy = prepare_rows(data, ViewState(view="all"), eager=False)
    assert not any(lazy.cells.made)  # type: ignore[attr-defined]
    assert [c.plain for c in lazy.cells[0]] == [c.plain for c in small.cells[0]]
