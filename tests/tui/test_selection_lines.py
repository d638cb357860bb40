"""The lines under the list keep the selected test's id and its reason readable at any width."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from pilots import app_on, settle

from flaketui.tui.widgets.flake_table import FlakeTable
from flaketui.tui.widgets.selection import ELLIPSIS, FittedText, fit_line, fold_id, fold_id_end

ID_PART = st.text(alphabet="abcdefghij_.-0123456789", min_size=1, max_size=30)
TEST_ID = st.builds(
    lambda folders, name, param: "/".join(folders) + "::" + name + param,
    st.lists(ID_PART, min_size=1, max_size=5),
    ID_PART,
    st.sampled_from(["", "[gbp]", "[currency-EUR-window-180d]"]),
)


@given(TEST_ID, st.integers(min_value=1, max_value=200))
def test_a_folded_id_keeps_every_character_within_the_width(test_id: str, width: int) -> None:
    lines = fold_id(test_id, width)
    assert "".join(lines) == test_id
    assert all(0 < len(line) <= width for line in lines)


@given(TEST_ID, st.integers(min_value=1, max_value=200))
def test_an_id_breaks_only_at_its_separators_when_its_parts_fit(test_id: str, width: int) -> None:
    lines = fold_id(test_id, width)
    parts = test_id.replace("::", "::\n").replace("/", "/\n").replace("[", "\n[").split("\n")
    if all(len(part) <= width for part in parts):
        for line in lines[:-1]:
            assert line.endswith(("/", "::")) or test_id[len(line) :].startswith("[")
            test_id = test_id[len(line) :]


@given(TEST_ID, st.integers(min_value=1, max_value=200), st.integers(min_value=1, max_value=3))
def test_an_id_on_few_rows_keeps_its_end(test_id: str, width: int, rows: int) -> None:
    lines = fold_id_end(test_id, width, rows)
    assert 0 < len(lines) <= rows and all(len(line) <= width for line in lines)
    shown = "".join(lines)
    if len(fold_id(test_id, width)) <= rows:
        assert lines == fold_id(test_id, width)
    elif width > 1:
        assert shown.startswith(ELLIPSIS) and test_id.endswith(shown[len(ELLIPSIS) :])
        # no longer end would fit
        longer = ELLIPSIS + test_id[len(test_id) - len(shown) :]
        assert len(fold_id(longer, width)) > rows


@given(
    st.lists(st.text(alphabet="abcdefgh0123,", min_size=1, max_size=12), min_size=1, max_size=20),
    st.integers(min_value=2, max_value=120),
)
def test_a_reason_is_cut_after_a_whole_word_with_an_ellipsis(words: list[str], width: int) -> None:
    text = " ".join(words)
    line = fit_line(text, width)
    assert len(line) <= width
    if len(text) <= width:
        assert line == text
    else:
        assert line.endswith(ELLIPSIS)
        kept = line[: -len(ELLIPSIS)]
        assert text.startswith(kept)
        if text[: width - len(ELLIPSIS) + 1].rfind(" ") > 0:
            assert text[len(kept)] in " ,;:"  # cut where a word ends, never inside one


async def test_the_selected_id_and_reason_are_whole_at_80_columns(
    sample_history: Path, tmp_path: Path
) -> None:
    app = app_on(sample_history, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("down", "down")
        await pilot.pause()
        screen = app.main_screen
        selected = screen.query_one("#selected", FittedText)
        reason = screen.query_one("#reason", FittedText)
        item = screen.item_for(screen.query_one("#table").current_row)  # type: ignore[attr-defined]
        assert item is not None
        shown_id = selected.lines(selected.content_size.width)
        assert "".join(shown_id) == item.test_id  # type: ignore[union-attr]
        assert all(line.endswith(("/", "::")) for line in shown_id[:-1])
        assert selected.size.height == len(shown_id)
        (line,) = reason.lines(reason.content_size.width)
        assert line == item.reason or (
            line.endswith(ELLIPSIS) and item.reason.startswith(line[:-1].rstrip())
        )
        assert reason.size.height == 1 and len(line) <= reason.size.width


async def test_the_list_keeps_its_height_as_the_cursor_moves_at_80_columns(
    sample_history: Path, tmp_path: Path
) -> None:
    app = app_on(sample_history, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("4")  # every test: short ids and ids that need three rows
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.main_screen
        table = screen.query_one("#table", FlakeTable)
        selected = screen.query_one("#selected", FittedText)
        heights: set[tuple[int, int]] = set()
        needed: set[int] = set()
        shown: list[tuple[str, list[str]]] = []
        for _ in range(table.row_count):
            item = screen.item_for(table.current_row)
            assert item is not None
            test_id = item.test_id  # type: ignore[union-attr]
            width = selected.content_size.width
            needed.add(len(fold_id(test_id, width)))
            shown.append((test_id, selected.lines(width)))
            heights.add((table.size.height, selected.size.height))
            await pilot.press("down")
            await pilot.pause()
        assert {2, 3} <= needed  # the ids did take different rows
        assert len(heights) == 1, heights  # one table height, one id height, all along
        assert heights.pop()[1] == 2
        for test_id, lines in shown:  # the end of each id, its test's name, is on screen
            assert len(lines) <= 2 and test_id.endswith("".join(lines).lstrip(ELLIPSIS))


async def test_the_id_box_gives_its_second_row_back_where_every_id_fits_one(
    sample_history: Path, tmp_path: Path
) -> None:
    app = app_on(sample_history, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        selected = app.main_screen.query_one("#selected", FittedText)
        report = app.main_screen.data.report  # type: ignore[union-attr]
        assert max(len(t.test_id) for t in report.tests) <= selected.content_size.width
        assert selected.size.height == 1
    narrow = app_on(sample_history, tmp_path)
    async with narrow.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert narrow.main_screen.query_one("#selected", FittedText).size.height == 2
