"""Why a test is flaky: its counted runs split by every recorded dimension, and the suspects.

Units: one per counted run of the target (a family's params pooled by run, bad when any
param's first attempt failed, as the scorer pools them). Each unit holds, per dimension, the
set of values it ran under; a dimension a run did not record is absent from it and that run
takes no part in that dimension's comparisons.

Dimensions:
- worker_count, suite, branch_kind, runner_host, os, python: the run's;
- hour: the run's hour of day, UTC ("07");
- worker_id: the worker of the first attempt ('' in a serial run);
- duration: the first attempt's band against the test's own median duration in the window
  (DURATION_BANDS), or "near timeout" when it used NEAR_TIMEOUT_SHARE of a known timeout. An
  attempt less than SLOW_MIN_EXCESS_MS over the median stays in the first band whatever the
  ratio: a failing attempt takes longer than a passing one because pytest imports what it
  needs to report the failure and then formats it (tens of milliseconds, several times a
  fast test's median), which would make every random flake look slow;
- predecessor: every test that ran before the first attempt on the same worker in the same
  run (recorded by the pytest plugin; reports do not say), at most the MAX_ORDER_RUNS newest
  runs. A polluter need not run just before its victim.

Suspects: for each dimension value, the unit's bad runs under it against the rest of the runs
where that dimension is known, by Fisher's exact test (two-sided), the p-values of all of a
target's comparisons adjusted together with Benjamini-Hochberg. A suspect has an adjusted
p-value at most `suspect_fdr`, at least `suspect_min_bad` bad runs under its value, and a
failure rate at least `suspect_min_ratio` times the rest's (the effect size): a value that
makes the test fail more, never one that only fails less. Worker count is also compared as
thresholds (">=4": runs at 4 workers or more against fewer). Strongest first, a suspect is
kept only if it still holds (same criteria, unadjusted p-value) in the runs that the suspects
kept before it do not cover: "after test_b" is dropped when test_b only ran before the
victim in runs where the real polluter did too, and "2 workers" when "1 worker" explains the
rest. A value whose runs all fall under another dimension's suspect value, and that does not
stand out within them, comes after that broader one ("16 workers" before "worker gw12"); one
that does stand out within them, and without whose runs the broader value no longer holds,
comes before it ("after test_b" before "at 02h UTC" when only shuffled nightlies record an
order and the victim fails in those alone); a tie goes to the dimension listed first
("16 workers" before "at 02h UTC" when they are the same runs).
"""

from __future__ import annotations

import json
import sqlite3
import statistics
from array import array
from bisect import bisect_left
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from itertools import chain, filterfalse
from pathlib import Path
from typing import TypeAlias

from flaketui.core.config import Config
from flaketui.core.history.dbhandle import Connected
from flaketui.core.rollups.evidence import counted_runs_cte
from flaketui.core.rollups.sql import COUNTED
from flaketui.core.scoring.detail import Target, resolve_target
from flaketui.core.scoring.results import Report, Suspect
from flaketui.core.scoring.statistics import (
    FisherExact,
    LogChoices,
    benjamini_hochberg,
    wilson_interval,
)
from flaketui.core.timeutil import to_iso

DIMENSIONS = (
    "worker_count",
    "worker_id",
    "runner_host",
    "os",
    "python",
    "suite",
    "branch_kind",
    "hour",
    "duration",
    "predecessor",
)
# Upper edges (as multiples of the test's median duration) and names of the duration bands.
DURATION_BANDS = ((1.0, "near median"), (2.0, "1-2x median"), (4.0, "2-4x median"))
SLOW_MIN_EXCESS_MS = 1_000
SLOWEST_BAND = ">4x median"
NEAR_TIMEOUT = "near timeout"
NEAR_TIMEOUT_SHARE = 0.9
MAX_ORDER_RUNS = 500
MAX_ORDER_ENTRIES = 2_000_000  # first attempts of the run orders one analysis keeps
MAX_PIVOT_ROWS = 50  # of the predecessor pivot, the values with the highest Wilson low

