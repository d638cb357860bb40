"""The SQL that selects counted runs and aggregates them per test, per family, per signature.

Everything here aggregates inside SQLite (GROUP BY and window functions); Python only sees
one row per test or group. flaketui.core.scoring.aggregates runs it over a whole history; `ANALYSIS`
over `TEST_UNITS` / `FAMILY_UNITS` also judges one target (flaketui.core.scoring.series does).
Sequences are ordered by (ts, run id); ties in time are broken by ingest order.

Counted runs, as of `now`:
- the run's `ts` lies in the window `(now - window_days, now]`;
- the test-run is not `skipped` and its run's commit did not edit the test's file (`edited`);
- the run is not an incident: `runs.incident` is NULL (flaketui.core.history.incidents tags the runs
  its window and signature rules match, so the tag is the single source of truth);
- the run is not a `flaketui diagnose` experiment (`runs.source = 'diagnose'`);
- interrupted runs count: every recorded attempt really happened.

Pooling rule for groups (families and signature groups): a group run is a run in which any
member ran; it is bad if any member's first attempt failed, flaky if any member was flaky,
and its attempts are the most any member made. So runs, runs_per_week and damage read as
"merges this group blocked", never as a sum over members.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from flaketui.core.config import Config
from flaketui.core.timeutil import to_iso

LN2 = math.log(2.0)


def counted_runs_cte(
    now: datetime,
    config: Config,
    *,
    suite: str | None = None,
    branch_kind: str | None = None,
    test_ids: Sequence[str] | None = None,
    test_pks: Sequence[int] | None = None,
    name: str = "counted",
) -> tuple[str, dict[str, Any]]:
    """CTE text `<name>_runs AS (...), <name> AS (...)` and its named parameters.

    Use it as `f"WITH {cte} SELECT ... FROM {name} ..."`. Columns of `<name>`: test (tests.id),
    run (runs.id), ts, outcome, bad, attempts, failed_attempts, worker_id, signature
    (signatures.id), first_duration_ms, first_timeout_ms, first_position (of the test's first
    attempt in the run), suite, branch_kind, commit_sha, worker_count, and per run: weight (the
    recency weight as of now), is_main (0/1), gating (0/1: suite not non-gating).
    `test_ids` (tests.test_id) or `test_pks` (tests.id) restrict it to some tests and drive the
    scan from them (index range reads instead of a full scan). Parameters are named
    `:<name>_...` so several CTEs can share one statement.
    """
    params: dict[str, Any] = {
        f"{name}_start": to_iso(now - timedelta(days=config.window_days)),
        f"{name}_end": to_iso(now),
        f"{name}_decay": -LN2 / config.half_life_days,
        f"{name}_main_weight": config.main_weight,
        f"{name}_other_weight": config.other_weight,
        f"{name}_non_gating": json.dumps(list(config.non_gating_suites)),
    }
    run_filters = ""
    if suite is not None:
        run_filters += f" AND r.suite = :{name}_suite"
        params[f"{name}_suite"] = suite
    if branch_kind is not None:
        run_filters += f" AND r.branch_kind = :{name}_branch_kind"
        params[f"{name}_branch_kind"] = branch_kind
    focus = ""
    source = f"test_runs tr CROSS JOIN {name}_runs cr ON cr.id = tr.run"
    if test_ids is not None or test_pks is not None:
        if test_ids is not None:
            params[f"{name}_tests"] = json.dumps(list(test_ids))
            picked = (
                f"SELECT id FROM tests WHERE test_id IN "
                f"(SELECT value FROM json_each(:{name}_tests))"
            )
        else:
            params[f"{name}_pks"] = json.dumps([int(pk) for pk in test_pks or ()])
            picked = f"SELECT DISTINCT value FROM json_each(:{name}_pks)"
        focus = f"{name}_focus(test) AS MATERIALIZED ({picked}),"
        # CROSS JOIN fixes the join order: focused tests first, then their rows by key.
        source = (
            f"{name}_focus f CROSS JOIN test_runs tr ON tr.test = f.test "
            f"CROSS JOIN {name}_runs cr ON cr.id = tr.run"
        )
    sql = f"""{focus}
{name}_runs AS MATERIALIZED (
    SELECT r.id, r.suite, r.branch_kind, r.commit_sha, r.worker_count,
        r.branch_kind = 'main' AS is_main,
        r.suite NOT IN (SELECT value FROM json_each(:{name}_non_gating)) AS gating,
        exp(:{name}_decay * max(0.0, julianday(:{name}_end) - julianday(r.ts)))
            * CASE WHEN r.branch_kind = 'main' THEN :{name}_main_weight
                   ELSE :{name}_other_weight END AS weight
    FROM runs r
    WHERE r.ts > :{name}_start AND r.ts <= :{name}_end AND r.incident IS NULL
        AND r.source <> 'diagnose'{run_filters}
),
{name} AS (
    SELECT tr.test, tr.run, tr.ts, tr.outcome, tr.bad, tr.attempts, tr.failed_attempts,
           tr.worker_id, tr.signature, tr.first_duration_ms, tr.first_timeout_ms,
           tr.first_position, cr.suite, cr.branch_kind, cr.commit_sha,
           cr.worker_count, cr.weight, cr.is_main, cr.gating
    FROM {source}
    WHERE tr.ts > :{name}_start AND tr.ts <= :{name}_end
      AND tr.outcome <> 'skipped' AND tr.edited = 0
)"""
    return sql, params


# Unit rows: one row per (key, run) with the columns the analysis below needs.
TEST_UNITS = """
units AS (
    SELECT test AS key, run, ts, bad, outcome = 'flaky' AS flaky, outcome <> 'pass' AS failed_any,
           attempts, commit_sha, branch_kind, suite
    FROM counted
)"""

FAMILY_UNITS = """
families AS (SELECT DISTINCT parent FROM tests WHERE test_id <> parent),
units AS (
    SELECT t.parent AS key, c.run, min(c.ts) AS ts, max(c.bad) AS bad,
           max(c.outcome = 'flaky') AS flaky, max(c.outcome <> 'pass') AS failed_any,
           max(c.attempts) AS attempts, min(c.commit_sha) AS commit_sha,
           min(c.branch_kind) AS branch_kind, min(c.suite) AS suite
    FROM counted c JOIN tests t ON t.id = c.test
    WHERE t.parent IN (SELECT parent FROM families)
    GROUP BY t.parent, c.run
)"""

SIGNATURE_UNITS = """
members AS MATERIALIZED (
    SELECT CAST(key AS INTEGER) AS test, value AS sig FROM json_each(:members)
),
units AS (
    SELECT m.sig AS key, c.run, min(c.ts) AS ts, max(c.bad) AS bad,
           max(c.outcome = 'flaky') AS flaky, max(c.outcome <> 'pass') AS failed_any,
           max(c.attempts) AS attempts, min(c.commit_sha) AS commit_sha,
           min(c.branch_kind) AS branch_kind, min(c.suite) AS suite
    FROM counted c JOIN members m ON m.test = c.test
    GROUP BY m.sig, c.run
)"""

# Per-key analysis over `units`: counts, flips (LAG), the clean tail, recency weights, the
# same-commit evidence and the default branch's trailing bad streak (the change point).
ANALYSIS = """
seq AS (
    SELECT u.*,
        lag(bad) OVER by_time AS prev_bad,
        sum(failed_any) OVER (
            PARTITION BY key ORDER BY ts, run ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING
        ) AS failures_from_here,
        exp(:neg_ln2_per_half_life * max(0.0, julianday(:now) - julianday(ts)))
            * CASE WHEN branch_kind = 'main' THEN :main_weight ELSE :other_weight END AS weight
    FROM units u
    WINDOW by_time AS (PARTITION BY key ORDER BY ts, run)
),
agg AS (
    SELECT key, count(*) AS runs, sum(flaky) AS flaky_runs, sum(bad) AS failed_runs,
        sum(prev_bad IS NOT NULL AND prev_bad <> bad) AS flips,
        sum(failures_from_here = 0) AS clean_tail,
        sum(weight * failed_any) AS weighted_bad, sum(weight) AS weighted_total,
        min(ts) AS first_ts, max(ts) AS last_ts,
        max(CASE WHEN failed_any THEN ts END) AS last_failure_at,
        max(attempts) AS max_attempts,
        max(branch_kind = 'main' AND suite NOT IN (SELECT value FROM json_each(:non_gating)))
            AS gates_main,
        max(branch_kind <> 'main' AND suite NOT IN (SELECT value FROM json_each(:non_gating)))
            AS gates_branch
    FROM seq GROUP BY key
),
mixed AS (
    SELECT key, count(*) AS mixed_commits FROM (
        SELECT key FROM units WHERE commit_sha IS NOT NULL
        GROUP BY key, commit_sha HAVING min(bad) = 0 AND max(bad) = 1
    ) GROUP BY key
),
main_seq AS (
    SELECT key, run, ts, bad, flaky, commit_sha,
        row_number() OVER (PARTITION BY key ORDER BY ts, run) AS rn,
        lag(bad) OVER (PARTITION BY key ORDER BY ts, run) AS prev_bad
    FROM units WHERE branch_kind = 'main'
),
main_agg AS (
    SELECT key, count(*) AS main_runs, sum(bad) AS main_bad,
        sum(bad = 1 AND coalesce(prev_bad, 0) = 0) AS main_bad_streaks,
        sum(bad = 0 AND prev_bad = 1) AS main_recoveries,
        sum(prev_bad IS NOT NULL AND prev_bad <> bad) AS main_flips,
        max(CASE WHEN bad = 0 THEN rn END) AS good_rn
    FROM main_seq GROUP BY key
),
tail AS (
    SELECT m.key, count(*) AS streak, sum(m.flaky) AS streak_flaky, min(m.rn) AS first_rn
    FROM main_seq m JOIN main_agg g ON g.key = m.key
    WHERE m.rn > coalesce(g.good_rn, 0)
    GROUP BY m.key
)
SELECT a.*, coalesce(x.mixed_commits, 0) AS mixed_commits,
    coalesce(g.main_runs, 0) AS main_runs, coalesce(g.main_bad, 0) AS main_bad,
    coalesce(g.main_bad_streaks, 0) AS main_bad_streaks,
    coalesce(g.main_recoveries, 0) AS main_recoveries,
    coalesce(g.main_flips, 0) AS main_flips, coalesce(g.good_rn, 0) AS good_rn,
    coalesce(t.streak, 0) AS streak, coalesce(t.streak_flaky, 0) AS streak_flaky,
    fb.commit_sha AS first_bad_commit, fb.ts AS first_bad_at,
    lg.commit_sha AS last_good_commit, lg.ts AS last_good_at
