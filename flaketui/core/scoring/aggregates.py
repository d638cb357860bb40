"""Evidence of every test, family and signature group as of `now`.

With rollups kept (flaketui.core.rollups.build) and no suite or branch filter, everything is read
from them (`_from_rollups`): tests x days rows, not raw results. A report restricted to a suite
or a branch kind reads the rollups' per-day run lists instead (flaketui.core.rollups.filtered).
Without rollups (or with another half-life), two SQL stages over the raw rows:

Stage 1 is one grouped scan of the counted runs (SQL of flaketui.core.rollups.evidence): counts,
recency weights, first and last times, blast-radius inputs. A key without a failed run needs
nothing more: its flips, streaks and same-commit conflicts are zero. Stage 2 runs the sequence
analysis (window functions) only on the keys that failed, driven from their tests' rows, so
a rescore costs one full scan plus work proportional to the failing tests.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from flaketui.core.config import Config
from flaketui.core.history.dbhandle import Connected
from flaketui.core.rollups import build as rollups
from flaketui.core.rollups import filtered as rollup_filtered
from flaketui.core.rollups import read as rollup_read
from flaketui.core.rollups.evidence import (
    ANALYSIS,
    FAMILY_UNITS,
    SIGNATURE_UNITS,
    TEST_UNITS,
    Evidence,
    analysis_params,
    counted_runs_cte,
    ensure_sql_functions,
)
from flaketui.core.rollups.filtered import EvidencePass
from flaketui.core.scoring.statistics import RateChange, rate_change

# Stage 1: one grouped scan for every key; the sequence analysis then runs on failing keys only.
_BASE_COLUMNS = """
    count(*) AS runs, sum(flaky) AS flaky_runs, sum(bad) AS failed_runs,
    sum(failed_any) AS failed_any_runs,
    sum(weight * failed_any) AS weighted_bad, sum(weight) AS weighted_total,
    min(ts) AS first_ts, max(ts) AS last_ts,
    max(CASE WHEN failed_any THEN ts END) AS last_failure_at,
    max(attempts) AS max_attempts, max(is_main AND gating) AS gates_main,
    max(NOT is_main AND gating) AS gates_branch, sum(is_main) AS main_runs,
    min(suite) AS suite_min, max(suite) AS suite_max"""

# Per-suite run counts and most attempts ride along in the same scan when suites are few.
MAX_SUITE_COLUMNS = 16


def _test_base(suite_count: int) -> str:
    per_suite = "".join(
        f",\n    sum(suite = :suite_{i}) AS suite_runs_{i},"
        f" max(CASE WHEN suite = :suite_{i} THEN attempts ELSE 0 END) AS suite_attempts_{i}"
        for i in range(suite_count)
    )
    return f"""