# A target's counted rows (see flaketui.core.rollups.evidence), newest run first: what varies
# between the tests of one run. Each row's run is looked up by key: joined to the window's
# counted runs instead (a table made per query), a big family's rows take half as long again.
_UNITS_SQL = f"""
WITH focus(test) AS MATERIALIZED (
    SELECT id FROM tests WHERE test_id IN (SELECT value FROM json_each(:tests))
)
SELECT tr.test, tr.run, tr.bad, coalesce(tr.worker_id, ''), tr.first_duration_ms,
       tr.first_timeout_ms, tr.first_position
FROM focus f CROSS JOIN test_runs tr ON tr.test = f.test CROSS JOIN runs r ON r.id = tr.run
WHERE tr.ts > :start AND tr.ts <= :end AND {COUNTED}
ORDER BY tr.ts DESC, tr.run DESC
"""
# What every test of a run shares, for each counted run of the window (the same for every
# target): ts, then the values of its dimensions, as text (worker_count cast here) as the pivots
# compare and show them.
_RUN_VALUES_SQL = """
SELECT r.id, r.ts, CAST(r.worker_count AS TEXT), r.suite, r.branch_kind, r.runner_host, r.os,
       r.python
FROM counted_runs cr CROSS JOIN runs r ON r.id = cr.id
"""
RunValues = dict[int, tuple[str, str, str, str, str | None, str | None, str | None]]

# The recorded order of some runs: per run and worker, its first attempts' positions and tests
# (as JSON arrays: one row per worker of a run, not per attempt).
_ORDER_SQL = """
SELECT run, coalesce(worker_id, ''), json_group_array(position), json_group_array(test)
FROM results
WHERE run IN (SELECT value FROM json_each(?)) AND attempt = 1 AND position IS NOT NULL
GROUP BY run, coalesce(worker_id, '')
"""
# The same, for some spots (run, worker, position) alone: the attempts before each spot.
_BEFORE_SQL = """
WITH spots(run, worker, position) AS MATERIALIZED (
    SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]')
    FROM json_each(?)
)
SELECT s.run, s.worker, json_group_array(r.position), json_group_array(r.test)
FROM spots s CROSS JOIN results r ON r.run = s.run AND r.attempt = 1
    AND coalesce(r.worker_id, '') = s.worker AND r.position < s.position
GROUP BY s.run, s.worker
"""


@dataclass(slots=True)
class Unit:
    """One counted run of the target, with the values it ran under."""

    run: int
    ts: str
    bad: bool
    # Tuples, not sets: a run has one value of most dimensions, and tuples of strings (with the
    # dict holding them) leave the garbage collector's watch, where thousands of sets per target
    # would trigger a full collection every few targets on a big history.
    values: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # per first attempt of a member, for the slow-cause text: duration_ms then timeout_ms, one
    # flat tuple of numbers (a pair per attempt would be millions of objects to collect)
    timings: tuple[int | None, ...] = ()


@dataclass(slots=True)
class DimensionRow:
    """Runs and bad runs under one value of one dimension, with the Wilson interval."""

    value: str
    runs: int
    bad_runs: int
    fail_rate: float
    wilson_low: float
    wilson_high: float


@dataclass(slots=True)
class CauseAnalysis:
    """A target's units, the pivots they give and the suspects among their values."""

    key: str
    kind: str
    members: list[str]
    runs: int
    bad_runs: int
    units: list[Unit]
    suspects: list[Suspect]


def _median(values: list[int]) -> float | None:
    return float(statistics.median(values)) if values else None


def duration_band(duration_ms: int, median_ms: float | None, timeout_ms: int | None) -> str:
    """The duration band of one attempt (see DURATION_BANDS and NEAR_TIMEOUT)."""
    if timeout_ms and duration_ms >= NEAR_TIMEOUT_SHARE * timeout_ms:
        return NEAR_TIMEOUT
    if duration_ms - (median_ms or 0.0) < SLOW_MIN_EXCESS_MS:
        return DURATION_BANDS[0][1]
    if not median_ms:
        return SLOWEST_BAND
    ratio = duration_ms / median_ms
    for edge, name in DURATION_BANDS:
        if ratio <= edge:
            return name
    return SLOWEST_BAND


