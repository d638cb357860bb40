"""Daily series: the recency score as of each day's end, and the verdict changes between days.

The recency weight of a run decays as 0.5 ** (age / half_life), so it factors into a part that
depends only on the run (its weight as of `now`) and one that depends only on the as-of time:
weight(as_of) = weight(now) * 2 ** ((now - as_of) / half_life). SQLite therefore sums weights as
of `now` per (test, day), once, and each day's score is a sum over the days in its window.
"""

from __future__ import annotations

import dataclasses
import json
import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from itertools import accumulate
from typing import Any

from flaketui.core.config import Config
from flaketui.core.history.dbhandle import Connected
from flaketui.core.rollups import build as rollups
from flaketui.core.rollups.evidence import (
    ANALYSIS,
    FAMILY_UNITS,
    LN2,
    SIGNATURE_UNITS,
    TEST_UNITS,
    Evidence,
    analysis_params,
    counted_runs_cte,
    ensure_sql_functions,
)
from flaketui.core.rollups.filtered import Timeline
from flaketui.core.rollups.read import WindowRun
from flaketui.core.scoring.aggregates import rate_changes
from flaketui.core.scoring.detail import Target, resolve_target
from flaketui.core.scoring.results import Verdict
from flaketui.core.scoring.statistics import RateChange, recency_score
from flaketui.core.scoring.verdicts import compute_scores, current_of, judge
from flaketui.core.timeutil import days_between, parse_iso, to_iso


@dataclass(slots=True, frozen=True)
class VerdictChange:
    """A test's verdict changed during `day` (judged as of that day's end)."""

    day: date
    before: Verdict  # the verdict as of the previous day's end
    after: Verdict
    reason: str  # the reason of the new verdict


# One row per (key, run): a family pools its params by run, as the scorer does.
_TEST_UNITS = """
units AS (
    SELECT t.test_id AS key, c.run, c.ts, c.outcome <> 'pass' AS failed_any, c.branch_kind
    FROM counted c JOIN tests t ON t.id = c.test
    WHERE :keys IS NULL OR t.test_id IN (SELECT value FROM json_each(:keys))
)"""

# A family is every test of a parametrized parent, its unparametrized test included (as the
# family's evidence and family_day_seq pool it).
_FAMILY_UNITS = """
units AS (
    SELECT t.parent AS key, c.run, min(c.ts) AS ts, max(c.outcome <> 'pass') AS failed_any,
           min(c.branch_kind) AS branch_kind
    FROM counted c JOIN tests t ON t.id = c.test
    WHERE t.parent IN (SELECT parent FROM tests WHERE test_id <> parent)
      AND (:keys IS NULL OR t.parent IN (SELECT value FROM json_each(:keys)))
    GROUP BY t.parent, c.run
)"""

# A day's bucket holds the runs of (its previous midnight, its own end at the next midnight],
# so that "as of the end of day D" covers whole buckets; `recent` marks the runs inside the
# window as of `now` itself, whose start falls inside a bucket.
_DAILY = """
SELECT key,
    CASE WHEN substr(ts, 12, 8) = '00:00:00' THEN date(ts, '-1 day') ELSE substr(ts, 1, 10) END
        AS day,
    ts > :now_start AS recent,
    sum(weight * failed_any) AS weighted_bad, sum(weight) AS weighted_total
FROM (
    SELECT key, ts, failed_any,
        exp(:neg_ln2_per_half_life * max(0.0, julianday(:now) - julianday(ts)))
            * CASE WHEN branch_kind = 'main' THEN :main_weight ELSE :other_weight END AS weight
    FROM units
)
GROUP BY key, day, recent
"""


def _day_ends(now: datetime, days: int) -> list[datetime]:
    """The as-of times: the end of each of the last `days` days, the last one being `now`."""
    today = now.astimezone(UTC).date()
    ends = [
        datetime.combine(today - timedelta(days=back - 1), time(0), tzinfo=UTC)
        for back in range(days - 1, 0, -1)
    ]
    return [*ends, now]


