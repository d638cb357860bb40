"""The ranked list: view-model rows drawn line by line, keeping the cursor on the same row.

Columns fit the width: on a narrow screen the list drops columns by their priority (see
viewmodel.Column) before it cuts a test id, and a cut id loses its left end, not the test's
name (fit_columns, fit_label).

A ScrollView on Textual's line API: the widget holds the rows of the view and draws only the
lines on screen, so showing a view of 50 000 tests costs what showing its first screenful
costs. Rows and their styled cells are built off the UI thread (prepare_rows); a cell that is
not made yet is made when its row is first drawn. The look is the one of Textual's DataTable
with a row cursor and zebra stripes (header, stripes, cursor, hover), from component classes
that the app's stylesheet may restyle.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, overload

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from flaketui.core.output.text import visible
from flaketui.tui.loaders import MainData
from flaketui.tui.viewmodel import Column, Row, ViewContext, ViewState, build_rows, columns_for
from flaketui.tui.widgets.palette import VERDICT_STYLES

RIGHT_ALIGNED = frozenset({"rank", "damage", "recency", "flip", "runs", "fail_rate", "days_left"})
FIRST_ROWS = 60  # more than a tall terminal shows: the first screen's cells, made in the worker
EAGER_ROWS = 5000  # a worker measures the cell texts of a view this small (see prepare_rows)
CELL_PADDING = 1  # blank cells on each side of a cell
HEADER_LINES = 1
# Ascending, descending: drawn after the sorted column's label, in its right padding when the
# label fills the column, so that a sort never widens a column (nor drops another).
SORT_MARKS = {False: "▲", True: "▼"}
FLEX_COLUMN = "test"  # the column that takes the width the others leave
# Cells of a test id kept before an optional column is shown: most node ids stay whole.
TEST_WANT = 60
TEST_FLOOR = 20  # a screen too narrow even for the columns always shown scrolls sideways


class LazyCells(Sequence[list[Text]]):
    """The styled cells of rows, made for a row when it is first drawn or compared.

    A view of 50 000 tests shows its first screenful at once: styling every cell up front
    would cost seconds before it.
    """

    def __init__(self, rows: list[Row], keys: tuple[str, ...]) -> None:
        """Cells of `rows` for the columns `keys`, none made yet."""
        self.rows = rows
        self.keys = keys
        self.made: list[list[Text] | None] = [None] * len(rows)

    def __len__(self) -> int:
        """One entry per row."""
        return len(self.rows)

    def make(self, count: int) -> None:
        """Make the cells of the first `count` rows now (in a worker, before they are shown)."""
        for index in range(min(count, len(self.rows))):
            self[index]

    def made_count(self) -> int:
        """How many rows have their cells made."""
        return sum(1 for cells in self.made if cells is not None)

    @overload
    def __getitem__(self, index: int) -> list[Text]: ...

    @overload
    def __getitem__(self, index: slice) -> list[list[Text]]: ...

    def __getitem__(self, index: int | slice) -> list[Text] | list[list[Text]]:
        """A row's cells (made and kept on first use), or a slice's."""
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        made = self.made[index]
        if made is None:
            made = self.made[index] = row_cells(self.rows[index], self.keys)
        return made

    def is_made(self, index: int) -> bool:
        """Whether the row's cells exist already."""
        return self.made[index] is not None


@dataclass(slots=True)
class PreparedRows:
    """The rows of one view and their styled cells, ready to show."""

    rows: list[Row]
    cells: Sequence[list[Text]]
    # The widest made cell of each column (None: measured by the table when shown).
    widths: list[int] | None = field(default=None)


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
        # A test id or a cause from CI: control characters as escapes, as every output shows them.
        cells.append(Text(visible(value), style=style, justify=justify))  # type: ignore[arg-type]
    return cells


def measure(cells: Sequence[list[Text]], columns: int) -> list[int]:
    """The widest made cell of each of `columns` columns (rows not made yet are skipped)."""
    made = cells.is_made if isinstance(cells, LazyCells) else None
    return _widest(
        ([text.plain for text in cells[index][:columns]] for index in range(len(cells))
         if made is None or made(index)),
        columns,
    )  # fmt: skip


