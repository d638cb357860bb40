"""The filtered timeline's per-day counts against a plain count over the same positions."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from flaketui.core.rollups.filtered import Timeline
from flaketui.core.rollups.read import WindowRun

START = datetime(2026, 11, 1, tzinfo=UTC)


def _timeline(hours: list[int]) -> Timeline:
    """Runs at those hours after START (ids in order of the list, so ties keep id order)."""
    runs = {
        pk: WindowRun(
            (START + timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M:%SZ"), None, True, "ci", True, 1.0
        )
        for pk, h in enumerate(hours, 1)
    }
    return Timeline(runs)


@given(
    hours=st.lists(st.integers(min_value=0, max_value=24 * 20), min_size=1, max_size=60),
    data=st.data(),
)
def test_day_counts_count_each_days_units_and_bad_units(
    hours: list[int], data: st.DataObject
) -> None:
    timeline = _timeline(hours)
    positions = range(len(hours))
    units = sorted(data.draw(st.sets(st.sampled_from(positions))))
    bad = sorted(data.draw(st.sets(st.sampled_from(units)))) if units else []
    per_day = Counter(timeline.ts[at][:10] for at in units)
    bad_per_day = Counter(timeline.ts[at][:10] for at in bad)
    expected = [(day, per_day[day], bad_per_day[day]) for day in sorted(per_day)]
    assert timeline.day_counts(units, bad) == expected
