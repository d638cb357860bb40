"""Pure scoring functions over counts: Wilson interval, flips, recency, blast radius, damage.

Choices made here:
- `wilson_interval(k, 0)` is (0.0, 1.0): with no observation every rate is possible.
- The interval is clamped to [0, 1] and widened by at most a rounding error so that
  lo <= k/n <= hi always holds (floating point can otherwise miss it by 1e-17).
- `recency_weight` treats a negative age (a run after `now`) as age 0; callers exclude
  such runs anyway.
- `runs_per_week` divides by the shorter of the window and the time since the test (or
  group) was first seen, never by less than one day, so a test added yesterday with two
  runs is not extrapolated to 14 runs a day.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from flaketui.core.config import Config

DAYS_PER_WEEK = 7.0
MIN_SPAN_DAYS = 1.0


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of the proportion k/n; (0.0, 1.0) when n == 0."""
    if n <= 0:
        return (0.0, 1.0)
    if not 0 <= k <= n:
        raise ValueError(f"wilson_interval: need 0 <= k <= n, got k={k}, n={n}")
    p_hat = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p_hat + z2 / (2.0 * n)) / denom
    margin = z * math.sqrt(p_hat * (1.0 - p_hat) / n + z2 / (4.0 * n * n)) / denom
    low = max(0.0, min(p_hat, centre - margin))
    high = min(1.0, max(p_hat, centre + margin))
    return (low, high)


def wilson_low(k: int, n: int, z: float = 1.96) -> float:
    """Lower bound of the Wilson interval; 0.0 when n == 0 (no evidence ranks last)."""
    return 0.0 if n <= 0 else wilson_interval(k, n, z)[0]


def flip_count(bad: Sequence[bool]) -> int:
    """Transitions between good and bad in a time-ordered sequence of runs."""
    return sum(1 for before, after in itertools.pairwise(bad) if before != after)


def flip_rate(bad: Sequence[bool]) -> float:
    """Flips / (runs - 1); 0.0 when there are fewer than two runs."""
    if len(bad) < 2:
        return 0.0
    return flip_count(bad) / (len(bad) - 1)


def flip_rate_interval(flips: int, runs: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson interval of the flip rate: flips out of runs - 1 transitions."""
    transitions = max(0, runs - 1)
    return wilson_interval(min(flips, transitions), transitions, z)


def recency_weight(age_days: float, branch_kind: str, config: Config) -> float:
    """The recency weight of one run: half-life decay times the branch weight."""
    decay: float = 0.5 ** (max(0.0, age_days) / config.half_life_days)
    branch = config.main_weight if branch_kind == "main" else config.other_weight
    return decay * branch


def recency_score(weighted_bad: float, weighted_total: float, alpha: float) -> float:
    """The recency score: weighted flaky-or-failed runs over weighted runs plus Laplace alpha."""
    denominator = weighted_total + alpha
    if denominator <= 0.0:
        return 0.0
    return weighted_bad / denominator


def blast_radius(gates_main: bool, gates_branch: bool, config: Config) -> float:
    """4 when gating merges on the default branch, 2 on feature branches only, else 1."""
    if gates_main:
        return config.blast_radius_main
    if gates_branch:
        return config.blast_radius_branch
    return config.blast_radius_nongating


def is_gating(suite: str, config: Config) -> bool:
    """Whether a suite blocks merges (every suite not listed as non-gating)."""
    return suite not in config.non_gating_suites


def runs_per_week(runs: int, days_seen: float, window_days: float) -> float:
    """Distinct runs per week over the shorter of the window and the time seen (>= 1 day)."""
    span = max(MIN_SPAN_DAYS, min(float(window_days), days_seen))
    return runs / span * DAYS_PER_WEEK


def damage(flake_rate_low: float, weekly_runs: float, radius: float) -> float:
    """Damage: expected blocked merges per week."""
    return flake_rate_low * weekly_runs * radius