def daily_recency_scores(
    db: Connected,
    test_ids: Sequence[str] | None,
    *,
    now: datetime,
    days: int,
    config: Config,
    family: bool = False,
) -> dict[str, list[float]]:
    """Recency score as of the end of each of the last `days` days (oldest first; last = now).

    Keys are test ids (or family parents with family=True); test_ids None means every test (or
    family) with a counted run in the widened window. Requested ids without runs get zeros.
    """
    if days < 1:
        return {key: [] for key in test_ids or ()}
    if test_ids is not None:
        fast = _from_rollups(db, test_ids, now, days, config, family=family)
        if fast is not None:
            return fast
    units = _FAMILY_UNITS if family else _TEST_UNITS
    keys = None if test_ids is None else json.dumps(list(test_ids))
    return _daily_from_units(db, units, {"keys": keys}, test_ids, now=now, days=days, config=config)


def daily_group_scores(
    db: Connected,
    members: Mapping[int, str],
    *,
    now: datetime,
    days: int,
    config: Config,
) -> dict[str, list[float]]:
    """Daily recency scores of pooled groups (oldest first; last = now), by the report's rule:
    a group run is a run any member ran in, bad for the score if any member failed in it.

    members maps a test's primary key to its group's key (a family's parent, a signature hash);
    every key in it gets a series (zeros without runs). From the rollups' per-day run lists
    when they can answer, else from the raw rows.
    """
    keys = sorted(set(members.values()))
    if days < 1 or not keys:
        return {key: [] for key in keys}
    sums = _group_sums_from_rollups(db, members, now, days, config)
    if sums is not None:
        return _series_from_sums(*sums, keys, now=now, days=days, config=config)
    pairs = json.dumps({str(pk): key for pk, key in members.items()})
    return _daily_from_units(
        db,
        SIGNATURE_UNITS,
        {"members": pairs},
        keys,
        now=now,
        days=days,
        config=config,
        test_pks=sorted(members),
    )


def _group_sums_from_rollups(
    db: Connected,
    members: Mapping[int, str],
    now: datetime,
    days: int,
    config: Config,
) -> tuple[dict[str, dict[date, list[float]]], dict[str, list[float]]] | None:
    """Per group, the day buckets' weight sums as _DAILY makes them, from the rollups' run
    lists over the widened window; None when the rollups cannot answer."""
    from flaketui.core.rollups import read as rollup_read

    wide = dataclasses.replace(config, window_days=config.window_days + days)
    if not rollups.answers(db.conn, wide) or float(wide.window_days) != int(wide.window_days):
        return None
    window = rollup_read.Window.of(db.conn, now, wide)
    now_start = to_iso(now - timedelta(days=config.window_days))
    decay = -LN2 / config.half_life_days
    # Per counted-eligible run (incident runs never count): its weight as of now, its day
    # bucket (as _DAILY: a run at midnight closes the previous day's) and whether it is recent.
    runs: dict[int, tuple[float, date, bool]] = {}
    for pk, ts, kind in db.conn.execute(
        "SELECT id, ts, branch_kind FROM runs"
        " WHERE ts > :start AND ts <= :now AND incident IS NULL AND source <> 'diagnose'",
        window.params,
    ):
        when = parse_iso(ts)
        weight = math.exp(decay * max(0.0, days_between(when, now)))
        weight *= config.main_weight if kind == "main" else config.other_weight
        day = when.date() - timedelta(days=1) if ts[11:19] == "00:00:00" else when.date()
        runs[int(pk)] = (weight, day, ts > now_start)
    per_day: dict[str, dict[date, list[float]]] = {}
    at_now: dict[str, list[float]] = {}
    for key, (ran, _bad, _flaky, failed) in rollup_read.group_units(
        db.conn, members, window
    ).items():
        for run in ran.intersection(runs):
            weight, day, recent = runs[run]
            _add_sums(per_day, at_now, key, day, recent, weight if run in failed else 0.0, weight)
    return per_day, at_now