def prepare_rows(
    data: MainData, state: ViewState, *, eager: bool = True, eager_rows: int = EAGER_ROWS
) -> PreparedRows:
    """Build the rows of the view `state` asks for (pure: safe in a worker thread).

    eager (the workers of a load): the texts of the first eager_rows rows are made and
    measured here, off the UI thread, and the styled cells of the first screen (FIRST_ROWS);
    otherwise both are made as the list draws the rows. The other rows' styled cells wait to
    be drawn: three objects per cell (a Text and its two lists) for every row of a view would
    lengthen each full garbage collection, a pause of the whole app, while a history loads.
    """
    columns = columns_for(state.view)
    ctx = ViewContext(
        now=data.report.now, lifecycle=data.lifecycle, causes_loaded=data.causes_loaded
    )
    rows = build_rows(data.report, state, ctx, data.quarantine)
    keys = tuple(c.key for c in columns)
    cells = LazyCells(rows, keys)
    if not eager:
        return PreparedRows(rows, cells, measure(cells, len(keys)))
    cells.make(FIRST_ROWS)
    return PreparedRows(rows, cells, text_widths(rows[:eager_rows], len(keys)))


def text_widths(rows: Sequence[Row], columns: int) -> list[int]:
    """The widest cell text of each of `columns` columns over `rows` (as row_cells cuts them)."""
    return _widest((row.cells for row in rows), columns)


def _widest(texts: Iterable[Sequence[str]], columns: int) -> list[int]:
    """The widest of each row's first `columns` texts, column by column, in terminal cells."""
    widths = [0] * columns
    for row in texts:
        for column, text in enumerate(row[:columns]):
            width = cell_len(text)
            if width > widths[column]:
                widths[column] = width
    return widths


def fit_columns(
    widths: Sequence[int],
    priorities: Sequence[int],
    flex: int | None,
    width: int,
    *,
    want: int = TEST_WANT,
    floor: int = TEST_FLOOR,
) -> tuple[list[int], list[int]]:
    """The columns shown in `width` cells and the content width of each, in column order.

    Columns of priority 0 are always shown. The flex column (the test) asks for its widest
    cell, up to `want`; the other columns come in order of priority (1 first) while they fit,
    and stop at the first that does not, so that they drop in a fixed order as the screen
    narrows. Whatever width is left widens the flex column up to its widest cell.
    """
    pad = 2 * CELL_PADDING
    always = [i for i, p in enumerate(priorities) if p == 0]
    used = sum(widths[i] + pad for i in always if i != flex)
    goal = 0
    if flex is not None:
        goal = min(widths[flex], want)
        used += goal + pad
    chosen = set(always)
    optional = sorted((i for i, p in enumerate(priorities) if p > 0), key=lambda i: priorities[i])
    for index in optional:
        if used + widths[index] + pad > width:
            break
        chosen.add(index)
        used += widths[index] + pad
    shown = sorted(chosen)
    fitted = [widths[i] for i in shown]
    if flex is not None:
        others = used - goal - pad
        room = width - others - pad
        fitted[shown.index(flex)] = min(widths[flex], max(room, min(floor, widths[flex])))
    return shown, fitted


_LABEL = re.compile(r"(?P<lead>[▸▾] |  └ )?(?P<body>.*?)(?P<count> \(\d+\))?", re.DOTALL)


def fit_label(label: str, width: int, *, keep_tail: bool = True) -> str:
    """A test id or group label cut to `width` cells with "…" where it was cut.

    An id loses its left end (the test's name is at its right); a signature's message its
    right end (keep_tail=False). A group's marker and member count, and a member's indent,
    always stay.
    """
    if cell_len(label) <= width:
        return label
    match = _LABEL.fullmatch(label)
    lead = (match["lead"] or "") if match else ""
    count = (match["count"] or "") if match and lead in ("▸ ", "▾ ") else ""
    body = label[len(lead) : len(label) - len(count)]
    room = width - cell_len(lead) - cell_len(count) - 1
    if room < 1:
        return set_cell_size(label, width)
    if not keep_tail:
        return lead + set_cell_size(body, room) + "…" + count
    tail = ""
    for char in reversed(body):
        if cell_len(tail) + cell_len(char) > room:
            break
        tail = char + tail
    return lead + "…" + tail + count


