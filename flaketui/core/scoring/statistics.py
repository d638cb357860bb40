"""Pure scoring functions over counts: Wilson interval, flips, recency, blast radius, damage.

Choices made here:
- `wilson_interval(k, 0)` is (0.0, 1.0): with no observation every rate is possible.
- The interval is clamped to [0, 1] and widened by at most a rounding error so that
  lo <= k/n <= hi always holds (floating point can otherwise miss it by 1e-17).
- `recency_weight` treats a negative age (a run after `now`) as age 0; callers exclude
  such runs anyway.
- `runs_per_week` divides by the shorter of the window and the time since the test (or
  group) was first seen, never by less than `min_span_days` (7 by default), so 27 runs
  recorded within 40 minutes are 27 runs a week, not 170.
- `rate_change` finds the most likely change in a daily bad-run rate (`best_split` is the
  same search on bare counts); `RateChange.significant` keeps it when a likelihood-ratio test
  passes, Bonferroni-corrected over the candidate days (over raw rows the scorer runs the same
  search in SQL: flaketui.core.scoring.aggregates.rate_changes).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from flaketui.core.config import Config

DAYS_PER_WEEK = 7.0


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


def runs_per_week(
    runs: int, days_seen: float, window_days: float, min_span_days: float = 7.0
) -> float:
    """Distinct runs per week over the shorter of the window and the time seen, never over
    less than min_span_days (nor more than the window)."""
    span = max(min(float(min_span_days), float(window_days)), min(float(window_days), days_seen))
    return runs / max(span, 1e-9) * DAYS_PER_WEEK


def normal_quantile(p: float) -> float:
    """The standard normal distribution's quantile (inverse CDF) at p."""
    return NormalDist().inv_cdf(p)


def _loglik(bad: int, runs: int) -> float:
    """Bernoulli log-likelihood of `bad` of `runs` at its own maximum-likelihood rate."""
    if runs <= 0 or bad <= 0 or bad >= runs:
        return 0.0
    p = bad / runs
    return bad * math.log(p) + (runs - bad) * math.log(1.0 - p)


def change_threshold(days: int, alpha: float) -> float:
    """Likelihood-ratio statistic a split must reach: chi-square (1 dof) at alpha / splits."""
    splits = max(1, days - 1)
    return normal_quantile(1.0 - alpha / (2.0 * splits)) ** 2


def best_split(counts: Sequence[tuple[int, int]]) -> tuple[int, float]:
    """(index, statistic) of the most likely change in daily (runs, bad) counts: the days
    before `index` against the days from it, and twice the log-likelihood ratio of two
    Bernoulli rates against one; (0, 0.0) with fewer than two days. Ties: the earliest."""
    change = rate_change([(str(index), n, k) for index, (n, k) in enumerate(counts)])
    if change.split_day is None:
        return 0, 0.0
    return int(change.split_day) + 1, 2.0 * (change.split_ll - change.whole_ll)


@dataclass(frozen=True, slots=True)
class RateChange:
    """A key's daily bad-run counts summed, with their most likely single change."""

    runs: int
    bad: int
    days: int  # days with a counted run
    first_bad_day: str | None
    whole_ll: float  # log-likelihood at one rate
    split_day: str | None  # last day before the change (None with a single day)
    runs_before: int
    bad_before: int
    split_ll: float  # log-likelihood with a rate on each side of split_day
    first_bad_after: str | None

    def significant(self, alpha: float) -> bool:
        """The change passes the likelihood-ratio test (Bonferroni over the days)."""
        statistic = 2.0 * (self.split_ll - self.whole_ll)
        return self.split_day is not None and statistic > change_threshold(self.days, alpha)


def rate_change(days: Sequence[tuple[str, int, int]]) -> RateChange:
    """The most likely change in a key's daily bad-run rate, from its days with a counted run
    as (day, runs, bad runs) in day order: the split maximising the two sides' Bernoulli
    log-likelihood (ties: the earliest), with the days and counts around it, as the raw-row
    search of the scorer reports them."""
    runs = sum(n for _, n, _ in days)
    bad = sum(k for _, _, k in days)
    whole = _loglik(bad, runs)
    first_bad_day = next((day for day, _, k in days if k > 0), None)
    best, where = -math.inf, -1
    left_runs = left_bad = runs_before = bad_before = 0
    for index in range(len(days) - 1):
        _, n, k = days[index]
        left_runs += n
        left_bad += k
        both = _loglik(left_bad, left_runs) + _loglik(bad - left_bad, runs - left_runs)
        if both > best:
            best, where, runs_before, bad_before = both, index, left_runs, left_bad
    if where < 0:
        return RateChange(runs, bad, len(days), first_bad_day, whole, None, 0, 0, whole, None)
    first_bad_after = next((day for day, _, k in days[where + 1 :] if k > 0), None)
    return RateChange(
        runs=runs,
        bad=bad,
        days=len(days),
        first_bad_day=first_bad_day,
        whole_ll=whole,
        split_day=days[where][0],
        runs_before=runs_before,
        bad_before=bad_before,
        split_ll=best,
        first_bad_after=first_bad_after,
    )


def damage(flake_rate_low: float, weekly_runs: float, radius: float) -> float:
    """Damage: expected blocked merges per week."""
    return flake_rate_low * weekly_runs * radius