def _daily_from_units(
    db: Connected,
    units: str,
    unit_params: dict[str, object],
    keys_wanted: Sequence[str] | None,
    *,
    now: datetime,
    days: int,
    config: Config,
    test_pks: Sequence[int] | None = None,
) -> dict[str, list[float]]:
    """Daily recency scores per key of a `units` CTE (key, run, ts, failed_any, branch_kind);
    test_pks, when given, restricts the scan to those tests' rows."""
    # One CTE wide enough for the oldest day's window; each day then picks its own buckets.
    wide = dataclasses.replace(config, window_days=config.window_days + days)
    cte, params = counted_runs_cte(now, wide, test_pks=test_pks)
    params.update(
        {
            **unit_params,
            "now": to_iso(now),
            "now_start": to_iso(now - timedelta(days=config.window_days)),
            "neg_ln2_per_half_life": -LN2 / config.half_life_days,
            "main_weight": config.main_weight,
            "other_weight": config.other_weight,
        }
    )
    ensure_sql_functions(db.conn)
    # key -> day -> [weighted_bad, weighted_total]; key -> the same sums as of `now` exactly.
    per_day: dict[str, dict[date, list[float]]] = {}
    at_now: dict[str, list[float]] = {}
    for key, day, recent, w_bad, w_total in db.conn.execute(
        f"WITH {cte}, {units} {_DAILY}", params
    ):
        _add_sums(per_day, at_now, key, date.fromisoformat(day), bool(recent), w_bad, w_total)
    return _series_from_sums(per_day, at_now, keys_wanted, now=now, days=days, config=config)


def _add_sums(
    per_day: dict[str, dict[date, list[float]]],
    at_now: dict[str, list[float]],
    key: str,
    day: date,
    recent: bool,
    w_bad: float,
    w_total: float,
) -> None:
    """Add weights (as of now) to a key's day bucket, and to its as-of-now sums if recent."""
    sums = per_day.setdefault(key, {}).setdefault(day, [0.0, 0.0])
    sums[0] += w_bad
    sums[1] += w_total
    if recent:
        now_sums = at_now.setdefault(key, [0.0, 0.0])
        now_sums[0] += w_bad
        now_sums[1] += w_total


def _series_from_sums(
    per_day: dict[str, dict[date, list[float]]],
    at_now: dict[str, list[float]],
    keys_wanted: Sequence[str] | None,
    *,
    now: datetime,
    days: int,
    config: Config,
) -> dict[str, list[float]]:
    """Each key's daily scores from its per-day weight sums (taken as of now)."""
    ends = _day_ends(now, days)
    # Buckets from the oldest window's first day on; prefix sums give each window in O(1).
    origin = ends[0].date() - timedelta(days=config.window_days)
    span = (ends[-1].date() - origin).days + 1
    keys = list(keys_wanted) if keys_wanted is not None else sorted(per_day)
    out: dict[str, list[float]] = {}
    for key in keys:
        cum_bad = [0.0] * (span + 1)
        cum_total = [0.0] * (span + 1)
        for day, (bad, total) in per_day.get(key, {}).items():
            index = (day - origin).days
            if 0 <= index < span:
                cum_bad[index + 1] += bad
                cum_total[index + 1] += total
        for index in range(span):
            cum_bad[index + 1] += cum_bad[index]
            cum_total[index + 1] += cum_total[index]
        series = []
        for as_of in ends[:-1]:
            last = (as_of.date() - origin).days  # the bucket ending at as_of, plus one
            first = last - config.window_days
            series.append(
                _score_as_of(
                    cum_bad[last] - cum_bad[first],
                    cum_total[last] - cum_total[first],
                    days_between(as_of, now),
                    config,
                )
            )
        now_bad, now_total = at_now.get(key, [0.0, 0.0])
        series.append(recency_score(now_bad, now_total, config.laplace_alpha))
        out[key] = series
    return out


# Per (test, day) recency sums from the day rows (all suites), relative to the day's start;
# _from_rollups scales them to the origin's start (sum over runs of w 2^((ts - origin)/h)),
# so that prefix sums give every as-of window. The scale depends on the day alone: computed
# once per day in Python, not per row in SQL (the same doubles: idx is exact, exp is libm's).
_ROLLUP_DAYS = """
SELECT {key}, CAST(round(julianday(day) - julianday(:origin)) AS INTEGER) AS idx,
    :main_weight * main_w_bad + :other_weight * other_w_bad AS w_bad,
    :main_weight * main_w + :other_weight * other_w AS w_total
FROM {table}
WHERE {key} IN (SELECT value FROM json_each(:tests)) AND day >= :origin AND day <= :today
ORDER BY {key}
"""