base_units AS (
    SELECT test AS key, run, ts, bad, outcome = 'flaky' AS flaky, outcome <> 'pass' AS failed_any,
           attempts, weight, is_main, gating, suite
    FROM counted
)
SELECT key, {_BASE_COLUMNS}{per_suite} FROM base_units GROUP BY key"""


_POOLED_BASE_UNITS = """
    SELECT {key} AS key, c.run, min(c.ts) AS ts, max(c.bad) AS bad,
           max(c.outcome = 'flaky') AS flaky, max(c.outcome <> 'pass') AS failed_any,
           max(c.attempts) AS attempts, min(c.weight) AS weight, min(c.is_main) AS is_main,
           min(c.gating) AS gating, min(c.suite) AS suite
    FROM counted c {join}
    GROUP BY {key}, c.run"""

_FAMILY_BASE = f"""
base_units AS ({_POOLED_BASE_UNITS.format(key="t.parent", join="JOIN tests t ON t.id = c.test")})
SELECT key, {_BASE_COLUMNS} FROM base_units GROUP BY key"""

_SIGNATURE_BASE = f"""
members AS MATERIALIZED (
    SELECT CAST(key AS INTEGER) AS test, value AS sig FROM json_each(:members)
),
base_units AS ({_POOLED_BASE_UNITS.format(key="m.sig", join="JOIN members m ON m.test = c.test")})
SELECT key, {_BASE_COLUMNS} FROM base_units GROUP BY key"""


def _suites_of(row: Mapping[str, Any], suite_names: Sequence[str]) -> dict[str, tuple[int, int]]:
    return {
        name: (int(row[f"suite_runs_{i}"]), int(row[f"suite_attempts_{i}"]))
        for i, name in enumerate(suite_names)
        if row[f"suite_runs_{i}"]
    }


def _from_base(row: Mapping[str, Any], suite_names: Sequence[str] = ()) -> Evidence:
    """Evidence of a key without any failed run: the sequence facts follow from the counts."""
    return Evidence(
        key=row["key"],
        runs=row["runs"],
        flaky_runs=row["flaky_runs"],
        failed_runs=row["failed_runs"],
        flips=0,
        clean_tail=row["runs"],
        weighted_bad=row["weighted_bad"],
        weighted_total=row["weighted_total"],
        first_ts=row["first_ts"],
        last_ts=row["last_ts"],
        last_failure_at=None,
        max_attempts=row["max_attempts"],
        gates_main=row["gates_main"],
        gates_branch=row["gates_branch"],
        mixed_commits=0,
        main_runs=row["main_runs"],
        main_bad=0,
        main_bad_streaks=0,
        main_recoveries=0,
        main_flips=0,
        good_rn=row["main_runs"],
        streak=0,
        streak_flaky=0,
        first_bad_commit=None,
        first_bad_at=None,
        last_good_commit=None,
        last_good_at=None,
        suite_min=row["suite_min"],
        suite_max=row["suite_max"],
        suites=_suites_of(row, suite_names),
    )


def _rows(db: Connected, sql: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    cursor = db.conn.execute(sql, params)
    names = [col[0] for col in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def _collect(
    db: Connected,
    base_sql: str,
    units_sql: str,
    extra: Mapping[str, Any],
    now: datetime,
    config: Config,
    suite: str | None,
    branch_kind: str | None,
    scope: Sequence[int] | None,
    members_of: Callable[[list[Any]], list[int]],
    suite_names: Sequence[str] = (),
) -> dict[Any, Evidence]:
    """Stage 1 over `scope` (tests.id, None = all tests), stage 2 on the keys that failed."""
    ensure_sql_functions(db.conn)
    cte, params = counted_runs_cte(
        now, config, suite=suite, branch_kind=branch_kind, test_pks=scope
    )
    joiner = "," if not base_sql.lstrip().startswith("SELECT") else ""
    base = _rows(db, f"WITH {cte}{joiner}{base_sql}", {**params, **extra})
    out = {row["key"]: _from_base(row, suite_names) for row in base}
    failing = [row["key"] for row in base if row["failed_any_runs"]]
    if not failing:
        return out
    cte, params = counted_runs_cte(
        now, config, suite=suite, branch_kind=branch_kind, test_pks=members_of(failing)
    )
    params.update(analysis_params(now, config))
    for row in _rows(db, f"WITH {cte},{units_sql},{ANALYSIS}", {**params, **extra}):
        if row["key"] in out:
            known = out[row["key"]]
            out[row["key"]] = Evidence(
                **row, suite_min=known.suite_min, suite_max=known.suite_max, suites=known.suites
            )
    return out


def rollup_window(
    db: Connected,
    now: datetime,
    config: Config,
    suite: str | None = None,
    branch_kind: str | None = None,
) -> rollup_read.Window | None:
    """The rollup reader's window, or None when the rollups cannot answer exactly."""
    if suite is not None or branch_kind is not None:
        return None
    if rollups.answers(db.conn, config):
        return rollup_read.Window.of(db.conn, now, config)
    return None


def answering_window(db: Connected, now: datetime, config: Config) -> rollup_read.Window | None:
    """The rollups' window for any request, filtered or not (a filtered one reads their run
    lists: flaketui.core.rollups.filtered); None when they cannot answer exactly."""
    if rollups.answers(db.conn, config):
        return rollup_read.Window.of(db.conn, now, config)
    return None


def filtered_window(
    db: Connected,
    now: datetime,
    config: Config,
    suite: str | None = None,
    branch_kind: str | None = None,
) -> rollup_read.Window | None:
    """The window of a suite or branch-kind restricted request the rollups' run lists
    answer (flaketui.core.rollups.filtered); None without a filter or when they cannot."""
    if suite is None and branch_kind is None:
        return None
    if rollups.answers(db.conn, config):
        return rollup_read.Window.of(db.conn, now, config)
    return None


