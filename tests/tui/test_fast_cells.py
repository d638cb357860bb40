"""FlakeTable's fast cell rendering and measuring match DataTable's own, cell for cell."""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from flaketui.tui.widgets.flake_table import FlakeTable

SIZE = (120, 20)
WIDE = "…ests/test_billing.py::test_charge[usd]"  # an ellipsis, then ASCII
SPARK = "⣀⣀⣤⣶⣿⡀"


def _cells(index: int) -> list[Text]:
    return [
        Text(str(index + 1), justify="right"),
        Text(WIDE if index % 2 else f"tests/test_{index}.py::test_x", style="bold" * (index == 3)),
        Text("flaky" if index % 3 else "regression", style="bold red" if index % 3 else "magenta"),
        Text(f"{index * 1.25:.2f}", justify="right", style="dim" if index % 4 == 0 else ""),
        Text("—" if index % 5 == 0 else "@acme/billing @farah-tax"),  # cropped: width 10
        Text(SPARK if index % 2 else ""),
    ]


class _Table(App[None]):
    def __init__(self, table: DataTable[Any]) -> None:
        super().__init__()
        self.table = table

    def compose(self) -> ComposeResult:
        yield self.table


async def _lines(table: DataTable[Any]) -> tuple[list[list[Segment]], list[int], Any]:
    app = _Table(table)
    async with app.run_test(size=SIZE) as pilot:
        for key in ("rank", "test", "verdict", "damage"):
            table.add_column(key, key=key)
        table.add_column("owner", key="owner", width=10)
        table.add_column("trend", key="trend")
        for index in range(30):
            table.add_row(*_cells(index), key=f"r{index}")
        await pilot.pause()
        table.move_cursor(row=2)
        await pilot.pause()
        lines = [list(Segment.simplify(list(table.render_line(y)))) for y in range(SIZE[1])]
        return lines, [c.content_width for c in table.ordered_columns], table.virtual_size


async def test_fast_cells_match_datatable_rendering() -> None:
    stock = await _lines(DataTable(cursor_type="row", zebra_stripes=True))
    fast_table = FlakeTable()
    fast = await _lines(fast_table)
    assert fast[0] == stock[0]
    # Columns are as wide as DataTable's own measuring makes them, the scroll size the same.
    assert fast[1] == stock[1] and fast[2] == stock[2]
    # The fast path did the body cells (not DataTable's fallback).
    assert fast_table._fast_cell(0, 1) is not None


async def test_cells_with_spans_take_datatable_path() -> None:
    table = FlakeTable()
    app = _Table(table)
    async with app.run_test(size=SIZE) as pilot:
        table.add_column("a", key="a")
        table.add_row(Text.assemble(("x", "bold"), "y"), key="r")
        await pilot.pause()
        assert table._fast_cell(0, 0) is None
        assert "xy" in "".join(s.text for s in table.render_line(1))