FROM agg a
LEFT JOIN mixed x ON x.key = a.key
LEFT JOIN main_agg g ON g.key = a.key
LEFT JOIN tail t ON t.key = a.key
LEFT JOIN main_seq fb ON fb.key = a.key AND fb.rn = t.first_rn
LEFT JOIN main_seq lg ON lg.key = a.key AND lg.rn = g.good_rn
"""


@dataclass(slots=True)
class Evidence:
    """Aggregated counted runs of one test or group, as returned by the analysis query."""

    key: Any  # tests.id for tests, parent id for families, signature hash for groups
    runs: int
    flaky_runs: int
    failed_runs: int
    flips: int
    clean_tail: int  # counted runs after the last failed one (all runs when none failed)
    weighted_bad: float
    weighted_total: float
    first_ts: str
    last_ts: str
    last_failure_at: str | None
    max_attempts: int
    gates_main: int
    gates_branch: int
    mixed_commits: int  # commits with both a good and a bad run
    main_runs: int
    main_bad: int
    main_bad_streaks: int  # separate stretches of bad runs on the default branch
    main_recoveries: int  # bad -> good transitions on the default branch
    main_flips: int
    good_rn: int  # position of the last good main run (0: none); = main runs before the streak
    streak: int  # trailing bad main runs
    streak_flaky: int  # of which flaky (a regression fails every attempt)
    first_bad_commit: str | None
    first_bad_at: str | None
    last_good_commit: str | None
    last_good_at: str | None
    suite_min: str | None = None  # first and last suite name among the runs (tests only)
    suite_max: str | None = None
    suites: dict[str, tuple[int, int]] = field(default_factory=dict)  # suite -> (runs, attempts)


def ensure_sql_functions(conn: sqlite3.Connection) -> None:
    """Provide exp() and ln() when SQLite was built without its math functions."""
    try:
        conn.execute("SELECT exp(0), ln(1)").fetchone()
    except sqlite3.OperationalError:
        conn.create_function("exp", 1, math.exp, deterministic=True)
        conn.create_function("ln", 1, math.log, deterministic=True)


def analysis_params(now: datetime, config: Config) -> dict[str, Any]:
    return {
        "now": to_iso(now),
        "neg_ln2_per_half_life": -LN2 / config.half_life_days,
        "main_weight": config.main_weight,
        "other_weight": config.other_weight,
        "non_gating": json.dumps(list(config.non_gating_suites)),
    }