def _evidence(
    key: Any, base: Mapping[str, Any], seq: Mapping[str, Any] | None, mixed: int
) -> Evidence:
    """Evidence from stage-1 facts and (for keys with a failure) chained sequence facts."""
    main_runs = base["main_runs"]
    if seq is None:
        seq = {"flips": 0, "clean_tail": None, "main_bad": 0, "main_bad_streaks": 0,
               "main_recoveries": 0, "main_flips": 0, "streak": 0, "streak_flaky": 0,
               "has_good": True}  # fmt: skip
    return Evidence(
        key=key,
        runs=base["runs"],
        flaky_runs=base["flaky_runs"],
        failed_runs=base["failed_runs"],
        flips=seq["flips"],
        clean_tail=base["runs"] if seq["clean_tail"] is None else seq["clean_tail"],
        weighted_bad=base["weighted_bad"],
        weighted_total=base["weighted_total"],
        first_ts=base["first_ts"],
        last_ts=base["last_ts"],
        last_failure_at=base["last_failure_at"],
        max_attempts=base["max_attempts"],
        gates_main=base["gates_main"],
        gates_branch=base["gates_branch"],
        mixed_commits=mixed,
        main_runs=main_runs,
        main_bad=seq["main_bad"],
        main_bad_streaks=seq["main_bad_streaks"],
        main_recoveries=seq["main_recoveries"],
        main_flips=seq["main_flips"],
        good_rn=main_runs - seq["streak"] if seq["has_good"] else 0,
        streak=seq["streak"],
        streak_flaky=seq["streak_flaky"],
        first_bad_commit=None,
        first_bad_at=None,
        last_good_commit=None,
        last_good_at=None,
        suite_min=base["suite_min"],
        suite_max=base["suite_max"],
        suites=base.get("suites") or {},
    )


def _tests_from_rollups(
    db: Connected,
    now: datetime,
    config: Config,
    window: rollup_read.Window,
    keys: Sequence[int] | None = None,
) -> dict[int, Evidence] | None:
    base = rollups.test_base(db.conn, now, config, keys=keys)
    if base is None:
        return None
    failing = [row["key"] for row in base if row["failed_any_runs"]]
    seq = rollup_read.sequences(db.conn, "test", failing, window)
    mixed = rollup_read.mixed_counts(db.conn, "test", window)
    out = {
        row["key"]: _evidence(row["key"], row, seq.get(row["key"]), mixed.get(row["key"], 0))
        for row in base
    }
    streaks = [key for key, row in seq.items() if row["streak"] > 0]
    _apply_change_points(db, "test", out, streaks, window)
    return out


def _apply_change_points(
    db: Connected,
    kind: str,
    out: Mapping[Any, Evidence],
    streaks: list[Any],
    window: rollup_read.Window,
) -> None:
    """Fill first bad / last good commit of the keys ending in a bad streak on main."""
    for key, found in rollup_read.change_points(db.conn, kind, streaks, window).items():
        for name, value in found.items():
            setattr(out[key], name, value)


def per_test_evidence(
    db: Connected,
    now: datetime,
    config: Config,
    suite: str | None = None,
    branch_kind: str | None = None,
) -> dict[int, Evidence]:
    """Evidence per test (keyed by tests.id) for every test with a counted run.

    From the rollups, `Evidence.suites` holds each test's counted runs and most attempts per
    suite. From raw rows, only with at most MAX_SUITE_COLUMNS suites in the window; otherwise
    it is empty (use `suite_counts`). From the rollups, last_good_commit / last_good_at are
    only set when the default branch ends in a bad streak (streak > 0).
    """
    return evidence_pass(db, now, config, suite, branch_kind, pool_families=False).tests