def log_choose(n: int, k: int) -> float:
    """The natural log of the binomial coefficient C(n, k)."""
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_exact(bad_in: int, runs_in: int, bad_rest: int, runs_rest: int) -> float:
    """Two-sided p-value of Fisher's exact test on a 2x2 table of bad runs out of runs.

    The margins are fixed; the p-value sums the hypergeometric probabilities of every table no
    more likely than the observed one (a relative tolerance absorbs rounding), as R's
    fisher.test does.
    """
    return FisherExact()(bad_in, runs_in, bad_rest, runs_rest)


# n -> log_choose(n, k) for every k from 0 to n
LogChoices = dict[int, list[float]]


class FisherExact:
    """fisher_exact, keeping the hypergeometric terms of each pair of margins it has met.

    The comparisons of one analysis share their margins: every value of a dimension splits the
    same runs and bad runs, and many values split them alike. Each table's p-value is the same
    sum, in the same order, as fisher_exact's.
    """

    def __init__(self, choices: LogChoices | None = None) -> None:
        # (total, bad, runs_in) -> (first k, log-probability and probability of each k)
        self._terms: dict[tuple[int, int, int], tuple[int, list[float], list[float]]] = {}
        # Shared with other instances given the same dict: they depend on n alone.
        self._choose: LogChoices = {} if choices is None else choices

    def __call__(self, bad_in: int, runs_in: int, bad_rest: int, runs_rest: int) -> float:
        if not (0 <= bad_in <= runs_in and 0 <= bad_rest <= runs_rest):
            raise ValueError("fisher_exact: need 0 <= bad <= runs on both sides")
        total = runs_in + runs_rest
        bad = bad_in + bad_rest
        if total == 0 or runs_in == 0 or runs_rest == 0 or bad in (0, total):
            return 1.0
        low, log_pmf, pmf = self._margins(total, bad, runs_in)
        cutoff = log_pmf[bad_in - low] + 1e-7
        p_value = sum(p for lp, p in zip(log_pmf, pmf, strict=True) if lp <= cutoff)
        return min(1.0, p_value)

    def _margins(self, total: int, bad: int, runs_in: int) -> tuple[int, list[float], list[float]]:
        key = (total, bad, runs_in)
        terms = self._terms.get(key)
        if terms is None:
            low, high = max(0, runs_in - (total - bad)), min(runs_in, bad)
            base = log_choose(total, runs_in)
            choose_bad, choose_good = self._choices(bad), self._choices(total - bad)
            log_pmf = [
                choose_bad[k] + choose_good[runs_in - k] - base for k in range(low, high + 1)
            ]
            terms = self._terms[key] = (low, log_pmf, [math.exp(lp) for lp in log_pmf])
        return terms

    def _choices(self, n: int) -> list[float]:
        """log_choose(n, k) for every k from 0 to n."""
        found = self._choose.get(n)
        if found is None:
            found = self._choose[n] = [log_choose(n, k) for k in range(n + 1)]
        return found


def stratified_fisher_exact(
    tables: Sequence[tuple[int, int, int, int]], fisher: FisherExact | None = None
) -> float:
    """Two-sided p-value of Fisher's exact test stratified over several 2x2 tables, each
    (bad_in, runs_in, bad_rest, runs_rest) as for fisher_exact. `fisher`: the FisherExact
    of an analysis making many such tests (its terms are kept for the next; same values).

    Every table's margins are fixed and the statistic is the sum of bad_in over the tables:
    the exact conditional test of independence within every table (of a common odds ratio of
    1). Its distribution is the convolution of the tables' hypergeometric distributions; the
    p-value sums the probability of every sum no more likely than the observed one (a
    relative tolerance absorbs rounding). One table gives fisher_exact's p-value exactly.
    """
    varying = []
    for bad_in, runs_in, bad_rest, runs_rest in tables:
        if not (0 <= bad_in <= runs_in and 0 <= bad_rest <= runs_rest):
            raise ValueError("stratified_fisher_exact: need 0 <= bad <= runs on both sides")
        bad, total = bad_in + bad_rest, runs_in + runs_rest
        if runs_in and runs_rest and 0 < bad < total:
            varying.append((bad_in, runs_in, bad_rest, runs_rest))
    if not varying:
        return 1.0
    fisher = fisher or FisherExact()
    if len(varying) == 1:
        return fisher(*varying[0])
    low, pmf, observed = 0, [1.0], 0
    for bad_in, runs_in, bad_rest, runs_rest in varying:
        first, _log_pmf, terms = fisher._margins(runs_in + runs_rest, bad_in + bad_rest, runs_in)
        combined = [0.0] * (len(pmf) + len(terms) - 1)
        for i, left in enumerate(pmf):
            for j, right in enumerate(terms):
                combined[i + j] += left * right
        low, pmf, observed = low + first, combined, observed + bad_in
    cutoff = pmf[observed - low] * (1 + 1e-7)
    return min(1.0, sum(p for p in pmf if p <= cutoff))


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values), in the input order."""
    count = len(p_values)
    order = sorted(range(count), key=lambda i: p_values[i])
    adjusted = [1.0] * count
    running = 1.0
    for rank in range(count, 0, -1):
        index = order[rank - 1]
        running = min(running, p_values[index] * count / rank)
        adjusted[index] = min(1.0, running)
    return adjusted
