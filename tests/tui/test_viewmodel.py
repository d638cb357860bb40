"""The view logic of the list, without Textual: formatting, filter, grouping, sort, repro."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from flaketui.core.scoring import results
from flaketui.core.scoring.results import GroupVerdict, Report, Scores
from flaketui.tui.actionmodel import next_in_cycle, repro_command, worst_worker_count
from flaketui.tui.viewmodel import (
    SPARK_BLOCKS,
    CellMaker,
    ViewContext,
    ViewState,
    build_rows,
    columns_for,
    relative_time,
    short_id,
    sparkline,
)
from flaketui.tui.widgets.flake_table import fit_label

NOW = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)


def _test(
    test_id: str, verdict: str, damage: float, rank: int | None, owner: str = ""
) -> results.TestVerdict:
    return results.TestVerdict(
        test_id=test_id,
        parent=test_id.split("[")[0],
        suite="unit",
        test_file=None,
        scores=Scores(runs=20, damage=damage),
        verdict=verdict,
        reason="r",
        rank=rank,
        owner=owner or None,
        signature_text="TimeoutError" if "net" in test_id else "AssertionError",
    )


def _report() -> Report:
    tests = [
        _test("t.py::fam[a]", "flaky", 3.0, 2, "@pay"),
        _test("t.py::fam[b]", "flaky", 4.0, 1, "@pay"),
        _test("t.py::net", "flaky", 1.0, 3, "@net"),
        _test("t.py::broken", "regression", 0.5, None),
        _test("t.py::ok", "healthy", 0.0, None),
    ]
    family = GroupVerdict(
        "t.py::fam",
        "t.py::fam",
        ["t.py::fam[a]", "t.py::fam[b]"],
        Scores(damage=6.0),
        "flaky",
        "r",
        1,
    )
    return Report(NOW, 90, {}, tests, [family], [])


def _targets(state: ViewState) -> list[str]:
    return [r.target for r in build_rows(_report(), state, ViewContext(NOW))]


def test_flaky_view_is_ranked_and_excludes_other_verdicts() -> None:
    assert _targets(ViewState()) == ["t.py::fam[b]", "t.py::fam[a]", "t.py::net"]
    assert _targets(ViewState(view="regressions")) == ["t.py::broken"]
    assert len(_targets(ViewState(view="all"))) == 5


def test_every_test_by_damage_keeps_the_ranking_order_among_equals() -> None:
    """Tests of equal damage are listed as ranked (the ranking breaks the tie), in the All
    view's own order and sorted by damage, not by id; unranked ones follow, by id."""
    tests = [
        _test("t.py::a", "flaky", 2.0, 3),
        _test("t.py::b", "flaky", 2.0, 2),
        _test("t.py::c", "flaky", 2.0, 1),
        _test("t.py::d", "healthy", 2.0, None),
        _test("t.py::big", "regression", 9.0, None),
    ]
    report = Report(NOW, 90, {}, tests, [], [])
    expected = ["t.py::big", "t.py::c", "t.py::b", "t.py::a", "t.py::d"]
    for state in (
        ViewState(view="all"),
        ViewState(view="all", sort_column="damage", sort_reverse=True),
    ):
        assert [r.target for r in build_rows(report, state, ViewContext(NOW))] == expected


def test_filter_matches_id_owner_and_signature() -> None:
    assert _targets(ViewState(filter_text="NET")) == ["t.py::net"]
    assert _targets(ViewState(filter_text="@pay")) == ["t.py::fam[b]", "t.py::fam[a]"]
    assert _targets(ViewState(filter_text="timeouterror")) == ["t.py::net"]


def test_family_grouping_collapses_and_expands() -> None:
    state = ViewState(grouping="family")
    assert _targets(state) == ["t.py::fam", "t.py::net"]
    state.expanded.add("t.py::fam")
    rows = build_rows(_report(), state, ViewContext(NOW))
    assert [r.kind for r in rows] == ["group", "member", "member", "test"]
    assert rows[0].cells[1].startswith("▾")


def test_a_views_rows_share_one_cell_maker_and_make_the_cells_of_their_item() -> None:
    state = ViewState(view="all", grouping="family", expanded={"t.py::fam"})
    ctx = ViewContext(NOW)
    rows = build_rows(_report(), state, ctx)
    # One object per row until it is drawn: no function of its own, one maker for all.
    makers = {id(row.cell_source) for row in rows}
    assert len(makers) == 1 and isinstance(rows[0].cell_source, CellMaker)
    columns = columns_for("all", "family")
    for row in rows:  # (the # column numbers the grouped order: not compared here)
        expected = tuple(column.text(row.item, ctx) for column in columns)[1:]
        if row.kind != "test":
            expected = (row.label, *expected[1:])
        assert row.cells[1:] == expected
        assert row.cell_source[1:] == expected and row.item is None  # made once, item let go


