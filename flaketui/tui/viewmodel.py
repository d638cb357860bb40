"""Pure view logic of the main list: views, filtering, grouping, sorting and cell text."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from flaketui.core.scoring.results import GroupVerdict, Report, Scores, TestVerdict
from flaketui.core.timeutil import utc_now
from flaketui.tui.loaders import QuarantineRow  # the loaded skip-file entries the view lists

VIEWS = ("flaky", "regressions", "quarantined", "all")
VIEW_TITLES = {
    "flaky": "Flaky",
    "regressions": "Regressions",
    "quarantined": "Quarantined",
    "all": "All",
}
GROUPINGS = ("none", "signature", "family", "cofailure")
SPARK_BLOCKS = "▁▂▃▄▅▆▇█"
CAUSE_WIDTH = 28  # the likely cause is a short text; a longer one ends with "…"
PENDING = "…"  # a cell whose value is still being read


@dataclass(slots=True)
class ViewState:
    """What the user chose: view, filter text, grouping, expanded groups and sort order."""

    view: str = "flaky"
    filter_text: str = ""
    grouping: str = "none"
    expanded: set[str] = field(default_factory=set)
    sort_column: str | None = None  # None: the view's natural ranking
    sort_reverse: bool = False

    def copy(self) -> ViewState:
        """A snapshot a worker can build rows for while the user changes the original."""
        return replace(self, expanded=set(self.expanded))


@dataclass(slots=True)
class Row:
    """One table row: a test, a group, or a member inside an expanded group."""

    key: str  # unique row key: "t:<id>", "g:<group key>" or "m:<group key>:<id>"
    kind: str  # test | group | member
    target: str  # test id, or the group key
    # The cell texts, or what makes them when first read: a view of 50 000 tests would
    # otherwise format every cell (a braille trend each) before showing the first screenful.
    # A CellMaker makes them from `item` (and `label`, in the test column when given).
    cell_source: tuple[str, ...] | Callable[[], tuple[str, ...]] | CellMaker
    style: str  # verdict (or quarantine mode) that colours the row's verdict cell
    family: bool = False  # a family group (Enter opens its detail)
    item: Any = None  # the test, group or skip-file entry a CellMaker reads
    label: str | None = None

    @property
    def cells(self) -> tuple[str, ...]:
        """The row's cell texts, in column order (made once, on first read)."""
        source = self.cell_source
        if isinstance(source, CellMaker):
            source = self.cell_source = source.make(self.item, self.label)
            self.item = self.label = None
        elif callable(source):
            source = self.cell_source = source()
        return source


@dataclass(frozen=True, slots=True)
class CellMaker:
    """Makes the cell texts of a view's rows, one maker for all of them.

    A row keeps its item and this shared maker rather than a function of its own: the rows of
    a view of 50 000 tests are then 50 000 objects, not five times as many, which is what
    every garbage collection of the app walks through (a pause of the UI thread).
    """

    columns: tuple[Column, ...]
    ctx: ViewContext

    def make(self, item: Any, label: str | None = None) -> tuple[str, ...]:
        """The item's cell texts; `label` in the test column when given."""
        cells = [column.text(item, self.ctx) for column in self.columns]
        if label is not None:
            cells[1] = label
        return tuple(cells)


@dataclass(slots=True)
class Column:
    """A column: its label, key and how to read its sort value and text from an item.

    priority: 0 for the columns always shown; on a narrow screen the list drops the others,
    the highest number first (see flake_table.fit_columns).
    """

    key: str
    label: str
    value: Callable[[Any, ViewContext], Any]
    text: Callable[[Any, ViewContext], str]
    priority: int = 0


@dataclass(slots=True)
class ViewContext:
    """What the columns need besides the item: the clock and lifecycle states."""

    now: datetime
    lifecycle: dict[str, str] = field(default_factory=dict)
    # A skip-file entry expires in real time, as the pytest plugin checks it: its days left
    # count from the wall clock, not from the moment the scores are as of (--now).
    wall_now: datetime = field(default_factory=utc_now)
    # In a grouped view, the # column numbers the top-level rows (groups and lone tests) in
    # their pooled-damage order: tests' and groups' own ranks are counted apart and would
    # repeat. Keyed by _position_key; members of a group have none.
    positions: dict[tuple[str, str], int] = field(default_factory=dict)
    causes_loaded: bool = False  # the flaky items' likely causes are read (after the ranking)