# Counted runs of the given tests at given instants (midnights, and the window's raw edge
# days), with their weights as of `now`; the rollups put a run at midnight on its own day.
_RAW_AT = """
SELECT tr.test, tr.ts, tr.outcome <> 'pass' AS failed_any,
    exp(-:ln2_per_h * max(0.0, julianday(:now) - julianday(tr.ts)))
        * CASE WHEN r.branch_kind = 'main' THEN :main_weight ELSE :other_weight END AS weight
FROM runs r CROSS JOIN test_runs tr ON tr.run = r.id
WHERE r.incident IS NULL AND r.source <> 'diagnose' AND tr.outcome <> 'skipped' AND tr.edited = 0
  AND tr.test IN (SELECT value FROM json_each(:tests)) AND {where}
"""
# The same per family: its units pooled by run (a run is failed if any member failed in it).
_FAMILY_RAW_AT = """
SELECT t.parent, r.ts, max(tr.outcome <> 'pass') AS failed_any,
    exp(-:ln2_per_h * max(0.0, julianday(:now) - julianday(r.ts)))
        * CASE WHEN r.branch_kind = 'main' THEN :main_weight ELSE :other_weight END AS weight
FROM runs r CROSS JOIN test_runs tr ON tr.run = r.id CROSS JOIN tests t ON t.id = tr.test
WHERE r.incident IS NULL AND r.source <> 'diagnose' AND tr.outcome <> 'skipped' AND tr.edited = 0
  AND t.parent IN (SELECT value FROM json_each(:tests))
  AND t.parent IN (SELECT parent FROM tests WHERE test_id <> parent) AND {where}
GROUP BY t.parent, r.id
"""


