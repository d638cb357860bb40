"""The ranked list: a DataTable fed with view-model rows, keeping the cursor on the same row."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from flaketui.tui.viewmodel import Column, Row
from flaketui.tui.widgets.palette import VERDICT_STYLES

RIGHT_ALIGNED = frozenset({"rank", "damage", "recency", "flip", "runs", "fail_rate", "days_left"})


class FlakeTable(DataTable[Text]):
    """Rows are tests, groups or group members; the row key says which."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
        self.rows_by_key: dict[str, Row] = {}
        self._column_keys: tuple[str, ...] = ()
        self._row_order: list[str] = []

    def show(self, rows: list[Row], columns: list[Column], *, sort_key: str | None) -> None:
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
        self.rows_by_key = {row.key: row for row in rows}
        verdict_index = keys.index("verdict") if "verdict" in keys else None
        mode_index = keys.index("mode") if "mode" in keys else None
        for row in rows:
            self.add_row(*self._cells(row, keys, verdict_index, mode_index), key=row.key)
        self._row_order = [row.key for row in rows]
        if current is not None and current.key in self.rows_by_key:
            self.move_cursor(row=self.get_row_index(current.key), animate=False)

    def _cells(
        self, row: Row, keys: tuple[str, ...], verdict_index: int | None, mode_index: int | None
    ) -> list[Text]:
        cells = []
        for index, value in enumerate(row.cells):
            style = ""
            if index in (verdict_index, mode_index):
                style = VERDICT_STYLES.get(value, "")
            elif row.kind == "group":
                style = "bold"
            justify = "right" if keys[index] in RIGHT_ALIGNED else "left"
            cells.append(Text(value, style=style, justify=justify))  # type: ignore[arg-type]
        return cells

    @property
    def current_row(self) -> Row | None:
        """The view-model row under the cursor."""
        order = self._row_order
        if not order or not 0 <= self.cursor_row < len(order):
            return None
        return self.rows_by_key.get(order[self.cursor_row])