def style_of(cell: Text) -> Style:
    """A cell's style as a Style (Text keeps a string as given)."""
    style = cell.style
    if isinstance(style, Style):
        return style
    return Style.parse(style) if style else Style.null()


def cell_segments(
    cell: Text, width: int, edge_style: Style, text_style: Style, padding: int = CELL_PADDING
) -> list[Segment]:
    """One cell's line: padding in the edge style, the text cropped or justified in its own."""
    inner = max(0, width - 2 * padding)
    plain = cell.plain.replace("\n", " ")
    size = cell_len(plain)
    trailing = 0
    if size > inner:
        plain = set_cell_size(plain, inner)
    elif cell.justify == "right":
        plain = " " * (inner - size) + plain
    else:
        trailing = inner - size  # the padding fills the rest of the cell in its own style
    line = []
    if padding:
        line.append(Segment(" " * padding, edge_style))
    if plain:
        line.append(Segment(plain, text_style))
    if padding + trailing:
        line.append(Segment(" " * (padding + trailing), edge_style))
    return line


class FlakeTable(ScrollView, can_focus=True):
    """Rows are tests, groups or group members; the row key says which."""

    ALLOW_SELECT = False

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("right", "scroll_right", "Scroll right", show=False),
        Binding("left", "scroll_left", "Scroll left", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("ctrl+home", "first_row", "Top", show=False),
        Binding("ctrl+end", "last_row", "Bottom", show=False),
        Binding("home", "scroll_home", "Home", show=False),
        Binding("end", "scroll_end", "End", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "flaketable--cursor",
        "flaketable--hover",
        "flaketable--header",
        "flaketable--header-hover",
        "flaketable--odd-row",
        "flaketable--even-row",
    }

    # The colours of Textual's DataTable with a row cursor and zebra stripes.
    DEFAULT_CSS = """
    FlakeTable {
        background: $surface;
        color: $foreground;
        height: auto;
        max-height: 100%;

        &:focus {
            background-tint: $foreground 5%;
            & > .flaketable--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .flaketable--header {
                background-tint: $foreground 5%;
            }
        }
        &:dark {
            & > .flaketable--even-row {
                background: $surface-darken-1 40%;
            }
        }
        & > .flaketable--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        &:ansi > .flaketable--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
        & > .flaketable--odd-row {
        }
        & > .flaketable--even-row {
            background: $surface-lighten-1 50%;
        }
        & > .flaketable--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        & > .flaketable--header-hover {
            background: $accent 30%;
        }
        & > .flaketable--hover {
            background: $block-hover-background;
        }
    }
    """

    class RowHighlighted(Message):
        """The cursor moved to another row."""

        def __init__(self, table: FlakeTable, row: Row | None) -> None:
            self.table = table
            self.row = row
            super().__init__()

    class RowSelected(Message):
        """Enter, or a click on the row under the cursor."""

        def __init__(self, table: FlakeTable, row: Row) -> None:
            self.table = table
            self.row = row
            super().__init__()

    class HeaderSelected(Message):
        """A click on a column's header."""

        def __init__(self, table: FlakeTable, column_key: str) -> None:
            self.table = table
            self.column_key = column_key
            super().__init__()

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.rows_by_key: dict[str, Row] = {}
        self.column_keys: tuple[str, ...] = ()
        self.labels: list[Text] = []
        self.widths: list[int] = []  # content width of each column, padding excluded
        self.priorities: list[int] = []  # each column's (viewmodel.Column.priority)
        self.flex: int | None = None  # the index of the test column
        self.shown: list[int] = []  # the columns that fit the width (fit_columns)
        self.fitted: list[int] = []  # the width each shown column gets
        self.row_order: list[str] = []
        self.cursor_row = 0
        self.prepared = PreparedRows([], [])
        self.sort_key: str | None = None
        self.descending = False
        self.hover_line: int | None = None  # the line under the mouse (0 is the header)
        self.widening = False  # a wider cell was drawn: the columns widen after this paint

    # ---- content ----------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        """Rows in the list."""
        return len(self.row_order)

    def show(
        self,
        prepared: PreparedRows,
        columns: list[Column],
        *,
        sort_key: str | None,
        descending: bool = False,
    ) -> None:
        """Replace the content, keeping the cursor on the row it was on when it still exists.

        sort_key and descending: the column the rows are ordered by, marked in its header.
        """
        current = self.current_row
        keys = tuple(c.key for c in columns)
        # Columns keep their width from view to view (a filter, a sort, a grouping) while the
        # same columns are shown: the list does not shift sideways under the reader.
        kept = self.widths if keys == self.column_keys else []
        self.column_keys = keys
        self.priorities = [column.priority for column in columns]
        self.flex = keys.index(FLEX_COLUMN) if FLEX_COLUMN in keys else None
        self.labels = [Text(column.label) for column in columns]
        self.sort_key = sort_key
        self.descending = descending
        self.prepared = prepared
        self.rows_by_key = {row.key: row for row in prepared.rows}
        self.row_order = [row.key for row in prepared.rows]
        self.set_widths(prepared)
        self.widths = [max(pair) for pair in zip(self.widths, kept + [0] * len(keys), strict=False)]
        self.cursor_row = 0
        if current is not None and current.key in self.rows_by_key:
            self.cursor_row = self.row_order.index(current.key)
        self.resize_content()
        # New content starts at its top left, as a new table would, the cursor's row in view.
        self.scroll_to(0, 0, animate=False, force=True, immediate=True)
        if self.cursor_row:
            self.scroll_to_cursor()
        self.refresh()

    def show_changes(
        self,
        prepared: PreparedRows,
        columns: list[Column],
        *,
        sort_key: str | None,
        descending: bool = False,
    ) -> None:
        """Show new cell values of the same rows (lifecycle states arrived), else show().

        The columns fit the new values, narrower too: a placeholder wider than the states
        that replace it leaves no gap.
        """
        same_rows = [row.key for row in prepared.rows] == self.row_order
        same_columns = tuple(c.key for c in columns) == self.column_keys
        same_order = (sort_key, descending) == (self.sort_key, self.descending)
        if not (same_rows and same_columns and same_order):
            self.show(prepared, columns, sort_key=sort_key, descending=descending)
            return
        self.prepared = prepared
        self.rows_by_key = {row.key: row for row in prepared.rows}
        self.set_widths(prepared)
        self.resize_content()
        self.refresh()

    def set_widths(self, prepared: PreparedRows) -> None:
        """Each column as wide as its widest made cell, and its label."""
        widths = prepared.widths
        if widths is None or len(widths) != len(self.labels):
            widths = measure(prepared.cells, len(self.labels))
        self.widths = [
            max(width, label.cell_len) for width, label in zip(widths, self.labels, strict=True)
        ]

    def resize_content(self) -> None:
        """Fit the columns to the width; set the scrollable size from them and the rows."""
        room = self.scrollable_content_region.width or self.size.width
        self.shown, self.fitted = fit_columns(self.widths, self.priorities, self.flex, room)
        width = sum(self.fitted) + 2 * CELL_PADDING * len(self.fitted)
        self.virtual_size = Size(width, self.row_count + HEADER_LINES)

    def on_resize(self, event: events.Resize) -> None:
        """Fit the columns to the new width."""
        self.resize_content()
        self.refresh()

    def index_of(self, key: str) -> int:
        """The index of a row."""
        return self.row_order.index(key)

    @property
    def current_row(self) -> Row | None:
        """The view-model row under the cursor."""
        order = self.row_order
        if not order or not 0 <= self.cursor_row < len(order):
            return None
        return self.rows_by_key.get(order[self.cursor_row])

    def cells_of(self, key: str) -> list[Text]:
        """The styled cells of a row, as drawn."""
        return self.prepared.cells[self.index_of(key)]

    # ---- the cursor -------------------------------------------------------------------------

    def move_cursor(self, *, row: int, animate: bool = False, scroll: bool = True) -> None:
        """Put the cursor on row `row` (clamped to the list), scrolling it into view."""
        last = self.row_count - 1
        row = max(0, min(row, last))
        previous, self.cursor_row = self.cursor_row, row
        if scroll:
            self.scroll_to_cursor(animate=animate)
        if row != previous:
            self.refresh_lines(previous + HEADER_LINES)
            self.refresh_lines(row + HEADER_LINES)
            self.post_message(self.RowHighlighted(self, self.current_row))

    def scroll_to_cursor(self, *, animate: bool = False) -> None:
        """Scroll so that the cursor's row is on screen, below the header."""
        if not self.size.height:
            self.call_after_refresh(self.scroll_to_cursor)
            return
        visible = max(1, self.scrollable_content_region.height - HEADER_LINES)
        top = round(self.scroll_target_y)
        if self.cursor_row < top:
            top = self.cursor_row
        elif self.cursor_row >= top + visible:
            top = self.cursor_row - visible + 1
        else:
            return
        self.scroll_to(y=top, animate=animate, force=True, immediate=not animate)

    def page(self) -> int:
        """Rows in one page of the list."""
        return max(1, self.scrollable_content_region.height - HEADER_LINES)

    def action_cursor_up(self) -> None:
        """One row up."""
        self.set_hover(None)
        self.move_cursor(row=self.cursor_row - 1)

    def action_cursor_down(self) -> None:
        """One row down."""
        self.set_hover(None)
        self.move_cursor(row=self.cursor_row + 1)

    def action_page_down(self) -> None:
        """One page down, the cursor keeping its place on the screen."""
        self.set_hover(None)
        self.scroll_to(y=self.scroll_target_y + self.page(), animate=False, force=True)
        self.move_cursor(row=self.cursor_row + self.page())

    def action_page_up(self) -> None:
        """One page up, the cursor keeping its place on the screen."""
        self.set_hover(None)
        self.scroll_to(y=self.scroll_target_y - self.page(), animate=False, force=True)
        self.move_cursor(row=self.cursor_row - self.page())

    def action_first_row(self) -> None:
        """The first row."""
        self.set_hover(None)
        self.move_cursor(row=0)

    def action_last_row(self) -> None:
        """The last row."""
        self.set_hover(None)
        self.move_cursor(row=self.row_count - 1)

    def action_scroll_home(self) -> None:
        """Scroll to the first column."""
        self.scroll_to(x=0, animate=False)

    def action_scroll_end(self) -> None:
        """Scroll to the last column."""
        self.scroll_to(x=self.max_scroll_x, animate=False)

    def action_select_cursor(self) -> None:
        """Post RowSelected for the row under the cursor."""
        row = self.current_row
        if row is not None:
            self.post_message(self.RowSelected(self, row))

    # ---- the mouse --------------------------------------------------------------------------

    def on_click(self, event: events.Click) -> None:
        """A header click sorts; a row click moves the cursor there, or selects its row."""
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y < HEADER_LINES:
            column = self.column_at(offset.x + round(self.scroll_x))
            if column is not None:
                self.post_message(self.HeaderSelected(self, self.column_keys[column]))
            return
        row = round(self.scroll_y) + offset.y - HEADER_LINES
        if not 0 <= row < self.row_count:
            return
        event.stop()
        if row == self.cursor_row:
            self.action_select_cursor()
        else:
            self.move_cursor(row=row)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        """Highlight the row (or the header) under the mouse."""
        offset = event.get_content_offset(self)
        line = None
        if offset is not None:
            line = offset.y
            if line >= HEADER_LINES:
                line += round(self.scroll_y)
                if line - HEADER_LINES >= self.row_count:
                    line = None
        self.set_hover(line)

    def on_leave(self, event: events.Leave) -> None:
        """No hover once the mouse has left."""
        self.set_hover(None)

    def set_hover(self, line: int | None) -> None:
        """Highlight `line` (list coordinates, 0 the header) as under the mouse, or none."""
        if line != self.hover_line:
            for old in (self.hover_line, line):
                if old is not None:
                    self.refresh_lines(old)
            self.hover_line = line

    def column_at(self, x: int) -> int | None:
        """The column at x (list coordinates), or None past the last one."""
        right = 0
        for column, width in zip(self.shown, self.fitted, strict=True):
            right += width + 2 * CELL_PADDING
            if x < right:
                return column
        return None

    def refresh_lines(self, y_start: int, line_count: int = 1) -> None:
        """Refresh lines in list coordinates (the header is line 0, always on screen)."""
        if y_start < HEADER_LINES:
            self.refresh(Region(0, 0, self.size.width, HEADER_LINES))
            return
        super().refresh_lines(y_start, line_count)

    # ---- drawing ----------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        """One line of the list: the header on top, then the rows from the scroll offset."""
        width = self.size.width
        base_style = self.rich_style
        scroll_x, scroll_y = self.scroll_offset
        line = y if y < HEADER_LINES else y + scroll_y
        index = line - HEADER_LINES
        if index >= self.row_count:
            return Strip.blank(width, base_style)
        if index < 0:
            cells = self.header_cells()
            row_style = self.get_component_rich_style("flaketable--header")
        else:
            cells = self.prepared.cells[index]
            zebra = "flaketable--odd-row" if index % 2 else "flaketable--even-row"
            row_style = self.get_component_rich_style(zebra)
            self.note_widths(cells)
        component, post = self.highlight(index, hover=self.hover_line == line)
        pre_style = row_style + component
        edge_base = pre_style + post
        segments: list[Segment] = []
        for column, content_width in zip(self.shown, self.fitted, strict=True):
            if column >= len(cells):
                break
            text = cells[column]
            if column == self.flex and index >= 0 and cell_len(text.plain) > content_width:
                row = self.prepared.rows[index]
                keep_tail = not (row.kind == "group" and not row.family)  # a message: its start
                cut = fit_label(text.plain, content_width, keep_tail=keep_tail)
                text = Text(cut, style=text.style, justify=text.justify)
            # Each cell's segments carry its place, as Rich metadata: the cells stay apart in
            # exported screenshots, and any handler of mouse events can read where it points.
            meta = Style.from_meta({"row": index, "column": column})
            text_style = pre_style + style_of(text) + post + meta
            cell_width = content_width + 2 * CELL_PADDING
            if index < 0 and column == self.marked:
                # The sort mark may take the label's right padding.
                label = set_cell_size(text.plain, content_width + CELL_PADDING)
                segments += [
                    Segment(" " * CELL_PADDING, edge_base + meta),
                    Segment(label, text_style),
                ]
                continue
            segments += cell_segments(text, cell_width, edge_base + meta, text_style)
        table_width = sum(self.fitted) + 2 * CELL_PADDING * len(self.fitted)
        # The rest of the line, in the row's style (the cursor's, for the cursor row).
        rest = Style.from_meta({"row": index, "column": 0, "out_of_bounds": True})
        segments.append(Segment(" " * max(0, width - table_width), pre_style + rest))
        strip = Strip(segments).crop(scroll_x, scroll_x + width)
        return strip.adjust_cell_length(width, base_style).simplify()

    @property
    def marked(self) -> int | None:
        """The index of the column the rows are sorted by, if shown."""
        keys = self.column_keys
        return keys.index(self.sort_key) if self.sort_key in keys else None

    def header_cells(self) -> list[Text]:
        """The column labels, the sorted column's with its direction."""
        cells = list(self.labels)
        marked = self.marked
        if marked is not None:
            cells[marked] = Text(cells[marked].plain + SORT_MARKS[self.descending])
        return cells

    def highlight(self, index: int, *, hover: bool) -> tuple[Style, Style]:
        """The cursor and hover styles of row `index` (-1: the header), and the colours they
        force over the cells' own (those of the cursor)."""
        component = Style()
        if hover:
            component += self.get_component_rich_style("flaketable--hover")
            if index < 0:
                component += self.get_component_rich_style("flaketable--header-hover")
        if index >= 0 and index == self.cursor_row:
            component += self.get_component_rich_style("flaketable--cursor")
        post = Style.from_color(component.color) + Style.from_color(bgcolor=component.bgcolor)
        return component, post

    def note_widths(self, cells: list[Text]) -> None:
        """Widen the columns after this paint when a row drawn now is wider than they are."""
        if self.widening:
            return
        for text, width in zip(cells, self.widths, strict=False):
            if cell_len(text.plain) > width:
                self.widening = True
                self.call_after_refresh(self.widen)
                return

    def widen(self) -> None:
        """Measure the made cells again and widen the columns to them."""
        self.widening = False
        widths = measure(self.prepared.cells, len(self.column_keys))
        self.widths = [max(*pair) for pair in zip(widths, self.widths, strict=True)]
        self.resize_content()
        self.refresh()
