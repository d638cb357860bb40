"""A ranked-list row rendered in one pass: the same segments as DataTable's, cell by cell.

DataTable renders a row cell by cell, each cell reading the table's reactive settings, building
a cache key and summing its styles anew. On the first ranked screen that was some 15 ms of the
first paint: here the settings and the row's styles are read once per row, and each
cell only adds its own meta (row and column, for clicks). tests/tui/test_fast_rows.py compares
the segments with the cell-by-cell path for every row, cursor and hover on and off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

if TYPE_CHECKING:
    from textual.coordinate import Coordinate
    from textual.widgets import DataTable

JUSTIFIED = (None, "default", "left", "right")
OVERFLOWS = (None, "fold", "crop")

Lines = list[list[Segment]]

# Rich's Style sum without its cache: each cell's meta is new, so caching the sum only evicts
# the sums that do repeat (the row and cell styles) from Rich's 1024 entries.
_ADD_UNCACHED = getattr(Style._add, "__wrapped__", None)


def with_meta(style: Style, meta: Style) -> Style:
    """`style + meta` (the same Style), for a meta that is used once."""
    if _ADD_UNCACHED is None:
        return style + meta
    combined: Style = _ADD_UNCACHED(style, meta)
    return combined.copy() if combined.link else combined


def is_fast_cell(cell: object) -> bool:
    """A one-line Text of one style that cell_segments renders as Rich would."""
    return (
        isinstance(cell, Text)
        and not cell.spans
        and "\n" not in cell.plain
        and cell.justify in JUSTIFIED
        and cell.overflow in OVERFLOWS
        and cell.end == "\n"
    )


def style_of(cell: Text) -> Style:
    """A cell's style as a Style (Text keeps a string as given)."""
    style = cell.style
    if isinstance(style, Style):
        return style
    return Style.parse(style) if style else Style.null()


def cell_segments(
    cell: Text, width: int, padding: int, edge_style: Style, text_style: Style
) -> list[Segment]:
    """One cell's line: padding in the edge style, the text cropped or justified in its own."""
    inner = max(0, width - 2 * padding)
    plain = cell.plain
    size = cell_len(plain)
    trailing = 0
    if size > inner:
        plain = set_cell_size(plain, inner)
    elif cell.justify == "right":
        plain = " " * (inner - size) + plain
    else:
        trailing = inner - size  # Padding fills the rest of the line in its own style
    line = []
    if padding:
        line.append(Segment(" " * padding, edge_style))
    if plain:
        line.append(Segment(plain, text_style))
    if padding + trailing:
        line.append(Segment(" " * (padding + trailing), edge_style))
    return line


def render_row(
    table: DataTable[Any],
    row_key: Any,
    base_style: Style,
    cursor_location: Coordinate,
    hover_location: Coordinate,
) -> tuple[Lines, Lines] | None:
    """The fixed and scrollable cell lines of a one-line body row, as DataTable makes them.

    None when DataTable's own path is needed: a header or labelled or fixed row or column, a
    cursor other than the row cursor, a cell that is not a plain one-style Text.
    """
    if table.cursor_type != "row" or table.fixed_columns or table.fixed_rows:
        return None
    if table._labelled_row_exists and table.show_row_labels:
        return None
    row = table.rows.get(row_key)
    cells = table._data.get(row_key)
    row_index = table._row_locations.get(row_key)
    if row is None or cells is None or row_index is None or row.height != 1:
        return None
    padding = table.cell_padding
    if padding < 0:
        return None
    columns = table.ordered_columns
    texts = [cells.get(column.key) for column in columns]
    if not all(is_fast_cell(text) for text in texts):
        return None
    cursor = row_index == cursor_location.row
    hover = row_index == hover_location.row
    show_cursor = table.show_cursor
    show_hover_cursor = table._show_hover_cursor
    row_style = table._get_row_style(row_index, base_style)
    component_style, post_style = table._get_styles_to_render_cell(
        False,
        False,
        False,
        hover,
        cursor,
        show_cursor,
        show_hover_cursor,
        table.cursor_foreground_priority == "css",
        table.cursor_background_priority == "css",
    )
    # The sums of DataTable's cells (row, component, cell, post, meta), in its order: all but
    # the meta repeat along the row, so they are made once per row and cell style.
    pre_style = row_style + component_style
    edge_base = pre_style + post_style
    text_bases: dict[Any, Style] = {}
    scrollable: Lines = []
    table_width = 0
    for column_index, (column, text) in enumerate(zip(columns, texts, strict=True)):
        width = 2 * padding + (column.content_width if column.auto_width else column.width)
        table_width += width
        assert isinstance(text, Text)
        cell_style = text.style
        text_base = text_bases.get(cell_style)
        if text_base is None:
            text_base = text_bases[cell_style] = pre_style + style_of(text) + post_style
        meta = Style.from_meta({"row": row_index, "column": column_index})
        edge_style = with_meta(edge_base, meta)
        scrollable.append(
            cell_segments(text, width, padding, edge_style, with_meta(text_base, meta))
        )
    # The rest of the line, as DataTable extends a row for the row cursor.
    remaining = max(0, table.size.width - table_width - table._row_label_column_width)
    extend_style, _ = table._get_styles_to_render_cell(
        False,
        False,
        False,
        hover_location.row == row_index,
        cursor,
        show_cursor,
        show_hover_cursor,
        False,
        False,
    )
    extend_style = row_style + extend_style
    extend_meta = Style.from_meta({"row": row_index, "column": 0, "out_of_bounds": True})
    extend_style = with_meta(extend_style, extend_meta)
    scrollable.append([Segment(" " * remaining, extend_style)])
    return [], scrollable
