"""TAP test identity: test points that share a description are different tests, never retries."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flaketui.core.ingest.tap import iter_case_rows


def _rows(tmp_path: Path, content: str) -> list[tuple[str, list[str]]]:
    path = tmp_path / "stream.tap"
    path.write_text(content, encoding="utf-8")
    return [(test_id, [a[0] for a in attempts]) for test_id, _, attempts, _ in iter_case_rows(path)]


def test_repeated_top_level_descriptions_are_numbered_tests(tmp_path: Path) -> None:
    rows = _rows(
        tmp_path,
        "TAP version 13\nok 1 - should be equal\nnot ok 2 - should be equal\n"
        "ok 3 - other\nok 4 - should be equal # SKIP no network\n1..4\n",
    )
    assert rows == [
        ("should be equal", ["pass"]),
        ("should be equal #2", ["fail"]),
        ("other", ["pass"]),
        ("should be equal #3", ["skipped"]),
    ]


def test_repeated_descriptions_inside_a_subtest_are_numbered_under_it(tmp_path: Path) -> None:
    rows = _rows(
        tmp_path,
        "TAP version 14\n# Subtest: parser\n    ok 1 - should be equal\n"
        "    not ok 2 - should be equal\n    1..2\nnot ok 1 - parser\n"
        "ok 2 - printer {\n    ok 1 - should be equal\n    1..1\n}\n"
        "# Subtest: parser\n    ok 1 - should be equal\n    1..1\nok 3 - parser\n1..3\n",
    )
    assert rows == [
        ("parser > should be equal", ["pass"]),
        ("parser > should be equal #2", ["fail"]),
        ("printer > should be equal", ["pass"]),
        ("parser > should be equal #3", ["pass"]),
    ]


def test_a_number_already_taken_moves_on(tmp_path: Path) -> None:
    rows = _rows(tmp_path, "ok 1 - a #2\nok 2 - a\nok 3 - a\nok 4 - a #2\nok 5 - a > b\n")
    assert [test_id for test_id, _ in rows] == ["a #2", "a", "a #3", "a #2 #2", "a > b"]
    truncated = _rows(tmp_path, "# Subtest: a\n    ok 1 - b\n    not ok 2 - b\n")
    assert [test_id for test_id, _ in truncated] == ["a > b", "a > b #2"]


def test_streams_without_repeats_keep_their_ids(tmp_path: Path) -> None:
    rows = _rows(
        tmp_path,
        "not ok 1 - empty {\n    1..0\n}\n# Subtest: suite\n    ok 1 - a\n    ok 2 - b\n"
        "    1..2\nnot ok 2 - suite\nok 3 - suite b\nok 4\nok 5\n1..5\n",
    )
    assert [test_id for test_id, _ in rows] == [
        "empty",
        "suite > a",
        "suite > b",
        "suite",
        "suite b",
        "test 4",
        "test 5",
    ]


# ---- any stream: one attempt per test ------------------------------------------------------------

DESCRIPTIONS = ["should be equal", "a", "a #2", "x > y", "x", "y"]


@dataclass(frozen=True)
class Point:
    """A test point, a subtest when it has children."""

    description: str
    failed: bool
    children: tuple[Point, ...] | None = None
    buffered: bool = False


def points(depth: int) -> st.SearchStrategy[Point]:
    leaf = st.builds(Point, st.sampled_from(DESCRIPTIONS), st.booleans())
    if depth == 0:
        return leaf
    subtest = st.builds(
        Point,
        st.sampled_from(DESCRIPTIONS),
        st.booleans(),
        st.lists(points(depth - 1), max_size=4).map(tuple),
        st.booleans(),
    )
    return st.one_of(leaf, subtest)


def render(point: Point, number: int, level: int) -> list[str]:
    pad = " " * 4 * level
    line = f"{pad}{'not ok' if point.failed else 'ok'} {number} - {point.description}"
    if point.children is None:
        return [line]
    inner = [
        text
        for index, child in enumerate(point.children, 1)
        for text in render(child, index, level + 1)
    ]
    plan = f"{pad}    1..{len(point.children)}"
    if point.buffered:
        return [line + " {", *inner, plan, pad + "}"]
    return [f"{pad}# Subtest: {point.description}", *inner, plan, line]


def stored(point: Point) -> list[tuple[str, bool]]:
    """The un-numbered ids a point stores, with whether each failed."""
    if point.children is None:
        return [(point.description, point.failed)]
    rows = [
        (f"{point.description} > {test_id}", failed)
        for child in point.children
        for test_id, failed in stored(child)
    ]
    if not rows or (point.failed and not any(failed for _, failed in rows)):
        rows.append((point.description, point.failed))
    return rows


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(stream=st.lists(points(2), min_size=1, max_size=6))
def test_any_stream_gives_each_test_one_attempt(tmp_path: Path, stream: list[Point]) -> None:
    lines = [text for number, point in enumerate(stream, 1) for text in render(point, number, 0)]
    content = "TAP version 14\n" + "".join(f"{text}\n" for text in lines)
    content += f"1..{len(stream)}\n"
    rows = _rows(tmp_path, content)
    ids = [test_id for test_id, _ in rows]
    assert len(set(ids)) == len(ids), ids
    assert all(len(attempts) == 1 for _, attempts in rows)
    expected = [(test_id, failed) for point in stream for test_id, failed in stored(point)]
    assert len(rows) == len(expected)  # nothing lost, nothing merged
    assert Counter(a[0] == "fail" for _, a in rows) == Counter(f for _, f in expected)
    if len({test_id for test_id, _ in expected}) == len(expected):
        assert ids == [test_id for test_id, _ in expected]  # no repeats: the ids as they were
    assert _rows(tmp_path, content) == rows  # the same stream, the same ids


def test_a_stream_cut_inside_a_subtest_keeps_the_subtest_name(tmp_path: Path) -> None:
    """The `# Subtest:` comment right after a test line names the tests of the cut subtest."""
    rows = _rows(tmp_path, "TAP version 14\nok 1 - x\n# Subtest: a\n    ok 1 - b\n")
    assert rows == [("x", ["pass"]), ("a > b", ["pass"])]
