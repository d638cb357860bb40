"""FlakeTable's one-pass rows paint the same segments as rendering them cell by cell."""

from __future__ import annotations

from typing import Any

import pytest
from rich.segment import Segment
from rich.text import Text
from textual.coordinate import Coordinate

from flaketui.tui.widgets import fast_rows, flake_table
from flaketui.tui.widgets.flake_table import FlakeTable
from tests.tui.test_fast_cells import _Table

SIZE = (120, 20)


def _cells(index: int) -> list[Text]:
    return [
        Text(str(index + 1), justify="right"),
        Text(f"…tests/test_{index}.py::test_charge[usd]", justify="left"),
        Text("flaky" if index % 3 else "regression", style="bold dark_orange", justify="left"),
        Text(f"{index * 1.25:.2f}", justify="right", style="dim" if index % 4 == 0 else ""),
        Text("—" if index % 5 == 0 else "@acme/billing @farah-tax"),  # cropped: width 10
        Text("⣀⣀⣤⣶⣿⡀" if index % 2 else ""),
        # Row 7 has a cell of two styles: that row takes DataTable's path.
        Text.assemble(("x", "bold"), "y") if index == 7 else Text("ok"),
    ]


async def _paint(hover_row: int | None, priority: str) -> list[list[Segment]]:
    table = FlakeTable(cursor_foreground_priority=priority, cursor_background_priority=priority)
    app = _Table(table)
    async with app.run_test(size=SIZE) as pilot:
        for key in ("rank", "test", "verdict", "damage"):
            table.add_column(key, key=key)
        table.add_column("owner", key="owner", width=10)
        table.add_column("trend", key="trend")
        table.add_column("note", key="note")
        for index in range(30):
            table.add_row(*_cells(index), key=f"r{index}")
        await pilot.pause()
        table.move_cursor(row=2)
        if hover_row is not None:
            table._show_hover_cursor = True
            table.hover_coordinate = Coordinate(hover_row, 1)
        await pilot.pause()
        lines = table.render_lines(table.size.region)
        return [list(line) for line in lines]


@pytest.mark.parametrize("hover_row", [None, 5, 2])
@pytest.mark.parametrize("priority", ["css", "renderable"])
async def test_rows_in_one_pass_match_cell_by_cell(
    monkeypatch: pytest.MonkeyPatch, hover_row: int | None, priority: str
) -> None:
    made: dict[str, bool] = {}
    render_row = fast_rows.render_row

    def counted(table: FlakeTable, row_key: Any, *args: Any) -> Any:
        pair = render_row(table, row_key, *args)
        made[str(row_key.value)] = pair is not None
        return pair

    monkeypatch.setattr(flake_table, "render_row", counted)
    fast = await _paint(hover_row, priority)
    # The rows took the one-pass path, but for row 7 (a cell of two styles) and the header.
    fell_back = {key for key, fast in made.items() if not fast and key.startswith("r")}
    assert fell_back == {"r7"} and len(made) > 15
    monkeypatch.setattr(flake_table, "render_row", lambda *args: None)
    cell_by_cell = await _paint(hover_row, priority)
    assert fast == cell_by_cell  # segment for segment: text, style and meta (for clicks)


def test_with_meta_is_rich_style_sum() -> None:
    from rich.style import Style

    base = Style(color="red", bgcolor="#272727", bold=True)
    meta = Style.from_meta({"row": 3, "column": 1})
    combined = fast_rows.with_meta(base, meta)
    assert combined == base + meta and combined.meta == {"row": 3, "column": 1}


def _draw(table: FlakeTable) -> None:
    """Every line through DataTable's line and row caches (not the widget's own line cache)."""
    for y in range(table.size.height):
        table.render_line(y)


async def test_rows_are_kept_through_a_resize_of_the_same_size_and_redrawn_for_a_new_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from textual import events

    drawn: list[str] = []
    render_row = fast_rows.render_row

    def counted(table: FlakeTable, row_key: Any, *args: Any) -> Any:
        drawn.append(str(row_key.value))
        return render_row(table, row_key, *args)

    monkeypatch.setattr(flake_table, "render_row", counted)
    table = FlakeTable()
    app = _Table(table)
    async with app.run_test(size=SIZE) as pilot:
        table.add_column("rank", key="rank")
        table.add_column("test", key="test")
        for index in range(30):
            table.add_row(Text(str(index)), Text(f"t{index}"), key=f"r{index}")
        await pilot.pause()
        _draw(table)
        drawn.clear()
        # The Resize that follows the first layout, the size unchanged: DataTable would drop
        # every rendered row and draw them all again.
        table.post_message(events.Resize(table.size, table.virtual_size, table.container_size))
        await pilot.pause()
        _draw(table)
        assert drawn == []
        await pilot.resize_terminal(90, 20)
        await pilot.pause()
        _draw(table)
        assert drawn  # a new width: the rows are drawn again, out to the new edge
        line = table.render_line(1)
        assert line.cell_length == table.size.width