def _from_rollups(
    db: Connected,
    test_ids: Sequence[str],
    now: datetime,
    days: int,
    config: Config,
    *,
    family: bool = False,
) -> dict[str, list[float]] | None:
    """daily_recency_scores of tests (or families: family_day_seq, units pooled by run) from
    the rollups' day rows, or None when they cannot answer.

    As of a midnight M, the window (M - window, M] is the whole days before M, less the runs
    at the window's first instant, plus the runs at M itself (kept on M's day by the rollups).
    As of now, the rollup days and raw edge days of rollups.window_params.
    """
    if not rollups.answers(db.conn, config) or float(config.window_days) != int(config.window_days):
        return None
    ensure_sql_functions(db.conn)
    if family:  # keyed by the parent itself
        pks: dict[str, Any] = {key: key for key in test_ids}
        table, key_column, raw_at = "family_day_seq", "parent", _FAMILY_RAW_AT
    else:
        pks = dict(
            db.conn.execute(
                "SELECT test_id, id FROM tests WHERE test_id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(test_ids)),),
            ).fetchall()
        )
        table, key_column, raw_at = "test_day_seq", "test", _RAW_AT
    ends = _day_ends(now, days)
    window = int(config.window_days)
    origin = ends[0].date() - timedelta(days=window)
    today = now.astimezone(UTC).date()
    span = (today - origin).days + 1
    ln2_h = LN2 / config.half_life_days
    params = {
        **rollups.window_params(db.conn, now, config),
        "tests": json.dumps(sorted(pks.values())),
        "origin": origin.isoformat(),
        "today": today.isoformat(),
        "ln2_per_h": ln2_h,
    }
    zeros = [0.0] * (span + 1)
    scale = [math.exp(ln2_h * idx) for idx in range(span)]
    # Per test, the cumulative weights by day index + 1, as tuples of floats: the collector
    # stops tracking those, where a pair of lists per test, alive until every test is read,
    # lengthened each full collection (a pause of the whole app) by all their items.
    cum: dict[int, tuple[tuple[float, ...], tuple[float, ...]]] = {}
    day_bad, day_total = zeros.copy(), zeros.copy()  # the current test's day sums
    current = None
    rollup_days = _ROLLUP_DAYS.format(key=key_column, table=table)
    for test, idx, w_bad, w_total in db.conn.execute(rollup_days, params):
        if test != current:
            if current is not None:
                cum[current] = (tuple(accumulate(day_bad)), tuple(accumulate(day_total)))
                day_bad[:], day_total[:] = zeros, zeros
            current = test
        day_bad[idx + 1], day_total[idx + 1] = w_bad * scale[idx], w_total * scale[idx]
    if current is not None:
        cum[current] = (tuple(accumulate(day_bad)), tuple(accumulate(day_total)))
    midnights: dict[int, list[tuple[str, int, float]]] = {}
    for test, ts, failed_any, weight in db.conn.execute(
        raw_at.format(where="substr(r.ts, 12) = '00:00:00Z' AND r.ts >= :origin AND r.ts <= :now"),
        params,
    ):
        midnights.setdefault(test, []).append((ts, failed_any, weight))
    edge: dict[int, list[float]] = {}
    for test, _ts, failed_any, weight in db.conn.execute(
        raw_at.format(where=rollups.EDGE_RUNS), params
    ):
        sums = edge.setdefault(test, [0.0, 0.0])
        sums[0] += weight * failed_any
        sums[1] += weight
    # Per as-of midnight: its last whole day, decay factor and the instants bounding it.
    points = [
        (
            (as_of.date() - origin).days,
            math.exp(-ln2_h * (as_of.date() - origin).days),
            to_iso(as_of - timedelta(days=window)),
            to_iso(as_of),
            math.exp(ln2_h * days_between(as_of, now)),
        )
        for as_of in ends[:-1]
    ]
    # As of now: rollup days lo..hi (indices), rescaled from the origin's start to now.
    lo = (date.fromisoformat(params["lo_day"]) - origin).days
    hi = (date.fromisoformat(params["hi_day"]) - origin).days + 1
    now_factor = math.exp(-ln2_h * days_between(datetime.combine(origin, time(0), UTC), now))
    empty = (tuple(zeros), tuple(zeros))
    out: dict[str, list[float]] = {}
    alpha = config.laplace_alpha
    for test_id in test_ids:
        pk = pks.get(test_id, -1)
        bad, total = cum.get(pk, empty)
        at_midnight = midnights.get(pk, ())
        series = []
        for last, factor, lo_ts, hi_ts, rescale in points:
            w_bad = (bad[last] - bad[last - window]) * factor
            w_total = (total[last] - total[last - window]) * factor
            for ts, failed_any, weight in at_midnight:
                sign = 1.0 if ts == hi_ts else -1.0 if ts == lo_ts else 0.0
                w_bad += sign * weight * failed_any * rescale
                w_total += sign * weight * rescale
            series.append(recency_score(max(0.0, w_bad), max(0.0, w_total), alpha))
        edge_bad, edge_total = edge.get(pk, [0.0, 0.0])
        w_bad = w_total = 0.0
        if hi > lo:
            w_bad = (bad[hi] - bad[lo]) * now_factor
            w_total = (total[hi] - total[lo]) * now_factor
        series.append(
            recency_score(max(0.0, w_bad + edge_bad), max(0.0, w_total + edge_total), alpha)
        )
        out[test_id] = series
    return out


def _score_as_of(w_bad: float, w_total: float, days_before_now: float, config: Config) -> float:
    """The score from weights taken as of `now`, rescaled to an earlier as-of time."""
    scale = math.exp(LN2 * days_before_now / config.half_life_days)
    return recency_score(max(0.0, w_bad) * scale, max(0.0, w_total) * scale, config.laplace_alpha)


