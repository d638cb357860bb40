"""Pure scoring functions: hand-computed values and properties."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flaketui.core.config import Config
from flaketui.core.scoring.statistics import (
    blast_radius,
    damage,
    flip_count,
    flip_rate,
    flip_rate_interval,
    is_gating,
    recency_score,
    recency_weight,
    runs_per_week,
    wilson_interval,
    wilson_low,
)

Z2 = 1.96**2


def test_wilson_all_failures_matches_closed_form() -> None:
    # k = n: lo = n / (n + z^2); for 10/10 that is 0.72.
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(10 / (10 + Z2))
    assert round(low, 2) == 0.72
    assert high == 1.0


def test_wilson_no_failures_in_20_runs_has_high_0_16() -> None:
    low, high = wilson_interval(0, 20)
    assert low == 0.0
    assert high == pytest.approx(Z2 / (20 + Z2))
    assert round(high, 2) == 0.16


def test_wilson_one_in_four_hand_computed() -> None:
    low, high = wilson_interval(1, 4)
    assert low == pytest.approx(0.04559, abs=1e-4)
    assert high == pytest.approx(0.69936, abs=1e-4)


def test_wilson_bands_at_ten_runs() -> None:
    # N = 10 separates p = 0.1 (lo 0.02, hi 0.44) and p = 0.8 (lo 0.44, hi 0.98)
    assert wilson_interval(1, 10) == pytest.approx((0.0179, 0.4042), abs=1e-3)
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-3)


def test_wilson_without_runs_is_uninformative() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_low(0, 0) == 0.0


def test_wilson_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError):
        wilson_interval(5, 3)


@given(st.integers(min_value=1, max_value=5000), st.data())
def test_wilson_bounds_contain_the_estimate(n: int, data: st.DataObject) -> None:
    k = data.draw(st.integers(min_value=0, max_value=n))
    low, high = wilson_interval(k, n)
    assert 0.0 <= low <= k / n <= high <= 1.0


@given(
    st.integers(min_value=1, max_value=500),
    st.integers(min_value=0, max_value=500),
    st.integers(min_value=2, max_value=20),
)
def test_wilson_narrows_with_more_runs_at_the_same_rate(n: int, k_raw: int, factor: int) -> None:
    k = k_raw % (n + 1)
    low, high = wilson_interval(k, n)
    low_more, high_more = wilson_interval(k * factor, n * factor)
    assert high_more - low_more < high - low


def test_flips_of_a_broken_and_an_alternating_sequence() -> None:
    # Two hand-written sequences, A and B, with their flip counts worked out by hand.
    a = [c == "F" for c in "PPPPPPPPPPFFFFFFFFFF"]
    b = [c == "F" for c in "PFPPFPFPFPPFPFPFPPFF"]
    assert flip_count(a) == 1
    assert flip_rate(a) == pytest.approx(1 / 19)
    assert flip_count(b) == 15
    assert flip_rate(b) == pytest.approx(15 / 19)


def test_flip_rate_edges() -> None:
    assert flip_rate([]) == 0.0
    assert flip_rate([True]) == 0.0
    assert flip_rate([True, False, True, False]) == 1.0
    assert flip_rate_interval(0, 1) == (0.0, 1.0)  # no transition observed


@given(st.lists(st.booleans(), max_size=200))
def test_flip_rate_is_a_rate_and_symmetric(bad: list[bool]) -> None:
    rate = flip_rate(bad)
    assert 0.0 <= rate <= 1.0
    assert flip_count(bad) <= max(0, len(bad) - 1)
    assert rate == flip_rate([not x for x in bad])  # swapping good and bad changes nothing
    assert rate == flip_rate(bad[::-1])  # direction of time does not matter to the count


def test_recency_weight_half_life_and_branch() -> None:
    config = Config()
    assert recency_weight(0.0, "main", config) == 3.0
    assert recency_weight(14.0, "main", config) == pytest.approx(1.5)
    assert recency_weight(28.0, "pr", config) == pytest.approx(0.25)
    assert recency_weight(7.0, "release", config) == pytest.approx(2**-0.5)
    assert recency_weight(-1.0, "pr", config) == 1.0


def test_recency_score_hand_computed() -> None:
    config = Config()
    # A main failure today (weight 3) and a PR pass 14 days ago (weight 0.5), alpha 2.
    bad = recency_weight(0, "main", config)
    total = bad + recency_weight(14, "pr", config)
    assert recency_score(bad, total, config.laplace_alpha) == pytest.approx(3 / 5.5)
    assert recency_score(0.0, 0.0, 0.0) == 0.0


@given(st.floats(0, 1e6), st.floats(0, 1e6))
def test_recency_score_in_unit_interval(bad: float, extra: float) -> None:
    assert 0.0 <= recency_score(bad, bad + extra, 2.0) < 1.0


def test_blast_radius_levels() -> None:
    config = Config()
    assert blast_radius(True, True, config) == 4.0
    assert blast_radius(False, True, config) == 2.0
    assert blast_radius(False, False, config) == 1.0
    assert not is_gating("nightly", config)
    assert is_gating("unit", config)


def test_runs_per_week_uses_shorter_of_window_and_age() -> None:
    assert runs_per_week(90, days_seen=200.0, window_days=90) == pytest.approx(7.0)
    # Never extrapolated from less than min_span_days (7 by default).
    assert runs_per_week(10, days_seen=5.0, window_days=90) == pytest.approx(10.0)
    assert runs_per_week(3, days_seen=0.1, window_days=90) == pytest.approx(3.0)
    assert runs_per_week(10, days_seen=5.0, window_days=90, min_span_days=1.0) == pytest.approx(
        14.0
    )
    # A window shorter than the floor is the span.
    assert runs_per_week(10, days_seen=5.0, window_days=3) == pytest.approx(10 / 3 * 7)


def test_damage_is_a_product() -> None:
    assert damage(0.05, 70.0, 4.0) == pytest.approx(14.0)
    assert math.isclose(damage(0.0, 70.0, 4.0), 0.0)


@given(st.integers(min_value=1, max_value=2000), st.data())
def test_wilson_is_symmetric_in_good_and_bad(n: int, data: st.DataObject) -> None:
    k = data.draw(st.integers(min_value=0, max_value=n))
    low, high = wilson_interval(k, n)
    low_bad, high_bad = wilson_interval(n - k, n)
    assert low == pytest.approx(1.0 - high_bad, abs=1e-12)
    assert high == pytest.approx(1.0 - low_bad, abs=1e-12)


@given(st.lists(st.booleans(), min_size=2, max_size=200))
def test_flip_rate_lies_in_its_wilson_interval(bad: list[bool]) -> None:
    low, high = flip_rate_interval(flip_count(bad), len(bad))
    assert 0.0 <= low <= flip_rate(bad) <= high <= 1.0


@given(st.lists(st.booleans(), min_size=1, max_size=200))
def test_flips_are_the_streak_boundaries(bad: list[bool]) -> None:
    # Each flip starts a new maximal streak of equal outcomes.
    streaks = len([key for key, _run in itertools.groupby(bad)])
    assert flip_count(bad) == streaks - 1
    assert flip_rate([bad[0]] * len(bad)) == 0.0


def test_flip_rate_interval_hand_computed() -> None:
    # Sequence B: 15 flips over 19 transitions -> Wilson (15, 19).
    assert flip_rate_interval(15, 20) == wilson_interval(15, 19)
    assert flip_rate_interval(15, 20)[0] == pytest.approx(0.5667, abs=1e-4)