def load_units(
    db: Connected,
    target: Target,
    *,
    now: datetime,
    config: Config,
    orders: RunOrders | None = None,
    runs: RunValues | None = None,
    bases: RunBases | None = None,
) -> list[Unit]:
    """The target's counted runs, newest first, pooled by run, with every dimension's values.

    orders: the run orders read so far by the analysis this one is part of (see RunOrders);
    runs: the window's run_values, read once by that analysis; bases: the values its units
    made so far from them (see RunBases).
    """
    conn = db.conn
    window = {
        "tests": json.dumps(list(target.test_ids)),
        "start": to_iso(now - timedelta(days=config.window_days)),
        "end": to_iso(now),
    }
    rows = conn.execute(_UNITS_SQL, window).fetchall()
    if runs is None:
        runs = run_values(db, now=now, config=config)
    durations: dict[int, list[int]] = defaultdict(list)
    for row in rows:
        if row[4] is not None:
            durations[row[0]].append(row[4])
    medians = {test: _median(values) for test, values in durations.items()}
    if bases is None:
        bases = {}
    units: dict[int, Unit] = {}
    # (run, worker) -> the latest position of a member's first attempt there
    spots: dict[tuple[int, str], int] = {}
    near_median = DURATION_BANDS[0][1]
    # The units share their values' tuples (a run's values, then the target's few workers and
    # duration bands): millions of units on a big history, each with as few objects of its own
    # as can be, for the garbage collector to walk.
    alone: dict[str, tuple[str, ...]] = {}  # value -> (value,)
    grown: dict[tuple[tuple[str, ...], str], tuple[str, ...]] = {}  # (values, value) -> both
    # The loop is spelled out (no helper call per row), and each dimension's values are made
    # once per unit.
    for test, run, bad, worker, duration, timeout, position in rows:
        unit = units.get(run)
        if unit is None:
            base = bases.get(run)
            if base is None:
                shared = runs.get(run)
                if shared is None:
                    # A run that landed after the run values were read (each read is a snapshot
                    # of its own): read them again, for the targets after this one too.
                    runs.update(run_values(db, now=now, config=config))
                    shared = runs.get(run)
                    if shared is None:
                        continue  # pruned since its rows were read: no longer in the history
                base = bases[run] = _run_base(shared)
            values: dict[str, tuple[str, ...]] = base[1].copy()
            more = alone.get(worker)
            if more is None:
                more = alone[worker] = (worker,)
            values["worker_id"] = more
            unit = units[run] = Unit(run, base[0], bool(bad), values)
        else:
            values = unit.values
            if bad:
                unit.bad = True
            found = values["worker_id"]
            if worker not in found:
                more = grown.get((found, worker))
                if more is None:
                    more = grown[(found, worker)] = (*found, worker)
                values["worker_id"] = more
        if duration is not None:
            median = medians.get(test)
            if not timeout and duration - (median or 0.0) < SLOW_MIN_EXCESS_MS:
                band = near_median  # duration_band's answer, without the call
            else:
                band = duration_band(duration, median, timeout)
            found = values.get("duration", ())
            if band not in found:
                more = grown.get((found, band))
                if more is None:
                    more = grown[(found, band)] = (*found, band)
                values["duration"] = more
            unit.timings += (duration, timeout)
        if position is not None:
            spot = (run, worker)
            if spots.get(spot, -1) < position:
                spots[spot] = position
    if spots:
        newest = set(
            sorted({run for run, _ in spots}, key=lambda r: (units[r].ts, r))[-MAX_ORDER_RUNS:]
        )
        known = (orders or RunOrders(conn, whole_runs=False)).before(
            {spot: at for spot, at in spots.items() if spot[0] in newest},
            own=set(target.test_ids),
        )
        for run, tests in known.items():
            units[run].values["predecessor"] = tests
    return list(units.values())


# Per run: its ts, and the values of the dimensions its tests share, as a unit of it starts
# (each unit copies the dict: its own values are added to the copy, the tuples are shared).
RunBases = dict[int, tuple[str, dict[str, tuple[str, ...]]]]