def evidence_pass(
    db: Connected,
    now: datetime,
    config: Config,
    suite: str | None = None,
    branch_kind: str | None = None,
    *,
    pool_families: bool = True,
    keys: Sequence[int] | None = None,
) -> EvidencePass:
    """per_test_evidence, and when the request is restricted to a suite or branch kind and the
    rollups answer it, what the same pass over the tests' run lists gives the rest of the
    report (rollup_filtered.EvidencePass): every parametrized family's run sets keyed by parent
    (unless not `pool_families`), which per_family_evidence and the families' onsets read, and
    the days of the tests with a bad run, which their onsets read (rate_changes).

    keys: the tests (tests.id) the caller asks about; when the rollups answer, only theirs
    are read, with the suites that retry (EvidencePass.retry_suites, read from every test).
    Other tests may still be in the result.
    """
    window = rollup_window(db, now, config, suite, branch_kind)
    if window is not None:
        if keys is not None:
            retrying = rollups.retry_suites(db.conn, now, config)
            found = None if retrying is None else _tests_from_rollups(db, now, config, window, keys)
            if found is not None:
                return EvidencePass(found, retry_suites=retrying)
        found = _tests_from_rollups(db, now, config, window)
        if found is not None:
            return EvidencePass(found)
    window = filtered_window(db, now, config, suite, branch_kind)
    if window is not None:
        members = rollup_filtered.family_members(db.conn) if pool_families else None
        return rollup_filtered.test_evidence(db.conn, window, config, suite, branch_kind, members)
    names = _window_suites(db, now, config, suite, branch_kind)
    if len(names) > MAX_SUITE_COLUMNS:
        names = []
    extra = {f"suite_{i}": name for i, name in enumerate(names)}
    tests = _collect(
        db,
        _test_base(len(names)),
        TEST_UNITS,
        extra,
        now,
        config,
        suite,
        branch_kind,
        None,
        lambda keys: [int(k) for k in keys],
        names,
    )
    return EvidencePass(tests)


def _window_suites(
    db: Connected,
    now: datetime,
    config: Config,
    suite: str | None,
    branch_kind: str | None,
) -> list[str]:
    """The suites of the counted runs in the window (a read of the small runs table)."""
    cte, params = counted_runs_cte(now, config, suite=suite, branch_kind=branch_kind)
    sql = f"WITH {cte} SELECT DISTINCT suite FROM counted_runs ORDER BY suite"
    return [str(name) for (name,) in db.conn.execute(sql, params)]


def _families_from_rollups(
    db: Connected,
    now: datetime,
    config: Config,
    window: rollup_read.Window,
    tests: Mapping[int, Evidence],
) -> dict[str, Evidence]:
    pooled = rollup_read.family_base(db.conn, window)
    if not pooled:
        return {}
    seq = rollup_read.sequences(db.conn, "family", None, window)
    mixed = rollup_read.mixed_counts(db.conn, "family", window)
    # Facts that do not depend on pooling (extremes, flags) come from the members' evidence.
    members: dict[str, list[Evidence]] = {}
    member_pks: dict[str, list[int]] = {}
    for pk, parent in db.conn.execute(
        "SELECT id, parent FROM tests WHERE parent IN "
        "(SELECT parent FROM tests WHERE test_id <> parent)"
    ):
        member_pks.setdefault(parent, []).append(int(pk))
        if pk in tests:
            members.setdefault(parent, []).append(tests[pk])
    out = {}
    for key, row in pooled.items():
        evs = members[key]
        failures = [ev.last_failure_at for ev in evs if ev.last_failure_at is not None]
        base = {
            **row,
            "first_ts": min(ev.first_ts for ev in evs),
            "last_ts": max(ev.last_ts for ev in evs),
            "last_failure_at": max(failures) if failures else None,
            "max_attempts": max(ev.max_attempts for ev in evs),
            "gates_main": max(ev.gates_main for ev in evs),
            "gates_branch": max(ev.gates_branch for ev in evs),
            "suite_min": min(str(ev.suite_min) for ev in evs),
            "suite_max": max(str(ev.suite_max) for ev in evs),
        }
        facts = seq.get(key) if row["failed_any_runs"] else None
        out[key] = _evidence(key, base, facts, mixed.get(key, 0))
        out[key].suites = {}
    streaks = [key for key, ev in out.items() if ev.streak > 0]
    _apply_change_points(db, "family", out, streaks, window)
    return out


