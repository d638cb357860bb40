"""The HTML report's inline sparklines: the same line as a point per day, in fewer points."""

from __future__ import annotations

import re
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from flaketui.core.output.html import SPARK_HEIGHT, SPARK_WIDTH, sparkline_svg


def _points(svg: str) -> list[tuple[float, float]]:
    (found,) = re.findall(r'<polyline points="([^"]*)"', svg)
    return [(float(x), float(y)) for x, y in (pair.split(",") for pair in found.split())]


def _every_day(values: list[float], floor_max: float) -> list[tuple[float, float]]:
    """A point per day, as the line is defined."""
    top = max(max(values), floor_max)
    step = SPARK_WIDTH / max(1, len(values) - 1)
    return [
        (round(i * step, 1), round(SPARK_HEIGHT - 1 - v / top * (SPARK_HEIGHT - 2), 1))
        for i, v in enumerate(values)
    ]


scores = st.lists(
    st.one_of(st.just(0.0), st.just(0.25), st.floats(0.0, 1.0)), min_size=1, max_size=40
)


@given(scores, st.floats(0.0, 1.0))
def test_the_line_passes_through_every_day(values: list[float], floor_max: float) -> None:
    svg = sparkline_svg(values, floor_max)
    if max(values) <= 0:
        assert svg == ""
        return
    full, kept = _every_day(values, floor_max), _points(svg)
    assert kept[0] == full[0] and kept[-1] == full[-1]
    assert all(point in full for point in kept)
    segments = list(pairwise(kept))
    for x, y in full:
        assert (x, y) in kept or any(a[0] < x < b[0] and a[1] == b[1] == y for a, b in segments), (
            x,
            y,
        )


def test_days_at_one_score_are_one_segment() -> None:
    svg = sparkline_svg([0.0] * 10 + [0.5] + [0.0] * 19, 0.1)
    assert _points(svg) == [(0.0, 17.0), (27.9, 17.0), (31.0, 1.0), (34.1, 17.0), (90.0, 17.0)]
