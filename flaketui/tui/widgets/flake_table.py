"""The ranked list: a DataTable fed with view-model rows, keeping the cursor on the same row.

Rows and their styled cells are built off the UI thread (prepare_rows); the table adds the
first screenful at once and the rest in chunks a frame apart, because adding and measuring
thousands of rows in one go would stall the event loop (SPEC §9).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widgets import DataTable

from flaketui.tui.loaders import MainData
from flaketui.tui.viewmodel import Column, Row, ViewContext, ViewState, build_rows, columns_for
from flaketui.tui.widgets.palette import VERDICT_STYLES

RIGHT_ALIGNED = frozenset({"rank", "damage", "recency", "flip", "runs", "fail_rate", "days_left"})
FIRST_ROWS = 60  # more than a tall terminal shows: the first screen is complete at once
CHUNK_ROWS = 60  # rows added per later frame
CHUNK_DELAY_S = 0.005


@dataclass(slots=True)
class PreparedRows:
    """The rows of one view and their styled cells, ready to add."""

    rows: list[Row]
    cells: list[list[Text]]


def row_cells(row: Row, keys: tuple[str, ...]) -> list[Text]:
    """A row's cells as styled text: verdict and mode coloured, groups bold, numbers right."""
    styled = {"verdict", "mode"}
    cells = []
    for key, value in zip(keys, row.cells, strict=False):
        style = ""
        if key in styled:
            style = VERDICT_STYLES.get(value, "")
        elif row.kind == "group":
            style = "bold"
        justify = "right" if key in RIGHT_ALIGNED else "left"
        cells.append(Text(value, style=style, justify=justify))  # type: ignore[arg-type]
    return cells


def prepare_rows(data: MainData, state: ViewState) -> PreparedRows:
    """Build the rows of the view `state` asks for (pure: safe in a worker thread)."""
    columns = columns_for(state.view)
    ctx = ViewContext(now=data.report.now, lifecycle=data.lifecycle)
    rows = build_rows(data.report, state, ctx, data.quarantine)
    keys = tuple(c.key for c in columns)
    return PreparedRows(rows, [row_cells(row, keys) for row in rows])


class FlakeTable(DataTable[Text]):
    """Rows are tests, groups or group members; the row key says which."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
        self.rows_by_key: dict[str, Row] = {}
        self._column_keys: tuple[str, ...] = ()
        self._row_order: list[str] = []
        self._prepared = PreparedRows([], [])
        self._added = 0  # rows of _prepared already in the table
        self._generation = 0  # bumped by show(): pending chunks of an older show() stop

    def show(self, prepared: PreparedRows, columns: list[Column], *, sort_key: str | None) -> None:
        """Replace the content, keeping the cursor on the row it was on when it still exists."""
        current = self.current_row
        keys = tuple(c.key for c in columns)
        if keys != self._column_keys:
            self.clear(columns=True)
            for column in columns:
                self.add_column(column.label, key=column.key)
            self._column_keys = keys
        else:
            self.clear()
        for column in columns:
            label = column.label + (" ▼" if column.key == sort_key else "")
            self.columns[column.key].label = Text(label)  # type: ignore[index]
        self._generation += 1
        self._prepared = prepared
        self._added = 0
        self.rows_by_key = {row.key: row for row in prepared.rows}
        self._row_order = [row.key for row in prepared.rows]
        target = None
        if current is not None and current.key in self.rows_by_key:
            target = self._row_order.index(current.key)
        self._add_up_to(max(FIRST_ROWS, (target or 0) + 1))
        if target is not None:
            self.move_cursor(row=target, animate=False)
        self._schedule_more()

    def _add_up_to(self, count: int) -> None:
        """Add the prepared rows up to `count` (in list order)."""
        prepared = self._prepared
        end = min(count, len(prepared.rows))
        for index in range(self._added, end):
            self.add_row(*prepared.cells[index], key=prepared.rows[index].key)
        self._added = max(self._added, end)

    def _schedule_more(self) -> None:
        if self._added < len(self._prepared.rows):
            generation = self._generation
            self.set_timer(CHUNK_DELAY_S, lambda: self._add_chunk(generation))

    def _add_chunk(self, generation: int) -> None:
        if generation != self._generation:
            return  # a newer show() replaced these rows
        self._add_up_to(self._added + CHUNK_ROWS)
        self._schedule_more()

    def index_of(self, key: str) -> int:
        """The index of a row, adding pending rows up to it first."""
        index = self._row_order.index(key)
        self._add_up_to(index + 1)
        return index

    @property
    def current_row(self) -> Row | None:
        """The view-model row under the cursor."""
        order = self._row_order
        if not order or not 0 <= self.cursor_row < len(order):
            return None
        return self.rows_by_key.get(order[self.cursor_row])