def per_family_evidence(
    db: Connected,
    now: datetime,
    config: Config,
    suite: str | None = None,
    branch_kind: str | None = None,
    *,
    tests: Mapping[int, Evidence] | None = None,
    units: rollup_read.GroupUnits | None = None,
) -> dict[str, Evidence]:
    """Evidence per parametrized family (keyed by parent id), pooled by run.

    `tests`: per_test_evidence of the same request, when the caller has it (saves a read);
    `units`: the run sets of every family for the same request (read with a suite or
    branch-kind filter only: evidence_pass), when the caller has them.
    """
    window = rollup_window(db, now, config, suite, branch_kind)
    if window is not None:
        if tests is None:
            tests = per_test_evidence(db, now, config)
        return _families_from_rollups(db, now, config, window, tests)
    window = filtered_window(db, now, config, suite, branch_kind)
    if window is not None:
        if tests is None:
            tests = per_test_evidence(db, now, config, suite, branch_kind)
        return rollup_filtered.family_evidence(
            db.conn, window, config, suite, branch_kind, tests, units
        )

    def members_of(parents: list[Any]) -> list[int]:
        rows = db.conn.execute(
            "SELECT id FROM tests WHERE parent IN (SELECT value FROM json_each(?))",
            (json.dumps(parents),),
        )
        return [int(pk) for (pk,) in rows]

    scope = [
        int(pk)
        for (pk,) in db.conn.execute(
            "SELECT id FROM tests WHERE parent IN "
            "(SELECT parent FROM tests WHERE test_id <> parent)"
        )
    ]
    if not scope:
        return {}
    return _collect(
        db, _FAMILY_BASE, FAMILY_UNITS, {}, now, config, suite, branch_kind, scope, members_of
    )


def per_signature_evidence(
    db: Connected,
    members: Mapping[int, str],
    now: datetime,
    config: Config,
    suite: str | None = None,
    branch_kind: str | None = None,
    *,
    tests: Mapping[int, Evidence] | None = None,
    units: rollup_read.GroupUnits | None = None,
) -> dict[str, Evidence]:
    """Evidence per signature group (keyed by hash), pooled by run; members: tests.id -> hash.

    `tests`: per_test_evidence of the same request, when the caller has it (saves a read);
    `units`: pooled_units of the same request and members, when the caller has them.
    """
    if not members:
        return {}
    window = rollup_window(db, now, config, suite, branch_kind)
    if window is not None:
        if tests is None:
            tests = per_test_evidence(db, now, config)
        attempts = {pk: ev.max_attempts for pk, ev in tests.items()}
        return rollup_read.signature_group_evidence(
            db.conn, members, attempts, window, config, units=units
        )
    window = filtered_window(db, now, config, suite, branch_kind)
    if window is not None:
        if tests is None:
            tests = per_test_evidence(db, now, config, suite, branch_kind)
        attempts = {pk: ev.max_attempts for pk, ev in tests.items()}
        return rollup_read.signature_group_evidence(
            db.conn, members, attempts, window, config, suite, branch_kind, units
        )
    extra = {"members": json.dumps({str(test): sig for test, sig in members.items()})}

    def members_of(hashes: list[Any]) -> list[int]:
        wanted = set(hashes)
        return [test for test, sig in members.items() if sig in wanted]

    return _collect(
        db,
        _SIGNATURE_BASE,
        SIGNATURE_UNITS,
        extra,
        now,
        config,
        suite,
        branch_kind,
        list(members),
        members_of,
    )


def suite_counts(
    db: Connected,
    now: datetime,
    config: Config,
    suite: str | None = None,
    branch_kind: str | None = None,
    test_pks: Sequence[int] | None = None,
) -> list[tuple[int, str, int, int]]:
    """(tests.id, suite, counted runs, most attempts) per test and suite."""
    cte, params = counted_runs_cte(
        now, config, suite=suite, branch_kind=branch_kind, test_pks=test_pks
    )
    sql = f"""WITH {cte}
        SELECT test, suite, count(*), max(attempts) FROM counted GROUP BY test, suite"""
    return [(int(t), str(s), int(n), int(a)) for t, s, n, a in db.conn.execute(sql, params)]