def _run_base(
    shared: tuple[str, str, str, str, str | None, str | None, str | None],
) -> tuple[str, dict[str, tuple[str, ...]]]:
    """A run's entry of RunBases, from its run_values."""
    ts, workers, suite, kind, host, os_name, python = shared
    values: dict[str, tuple[str, ...]] = {
        "worker_count": (workers,),
        "suite": (suite,),
        "branch_kind": (kind,),
        "hour": (ts[11:13],),
    }
    if host:
        values["runner_host"] = (host,)
    if os_name:
        values["os"] = (os_name,)
    if python:
        values["python"] = (python,)
    return ts, values


def run_values(db: Connected, *, now: datetime, config: Config) -> RunValues:
    """Per counted run of the window (runs.id): its ts and the values its tests share."""
    cte, params = counted_runs_cte(now, config)
    return {
        int(run): tuple(values)
        for run, *values in db.conn.execute(f"WITH {cte} {_RUN_VALUES_SQL}", params)
    }


# One worker's order in a run: its first attempts' positions, ascending, and the test id of
# each (the same string object for a test wherever it ran: slices are copied, not rebuilt).
WorkerOrder: TypeAlias = "tuple[array[int], tuple[str, ...]]"


class RunOrders:
    """The order the first attempts of runs took on each of their workers.

    With whole_runs (for an analysis of many targets), each run's order is read whole, once,
    and shared by every target: the newest runs are every target's, and a run holds every test
    of the suite. At most MAX_ORDER_ENTRIES attempts are kept, per worker an array of positions
    and a tuple of test ids (one string per test); the runs read longest ago make room first. A
    target whose runs would not fit (at the size of the runs read so far) is read as without
    it. Without it (one target) only the attempts before the target's spots are read, and
    nothing is kept.
    """

    def __init__(self, conn: sqlite3.Connection, *, whole_runs: bool = True) -> None:
        self._conn = conn
        self._whole_runs = whole_runs
        # run -> worker -> (positions ascending, the test id at each)
        self._orders: dict[int, dict[str, WorkerOrder]] = {}
        self._entries = 0
        self._read_total = (0, 0)  # runs read whole so far, and their attempts
        self._names: dict[int, str] = {}

    def before(
        self, spots: dict[tuple[int, str], int], *, own: set[str]
    ) -> dict[int, tuple[str, ...]]:
        """For each run of spots ((run, worker) -> position), the tests whose first attempt ran
        before that position on that worker, but own's: on each worker in the order they ran,
        workers in name order (a first test on its worker had none)."""
        runs = {run for run, _ in spots}
        if self._whole_runs and self._fits(runs):
            orders = self._read_runs(runs)
        else:
            picked = [[run, worker, at] for (run, worker), at in spots.items()]
            orders = self._read(_BEFORE_SQL, json.dumps(picked), runs)
        parts: dict[int, list[tuple[str, ...]]] = {run: [] for run, _ in spots}
        for (run, worker), position in sorted(spots.items()):
            positions, tests = orders[run].get(worker, _NO_ORDER)
            parts[run].append(tests[: bisect_left(positions, position)])
        before: dict[int, tuple[str, ...]] = {}
        for run, prefixes in parts.items():
            # Slices of the kept tuples, copied whole; most hold none of own's tests.
            tests = prefixes[0] if len(prefixes) == 1 else tuple(chain.from_iterable(prefixes))
            if not own.isdisjoint(tests):
                tests = tuple(filterfalse(own.__contains__, tests))
            before[run] = tests
        return before

    def _fits(self, runs: set[int]) -> bool:
        """Whether these runs' orders would fit in what may be kept, at the size of the runs
        read so far (the first runs are read to learn it)."""
        read_runs, read_entries = self._read_total
        return not read_runs or len(runs) * read_entries <= MAX_ORDER_ENTRIES * read_runs

    def _read_runs(self, runs: set[int]) -> dict[int, dict[str, WorkerOrder]]:
        """The kept orders, with those of runs not read yet read whole, making room first."""
        missing = runs - self._orders.keys()
        if missing:
            read = self._read(_ORDER_SQL, json.dumps(sorted(missing)), missing)
            added = sum(
                len(positions) for order in read.values() for positions, _ in order.values()
            )
            read_runs, read_entries = self._read_total
            self._read_total = (read_runs + len(missing), read_entries + added)
            for run in list(self._orders):
                if self._entries + added <= MAX_ORDER_ENTRIES:
                    break
                if run not in runs:
                    self._entries -= sum(len(p) for p, _ in self._orders.pop(run).values())
            self._orders.update(read)
            self._entries += added
        return self._orders

    def _read(self, sql: str, argument: str, runs: set[int]) -> dict[int, dict[str, WorkerOrder]]:
        """Orders by run and worker from one of the order queries, naming their tests."""
        pks: dict[int, dict[str, tuple[array[int], array[int]]]] = {run: {} for run in runs}
        for run, worker, positions_json, tests_json in self._conn.execute(sql, (argument,)):
            positions, tests = json.loads(positions_json), json.loads(tests_json)
            ranked = sorted(range(len(positions)), key=positions.__getitem__)
            pks[run][worker] = (
                array("q", [positions[i] for i in ranked]),
                array("q", [tests[i] for i in ranked]),
            )
        names = self._names
        unnamed = {t for order in pks.values() for _, tests in order.values() for t in tests}
        unnamed.difference_update(names)
        if unnamed:
            names.update(
                self._conn.execute(
                    "SELECT id, test_id FROM tests WHERE id IN (SELECT value FROM json_each(?))",
                    (json.dumps(sorted(unnamed)),),
                )
            )
        return {
            run: {
                worker: (positions, tuple(map(names.__getitem__, tests)))
                for worker, (positions, tests) in order.items()
            }
            for run, order in pks.items()
        }


