"""Verdict rules, the default branch's change point, reasons and flags.

The rules run in this order; the first that matches decides:
1. `insufficient`: fewer than N_min counted runs.
2. `healthy`: no bad run in the window.
3. `regression` (change point): the default branch's own time-ordered sequence ends in a
   streak of bad runs after at least one good main run, every one of which failed every
   attempt (a regression), save at most one rescued by a retry (the last flake of a flaky
   test often opens the streak its break continues: the break wins over the older flake
   evidence), and the runs that failed through are many: at least min_break_runs (3), and at
   least as many as make it unlikely (< streak_surprise, 5 %) under the test's own earlier
   main failure rate p (n >= ln 0.05 / ln p). PR and release runs are ignored here, so PR
   runs on older commits that still pass do not rescue it. first_bad_commit /
   last_good_commit come from this sequence.
4. `healthy` + `resolved` (a resolved incident): the counted runs end in a clean streak that
   a test still flaking at a steady rate would rarely produce, bounded by construction. The
   runs of a steady flake are exchangeable: whatever its rate, its k bad runs among N are
   equally likely to sit at any k of the N positions, so the chance that all of them fall
   before the last n runs is C(N - n, k) / C(N, k) (a permutation test, exact for every
   rate). The failures are history when
   - that chance is below false_resolution_rate (2.5 %): a steady flake is called resolved
     by chance at most 2.5 % of the time at any rate, half the 5 % promised, which leaves
     room for runs that are not quite independent (a bad hour on a shared runner);
   - the streak is at least N_min runs;
   - and it spans at least resolved_min_days (3) from the last failure to the latest clean
     run, so a burst of re-runs on one afternoon resolves nothing and every daily schedule
     (the nightly, a working day's pushes) has been seen clean at least twice.
   8 flakes in 80 runs need 45 clean runs after them; 10 failures in a row then 10 clean
   runs are already unlikely (C(20, 10) / C(30, 10) = 0.6 %). More clean runs only lower
   the chance, so they never undo a resolution.
4b. `healthy` + `rare-flake`: flake evidence, but the Wilson upper bound of the bad-run rate
   in the current regime (the runs since the latest significant change in the daily rate,
   or the whole window) stays below rare_flake_rate (1 %): the background noise of shared
   CI machines (a retry-rescued failure or two in a thousand runs) is not worth a fix,
   while a test that started failing days ago is judged on those days alone.
5. `regression`: Wilson low >= 0.70 (failing almost always).
6. The band 0.50 <= Wilson low < 0.70: `flaky` + `high-rate` with flake evidence, else
   `regression` (a test failing most of the time for no visible flaky reason is broken).
7. `flaky`: there is flake evidence: a flaky run (failed, then passed on retry); a
   commit with both a good and a bad run; or bad runs interleaved with good ones on the default
   branch (two separate bad stretches, or one recovered stretch shorter than min_break_runs). The
   interleaving counts in every suite; in suites that never retry it is the main evidence. A
   window without a default-branch run has none of it, which the report says
   (Report.no_default_branch_runs) rather than any verdict.
   The "Wilson high < 0.10 is healthy" band does not override evidence: a 3 % flake on a busy
   gating test is a standing tax worth ranking (damage puts it where it belongs).
8. `healthy`: Wilson high < 0.10 without flake evidence (too rare to act on).
9. `regression` + `suspected`: no flake evidence and the latest main runs are bad (a streak
   too short for rule 3): treated as a break until the history says otherwise.
10. `healthy`: bad runs without any flake evidence (e.g. failures on PR commits only).

Flags (sorted in output):
- `alternating`: flip rate >= 0.8 over >= N_min runs (test-order dependence, a toggled resource).
- `high-rate`: flaky with a Wilson low >= 0.50.
- `resolved`: healthy because the failures lie in the past (rule 4).
- `rare-flake`: healthy because the flake rate is surely below rare_flake_rate (rule 4b).
- `suspected`: regression from a short trailing streak on the default branch (rule 9).
- `new`: first seen less than grace_days before now.
- `no-retry`: flaky in a suite that never retries: evidence from flips and same-commit runs.
- `nightly-only`: runs only in non-gating suites (blast radius 1).
- `pr-only`: bad only off the default branch, where it also ran and passed every time. A test
  with no run on the default branch has nothing to compare with: runs with no branch recorded
  count as off it, so without this a history of unknown branches would flag every failure.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from flaketui.core.config import Config
from flaketui.core.rollups.evidence import Evidence
from flaketui.core.scoring.results import Scores, Verdict
from flaketui.core.scoring.statistics import (
    RateChange,
    blast_radius,
    damage,
    flip_rate_interval,
    log_choose,
    recency_score,
    runs_per_week,
    wilson_interval,
    wilson_low,
)
from flaketui.core.timeutil import days_between, parse_iso

DEFAULTS = Config()


@dataclass(slots=True)
class Judgement:
    """A verdict with its one-line reason, flags and (for regressions) the change point."""

    verdict: Verdict
    reason: str
    flags: list[str] = field(default_factory=list)
    first_bad_commit: str | None = None
    last_good_commit: str | None = None


@dataclass(frozen=True, slots=True)
class Current:
    """The runs of the current rate regime (since the latest change in the daily bad-run
    rate; the whole window when it never changed) and the day the flaking began."""

    runs: int
    bad: int
    onset: str | None  # 'YYYY-MM-DD', None without a bad run


def current_of(change: RateChange, config: Config = DEFAULTS) -> Current:
    """The current regime: the runs after the most likely change in the daily bad-run rate
    when it passes the likelihood-ratio test at change_alpha, else the whole window. The
    onset is the first bad day after a significant rise, else the first bad day."""
    if not change.significant(config.change_alpha):
        return Current(change.runs, change.bad, change.first_bad_day)
    runs = change.runs - change.runs_before
    bad = change.bad - change.bad_before
    rose = change.runs_before == 0 or bad / runs > change.bad_before / change.runs_before
    onset = change.first_bad_after if rose else change.first_bad_day
    return Current(runs, bad, onset or change.first_bad_day)


def compute_scores(
    ev: Evidence,
    *,
    retries: bool,
    first_seen: datetime,
    now: datetime,
    config: Config,
    current: Current | None = None,
) -> Scores:
    """Every score from one test's or group's evidence.

    One damage rule whatever evidence showed the flakiness: the flake rate is the Wilson
    lower bound of bad runs over runs in the current regime (`current`, else the window).
    A bad run blocks a merge whether a retry, a same-commit re-run or a flip revealed that
    it was a flake, so a test failing 27 runs of 44 never ranks under one failing 13 because
    fewer of its failures were retried. `retries` no longer changes the estimate.
    """
    low, high = wilson_interval(ev.failed_runs, ev.runs, config.z)
    flip_low, _ = flip_rate_interval(ev.flips, ev.runs, config.z)
    if current is None or current.runs <= 0:
        current = Current(ev.runs, ev.failed_runs, None)
    flake_low = wilson_low(current.bad, current.runs, config.z)
    window_start = now - timedelta(days=config.window_days)
    seen_from = max(window_start, min(first_seen, parse_iso(ev.first_ts)))
    weekly = runs_per_week(
        ev.runs, days_between(seen_from, now), config.window_days, config.min_span_days
    )
    radius = blast_radius(bool(ev.gates_main), bool(ev.gates_branch), config)
    return Scores(
        runs=ev.runs,
        flaky_runs=ev.flaky_runs,
        failed_runs=ev.failed_runs,
        fail_rate=ev.failed_runs / ev.runs if ev.runs else 0.0,
        wilson_low=low,
        wilson_high=high,
        flip_rate=ev.flips / (ev.runs - 1) if ev.runs > 1 else 0.0,
        flip_rate_low=flip_low,
        flake_rate_low=flake_low,
        current_runs=current.runs,
        current_bad_runs=current.bad,
        runs_per_week=weekly,
        blast_radius=radius,
        damage=damage(flake_low, weekly, radius),
        recency_score=recency_score(ev.weighted_bad, ev.weighted_total, config.laplace_alpha),
        last_failure_at=parse_iso(ev.last_failure_at) if ev.last_failure_at else None,
    )


def unlikely_streak(rate: float, surprise: float) -> float:
    """Length n from which a streak of events of probability `rate` each has P < surprise.

    rate ** n < surprise  <=>  n > ln(surprise) / ln(rate); inf when rate >= 1 (always
    likely), 0 when rate <= 0 (never happens, so any streak is a surprise).
    """
    if rate >= 1.0:
        return math.inf
    if rate <= 0.0:
        return 0.0
    return math.log(surprise) / math.log(rate)


def required_streak(ev: Evidence, config: Config = DEFAULTS) -> int:
    """Bad main runs in a row needed to believe a change point, given the earlier main rate."""
    if ev.good_rn <= 0:
        return config.min_break_runs
    earlier_rate = (ev.main_bad - ev.streak) / ev.good_rn
    needed = unlikely_streak(earlier_rate, config.streak_surprise)
    return max(config.min_break_runs, math.ceil(needed))


def is_change_point(ev: Evidence, config: Config = DEFAULTS) -> bool:
    """The default branch broke at a point and has been bad ever since.

    Every run of the streak failed every attempt, except at most one that a retry rescued:
    a flaky test's last flake often opens the streak its break then continues."""
    failed_through = ev.streak - ev.streak_flaky
    return ev.good_rn > 0 and ev.streak_flaky <= 1 and failed_through >= required_streak(ev, config)