def signature_counts(
    db: Connected,
    now: datetime,
    config: Config,
    suite: str | None = None,
    branch_kind: str | None = None,
    test_pks: Sequence[int] | None = None,
) -> list[tuple[int, str, str, int, str]]:
    """(tests.id, signature hash, text, counted runs with it, latest ts) per test and signature."""
    window = rollup_window(db, now, config, suite, branch_kind)
    if window is not None and test_pks is not None:
        return rollup_read.signature_counts(db.conn, list(test_pks), window)
    window = filtered_window(db, now, config, suite, branch_kind)
    if window is not None and test_pks is not None:
        return rollup_filtered.signature_counts(db.conn, window, test_pks, suite, branch_kind)
    cte, params = counted_runs_cte(
        now, config, suite=suite, branch_kind=branch_kind, test_pks=test_pks
    )
    sql = f"""WITH {cte}
        SELECT c.test, s.hash, s.text, count(*), max(c.ts)
        FROM counted c JOIN signatures s ON s.id = c.signature
        GROUP BY c.test, c.signature"""
    return [
        (int(t), str(h), str(x), int(n), str(ts)) for t, h, x, n, ts in db.conn.execute(sql, params)
    ]


# The most likely single change in a key's daily bad-run rate over the raw rows
# (statistics.rate_change, in SQL so that one row per key reaches Python): for each boundary
# between two days with counted runs, the Bernoulli log-likelihood of the two sides at their
# own rates; the best boundary (ties: the earliest) with the counts after it and the first bad
# day on each side.
_LL = "(CASE WHEN {k} > 0 AND {k} < {n} THEN {k} * ln(1.0 * {k} / {n}) + ({n} - {k}) * ln(1.0 - 1.0 * {k} / {n}) ELSE 0.0 END)"  # noqa: E501
_PER_DAY = """
per_day AS (
    SELECT key, substr(ts, 1, 10) AS day, count(*) AS n, sum(bad) AS k FROM units
    GROUP BY key, day
)"""
_RATE_CHANGE = f"""
cum AS (
    SELECT key, day, n, k,
        sum(n) OVER upto AS nl, sum(k) OVER upto AS kl,
        sum(n) OVER whole AS nt, sum(k) OVER whole AS kt,
        count(*) OVER whole AS days, row_number() OVER upto AS i,
        min(CASE WHEN k > 0 THEN day END) OVER whole AS first_bad_day,
        min(CASE WHEN k > 0 THEN day END) OVER after AS next_bad
    FROM per_day
    WINDOW upto AS (PARTITION BY key ORDER BY day ROWS UNBOUNDED PRECEDING),
        whole AS (PARTITION BY key),
        after AS (PARTITION BY key ORDER BY day DESC
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
scored AS (
    SELECT key, day, nl, kl, nt, kt, days, first_bad_day, next_bad,
        CASE WHEN i < days THEN
            {_LL.format(k="kl", n="nl")} + {_LL.format(k="(kt - kl)", n="(nt - nl)")}
        END AS ll
    FROM cum
),
best AS (
    SELECT * FROM (
        SELECT scored.*,
            row_number() OVER (PARTITION BY key ORDER BY ll IS NULL, ll DESC, day) AS pick
        FROM scored
    ) WHERE pick = 1
)
SELECT key, nt AS runs, kt AS bad, days, first_bad_day,
    {_LL.format(k="kt", n="nt")} AS whole_ll,
    CASE WHEN ll IS NOT NULL THEN day END AS split_day,
    CASE WHEN ll IS NOT NULL THEN nl END AS runs_before,
    CASE WHEN ll IS NOT NULL THEN kl END AS bad_before,
    ll AS split_ll,
    CASE WHEN ll IS NOT NULL THEN next_bad END AS first_bad_after
FROM best
"""


def pooled_units(
    db: Connected, members: Mapping[int, str], now: datetime, config: Config
) -> rollup_read.GroupUnits | None:
    """The run sets of pooled groups (members: tests.id -> group key) as the rollups give
    them for the window (rollup_read.group_units), read once for the evidence and the onsets
    of the same groups, filtered or not (the readers apply a suite or branch-kind filter to
    them); None when the rollups cannot answer."""
    window = answering_window(db, now, config)
    return None if window is None else rollup_read.group_units(db.conn, members, window)