_NO_ORDER: WorkerOrder = (array("q"), ())


def _value_counts(units: list[Unit], dimension: str) -> dict[str, list[int]]:
    """[runs, bad runs] under each value of a dimension, values in the order first met (a
    predecessor dimension has hundreds of values per unit: counted in one pass each)."""
    runs = Counter(chain.from_iterable(unit.values.get(dimension, ()) for unit in units))
    bad = Counter(chain.from_iterable(unit.values.get(dimension, ()) for unit in units if unit.bad))
    return {value: [count, bad[value]] for value, count in runs.items()}


def _rows(units: list[Unit], dimension: str, config: Config) -> list[DimensionRow]:
    rows = []
    for value, (runs, bad) in _value_counts(units, dimension).items():
        low, high = wilson_interval(bad, runs, config.z)
        rows.append(DimensionRow(value, runs, bad, bad / runs, low, high))
    return rows


def _order_key(dimension: str, value: str) -> tuple[object, ...]:
    if dimension == "worker_count":
        return (int(value),)
    if dimension == "duration":
        names = [name for _, name in DURATION_BANDS] + [SLOWEST_BAND, NEAR_TIMEOUT]
        return (names.index(value) if value in names else len(names), value)
    if dimension == "worker_id":
        digits = "".join(ch for ch in value if ch.isdigit())
        return (value.rstrip("0123456789"), int(digits) if digits else -1, value)
    return (value,)


def dimension_rows(units: list[Unit], dimension: str, config: Config) -> list[DimensionRow]:
    """The pivot of one dimension: a row per value (predecessor: the worst MAX_PIVOT_ROWS)."""
    if dimension not in DIMENSIONS:
        raise ValueError(f"unknown dimension {dimension!r}")
    rows = _rows(units, dimension, config)
    if dimension == "predecessor":
        rows.sort(key=lambda row: (-row.wilson_low, -row.runs, row.value))
        return rows[:MAX_PIVOT_ROWS]
    return sorted(rows, key=lambda row: _order_key(dimension, row.value))


def _comparisons(units: list[Unit], dimension: str) -> list[tuple[str, int, int, int, int]]:
    """(value, bad, runs, rest_bad, rest_runs) for each value to compare, over known units."""
    known = [unit for unit in units if dimension in unit.values]
    total, total_bad = len(known), sum(unit.bad for unit in known)
    if total < 2:
        return []
    groups = _value_counts(known, dimension)
    if dimension == "worker_count" and len(groups) > 2:
        ordered = sorted(groups, key=int)
        thresholds: dict[str, list[int]] = {}
        # The top edge's threshold is its exact value: compared once.
        for index, edge in enumerate(ordered[1:-1], start=1):
            above = ordered[index:]
            thresholds[f">={edge}"] = [
                sum(groups[v][0] for v in above),
                sum(groups[v][1] for v in above),
            ]
        groups = {**groups, **thresholds}
    out = []
    for value, (runs, bad) in groups.items():
        if runs == total:
            continue  # nothing to compare against
        out.append((value, bad, runs, total_bad - bad, total - runs))
    return out