def clean_tail_chance(bad: int, before: int, tail: int) -> float:
    """Chance that `bad` runs placed at random among `before + tail` all miss the last `tail`:
    C(before, bad) / C(before + tail, bad) (1.0 without a bad run)."""
    if bad <= 0:
        return 1.0
    if bad > before:
        return 0.0
    return math.exp(log_choose(before, bad) - log_choose(before + tail, bad))


def clean_runs_needed(ev: Evidence, config: Config = DEFAULTS) -> int:
    """Clean runs in a row after the last failure that make the failures history (rule 4)."""
    before = ev.runs - ev.clean_tail
    if ev.failed_runs <= 0 or before <= 0:  # no failure to resolve (rule 2 took it)
        return config.n_min
    low, high = 0, 1
    while clean_tail_chance(ev.failed_runs, before, high) >= config.false_resolution_rate:
        low, high = high, high * 2
    while high - low > 1:  # the chance falls as the tail grows: the first tail under the bar
        middle = (low + high) // 2
        if clean_tail_chance(ev.failed_runs, before, middle) < config.false_resolution_rate:
            high = middle
        else:
            low = middle
    return max(config.n_min, high)


def current_high(scores: Scores, config: Config = DEFAULTS) -> float:
    """Wilson upper bound of the bad-run rate in the current regime."""
    return wilson_interval(scores.current_bad_runs, scores.current_runs, config.z)[1]