def _family_members(db: Connected, test_pks: Sequence[int]) -> dict[int, str]:
    """tests.id -> parent for the tests of `test_pks` that belong to a family."""
    sql = """SELECT id, parent FROM tests
        WHERE id IN (SELECT value FROM json_each(?))
          AND parent IN (SELECT parent FROM tests WHERE test_id <> parent)"""
    return {int(pk): str(parent) for pk, parent in db.conn.execute(sql, (json.dumps(test_pks),))}


def _rollup_days(
    db: Connected,
    now: datetime,
    config: Config,
    kind: str,
    test_pks: Sequence[int],
    suite: str | None,
    branch_kind: str | None,
    members: Mapping[int, str] | None,
    units: rollup_read.GroupUnits | None = None,
    days: rollup_read.DayCounts | None = None,
) -> rollup_read.DayCounts | None:
    """Each key's days with counted runs and bad runs, from the rollups; None when they
    cannot answer the window."""
    window = answering_window(db, now, config)
    if window is None:
        return None
    filtered = suite is not None or branch_kind is not None
    if kind == "test":
        if filtered and days is not None:
            return {pk: days[pk] for pk in test_pks if pk in days}
        if filtered:
            return rollup_filtered.test_days(db.conn, window, config, test_pks, suite, branch_kind)
        return rollup_read.test_days(db.conn, test_pks, window)
    if kind == "family" and not filtered:  # pooled by run in the family day rows already
        return rollup_read.family_days(db.conn, set(_family_members(db, test_pks).values()), window)
    groups = members if kind == "signature" else _family_members(db, test_pks)
    day_of = (
        rollup_filtered.run_days(db.conn, window, config, suite, branch_kind) if filtered else None
    )
    return rollup_read.group_days(db.conn, groups or {}, window, day_of, units)


def rate_changes(
    db: Connected,
    now: datetime,
    config: Config,
    kind: str,
    test_pks: Sequence[int],
    suite: str | None = None,
    branch_kind: str | None = None,
    members: Mapping[int, str] | None = None,
    units: rollup_read.GroupUnits | None = None,
    days: rollup_read.DayCounts | None = None,
) -> dict[Any, RateChange]:
    """The most likely change in each key's daily bad-run rate (one row per key).

    `kind`: "test" (keys tests.id), "family" (parent ids) or "signature" (hashes, with
    `members` mapping tests.id -> hash), over the counted runs of `test_pks` alone (the tests
    with a failure, or the members of the groups with one). When the rollups answer the
    window, with a suite or branch-kind filter or without, a test's days come from its day
    rows and a group's from its members' run lists (rollup_read.group_days), those that pass
    the filter only (rollup_filtered), and the search runs in Python (statistics.rate_change);
    else every key's days and the search come from the raw rows in SQL. `units`: pooled_units
    of the same request covering these groups, when the caller has them. `days`: of a
    restricted request's tests, their days with a bad run (EvidencePass.bad_days, every
    test of `test_pks` among them), when the caller has them.
    """
    if not test_pks:
        return {}
    found = _rollup_days(db, now, config, kind, test_pks, suite, branch_kind, members, units, days)
    if found is not None:
        return {key: rate_change(rows) for key, rows in found.items()}
    ensure_sql_functions(db.conn)
    cte, params = counted_runs_cte(
        now, config, suite=suite, branch_kind=branch_kind, test_pks=test_pks
    )
    unit_sql = {"test": TEST_UNITS, "family": FAMILY_UNITS, "signature": SIGNATURE_UNITS}[kind]
    if kind == "signature":
        params["members"] = json.dumps({str(t): sig for t, sig in (members or {}).items()})
    sql = f"WITH {cte},{unit_sql},{_PER_DAY},{_RATE_CHANGE}"
    out = {}
    for row in _rows(db, sql, params):
        out[row["key"]] = RateChange(
            runs=int(row["runs"]),
            bad=int(row["bad"]),
            days=int(row["days"]),
            first_bad_day=row["first_bad_day"],
            whole_ll=float(row["whole_ll"]),
            split_day=row["split_day"],
            runs_before=int(row["runs_before"] or 0),
            bad_before=int(row["bad_before"] or 0),
            split_ll=float(row["split_ll"] if row["split_ll"] is not None else row["whole_ll"]),
            first_bad_after=row["first_bad_after"],
        )
    return out