def judge_as_of(
    db: Connected,
    target: Target,
    first_seen: datetime,
    as_of: datetime,
    config: Config,
) -> tuple[Verdict, str]:
    """(verdict, reason) of one test or family as of a moment, by the report's rules, from
    one raw analysis query (verdict_changes reads the units once: this is its reference)."""
    cte, params = counted_runs_cte(as_of, config, test_ids=target.test_ids)
    params.update(analysis_params(as_of, config))
    units = FAMILY_UNITS if target.kind == "family" else TEST_UNITS
    cursor = db.conn.execute(f"WITH {cte},{units},{ANALYSIS}", params)
    names = [col[0] for col in cursor.description]
    rows = cursor.fetchall()
    if not rows:
        return Verdict.INSUFFICIENT, "no counted runs"
    ev = Evidence(**dict(zip(names, rows[0], strict=True)))
    # Retries only change the damage score, never the verdict.
    retries = ev.max_attempts > 1
    current = None
    if ev.failed_runs:
        pks = [
            int(pk)
            for (pk,) in db.conn.execute(
                "SELECT id FROM tests WHERE test_id IN (SELECT value FROM json_each(?))",
                (json.dumps(target.test_ids),),
            )
        ]
        kind = "family" if target.kind == "family" else "test"
        changes = rate_changes(db, as_of, config, kind, pks)
        if ev.key in changes:
            current = current_of(changes[ev.key], config)
    scores = compute_scores(
        ev, retries=retries, first_seen=first_seen, now=as_of, config=config, current=current
    )
    judgement = judge(ev, scores, retries=retries, first_seen=first_seen, now=as_of, config=config)
    return judgement.verdict, judgement.reason


@dataclass(frozen=True, slots=True)
class Unit:
    """One counted run of a test (or family, pooled by run) as the analysis reads it."""

    run: int
    ts: str
    moment: datetime
    bad: int
    flaky: int
    failed_any: int
    attempts: int
    is_main: bool
    commit: str | None
    suite: str


def units_between(
    db: Connected, target: Target, start: datetime, end: datetime, config: Config
) -> list[Unit]:
    """The target's counted units with ts in (start, end] (and up to a day before), in
    (ts, run) order."""
    span = dataclasses.replace(config, window_days=math.ceil(days_between(start, end)))
    cte, params = counted_runs_cte(end, span, test_ids=target.test_ids)
    units = FAMILY_UNITS if target.kind == "family" else TEST_UNITS
    sql = (
        f"WITH {cte},{units} SELECT run, ts, bad, flaky, failed_any, attempts,"
        " branch_kind = 'main', commit_sha, suite FROM units ORDER BY ts, run"
    )
    moments: dict[str, datetime] = {}
    out = []
    for run, ts, bad, flaky, failed_any, attempts, is_main, commit, suite in db.conn.execute(
        sql, params
    ):
        moment = moments.get(ts)
        if moment is None:
            moment = moments[ts] = parse_iso(str(ts))
        out.append(
            Unit(int(run), str(ts), moment, int(bad), int(flaky), int(failed_any),
                  int(attempts), bool(is_main), commit, str(suite))
        )  # fmt: skip
    return out


def _log_likelihood(k: int, n: int) -> float:
    """Bernoulli log-likelihood of k bad in n at their own rate (aggregates._LL's formula)."""
    if 0 < k < n:
        return k * math.log(1.0 * k / n) + (n - k) * math.log(1.0 - 1.0 * k / n)
    return 0.0


def rate_change_of(units: Sequence[Unit]) -> RateChange:
    """aggregates.rate_changes of one key, from its units in the window."""
    per_day: dict[str, list[int]] = {}
    for unit in units:
        counts = per_day.setdefault(unit.ts[:10], [0, 0])
        counts[0] += 1
        counts[1] += unit.bad
    days = sorted(per_day)
    nt = sum(n for n, _ in per_day.values())
    kt = sum(k for _, k in per_day.values())
    whole_ll = _log_likelihood(kt, nt)
    best: tuple[float, str, int, int] | None = None
    nl = kl = 0
    for day in days[:-1]:
        nl += per_day[day][0]
        kl += per_day[day][1]
        ll = _log_likelihood(kl, nl) + _log_likelihood(kt - kl, nt - nl)
        if best is None or ll > best[0]:  # ties: the earliest day
            best = (ll, day, nl, kl)
    bad_days = [day for day in days if per_day[day][1] > 0]
    split_day = best[1] if best else None
    return RateChange(
        runs=nt,
        bad=kt,
        days=len(days),
        first_bad_day=bad_days[0] if bad_days else None,
        whole_ll=whole_ll,
        split_day=split_day,
        runs_before=best[2] if best else 0,
        bad_before=best[3] if best else 0,
        split_ll=best[0] if best else whole_ll,
        first_bad_after=(
            next((day for day in bad_days if day > split_day), None) if split_day else None
        ),
    )