def test_sort_by_column_and_reverse() -> None:
    assert _targets(ViewState(sort_column="damage")) == [
        "t.py::net",
        "t.py::fam[a]",
        "t.py::fam[b]",
    ]
    state = ViewState(sort_column="damage", sort_reverse=True)
    assert _targets(state)[0] == "t.py::fam[b]"


def test_relative_time() -> None:
    assert relative_time(None, NOW) == "—"
    assert relative_time(NOW - timedelta(minutes=5), NOW) == "5m ago"
    assert relative_time(NOW - timedelta(hours=3), NOW) == "3h ago"
    assert relative_time(NOW - timedelta(days=3), NOW) == "3d ago"
    assert relative_time(NOW - timedelta(days=30), NOW) == "4w ago"


@given(st.lists(st.floats(min_value=0, max_value=1), max_size=40))
def test_sparkline_has_one_block_per_value(values: list[float]) -> None:
    line = sparkline(values)
    assert len(line) == len(values)
    assert set(line) <= set(SPARK_BLOCKS)


@given(st.text(min_size=1, max_size=200))
def test_short_id_keeps_the_tail(test_id: str) -> None:
    shown = short_id(test_id, 20)
    assert len(shown) <= max(20, len(test_id) if len(test_id) <= 20 else 20)
    assert test_id.endswith(shown.lstrip("…"))


def test_repro_commands() -> None:
    assert repro_command("t.py::x[a b]", "flaky", worst_worker_count=16) == (
        "pytest 't.py::x[a b]' --count=50 -n 16 -p no:randomly"
    )
    assert repro_command("t.py::x", "flaky", worst_worker_count=1) == (
        "pytest t.py::x --count=50 -p no:randomly"
    )
    assert repro_command("t.py::x", "regression", first_bad="abc", last_good="def") == (
        "git bisect start abc def && git bisect run pytest t.py::x"
    )
    # A recorded random order is replayed (a regression still gets its bisect).
    replay = ["pytest", "-p", "randomly", "--randomly-seed=42", "-n", "4"]
    assert repro_command("t.py::x", "flaky", worst_worker_count=16, seed_replay=replay) == (
        "pytest -p randomly --randomly-seed=42 -n 4"
    )
    assert repro_command(
        "t.py::x", "regression", first_bad="abc", last_good="def", seed_replay=replay
    ).startswith("git bisect start abc def")


def test_worst_worker_count_prefers_the_highest_rate() -> None:
    class Row:
        def __init__(self, key: str, runs: int, rate: float) -> None:
            self.key, self.runs, self.fail_rate, self.wilson_low = key, runs, rate, rate / 2

    assert worst_worker_count([Row("1", 10, 0.0), Row("8", 10, 0.5), Row("16", 0, 0.0)]) == 8
    assert worst_worker_count([]) is None


def test_next_in_cycle_wraps() -> None:
    assert next_in_cycle([None, "a", "b"], None) == "a"
    assert next_in_cycle([None, "a", "b"], "b") is None
    assert next_in_cycle([None, "a"], "gone") is None


@given(st.lists(st.floats(min_value=0, max_value=1), max_size=40))
def test_braille_sparkline_packs_two_values_per_cell(values: list[float]) -> None:
    from flaketui.tui.viewmodel import braille_sparkline

    line = braille_sparkline(values)
    assert len(line) == (len(values) + 1) // 2
    assert all(0x2800 < ord(ch) <= 0x28FF for ch in line)


def test_braille_sparkline_rises_with_the_score() -> None:
    from flaketui.tui.viewmodel import braille_sparkline

    low, high = braille_sparkline([0.0, 0.0]), braille_sparkline([1.0, 1.0])
    assert bin(ord(low) - 0x2800).count("1") == 2
    assert bin(ord(high) - 0x2800).count("1") == 8


def test_pool_by_run_keeps_the_worst_param_of_each_run() -> None:
    from dataclasses import dataclass

    from flaketui.tui.actionmodel import pool_by_run

    @dataclass
    class Outcome:
        run_id: str
        test_id: str
        outcome: str

    pooled = pool_by_run(
        [
            Outcome("r1", "f[a]", "pass"),
            Outcome("r1", "f[b]", "flaky"),
            Outcome("r1", "f[c]", "fail"),
            Outcome("r2", "f[a]", "pass"),
            Outcome("r2", "f[b]", "skipped"),
            Outcome("r3", "f[b]", "flaky"),
            Outcome("r4", "f[a]", "pass"),
        ]
    )
    # A run with no bad param names no param: it has nothing against any of them.
    assert [(p.run_id, p.outcome, p.test_id) for p in pooled] == [
        ("r1", "fail", "f[c] (+1 more)"),
        ("r2", "pass", "f (all 2)"),
        ("r3", "flaky", "f[b]"),
        ("r4", "pass", "f[a]"),
    ]


