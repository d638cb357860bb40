"""The ranked list: a DataTable fed with view-model rows, keeping the cursor on the same row.

Rows and their styled cells are built off the UI thread (prepare_rows); the table adds the
first screenful at once and the rest in chunks a frame apart, because adding and measuring
thousands of rows in one go would stall the event loop.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, overload

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.coordinate import Coordinate
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

from flaketui.tui.loaders import MainData
from flaketui.tui.viewmodel import Column, Row, ViewContext, ViewState, build_rows, columns_for
from flaketui.tui.widgets.fast_rows import cell_segments, render_row, style_of
from flaketui.tui.widgets.palette import VERDICT_STYLES

RIGHT_ALIGNED = frozenset({"rank", "damage", "recency", "flip", "runs", "fail_rate", "days_left"})
FIRST_ROWS = 60  # more than a tall terminal shows: the first screen is complete at once
CHUNK_ROWS = 500  # rows per later frame at most: few chunks, since each one costs a repaint
CHUNK_BUDGET_S = 0.04  # and at most this long per chunk (no stall over 100 ms)
CHUNK_DELAY_S = 0.005
EAGER_ROWS = 5000  # a worker makes the cells of a view this small (see prepare_rows)


class LazyCells(Sequence[list[Text]]):
    """The styled cells of rows, made for a row when it is first added or compared.

    A view of 50 000 tests shows its first screenful at once and adds the rest in chunks:
    styling every cell up front cost seconds on the UI thread.
    """

    def __init__(self, rows: list[Row], keys: tuple[str, ...]) -> None:
        """Cells of `rows` for the columns `keys`, none made yet."""
        self._rows = rows
        self._keys = keys
        self._made: list[list[Text] | None] = [None] * len(rows)

    def __len__(self) -> int:
        """One entry per row."""
        return len(self._rows)

    def make(self, count: int) -> None:
        """Make the cells of the first `count` rows now (in a worker, before they are shown)."""
        for index in range(min(count, len(self._rows))):
            self[index]

    @overload
    def __getitem__(self, index: int) -> list[Text]: ...

    @overload
    def __getitem__(self, index: slice) -> list[list[Text]]: ...

    def __getitem__(self, index: int | slice) -> list[Text] | list[list[Text]]:
        """A row's cells (made and kept on first use), or a slice's."""
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        made = self._made[index]
        if made is None:
            made = self._made[index] = row_cells(self._rows[index], self._keys)
        return made


@dataclass(slots=True)
class PreparedRows:
    """The rows of one view and their styled cells, ready to add."""

    rows: list[Row]
    cells: Sequence[list[Text]]


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


def prepare_rows(
    data: MainData, state: ViewState, *, eager: bool = True, eager_rows: int = EAGER_ROWS
) -> PreparedRows:
    """Build the rows of the view `state` asks for (pure: safe in a worker thread).

    eager (the first load's workers): a view of up to eager_rows rows gets its cells made
    here, off the UI thread; otherwise they are made as the table adds the rows.
    """
    columns = columns_for(state.view)
    ctx = ViewContext(now=data.report.now, lifecycle=data.lifecycle)
    rows = build_rows(data.report, state, ctx, data.quarantine)
    keys = tuple(c.key for c in columns)
    cells = LazyCells(rows, keys)
    if eager:
        cells.make(eager_rows)
    return PreparedRows(rows, cells)


def _one_line(cell: object) -> bool:
    """A Text of one line without tabs: its width is the cell length of its text."""
    return isinstance(cell, Text) and "\n" not in cell.plain and "\t" not in cell.plain


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
        self._sort_key: str | None = None
        # Read once per paint (see render_lines): the table's style and its rows' styles.
        self._paint_style: Style | None = None
        self._paint_row_styles: dict[tuple[object, Style], Style] | None = None

    def show(self, prepared: PreparedRows, columns: list[Column], *, sort_key: str | None) -> None:
        """Replace the content, keeping the cursor on the row it was on when it still exists."""
        current = self.current_row
        keys = tuple(c.key for c in columns)
        if keys != self._column_keys:
            self.clear(columns=True)
            for column in columns:
                # Text, not str: DataTable parses a str label as markup, and Rich's markup
                # pass loads its emoji table (a visible part of a cold start).
                self.add_column(Text(column.label), key=column.key)
            self._column_keys = keys
        else:
            self.clear()
        for column in columns:
            label = column.label + (" ▼" if column.key == sort_key else "")
            self.columns[column.key].label = Text(label)  # type: ignore[index]
        self._generation += 1
        self._sort_key = sort_key
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

    def show_changes(
        self, prepared: PreparedRows, columns: list[Column], *, sort_key: str | None
    ) -> None:
        """Show new content: only the changed cells when the rows and columns are the same.

        When the lifecycle states arrive, one column of the same rows changes; rewriting those
        cells costs one repaint, where replacing every row costs several.
        """
        same_rows = [row.key for row in prepared.rows] == self._row_order
        same_columns = tuple(c.key for c in columns) == self._column_keys
        # Comparing a huge view cell by cell would make all its cells on the UI thread.
        small = len(prepared.rows) <= EAGER_ROWS
        if not (same_rows and same_columns and sort_key == self._sort_key and small):
            self.show(prepared, columns, sort_key=sort_key)
            return
        old = self._prepared
        changed: set[int] = set()  # column indexes
        for index, row in enumerate(prepared.rows):
            self.rows_by_key[row.key] = row
            if index >= self._added:
                continue  # not in the table yet: its chunk adds the new cells
            cells = prepared.cells[index]
            for column, (before, after) in enumerate(zip(old.cells[index], cells, strict=True)):
                if before.plain != after.plain or before.style != after.style:
                    # Widths are set below: DataTable's update_width re-measures the whole
                    # column for every cell that got narrower (quadratic in the rows).
                    self.update_cell(row.key, self._column_keys[column], after)
                    changed.add(column)
        self._prepared = prepared
        for column in changed:
            table_column = self.columns[self._column_keys[column]]  # type: ignore[index]
            widths = [cell_len(cells[column].plain) for cells in prepared.cells[: self._added]]
            # As DataTable counts it: the label is part of a column's content width.
            table_column.content_width = max([*widths, table_column.label.cell_len])
        if changed:
            self._require_update_dimensions = True  # the scroll size follows the widths
            self.check_idle()

    def _add_up_to(self, count: int, deadline: float | None = None) -> None:
        """Add the prepared rows up to `count` (in list order), or until `deadline`."""
        prepared = self._prepared
        end = min(count, len(prepared.rows))
        for index in range(self._added, end):
            self.add_row(*prepared.cells[index], key=prepared.rows[index].key)
            self._added = index + 1
            if deadline is not None and index % 25 == 0 and time.perf_counter() > deadline:
                return
        self._added = max(self._added, end)

    def _schedule_more(self) -> None:
        if self._added < len(self._prepared.rows):
            generation = self._generation
            # After the rows added so far are painted, and a moment more: the thread writing
            # that paint to the terminal needs the GIL the next chunk would hold.
            later = partial(self.set_timer, CHUNK_DELAY_S, lambda: self._add_chunk(generation))
            self.call_after_refresh(later)

    def _add_chunk(self, generation: int) -> None:
        if generation != self._generation:
            return  # a newer show() replaced these rows
        # A time budget, not a row count: the event loop gets its turn well within 100 ms
        # on any machine, and a fast one fills big views in fewer, larger chunks.
        self._add_up_to(self._added + CHUNK_ROWS, time.perf_counter() + CHUNK_BUDGET_S)
        self._schedule_more()

    def _size_updated(
        self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True
    ) -> bool:
        """Drop the rendered rows when the width they were drawn for changes, at once.

        DataTable drops them on the Resize event that follows, which also comes after the
        first layout with the size unchanged: every row of the first ranked screen was then
        drawn a second time, just after the first paint. See _on_resize.
        """
        if size != self._size:  # as ScrollView compares (size is the content's)
            self._update_count += 1
        return super()._size_updated(size, virtual_size, container_size, layout)

    def _on_resize(self, event: events.Resize) -> None:
        """Keep the rendered rows: _size_updated dropped them already if the size changed."""
        event.prevent_default()  # DataTable's handler would drop them again, whatever the size

    def render_lines(self, crop: Region) -> list[Strip]:
        """Paint, reading the table's style and each kind of row's style once, not per line.

        DataTable asks for them per line (and per row): each is a walk up the DOM merging
        styles, about a tenth of a full paint of the list (first ranked screen).
        """
        self._paint_style = super().rich_style
        self._paint_row_styles = {}
        try:
            return super().render_lines(crop)
        finally:
            self._paint_style = None
            self._paint_row_styles = None

    @property
    def rich_style(self) -> Style:
        """The table's style (the paint's own while painting)."""
        return self._paint_style or super().rich_style

    def _get_row_style(self, row_index: int, base_style: Style) -> Style:
        """DataTable's row style, once per paint for each kind of row."""
        memo = self._paint_row_styles
        if memo is None:
            return super()._get_row_style(row_index, base_style)
        if row_index == -1 or row_index < self.fixed_rows:
            kind: object = row_index if row_index == -1 else "fixed"
        else:
            kind = row_index % 2 if self.zebra_stripes else "plain"
        style = memo.get((kind, base_style))
        if style is None:
            style = memo[(kind, base_style)] = super()._get_row_style(row_index, base_style)
        return style

    def _render_line_in_row(
        self,
        row_key: RowKey,
        line_no: int,
        base_style: Style,
        cursor_location: Coordinate,
        hover_location: Coordinate,
    ) -> tuple[list[list[Segment]], list[list[Segment]]]:
        """A body row in one pass (fast_rows.render_row), cached as DataTable caches rows."""
        if line_no:
            return super()._render_line_in_row(
                row_key, line_no, base_style, cursor_location, hover_location
            )
        cache_key = (
            row_key,
            line_no,
            base_style,
            cursor_location,
            hover_location,
            self.cursor_type,
            self.show_cursor,
            self._show_hover_cursor,
            self._update_count,
            self._pseudo_class_state,
        )
        cached = self._row_render_cache.get(cache_key)
        if cached is not None:
            return cached
        pair = render_row(self, row_key, base_style, cursor_location, hover_location)
        if pair is None:
            return super()._render_line_in_row(
                row_key, line_no, base_style, cursor_location, hover_location
            )
        self._row_render_cache[cache_key] = pair
        return pair

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> list[list[Segment]]:
        """Render a one-line, one-style text cell without a Rich render pass.

        DataTable renders every cell through Rich (padding, styling, line splitting), which
        costs a large table a visible stall on each full repaint (new rows, a refreshed
        state). The cells here are single-line Text of one style, whose rendering is a padded
        string and three segments: identical output (tests/tui/test_fast_cells.py compares
        it with DataTable's own), several times faster. Anything else takes DataTable's path.
        """
        fast = self._fast_cell(row_index, column_index)
        if fast is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        row_key, column_key, cell = fast
        cache_key = (
            row_key,
            column_key,
            base_style,
            cursor,
            hover,
            self._show_hover_cursor,
            self._update_count,
            self._pseudo_class_state,
        )
        cached = self._cell_render_cache.get(cache_key)
        if cached is not None:
            return cached
        component_style, post_style = self._get_styles_to_render_cell(
            False,
            False,
            False,
            hover,
            cursor,
            self.show_cursor,
            self._show_hover_cursor,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css",
        )
        # The same sums as DataTable's (base + meta, component, cell, post), with the cell's
        # meta (row and column, for clicks) added last: the other sums repeat from cell to
        # cell, so Rich's style cache answers them.
        meta = Style.from_meta({"row": row_index, "column": column_index})
        pre_style = base_style + component_style
        edge_style = pre_style + post_style + meta
        text_style = pre_style + style_of(cell) + post_style + meta
        line = cell_segments(cell, width, self.cell_padding, edge_style, text_style)
        lines: list[list[Segment]] = [line]
        self._cell_render_cache[cache_key] = lines
        return lines

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        """Widen columns for new rows, measuring one-line text cells by their length.

        DataTable measures every new cell through Rich (tens of microseconds each: a visible
        stall for a few hundred rows); a one-line, tab-free Text is as wide as its text.
        Other rows go through DataTable's own measuring, which also sets the virtual size.
        """
        by_datatable: list[RowKey] = []
        columns = self.ordered_columns
        for row_key in new_rows:
            row = self.rows.get(row_key)
            cells = self._data.get(row_key)
            if row is None or cells is None or row.label is not None or row.height != 1:
                by_datatable.append(row_key)
                continue
            texts = [cells.get(column.key) for column in columns]
            if not all(_one_line(text) for text in texts):
                by_datatable.append(row_key)
                continue
            for column, text in zip(columns, texts, strict=True):
                width = cell_len(text.plain)  # type: ignore[union-attr]
                if width > column.content_width:
                    column.content_width = width
        super()._update_dimensions(by_datatable)

    def _fast_cell(self, row_index: int, column_index: int) -> tuple[Any, Any, Text] | None:
        """The keys and text of a body cell the fast path renders exactly, else None."""
        if row_index < 0 or column_index < 0 or self.fixed_rows or self.fixed_columns:
            return None
        if self.cell_padding < 0 or not hasattr(self, "_get_styles_to_render_cell"):
            return None
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        if row_key is None or column_key is None:
            return None
        cell = self._data.get(row_key, {}).get(column_key)
        row = self.rows.get(row_key)
        if row is None or row.height != 1 or not isinstance(cell, Text):
            return None
        if (
            cell.spans
            or "\n" in cell.plain
            or cell.justify not in (None, "default", "left", "right")
        ):
            return None
        if cell.overflow not in (None, "fold", "crop") or cell.end != "\n":
            return None
        return row_key, column_key, cell

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