def _position_key(item: Any) -> tuple[str, str]:
    return ("g", item.key) if isinstance(item, GroupVerdict) else ("t", item.test_id)


def _rank(item: Any, ctx: ViewContext) -> int | None:
    if ctx.positions:
        return ctx.positions.get(_position_key(item))
    rank: int | None = item.rank
    return rank


def _regression_rank(item: Any, ctx: ViewContext) -> int | None:
    if ctx.positions:
        return _rank(item, ctx)
    rank: int | None = getattr(item, "regression_rank", item.rank)
    return rank


def _rank_text(rank: int | None) -> str:
    return "" if rank is None else str(rank)


# ---- formatting -------------------------------------------------------------------------------


def relative_time(moment: datetime | None, now: datetime) -> str:
    """'3h ago', '2d ago', '5w ago' relative to the report's clock (not the wall clock)."""
    if moment is None:
        return "—"
    seconds = (now - moment).total_seconds()
    if seconds < 0:
        return "in future"
    for unit_seconds, unit in ((7 * 86400, "w"), (86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= unit_seconds * (2 if unit == "w" else 1):
            return f"{int(seconds // unit_seconds)}{unit} ago"
    return "just now"


def sparkline(values: Sequence[float]) -> str:
    """A unicode block sparkline on a fixed 0..1 scale so rows compare by eye."""
    if not values:
        return ""
    top = len(SPARK_BLOCKS) - 1
    return "".join(SPARK_BLOCKS[max(0, min(top, round(v * top)))] for v in values)


# Braille dots filling a column from the bottom: left column, then right column.
_LEFT_DOTS = (0x40, 0x04, 0x02, 0x01)
_RIGHT_DOTS = (0x80, 0x20, 0x10, 0x08)
# Dots lit per level 1..4 (index 0 unused): the list is drawn for every row, so no sums per value.
_LEFT_LEVELS = tuple(sum(_LEFT_DOTS[:level]) for level in range(5))
_RIGHT_LEVELS = tuple(sum(_RIGHT_DOTS[:level]) for level in range(5))


def _level(value: float) -> int:
    """1 + round(value * 3) clamped to 1..4 (one dot is the baseline: zero stays visible).

    Written out because it runs for every day of every row: round() halves to even, so
    0.5 -> 0, 1.5 -> 2 and 2.5 -> 2.
    """
    scaled = value * 3
    if scaled <= 0.5:
        return 1
    if scaled < 1.5:
        return 2
    if scaled <= 2.5:
        return 3
    return 4


def braille_sparkline(values: Sequence[float]) -> str:
    """Two values per character (0..1 scale, 4 levels): a 30-day trend in 15 cells."""
    left_levels, right_levels = _LEFT_LEVELS, _RIGHT_LEVELS
    cells = []
    count = len(values)
    for start in range(0, count, 2):
        dots = left_levels[_level(values[start])]
        if start + 1 < count:
            dots += right_levels[_level(values[start + 1])]
        cells.append(chr(0x2800 + dots))
    return "".join(cells)


def short_id(test_id: str, width: int) -> str:
    """Trim a long id from the left: the test name at the end is what people read."""
    return test_id if len(test_id) <= width else "…" + test_id[-(width - 1) :]


def short_message(text: str, width: int) -> str:
    """Trim a failure message on the right: its exception type and first words say the most."""
    return text if len(text) <= width else text[: width - 1] + "…"


def owner_text(owner: str | None) -> str:
    """The first owner, and how many more: the full list is in the filter, sort and exports."""
    if not owner:
        return "—"
    first, *others = owner.split()
    return f"{first} +{len(others)}" if others else first


def _num(value: float, digits: int = 2) -> str:
    return f"{value:.{digits}f}"


def _interval(scores: Scores) -> str:
    return f"{scores.wilson_low:.2f}–{scores.wilson_high:.2f}"


def _scores(item: TestVerdict | GroupVerdict) -> Scores:
    return item.scores


def _name(item: Any) -> str:
    if isinstance(item, TestVerdict):
        return item.test_id
    if isinstance(item, GroupVerdict):
        return item.label
    return str(item.test_id)


def _onset(item: Any, ctx: ViewContext) -> str | None:
    onset: str | None = getattr(item, "onset", None)
    return onset


def _cause(item: Any, ctx: ViewContext) -> str | None:
    """The label of the item's strongest suspect (flaky items only, once causes are read)."""
    causes = getattr(item, "causes", None)
    return str(causes[0].label) if causes else None


def _cause_text(item: Any, ctx: ViewContext) -> str:
    label = _cause(item, ctx)
    if label is not None:
        return short_message(label, CAUSE_WIDTH)
    if not ctx.causes_loaded and getattr(item, "verdict", None) == "flaky":
        return PENDING
    return "—"


def _lifecycle(item: Any, ctx: ViewContext) -> str:
    if isinstance(item, TestVerdict):
        return ctx.lifecycle.get(item.test_id, "—")
    return ""


# ---- columns ----------------------------------------------------------------------------------

# Priorities: what a narrow screen keeps longest after the rank, the test, its verdict and
# its damage (the ranking): why it flakes, since when, its lifecycle state and its owner.
_SCORE_COLUMNS: list[Column] = [
    Column("rank", "#", _rank, lambda i, c: _rank_text(_rank(i, c))),
    Column("test", "Test", lambda i, c: _name(i), lambda i, c: _name(i)),
    Column("verdict", "Verdict", lambda i, c: i.verdict, lambda i, c: i.verdict),
    Column("lifecycle", "State", _lifecycle, _lifecycle, 3),
    Column(
        "damage", "Damage", lambda i, c: _scores(i).damage, lambda i, c: _num(_scores(i).damage)
    ),
    Column("since", "Since", _onset, lambda i, c: _onset(i, c) or "—", 2),
    Column("cause", "Likely cause", _cause, _cause_text, 1),
    Column(
        "recency",
        "Recency",
        lambda i, c: _scores(i).recency_score,
        lambda i, c: _num(_scores(i).recency_score),
        10,
    ),
    Column(
        "wilson",
        "Wilson",
        lambda i, c: _scores(i).wilson_low,
        lambda i, c: _interval(i.scores),
        8,
    ),
    Column(
        "flip",
        "Flip",
        lambda i, c: _scores(i).flip_rate,
        lambda i, c: _num(i.scores.flip_rate),
        9,
    ),
    Column("runs", "Runs", lambda i, c: _scores(i).runs, lambda i, c: str(i.scores.runs), 7),
    Column(
        "last_failure",
        "Last fail",
        lambda i, c: _scores(i).last_failure_at,
        lambda i, c: relative_time(i.scores.last_failure_at, c.now),
        6,
    ),
    Column(
        "trend",
        "30 days",
        lambda i, c: sum(getattr(i, "daily_scores", []) or [0.0]),
        lambda i, c: braille_sparkline(getattr(i, "daily_scores", [])),
        5,
    ),
    Column("owner", "Owner", lambda i, c: i.owner or "", lambda i, c: owner_text(i.owner), 4),
]

_REGRESSION_COLUMNS: list[Column] = [
    Column("rank", "#", _regression_rank, lambda i, c: _rank_text(_regression_rank(i, c))),
    Column("test", "Test", lambda i, c: _name(i), lambda i, c: _name(i)),
    Column("verdict", "Verdict", lambda i, c: i.verdict, lambda i, c: i.verdict),
    Column(
        "first_bad",
        "First bad",
        lambda i, c: getattr(i, "first_bad_commit", None) or "",
        lambda i, c: (getattr(i, "first_bad_commit", None) or "—")[:12],
        1,
    ),
    Column(
        "last_good",
        "Last good",
        lambda i, c: getattr(i, "last_good_commit", None) or "",
        lambda i, c: (getattr(i, "last_good_commit", None) or "—")[:12],
        5,
    ),
    Column(
        "fail_rate",
        "Fail rate",
        lambda i, c: _scores(i).fail_rate,
        lambda i, c: _num(_scores(i).fail_rate),
    ),
    Column(
        "wilson",
        "Wilson",
        lambda i, c: _scores(i).wilson_low,
        lambda i, c: _interval(i.scores),
        6,
    ),
    Column("runs", "Runs", lambda i, c: _scores(i).runs, lambda i, c: str(i.scores.runs), 4),
    Column(
        "last_failure",
        "Last fail",
        lambda i, c: _scores(i).last_failure_at,
        lambda i, c: relative_time(i.scores.last_failure_at, c.now),
        3,
    ),
    Column("owner", "Owner", lambda i, c: i.owner or "", lambda i, c: owner_text(i.owner), 2),
]


def _days_left(row: QuarantineRow, now: datetime) -> float | None:
    return None if row.expires is None else (row.expires - now).total_seconds() / 86400


def _days_left_text(row: QuarantineRow, ctx: ViewContext) -> str:
    left = _days_left(row, ctx.wall_now)
    if left is None:
        return "—"
    # A part day counts: an entry added now for 30 days has 30 days left, not 29.
    return "expired" if left < 0 else f"{math.ceil(left)}d"


_QUARANTINE_COLUMNS: list[Column] = [
    Column("test", "Test", lambda i, c: i.test_id, lambda i, c: i.test_id),
    Column("mode", "Mode", lambda i, c: i.mode, lambda i, c: i.mode),
    Column(
        "expires",
        "Expires",
        lambda i, c: i.expires,
        lambda i, c: i.expires.strftime("%Y-%m-%d") if i.expires else "—",
        4,
    ),
    Column("days_left", "Days left", lambda i, c: _days_left(i, c.wall_now), _days_left_text),
    Column(
        "added",
        "Added",
        lambda i, c: i.hand_added,
        lambda i, c: "by hand ✎" if i.hand_added else "flaketui",
        6,
    ),
    Column("reason", "Reason", lambda i, c: i.reason, lambda i, c: short_message(i.reason, 60), 1),
    Column("ticket", "Ticket", lambda i, c: i.ticket or "", lambda i, c: i.ticket or "—", 3),
    Column("owner", "Owner", lambda i, c: i.owner or "", lambda i, c: owner_text(i.owner), 2),
]


def columns_for(view: str, grouping: str = "none") -> list[Column]:
    """The columns of one view; a grouped view's first column names what its rows are."""
    if view == "regressions":
        columns = _REGRESSION_COLUMNS
    elif view == "quarantined":
        return _QUARANTINE_COLUMNS
    else:
        columns = _SCORE_COLUMNS
    label = GROUPED_LABELS.get(grouping)
    if label is None:
        return columns
    return [replace(c, label=label) if c.key == "test" else c for c in columns]


GROUPED_LABELS = {
    "signature": "Signature / test",
    "family": "Family / test",
    "cofailure": "Co-failure group / test",
}


def natural_sort(view: str, grouping: str = "none") -> tuple[str, bool]:
    """The column whose order a view shows when no sort is chosen, and whether that order is
    descending: the ranked views by rank, the skip file's entries by test id, every test by
    damage (most first, as tests_in_view lists them) unless grouped, where the # column
    numbers that order (see build_rows)."""
    if view == "quarantined":
        return "test", False
    if view == "all" and grouping == "none":
        return "damage", True
    return "rank", False


# ---- building rows ----------------------------------------------------------------------------


def tests_in_view(report: Report, view: str) -> list[TestVerdict]:
    """The tests one view lists, in its natural order."""
    if view == "flaky":
        chosen = [t for t in report.tests if t.verdict == "flaky"]
        return sorted(chosen, key=lambda t: (t.rank is None, t.rank or 0, -t.scores.damage))
    if view == "regressions":
        chosen = [t for t in report.tests if t.verdict == "regression"]
        return sorted(
            chosen,
            key=lambda t: (
                t.regression_rank is None,
                t.regression_rank or 0,
                -t.scores.fail_rate,
            ),
        )
    # Equal damage keeps the ranking's order (its tie-breaks), the unranked after, by id.
    return sorted(
        report.tests,
        key=lambda t: (-t.scores.damage, t.rank is None, t.rank or 0, t.test_id),
    )


def _matches(needle: str, *haystacks: str | None) -> bool:
    return any(needle in (h or "").lower() for h in haystacks)


def test_matches(test: TestVerdict, needle: str) -> bool:
    """The `/` filter: a substring of the test id, owner or signature text."""
    return not needle or _matches(
        needle, test.test_id, test.owner, test.signature_text, test.signature
    )


def _sort_key(column: Column, ctx: ViewContext) -> Callable[[Any], tuple[bool, Any]]:
    def key(item: Any) -> tuple[bool, Any]:
        value = column.value(item, ctx)
        # None sorts last in either direction's natural reading.
        return (value is None, value if value is not None else 0)

    return key


def _sorted(
    items: list[Any], state: ViewState, columns: list[Column], ctx: ViewContext
) -> list[Any]:
    if state.sort_column is None:
        return list(reversed(items)) if state.sort_reverse else items
    column = next((c for c in columns if c.key == state.sort_column), None)
    if column is None:
        return items
    present = [i for i in items if column.value(i, ctx) is not None]
    missing = [i for i in items if column.value(i, ctx) is None]
    return sorted(present, key=_sort_key(column, ctx), reverse=state.sort_reverse) + missing


def _groups(report: Report, grouping: str) -> list[GroupVerdict]:
    if grouping == "signature":
        return report.signatures
    if grouping == "family":
        return [g for g in report.families if len(g.members) > 1]
    if grouping == "cofailure":
        return report.cofailures
    return []


def _group_order(group: GroupVerdict) -> tuple[bool, int, float]:
    return (group.rank is None, group.rank or 0, -group.scores.damage)


def build_rows(
    report: Report,
    state: ViewState,
    ctx: ViewContext,
    quarantine: Sequence[QuarantineRow] = (),
) -> list[Row]:
    """The rows of the table for the current view, filter, grouping and sort."""
    columns = columns_for(state.view)
    needle = state.filter_text.strip().lower()
    if state.view == "quarantined":
        by_id = {t.test_id: t for t in report.tests}
        entries = [
            q
            for q in quarantine
            if not needle
            or _matches(needle, q.test_id, q.owner, q.reason)
            or (q.test_id in by_id and test_matches(by_id[q.test_id], needle))
        ]
        entries = _sorted(entries, state, columns, ctx)
        maker = CellMaker(tuple(columns), ctx)
        return [Row(f"t:{q.test_id}", "test", q.test_id, maker, q.mode, item=q) for q in entries]
    tests = tests_in_view(report, state.view)
    visible = {t.test_id: t for t in tests}
    groups = _groups(report, state.grouping)
    top: list[Any] = []
    members_of: dict[str, list[TestVerdict]] = {}
    grouped: set[str] = set()
    for group in sorted(groups, key=_group_order):
        in_view = [visible[m] for m in group.members if m in visible]
        if not in_view:
            continue
        grouped.update(t.test_id for t in in_view)
        if needle and not _matches(needle, group.label, group.key, group.owner):
            in_view = [t for t in in_view if test_matches(t, needle)]
            if not in_view:
                continue
        members_of[group.key] = in_view
        top.append(group)
    top.extend(t for t in tests if t.test_id not in grouped and test_matches(t, needle))
    if groups:
        # Natural order with groups: the pooled damage ranks groups among lone tests, and the
        # # column numbers that order (whatever the sort shown).
        top.sort(key=lambda i: -i.scores.damage)
        positions = {_position_key(item): number for number, item in enumerate(top, 1)}
        ctx = replace(ctx, positions=positions)
    top = _sorted(top, state, columns, ctx)
    maker = CellMaker(tuple(columns), ctx)
    rows: list[Row] = []
    for item in top:
        if isinstance(item, GroupVerdict):
            count = len(members_of[item.key])
            marker = "▾" if item.key in state.expanded else "▸"
            label = item.label.splitlines()[0] if item.label else item.key
            label = f"{marker} {label} ({count})"
            rows.append(
                Row(
                    f"g:{item.key}",
                    "group",
                    item.key,
                    maker,
                    item.verdict,
                    family=state.grouping == "family",
                    item=item,
                    label=label,
                )
            )
            if item.key in state.expanded:
                # Worst first, as the lone tests: a family lists its params alphabetically.
                members = sorted(members_of[item.key], key=lambda t: -t.scores.damage)
                for member in _sorted(members, state, columns, ctx):
                    member_label = "  └ " + member.test_id
                    rows.append(
                        Row(
                            f"m:{item.key}:{member.test_id}",
                            "member",
                            member.test_id,
                            maker,
                            member.verdict,
                            item=member,
                            label=member_label,
                        )
                    )
        else:
            rows.append(
                Row(f"t:{item.test_id}", "test", item.test_id, maker, item.verdict, item=item)
            )
    return rows


def verdict_counts(report: Report, counted: dict[str, int] | None = None) -> dict[str, int]:
    """How many tests carry each verdict: the report's, or `counted` when given (a report that
    holds only some of its tests), in the same order."""
    counts = {"flaky": 0, "regression": 0, "healthy": 0, "insufficient": 0}
    if counted is not None:
        for verdict, count in counted.items():
            counts[verdict] = counts.get(verdict, 0) + count
        return counts
    for test in report.tests:
        counts[test.verdict] = counts.get(test.verdict, 0) + 1
    return counts