def _judge_days(
    db: Connected,
    target: Target,
    first_seen: datetime,
    ends: Sequence[datetime],
    config: Config,
) -> list[tuple[Verdict, str]]:
    """(verdict, reason) as of each moment of `ends` (ascending), by the report's rules.

    The target's units over the whole span are read once; each moment's evidence is the
    analysis of the units in its window (rollups.filtered.Timeline: the raw-row analysis in
    run order), its rate change the same split as aggregates.rate_changes, over those units.
    """
    units = units_between(
        db, target, ends[0] - timedelta(days=config.window_days), ends[-1], config
    )
    ln2_per_s = math.log(2.0) / config.half_life_days / 86400.0
    stamps = [u.ts for u in units]  # ascending: a window is a slice
    seconds = [u.moment.timestamp() for u in units]
    branch = [config.main_weight if u.is_main else config.other_weight for u in units]
    gating = [u.suite not in config.non_gating_suites for u in units]
    out: list[tuple[Verdict, str]] = []
    for as_of in ends:
        start, end = to_iso(as_of - timedelta(days=config.window_days)), to_iso(as_of)
        lo, hi = bisect_right(stamps, start), bisect_right(stamps, end)
        inside = units[lo:hi]
        if not inside:
            out.append((Verdict.INSUFFICIENT, "no counted runs"))
            continue
        at = as_of.timestamp()
        runs = {
            u.run: WindowRun(
                u.ts, u.commit, u.is_main, u.suite, gating[i],
                math.exp(-ln2_per_s * max(0.0, at - seconds[i])) * branch[i],
            )
            for i, u in enumerate(inside, lo)
        }  # fmt: skip
        sets = (
            {u.run for u in inside},
            {u.run for u in inside if u.bad},
            {u.run for u in inside if u.flaky},
            {u.run for u in inside if u.failed_any},
        )
        ev = Timeline(runs, in_order=True).evidence(
            target.key, sets, max(u.attempts for u in inside)
        )
        assert ev is not None
        # Retries only change the damage score, never the verdict.
        retries = ev.max_attempts > 1
        current = current_of(rate_change_of(inside), config) if ev.failed_runs else None
        scores = compute_scores(
            ev, retries=retries, first_seen=first_seen, now=as_of, config=config, current=current
        )
        judgement = judge(
            ev, scores, retries=retries, first_seen=first_seen, now=as_of, config=config
        )
        out.append((judgement.verdict, judgement.reason))
    return out


def verdict_days(
    db: Connected, test_id: str, *, now: datetime, days: int, config: Config
) -> tuple[datetime, list[datetime], list[tuple[Verdict, str]]]:
    """The target's first sighting, the moments it is judged at for verdict_changes (each
    day's end, one before the first day, `now` last) and its (verdict, reason) at each."""
    target = resolve_target(db, test_id)
    first_seen_text = db.conn.execute(
        "SELECT min(first_seen) FROM tests WHERE test_id IN (SELECT value FROM json_each(?))",
        (json.dumps(target.test_ids),),
    ).fetchone()[0]
    first_seen = parse_iso(str(first_seen_text))
    ensure_sql_functions(db.conn)
    # One extra point before the first day gives that day's starting verdict.
    ends = _day_ends(now, days + 1)
    return first_seen, ends, _judge_days(db, target, first_seen, ends, config)


def verdict_changes(
    db: Connected, test_id: str, *, now: datetime, days: int, config: Config
) -> list[VerdictChange]:
    """Verdict changes of a test (or family) over the last `days` days, oldest first.

    The test is re-judged as of each day's end (and as of `now` for today); a change is
    reported on the day whose end first shows the new verdict.
    """
    _first_seen, ends, judged = verdict_days(db, test_id, now=now, days=days, config=config)
    changes = []
    for (before, _), (after, reason), as_of in zip(judged, judged[1:], ends[1:], strict=False):
        if before != after:
            day = (as_of - timedelta(seconds=1)).date()
            changes.append(VerdictChange(day, before, after, reason))
    return changes
