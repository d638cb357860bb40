"""Tables sized to their rows."""

from __future__ import annotations

from typing import Any

from textual.widgets import DataTable


def fit_rows(table: DataTable[Any]) -> None:
    """Make a table as tall as its header and rows (a line each), up to its max-height: call it
    once the rows are added.

    Not `height: auto`, which the table works out from its rows when the app is next idle: the
    screen's layout at times kept the empty table's height after that (no line, the rows
    measured), until something else laid the screen out again.
    """
    table.styles.height = table.row_count + (1 if table.show_header else 0)
