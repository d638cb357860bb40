"""The ranked list shows its first screenful at once and the rest a chunk per frame."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual.app import App, ComposeResult
from tui_history import NOW

from flaketui.tui.app import make_app
from flaketui.tui.viewmodel import Column, Row
from flaketui.tui.widgets.flake_table import (
    CHUNK_ROWS,
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
COUNT = FIRST_ROWS + 2 * CHUNK_ROWS + 7


def _prepared(count: int, prefix: str = "t") -> PreparedRows:
    rows = [
        Row(f"t:{prefix}{i}", "test", f"{prefix}{i}", (str(i), f"{prefix}{i}"), "flaky")
        for i in range(count)
    ]
    return PreparedRows(rows, [[Text(c) for c in row.cells] for row in rows])


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield FlakeTable(id="table")


async def test_first_screenful_at_once_then_the_rest_in_chunks() -> None:
    app = _Host()
    async with app.run_test(size=(80, 30)) as pilot:
        table = app.query_one(FlakeTable)
        table.show(_prepared(COUNT), COLUMNS, sort_key=None)
        assert table.row_count == FIRST_ROWS
        assert len(table.rows_by_key) == COUNT  # every row is known (current_row, export)
        for _ in range(50):
            if table.row_count == COUNT:
                break
            await pilot.pause(0.02)
        assert table.row_count == COUNT
        assert [str(k.value) for k in table.rows][-1] == f"t:t{COUNT - 1}"


async def test_cursor_stays_on_its_row_beyond_the_first_screenful() -> None:
    app = _Host()
    async with app.run_test(size=(80, 30)) as pilot:
        table = app.query_one(FlakeTable)
        table.show(_prepared(COUNT), COLUMNS, sort_key=None)
        target = FIRST_ROWS + CHUNK_ROWS + 3
        table.move_cursor(row=table.index_of(f"t:t{target}"), animate=False)
        await pilot.pause()
        table.show(_prepared(COUNT), COLUMNS, sort_key=None)  # e.g. the lifecycle states arrived
        assert table.current_row is not None and table.current_row.target == f"t{target}"


async def test_a_newer_show_stops_the_older_chunks() -> None:
    app = _Host()
    async with app.run_test(size=(80, 30)) as pilot:
        table = app.query_one(FlakeTable)
        table.show(_prepared(COUNT, "old"), COLUMNS, sort_key=None)
        table.show(_prepared(5, "new"), COLUMNS, sort_key=None)
        await pilot.pause(0.2)
        assert [str(k.value) for k in table.rows] == [f"t:new{i}" for i in range(5)]


async def test_lifecycle_states_fill_in_after_the_first_screen(
    history: Path, tmp_path: Path
) -> None:
    app = make_app(history, now=NOW, skip_file=tmp_path / "q.json", cursor_blink=False, watch=False)
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(4):
            await app.workers.wait_for_complete()
            await pilot.pause()
        data = app.main_screen.data
        assert data is not None and data.extras_loaded and data.suites == ["unit"]
        table = app.main_screen.query_one(FlakeTable)
        state_column = list(table.columns).index("lifecycle")  # type: ignore[arg-type]
        shown = {row.target: row.cells[state_column] for row in table.rows_by_key.values()}
        assert shown == {t: data.lifecycle.get(t, "—") for t in shown}
        assert set(shown.values()) - {"—"}  # some test is in a lifecycle state


async def test_show_changes_rewrites_only_changed_cells_even_in_pending_rows() -> None:
    app = _Host()
    async with app.run_test(size=(80, 30)) as pilot:
        table = app.query_one(FlakeTable)
        before = _prepared(COUNT)
        table.show(before, COLUMNS, sort_key=None)
        table.move_cursor(row=5, animate=False)
        after = _prepared(COUNT)
        for index in (3, COUNT - 1):  # one row in the table, one still pending
            after.cells[index][1] = Text(f"changed {index}")
        updates: list[tuple[str, str]] = []
        original = table.update_cell

        def spy(row_key: object, column_key: object, value: Text, **kwargs: object) -> None:
            updates.append((str(row_key), value.plain))
            original(row_key, column_key, value, **kwargs)  # type: ignore[arg-type]

        table.update_cell = spy  # type: ignore[method-assign]
        table.show_changes(after, COLUMNS, sort_key=None)
        assert updates == [("t:t3", "changed 3")]  # the pending row is not rewritten twice
        assert table.row_count == FIRST_ROWS and table.cursor_row == 5
        for _ in range(50):
            if table.row_count == COUNT:
                break
            await pilot.pause(0.02)
        assert table.get_row(f"t:t{COUNT - 1}")[1].plain == f"changed {COUNT - 1}"
        assert table.get_row("t:t3")[1].plain == "changed 3"


async def test_show_changes_narrows_a_column_whose_widest_cell_shrank() -> None:
    app = _Host()
    async with app.run_test(size=(80, 30)) as pilot:
        table = app.query_one(FlakeTable)
        before = _prepared(20)
        before.cells[3][1] = Text("x" * 50)
        table.show(before, COLUMNS, sort_key=None)
        await pilot.pause()
        assert table.columns["test"].content_width == 50  # type: ignore[index]
        after = _prepared(20)
        table.show_changes(after, COLUMNS, sort_key=None)
        await pilot.pause()
        widest = max(len("Test"), *(len(cells[1].plain) for cells in after.cells))
        assert table.columns["test"].content_width == widest  # type: ignore[index]
        assert table.get_row("t:t3")[1].plain == "t3"


async def test_a_big_view_makes_each_rows_cells_only_when_the_row_is_added() -> None:
    made: list[int] = []

    def counted(i: int) -> Callable[[], tuple[str, str]]:
        def make() -> tuple[str, str]:
            made.append(i)
            return (str(i), f"t{i}")

        return make

    rows = [Row(f"t:t{i}", "test", f"t{i}", counted(i), "flaky") for i in range(COUNT)]
    prepared = PreparedRows(rows, LazyCells(rows, ("rank", "test")))
    app = _Host()
    async with app.run_test(size=(80, 30)) as pilot:
        table = app.query_one(FlakeTable)
        table.show(prepared, COLUMNS, sort_key=None)
        # The first screenful is styled at once; the rest waits for its chunk.
        assert sorted(made) == list(range(FIRST_ROWS))
        for _ in range(50):
            if table.row_count == COUNT:
                break
            await pilot.pause(0.02)
        assert sorted(made) == list(range(COUNT))  # each row's cells made exactly once
        assert table.get_row("t:t7")[1].plain == "t7"


def test_a_worker_makes_the_cells_of_a_small_view_and_leaves_a_big_one_lazy(
    history: Path,
) -> None:
    from flaketui.tui.loaders import load_main
    from flaketui.tui.startup import make_source
    from flaketui.tui.viewmodel import ViewState

    data = load_main(make_source(history, NOW), suite=None, branch_kind=None)
    small = prepare_rows(data, ViewState(view="all"))
    assert all(small.cells._made)  # type: ignore[attr-defined]
    lazy = prepare_rows(data, ViewState(view="all"), eager=False)
    assert not any(lazy.cells._made)  # type: ignore[attr-defined]
    assert [c.plain for c in lazy.cells[0]] == [c.plain for c in small.cells[0]]


def test_the_first_load_makes_only_the_first_screenfuls_cells(history: Path) -> None:
    # The first paint waits for the load worker: it styles what the screen shows, the table's
    # chunks style the rest.
    from flaketui.tui.loaders import load_main
    from flaketui.tui.startup import make_source
    from flaketui.tui.viewmodel import ViewState

    data = load_main(make_source(history, NOW), suite=None, branch_kind=None)
    first = prepare_rows(data, ViewState(view="all"), eager_rows=3)
    made = first.cells._made  # type: ignore[attr-defined]
    assert len(made) > 3 and all(made[:3]) and not any(made[3:])


async def test_the_first_chunk_waits_for_the_first_screenful_to_be_painted(
    monkeypatch: object,
) -> None:
    # A chunk added before that paint would hold the event loop (and the GIL the thread
    # writing the screen needs) just when the first ranked screen is due.
    painted: list[int] = []
    render_lines = FlakeTable.render_lines

    def rendering(self: FlakeTable, crop: object) -> object:
        painted.append(self.row_count)
        return render_lines(self, crop)  # type: ignore[arg-type]

    monkeypatch.setattr(FlakeTable, "render_lines", rendering)  # type: ignore[attr-defined]
    app = _Host()
    async with app.run_test(size=(80, 30)) as pilot:
        table = app.query_one(FlakeTable)
        table.show(_prepared(COUNT), COLUMNS, sort_key=None)
        for _ in range(50):
            if table.row_count == COUNT:
                break
            await pilot.pause(0.02)
        assert table.row_count == COUNT
    first = next(count for count in painted if count)
    assert first == FIRST_ROWS