def _percentile(values: list[int], share: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.1f} s" if ms < 100_000 else f"{ms / 60_000:.0f} min"


def cause_label(dimension: str, value: str, units: list[Unit] | None = None) -> str:
    """A short "likely cause" text for a suspect value."""
    if dimension == "runner_host":
        return f"host {value}"
    if dimension == "worker_count":
        return f"≥ {value[2:]} workers" if value.startswith(">=") else f"{value} workers"
    if dimension == "worker_id":
        return f"worker {value}" if value else "serial runs"
    if dimension == "os":
        return f"on {value}"
    if dimension == "python":
        return f"Python {value}"
    if dimension == "suite":
        return f"suite {value}"
    if dimension == "branch_kind":
        return f"{value} branches"
    if dimension == "hour":
        return f"at {value}h UTC"
    if dimension == "predecessor":
        return f"after {value.rsplit('::', 1)[-1]}"
    if dimension == "duration":
        bad = [unit.timings for unit in units or [] if unit.bad]
        durations = [d for timings in bad for d in timings[::2] if d is not None]
        timeouts = [t for timings in bad for t in timings[1::2] if t]
        if durations and timeouts:
            p95 = _percentile(durations, 0.95)
            return f"slow: p95 {_seconds(p95)} of a {_seconds(max(timeouts))} timeout"
        return f"slow: {value}"
    return f"{dimension} {value}"


def _matches(unit: Unit, dimension: str, value: str) -> bool:
    """Whether a unit ran under a dimension value (a ">=k" worker threshold included)."""
    values = unit.values.get(dimension)
    if not values:
        return False
    if dimension == "worker_count" and value.startswith(">="):
        return any(int(v) >= int(value[2:]) for v in values)
    return value in values


def _passes(config: Config, bad: int, runs: int, rest_bad: int, rest_runs: int) -> bool:
    """The effect-size part of a suspect's criteria."""
    if not runs or not rest_runs:
        return False
    rate, rest_rate = bad / runs, rest_bad / rest_runs
    return (
        bad >= config.suspect_min_bad
        and rate > rest_rate
        and rate >= config.suspect_min_ratio * rest_rate
    )


def _still_holds(
    units: list[Unit], suspect: Suspect, kept: list[Suspect], config: Config, fisher: FisherExact
) -> bool:
    """Whether a suspect holds in the runs none of the kept suspects covers."""
    if not kept:
        return True
    rest = [
        unit
        for unit in units
        if suspect.dimension in unit.values
        and not any(_matches(unit, k.dimension, k.value) for k in kept)
    ]
    inside = [unit for unit in rest if _matches(unit, suspect.dimension, suspect.value)]
    bad, runs = sum(unit.bad for unit in inside), len(inside)
    rest_bad, rest_runs = sum(unit.bad for unit in rest) - bad, len(rest) - runs
    if not _passes(config, bad, runs, rest_bad, rest_runs):
        return False
    return fisher(bad, runs, rest_bad, rest_runs) <= config.suspect_fdr