def is_rare(scores: Scores, config: Config = DEFAULTS) -> bool:
    """Rule 4b: the current bad-run rate is surely below the rare-flake floor."""
    return current_high(scores, config) < config.rare_flake_rate


def settle(scores: Scores, verdict: str) -> Scores:
    """The scores as listed: a healthy test blocks nothing now, so its damage is 0 (its past
    flakes must not order the All view)."""
    if verdict == "healthy" and scores.damage:
        return dataclasses.replace(scores, damage=0.0)
    return scores


def clean_days(ev: Evidence) -> float:
    """Days from the last failure to the latest counted (clean) run; 0 without a failure."""
    if ev.last_failure_at is None:
        return 0.0
    return max(0.0, days_between(parse_iso(ev.last_failure_at), parse_iso(ev.last_ts)))


def is_resolved(ev: Evidence, config: Config = DEFAULTS) -> bool:
    """Rule 4: the failures lie in the past, behind a clean streak the past rate rarely gives."""
    return (
        ev.failed_runs > 0
        and ev.clean_tail >= clean_runs_needed(ev, config)
        and clean_days(ev) >= config.resolved_min_days
    )


def interleaved_on_main(ev: Evidence, config: Config = DEFAULTS) -> bool:
    """Bad main runs interleaved with good ones (flips), not one long stretch."""
    if ev.main_bad_streaks >= 2:
        return True
    return (
        ev.main_bad_streaks == 1 and ev.main_recoveries >= 1 and ev.main_bad < config.min_break_runs
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _days(days: float, spec: str) -> str:
    """Days as `spec` shows them, "day" after a shown 1: "1 day", "0 days", "1.5 days"."""
    shown = format(days, spec)
    return f"{shown} day" if shown == "1" else f"{shown} days"


def evidence_parts(ev: Evidence, config: Config = DEFAULTS) -> list[str]:
    """The flake evidence a person can check, one phrase each; empty when there is none."""
    parts = []
    if ev.flaky_runs:
        parts.append(f"{_count(ev.flaky_runs, 'flaky run')} of {ev.runs}")
    if ev.mixed_commits:
        parts.append(f"same-commit pass and fail {_count(ev.mixed_commits, 'time')}")
    if interleaved_on_main(ev, config):
        parts.append(f"{_count(ev.main_flips, 'flip')} in {_count(ev.main_runs, 'main run')}")
    return parts


def _bad_of(ev: Evidence, scores: Scores) -> str:
    interval = f"Wilson {scores.wilson_low:.2f}-{scores.wilson_high:.2f}"
    return f"{_count(ev.failed_runs, 'bad run')} of {ev.runs} ({interval})"


def judge(
    ev: Evidence,
    scores: Scores,
    *,
    retries: bool,
    first_seen: datetime,
    now: datetime,
    config: Config,
) -> Judgement:
    """Apply the verdict rules of this module's docstring to one test or group."""
    result = _decide(ev, scores, config=config)
    flags = set(result.flags)
    if ev.runs >= config.n_min and scores.flip_rate >= config.alternating_flip_rate:
        flags.add("alternating")
    if first_seen > now - timedelta(days=config.grace_days):
        flags.add("new")
    if scores.blast_radius == config.blast_radius_nongating and not (
        ev.gates_main or ev.gates_branch
    ):
        flags.add("nightly-only")
    if ev.failed_runs > 0 and ev.main_runs > 0 and ev.main_bad == 0:
        flags.add("pr-only")
    if result.verdict == Verdict.FLAKY and not retries:
        flags.add("no-retry")
    result.flags = sorted(flags)
    return result


def _resolved(ev: Evidence, config: Config) -> Judgement:
    when = (ev.last_failure_at or "")[:10]
    return Judgement(
        Verdict.HEALTHY,
        f"{_count(ev.failed_runs, 'bad run')}, the last on {when}; "
        f"{_count(ev.clean_tail, 'clean run')} since, over {_days(clean_days(ev), '.0f')} "
        f"(>= {clean_runs_needed(ev, config)} needed after "
        f"{_count(ev.failed_runs, 'bad run')} in {ev.runs - ev.clean_tail})",
        ["resolved"],
    )


def _not_yet_resolved(ev: Evidence, config: Config) -> str:
    """Why a quiet spell is not a resolution yet; empty unless it is at least N_min runs."""
    if ev.clean_tail < config.n_min:
        return ""
    return (
        f"; clean for the last {_count(ev.clean_tail, 'run')} over "
        f"{_days(clean_days(ev), '.0f')}, {_count(clean_runs_needed(ev, config), 'run')} and "
        f"{_days(config.resolved_min_days, 'g')} needed to call it resolved"
    )


def _decide(ev: Evidence, scores: Scores, *, config: Config) -> Judgement:
    if ev.runs < config.n_min:
        return Judgement(
            Verdict.INSUFFICIENT, f"{_count(ev.runs, 'counted run')}; {config.n_min} needed"
        )
    if ev.failed_runs == 0:
        return Judgement(Verdict.HEALTHY, f"0 bad runs of {ev.runs}")
    if is_change_point(ev, config):
        return _regression(ev, scores, f"bad on main for the last {_count(ev.streak, 'run')}")
    if is_resolved(ev, config):
        return _resolved(ev, config)
    parts = evidence_parts(ev, config)
    if parts and is_rare(scores, config):
        bad, runs = scores.current_bad_runs, scores.current_runs
        return Judgement(
            Verdict.HEALTHY,
            f"rare flake: {_count(bad, 'bad run')} of {runs} "
            f"(rate at most {current_high(scores, config):.2%} < {config.rare_flake_rate:.0%}); "
            + ", ".join(parts),
            ["rare-flake"],
        )
    if scores.wilson_low >= config.regression_low:
        return _regression(ev, scores, f"failing almost always: {_bad_of(ev, scores)}")
    if scores.wilson_low >= config.flaky_low_max:
        if parts:
            reason = f"{_bad_of(ev, scores)}; " + ", ".join(parts) + _not_yet_resolved(ev, config)
            return Judgement(Verdict.FLAKY, reason, ["high-rate"])
        return _regression(ev, scores, f"failing mostly, no flake evidence: {_bad_of(ev, scores)}")
    if parts:
        if ev.flaky_runs and ev.main_bad == ev.failed_runs:
            parts[0] += " on main"
        return Judgement(Verdict.FLAKY, ", ".join(parts) + _not_yet_resolved(ev, config))
    if scores.wilson_high < config.healthy_high:
        return Judgement(Verdict.HEALTHY, f"rare: {_bad_of(ev, scores)}")
    if ev.streak > 0 and ev.streak_flaky == 0:
        result = _regression(
            ev,
            scores,
            f"bad on main for the last {_count(ev.streak, 'run')}",
            caveat="too few to be sure",
        )
        result.flags.append("suspected")
        return result
    return Judgement(
        Verdict.HEALTHY,
        f"{_bad_of(ev, scores)} without flake evidence "
        "(no retry pass, no same-commit pass and fail, no flips on main)",
    )


def _regression(ev: Evidence, scores: Scores, what: str, caveat: str = "") -> Judgement:
    """A regression judgement, with the default branch's change point when there is one (the
    caveat, if any, ends the reason: after the commits it qualifies)."""
    first_bad = ev.first_bad_commit if ev.streak > 0 else None
    last_good = ev.last_good_commit if ev.streak > 0 else None
    since = f" since commit {first_bad}" if first_bad else ""
    good = f" (last good {last_good})" if last_good else ""
    tail = f", {caveat}" if caveat else ""
    return Judgement(Verdict.REGRESSION, f"{what}{since}{good}{tail}", [], first_bad, last_good)