def _reference_braille(values: list[float]) -> str:
    """The plain formula the fast sparkline must equal."""

    def dots(value: float, column: tuple[int, ...]) -> int:
        return sum(column[: 1 + max(0, min(3, round(value * 3)))])

    left_dots, right_dots = (0x40, 0x04, 0x02, 0x01), (0x80, 0x20, 0x10, 0x08)
    cells = []
    for start in range(0, len(values), 2):
        right = dots(values[start + 1], right_dots) if start + 1 < len(values) else 0
        cells.append(chr(0x2800 + dots(values[start], left_dots) + right))
    return "".join(cells)


@given(
    st.lists(
        st.one_of(
            st.floats(min_value=-1.0, max_value=2.0, allow_nan=False),
            st.sampled_from([0.0, 1 / 6, 0.5, 1.5 / 3, 2.5 / 3, 1.0, 0.5 / 3]),
        ),
        max_size=40,
    )
)
def test_braille_sparkline_equals_the_plain_formula(values: list[float]) -> None:
    from flaketui.tui.viewmodel import braille_sparkline

    assert braille_sparkline(values) == _reference_braille(values)


def test_owner_text_names_the_first_owner_and_counts_the_rest() -> None:
    from flaketui.tui.viewmodel import owner_text

    assert owner_text(None) == "—" and owner_text("") == "—"
    assert owner_text("@acme/api") == "@acme/api"
    assert owner_text("@farah-tax @acme/billing @x") == "@farah-tax +2"


def test_group_rows_show_their_pooled_trend() -> None:
    report = _report()
    report.families[0].daily_scores = [0.0] * 10 + [0.5] * 20
    rows = build_rows(report, ViewState(grouping="family"), ViewContext(NOW))
    trend = [str(cell) for cell in rows[0].cells if "⣀" in str(cell) or "⣤" in str(cell)]
    assert rows[0].kind == "group" and trend, rows[0].cells


def test_grouped_rank_numbers_the_top_level_rows_once_each() -> None:
    """Groups and lone tests are ranked apart in core: a grouped list numbers its own order."""
    state = ViewState(grouping="family")
    state.expanded.add("t.py::fam")
    rows = build_rows(_report(), state, ViewContext(NOW))
    assert [(r.kind, r.cells[0]) for r in rows] == [
        ("group", "1"),
        ("member", ""),
        ("member", ""),
        ("test", "2"),  # t.py::net, rank 3 among tests
    ]
    reverse = ViewState(grouping="family", sort_column="rank", sort_reverse=True)
    assert [r.cells[0] for r in build_rows(_report(), reverse, ViewContext(NOW))] == ["2", "1"]
    # Without grouping the tests keep their own ranks.
    assert [r.cells[0] for r in build_rows(_report(), ViewState(), ViewContext(NOW))] == [
        "1",
        "2",
        "3",
    ]


def test_expanded_members_come_worst_first() -> None:
    state = ViewState(grouping="family")
    state.expanded.add("t.py::fam")
    rows = build_rows(_report(), state, ViewContext(NOW))
    # The family lists fam[a] (damage 3.0) before fam[b] (4.0).
    assert [r.target for r in rows if r.kind == "member"] == ["t.py::fam[b]", "t.py::fam[a]"]


def test_signature_group_labels_keep_the_start_of_the_message() -> None:
    report = _report()
    text = "TimeoutError: connect to db-primary.internal:5432 timed out after 30 seconds" * 2
    report.signatures = [
        GroupVerdict("abc123", text, ["t.py::net"], Scores(damage=1.0), "flaky", "r", 1)
    ]
    rows = build_rows(report, ViewState(grouping="signature"), ViewContext(NOW))
    label = next(row for row in rows if row.kind == "group").cells[1]
    assert label == f"▸ {text} (1)"  # whole: the list cuts it to the width it gives it
    cut = fit_label(label, 44, keep_tail=False)
    assert cut.startswith("▸ TimeoutError: connect to") and cut.endswith("… (1)")
    assert len(cut) == 44


def test_verdict_changes_text() -> None:
    from datetime import date

    from flaketui.core.scoring.series import VerdictChange
    from flaketui.tui.screens.detail import verdict_changes_text

    assert verdict_changes_text([], "flaky").plain == "none: flaky throughout"
    changes = [
        VerdictChange(date(2026, 11, 2), "insufficient", "flaky", "3 flaky runs of 12 on main"),
        VerdictChange(date(2026, 11, 20), "flaky", "healthy", "12 clean runs since"),
    ]
    assert verdict_changes_text(changes, "healthy").plain.splitlines() == [
        "2026-11-02  insufficient → flaky  3 flaky runs of 12 on main",
        "2026-11-20  flaky → healthy  12 clean runs since",
    ]