def _broader_first(
    units: list[Unit], suspects: list[Suspect], config: Config, fisher: FisherExact
) -> list[Suspect]:
    """Suspects in order, except where one suspect's runs all fall under another's value of
    another dimension:
    - the narrow one moves after the broad one when it does not stand out within the broad
      value's runs: "16 workers" explains "worker gw12" (a worker only 16-worker runs have),
      not the other way round; "16 workers" still stands within ">=4 workers";
    - the narrow one moves before the broad one when it stands out within the broad value's
      runs and the broad one no longer holds without the narrow one's runs: "after test_b"
      explains "at 02h UTC" when the victim fails only in shuffled nightlies, and only in
      those where test_b ran before it."""
    covered = {
        id(s): frozenset(i for i, u in enumerate(units) if _matches(u, s.dimension, s.value))
        for s in suspects
    }

    def nested(narrow: Suspect, wide: Suspect) -> bool:
        return narrow.dimension != wide.dimension and covered[id(narrow)] < covered[id(wide)]

    def explained(narrow: Suspect, wide: Suspect) -> bool:
        if not nested(narrow, wide):
            return False
        within = [units[i] for i in covered[id(wide)]]
        inside = [units[i] for i in covered[id(narrow)]]
        bad, runs = sum(u.bad for u in inside), len(inside)
        rest_bad, rest_runs = sum(u.bad for u in within) - bad, len(within) - runs
        return not (
            _passes(config, bad, runs, rest_bad, rest_runs)
            and fisher(bad, runs, rest_bad, rest_runs) <= config.suspect_fdr
        )

    def explains(narrow: Suspect, wide: Suspect) -> bool:
        return (
            nested(narrow, wide)
            and not explained(narrow, wide)
            and not _still_holds(units, wide, [narrow], config, fisher)
        )

    order = list(suspects)
    for _ in range(len(order) * len(order)):
        moved = False
        for i, suspect in enumerate(order):
            wider = [j for j in range(i + 1, len(order)) if explained(suspect, order[j])]
            if wider:
                order.insert(wider[0], order.pop(i))
                moved = True
                break
            narrower = [j for j in range(i + 1, len(order)) if explains(order[j], suspect)]
            if narrower:
                order.insert(i, order.pop(narrower[0]))
                moved = True
                break
        if not moved:
            break
    return order


def find_suspects(
    units: list[Unit], config: Config, *, choices: LogChoices | None = None
) -> list[Suspect]:
    """The dimension values under which the target fails more (see the module docstring).

    choices: log binomial coefficients already worked out by the analysis of other targets.
    """
    tests: list[tuple[str, str, int, int, int, int, float]] = []
    # The values of a dimension split the same runs: their tests share margins (a predecessor
    # dimension has hundreds of values). The checks of the kept order below use it too.
    fisher = FisherExact(choices)
    for dimension in DIMENSIONS:
        for value, bad, runs, rest_bad, rest_runs in _comparisons(units, dimension):
            p_raw = fisher(bad, runs, rest_bad, rest_runs)
            tests.append((dimension, value, bad, runs, rest_bad, rest_runs, p_raw))
    adjusted = benjamini_hochberg([test[-1] for test in tests])
    suspects = []
    for (dimension, value, bad, runs, rest_bad, rest_runs, p_raw), q in zip(
        tests, adjusted, strict=True
    ):
        rate, rest_rate = bad / runs, rest_bad / rest_runs
        if q <= config.suspect_fdr and _passes(config, bad, runs, rest_bad, rest_runs):
            label = cause_label(dimension, value, units)
            suspects.append(
                Suspect(
                    dimension,
                    value,
                    bad,
                    runs,
                    rate,
                    rest_bad,
                    rest_runs,
                    rest_rate,
                    q,
                    p_raw,
                    label,
                )
            )
    # Ties (the same runs under two names: a nightly suite at 02h with 16 workers) go to the
    # dimension listed first in DIMENSIONS.
    suspects.sort(
        key=lambda s: (s.p_raw, -(s.rate - s.rest_rate), DIMENSIONS.index(s.dimension), s.value)
    )
    suspects = _broader_first(units, suspects, config, fisher)
    kept: list[Suspect] = []
    for suspect in suspects:
        if _still_holds(units, suspect, kept, config, fisher):
            kept.append(suspect)
    return kept


def analyse(
    db: Connected, test_or_parent: str | Target, *, now: datetime, config: Config
) -> CauseAnalysis:
    """Units and suspects of a test or family (an exact test id first, else a family)."""
    target = (
        test_or_parent if isinstance(test_or_parent, Target) else resolve_target(db, test_or_parent)
    )
    units = load_units(db, target, now=now, config=config)
    return CauseAnalysis(
        key=target.key,
        kind=target.kind,
        members=target.test_ids,
        runs=len(units),
        bad_runs=sum(unit.bad for unit in units),
        units=units,
        suspects=find_suspects(units, config),
    )


# One analysis: (kind, key, members), kind being test, family or cofailure.
CauseTarget = tuple[str, str, tuple[str, ...]]
# What an analysis found: the suspects of each target, by (kind, key).
FoundCauses = dict[tuple[str, str], tuple[Suspect, ...]]


def cause_targets(report: Report, *, cofailures_only: bool = False) -> list[CauseTarget]:
    """What attach_causes analyses, in the order it does: the flaky tests, the flaky families
    (none with cofailures_only), then every co-failure group."""
    targets: list[CauseTarget] = []
    if not cofailures_only:
        targets += [("test", t.test_id, (t.test_id,)) for t in report.tests if t.verdict == "flaky"]
        targets += [
            ("family", g.key, tuple(g.members)) for g in report.families if g.verdict == "flaky"
        ]
    targets += [("cofailure", g.key, tuple(g.members)) for g in report.cofailures]
    return targets


def cause_rows(report: Report, targets: list[CauseTarget]) -> int:
    """About how many test-runs analysing targets reads: each member's counted runs."""
    return sum(target_rows(report, targets))


def target_rows(report: Report, targets: list[CauseTarget]) -> list[int]:
    """About how many test-runs analysing each target reads (see cause_rows)."""
    tests = {t.test_id: t.scores.runs for t in report.tests}
    return [sum(tests.get(member, 0) for member in members) for _, _, members in targets]


def find_causes(
    db: Connected, targets: list[CauseTarget], *, now: datetime, config: Config
) -> FoundCauses:
    """The suspects of each target, the targets sharing the run orders read for them."""
    orders = RunOrders(db.conn)
    runs = run_values(db, now=now, config=config)
    bases: RunBases = {}
    choices: LogChoices = {}  # the targets' tables of log binomial coefficients overlap
    found: FoundCauses = {}
    for kind, key, members in targets:
        target = Target(key, kind, [], list(members))
        units = load_units(
            db, target, now=now, config=config, orders=orders, runs=runs, bases=bases
        )
        found[(kind, key)] = tuple(find_suspects(units, config, choices=choices))
    return found


def with_causes(report: Report, found: FoundCauses) -> Report:
    """The report with the suspects found filled in; a co-failure group is then named by the
    cause its tests share, when it has one (cofailure.group_label)."""
    from flaketui.core.scoring.cofailure import group_label

    tests = [
        replace(t, causes=found[("test", t.test_id)]) if ("test", t.test_id) in found else t
        for t in report.tests
    ]
    families = [
        replace(g, causes=found[("family", g.key)]) if ("family", g.key) in found else g
        for g in report.families
    ]
    cofailures = []
    for group in report.cofailures:
        causes = found.get(("cofailure", group.key), ())
        label = group_label(group.members, causes[0].label if causes else None)
        cofailures.append(replace(group, causes=causes, label=label))
    return replace(report, tests=tests, families=families, cofailures=cofailures)


def attach_causes(
    db: Connected,
    report: Report,
    config: Config,
    *,
    cofailures_only: bool = False,
    shared_from: Path | None = None,
) -> Report:
    """The report with the suspects of its flaky tests, flaky families and co-failure groups
    filled in; a co-failure group is then named by the cause its tests share, when it has
    one (cofailure.group_label).

    cofailures_only: the co-failure groups' alone (they name the groups), for an output that
    shows no test's or family's causes; those are most of the work (a read of every flaky
    test's and family's runs).
    shared_from: the history's file, when a big analysis may be shared with a child process
    reading it (causes_apart.find_causes_shared): the same suspects, in about half the time on
    two cores.
    """
    targets = cause_targets(report, cofailures_only=cofailures_only)
    if shared_from is None:
        return with_causes(report, find_causes(db, targets, now=report.now, config=config))
    from flaketui.core.scoring.causes_apart import find_causes_shared

    rows = target_rows(report, targets)
    found = find_causes_shared(db, shared_from, targets, rows, now=report.now, config=config)
    return with_causes(report, found)
