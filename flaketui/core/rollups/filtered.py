"""Evidence of a report restricted to one suite and/or branch kind, from the rollups.

A suite and a branch kind are properties of a run, so restricting a report keeps or drops
whole runs. The day rows of test_day_seq list their runs (all, bad, flaky, failed); with the
window's runs that pass the filter in time order (read.window_runs), each test's or family's
units are those list entries that pass, and the time-ordered facts (flips, clean tail, default
branch streaks, same-commit conflicts) follow from them exactly as the raw-row analysis
(flaketui.core.rollups.evidence.ANALYSIS) computes them over the filtered raw rows. The
window's partial edge days come from the raw rows, as everywhere in the rollup readers.

The most attempts per test and suite are read from the raw rows of the (test, suite, day)
rollup rows that saw more than one attempt: usually a few, since one attempt is the rule.
"""

from __future__ import annotations

import json
import sqlite3
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import chain, pairwise
from typing import Any

from flaketui.core.config import Config
from flaketui.core.rollups import build as rollups
from flaketui.core.rollups import sql as q
from flaketui.core.rollups.evidence import Evidence
from flaketui.core.rollups.read import (
    DayCounts,
    GroupUnits,
    Window,
    WindowRun,
    edge_test_days,
    group_units,
    merge_days,
    window_runs,
)


def _run_filter(suite: str | None, branch_kind: str | None) -> str:
    """SQL conditions on `runs r` for the filter (always true without one)."""
    parts = ["1"]
    if suite is not None:
        parts.append("r.suite = :suite")
    if branch_kind is not None:
        parts.append("r.branch_kind = :branch_kind")
    return " AND ".join(parts)


class Timeline:
    """The filtered runs of a window in time order (ts, then run id, as the analysis orders
    them), with what the analysis reads of each by position."""

    def __init__(self, runs: Mapping[int, WindowRun], *, in_order: bool = False) -> None:
        """`in_order`: the mapping already iterates in (ts, run id) order (no sort)."""
        order = list(runs) if in_order else sorted(runs, key=lambda pk: (runs[pk].ts, pk))
        self.order = order  # run id by position
        self.position = {pk: i for i, pk in enumerate(order)}
        self.ids = frozenset(order)
        self.ts = [runs[pk].ts for pk in order]
        self.commit = [runs[pk].commit for pk in order]
        self.weight = [runs[pk].weight for pk in order]
        self.suite = [runs[pk].suite for pk in order]
        self.main = frozenset(i for i, pk in enumerate(order) if runs[pk].is_main)
        gating = frozenset(i for i, pk in enumerate(order) if runs[pk].gating)
        self.gating_main = gating & self.main
        self.gating_branch = gating - self.main
        by_suite: dict[str, set[int]] = {}
        for i, name in enumerate(self.suite):
            by_suite.setdefault(name, set()).add(i)
        self.by_suite = {name: frozenset(members) for name, members in sorted(by_suite.items())}
        by_commit: dict[str | None, list[int]] = {}
        for i, sha in enumerate(self.commit):
            by_commit.setdefault(sha, []).append(i)
        self.by_commit = by_commit
        # The days of the runs in order, and where each starts (positions; then the end).
        self.days: list[str] = []
        self.day_starts: list[int] = []
        for i, run_ts in enumerate(self.ts):
            if not self.days or self.days[-1] != run_ts[:10]:
                self.days.append(run_ts[:10])
                self.day_starts.append(i)
        self.day_starts.append(len(order))

    def day_counts(self, units: list[int], bad: list[int]) -> list[tuple[str, int, int]]:
        """(day, units, bad units) per day with a unit, in day order, of a key's units and
        bad units (positions in time order; bad ones among the units)."""
        out = []
        u_lo = b_lo = 0
        starts = self.day_starts
        for i, day in enumerate(self.days):
            if u_lo == len(units):
                break
            u_hi = bisect_left(units, starts[i + 1], u_lo)
            if u_hi > u_lo:
                b_hi = bisect_left(bad, starts[i + 1], b_lo)
                out.append((day, u_hi - u_lo, b_hi - b_lo))
                u_lo, b_lo = u_hi, b_hi
        return out

    def positions(self, pks: Iterable[int]) -> set[int]:
        """The positions of those runs that pass the filter."""
        return set(map(self.position.__getitem__, self.ids.intersection(pks)))

    def evidence(
        self,
        key: Any,
        sets: tuple[set[int], set[int], set[int], set[int]],
        max_attempts: int,
        attempts: Mapping[str, int] | None = None,
    ) -> Evidence | None:
        """The analysis of one key from its run sets (ran, bad, flaky, failed in any attempt);
        None when none of its runs passes the filter. `attempts`: most attempts per suite,
        to fill `Evidence.suites` (tests)."""
        present = self.positions(sets[0])
        bad, flaky, failed = (self.positions(s) for s in sets[1:])
        return self.evidence_at(key, sorted(present), bad, flaky, failed, max_attempts, attempts)

    def evidence_at(
        self,
        key: Any,
        units: list[int],
        bad: set[int],
        flaky: set[int],
        failed: set[int],
        max_attempts: int,
        attempts: Mapping[str, int] | None = None,
    ) -> Evidence | None:
        """`evidence` from positions: the key's units in time order and the positions of its
        bad, flaky and failed ones."""
        if not units:
            return None
        present = set(units)
        ts, weight = self.ts, self.weight
        main = present & self.main
        gates_main = int(not self.gating_main.isdisjoint(present))
        gates_branch = int(not self.gating_branch.isdisjoint(present))
        suites: dict[str, tuple[int, int]] = {}
        names = []
        if len(self.by_suite) == 1:  # a suite's report: every unit is of that suite
            [name] = self.by_suite
            names.append(name)
            if attempts is not None:
                suites[name] = (len(units), attempts.get(name, 1))
        else:
            for name, members in self.by_suite.items():
                count = len(members & present)
                if count:
                    names.append(name)
                    if attempts is not None:
                        suites[name] = (count, attempts.get(name, 1))
        ev = Evidence(
            key=key,
            runs=len(units),
            flaky_runs=len(flaky),
            failed_runs=len(bad),
            flips=0,
            clean_tail=len(units),
            weighted_bad=0.0,
            weighted_total=sum(map(weight.__getitem__, units)),
            first_ts=ts[units[0]],
            last_ts=ts[units[-1]],
            last_failure_at=None,
            max_attempts=max_attempts,
            gates_main=gates_main,
            gates_branch=gates_branch,
            mixed_commits=0,
            main_runs=len(main),
            main_bad=0,
            main_bad_streaks=0,
            main_recoveries=0,
            main_flips=0,
            good_rn=len(main),
            streak=0,
            streak_flaky=0,
            first_bad_commit=None,
            first_bad_at=None,
            last_good_commit=None,
            last_good_at=None,
            suite_min=names[0],
            suite_max=names[-1],
            suites=suites,
        )
        if failed:  # bad and flaky runs are failed ones: without any, the counts say it all
            self._sequence(ev, units, present, bad, flaky, failed, sorted(main))
        return ev

    def _sequence(
        self,
        ev: Evidence,
        units: list[int],
        present: set[int],
        bad: set[int],
        flaky: set[int],
        failed: set[int],
        main: list[int],
    ) -> None:
        """The time-ordered facts of a key with a failure, in place."""
        ordered_bad = sorted(bad)
        stretches, first_bad, trail = _stretches(units, ordered_bad)
        ev.flips = 2 * stretches - first_bad - (trail < len(units))
        last_failure = max(failed)
        ev.clean_tail = len(units) - bisect_right(units, last_failure)
        ev.last_failure_at = self.ts[last_failure]
        ev.weighted_bad = sum(map(self.weight.__getitem__, sorted(failed)))
        commit = self.commit
        by_commit = self.by_commit
        ev.mixed_commits = sum(
            1
            for sha in {commit[i] for i in bad} - {None}
            if any(i in present and i not in bad for i in by_commit[sha])
        )
        if not main:
            return
        main_bad = [i for i in ordered_bad if i in self.main]
        starts, first_bad, good_rn = _stretches(main, main_bad)
        ends_bad = good_rn < len(main)
        ev.main_bad = len(main_bad)
        ev.main_bad_streaks = starts
        ev.main_recoveries = starts - ends_bad
        ev.main_flips = 2 * starts - first_bad - ends_bad
        tail = main[good_rn:]
        ev.good_rn = good_rn
        ev.streak = len(tail)
        ev.streak_flaky = len(flaky.intersection(tail))
        if tail:
            ev.first_bad_commit, ev.first_bad_at = commit[tail[0]], self.ts[tail[0]]
            if good_rn:
                last_good = main[good_rn - 1]
                ev.last_good_commit, ev.last_good_at = commit[last_good], self.ts[last_good]


def _stretches(units: list[int], bad: list[int]) -> tuple[int, int, int]:
    """Of a sequence of units (positions in time order) and its bad ones (in order): the
    bad stretches, whether the first unit is bad (1) or not (0), and where the trailing bad
    stretch starts (len(units) when the last unit is good). flips = 2 x stretches - [first
    unit bad] - [last unit bad]."""
    if not bad:
        return 0, 0, len(units)
    at = [bisect_left(units, i) for i in bad]
    stretches = 1 + sum(1 for a, b in pairwise(at) if b != a + 1)
    trail = len(units)
    if at[-1] == len(units) - 1:
        trail = at[-1]
        for a, b in zip(reversed(at[:-1]), reversed(at[1:]), strict=True):
            if b != a + 1:
                break
            trail = a
    return stretches, int(at[0] == 0), trail


def _ids(text: str | None) -> map[int]:
    return map(int, text.split(",")) if text else map(int, ())


class RunLists:
    """The day rows' run lists as positions on a Timeline (the runs that pass its filter, in
    time order). Each distinct list is parsed once: a day's tests mostly ran in the same
    runs, so a window's tens of thousands of day rows hold a few hundred distinct lists."""

    def __init__(self, timeline: Timeline) -> None:
        self._position = timeline.position
        self._memo: dict[str, tuple[int, ...]] = {}

    def positions(self, text: str) -> tuple[int, ...]:
        """The positions of one list's runs that pass the filter, in time order."""
        found = self._memo.get(text)
        if found is None:
            position = self._position
            found = tuple(sorted(position[r] for r in _ids(text) if r in position))
            self._memo[text] = found
        return found

    def joined(self, texts: str | None) -> list[int]:
        """The positions of the runs of lists joined by ';', in time order."""
        if not texts:
            return []
        out = list(chain.from_iterable(map(self.positions, texts.split(";"))))
        out.sort()
        return out


# Per test: its units (positions in time order), its bad, flaky and failed positions, and,
# for a test with a bad unit, its days with units as read.DayCounts rows (day, units, bad).
_TestUnits = tuple[int, list[int], list[int], list[int], list[int], list[tuple[str, int, int]]]


def _test_units(
    conn: sqlite3.Connection,
    window: Window,
    timeline: Timeline,
    filter_sql: str,
    params: Mapping[str, Any],
) -> Iterator[_TestUnits]:
    """Per test, one at a time, as positions on the timeline: whole days from the day rows'
    run lists, the partial edge days from the raw rows. One test's lists are held at a time,
    so memory does not grow with the history. A test without a bad unit gets no days (its
    rate cannot change)."""
    position = timeline.position
    edges: dict[int, tuple[list[int], list[int], list[int], list[int]]] = {}
    units = q.TEST_UNITS.format(
        source="runs r CROSS JOIN test_runs tr ON tr.run = r.id",
        where=f"{rollups.EDGE_RUNS} AND tr.ts > :start AND tr.ts <= :now AND {filter_sql}",
    )
    for test, run, bad_unit, flaky_unit, failed_unit in conn.execute(
        f"SELECT key, run, bad, flaky, failed_any FROM ({units})", params
    ):
        at = position.get(run)
        if at is None:
            continue
        entry = edges.get(test)
        if entry is None:
            entry = edges[test] = ([], [], [], [])
        entry[0].append(at)
        for flag, target in ((bad_unit, entry[1]), (flaky_unit, entry[2]), (failed_unit, entry[3])):
            if flag:
                target.append(at)
    lists = RunLists(timeline)
    # One row per test (the table is in test order: no sort), the lists joined by ';'.
    for test, runs, bad, flaky, failed in conn.execute(
        "SELECT test, group_concat(run_list, ';'), group_concat(bad_list, ';'),"
        " group_concat(flaky_list, ';'), group_concat(fail_list, ';') FROM test_day_seq"
        " WHERE day >= :lo_day AND day <= :hi_day GROUP BY test",
        window.params,
    ):
        parts = (lists.joined(runs), lists.joined(bad), lists.joined(flaky), lists.joined(failed))
        edge = edges.pop(test, None)
        if edge is not None:
            for whole, part in zip(parts, edge, strict=True):
                whole.extend(part)
                whole.sort()
        days = timeline.day_counts(parts[0], parts[1]) if parts[1] else []
        yield (test, *parts, days)
    for test, edge in edges.items():
        ran, bad_at = sorted(edge[0]), sorted(edge[1])
        days = timeline.day_counts(ran, bad_at) if bad_at else []
        yield test, ran, bad_at, sorted(edge[2]), sorted(edge[3]), days


def _most_attempts(
    conn: sqlite3.Connection,
    filter_sql: str,
    params: Mapping[str, Any],
    *,
    by_branch_kind: bool,
) -> dict[int, dict[str, int]]:
    """Most attempts per test and suite over the filtered window, where more than one.

    A (test, suite, day) rollup row keeps its day's most attempts: a whole day of the window
    answers from it unless the filter names a branch kind (a day row mixes them), and only the
    raw runs of the partial edge days, or of every candidate day then, are read.
    """
    # The window's bounds are kept off the index (unary +): each candidate reads its day.
    raw_days = "c.day >= :first_day AND c.day <= :last_day"
    if not by_branch_kind:
        raw_days += " AND (c.day < :lo_day OR c.day > :hi_day)"
    raw = f"""
    SELECT c.test AS test, c.suite AS suite, max(tr.attempts) AS most
    FROM test_day_rollups c
    CROSS JOIN test_runs tr ON tr.test = c.test AND tr.ts >= c.day
        AND tr.ts < date(c.day, '+1 day')
    CROSS JOIN runs r ON r.id = tr.run
    WHERE {raw_days} AND c.max_attempts > 1
        AND r.suite = c.suite AND tr.attempts > 1 AND +tr.ts > :start AND +tr.ts <= :now
        AND {q.COUNTED} AND {filter_sql}
    GROUP BY c.test, c.suite"""
    sql = raw
    if not by_branch_kind:
        whole = """
    SELECT c.test AS test, c.suite AS suite, max(c.max_attempts) AS most
    FROM test_day_rollups c
    WHERE c.day >= :lo_day AND c.day <= :hi_day AND c.max_attempts > 1
        AND (:suite IS NULL OR c.suite = :suite)
    GROUP BY c.test, c.suite"""
        sql = f"SELECT test, suite, max(most) FROM ({raw} UNION ALL {whole}) GROUP BY test, suite"
    out: dict[int, dict[str, int]] = {}
    for test, suite, most in conn.execute(sql, params):
        out.setdefault(int(test), {})[str(suite)] = int(most)
    return out


@dataclass(slots=True)
class EvidencePass:
    """Per-test evidence, and what the same pass over the tests' run lists gives the rest of a
    report: the run sets of pooled groups and the days of the tests with a bad run."""

    tests: dict[int, Evidence]
    # Per group key: its members' runs (read.GroupUnits), of the filter's runs alone, which
    # are all family_evidence and read.group_days count of them. None: not pooled.
    group_units: GroupUnits | None = None
    # Per test with a bad run: its days as test_days gives them. None: not kept.
    bad_days: DayCounts | None = None
    # The suites that retry, read from every test when `tests` holds only some. None: `tests`
    # holds every test (each one's suites say it).
    retry_suites: set[str] | None = None


def test_evidence(
    conn: sqlite3.Connection,
    window: Window,
    config: Config,
    suite: str | None,
    branch_kind: str | None,
    pool: Mapping[int, str] | None = None,
) -> EvidencePass:
    """Evidence per test (tests.id) over the runs of the suite and/or branch kind; with the
    run sets of the groups `pool` maps tests to (tests.id -> group key; None: no pooling)
    and the bad tests' days, from the same pass."""
    timeline = Timeline(window_runs(conn, window, config, suite, branch_kind))
    filter_sql = _run_filter(suite, branch_kind)
    params = {**window.params, "suite": suite, "branch_kind": branch_kind}
    attempts = _most_attempts(conn, filter_sql, params, by_branch_kind=branch_kind is not None)
    members = pool or {}
    pooled: dict[str, tuple[set[int], set[int], set[int], set[int]]] = {
        key: (set(), set(), set(), set()) for key in set(members.values())
    }
    out = {}
    bad_days: DayCounts = {}
    rows = _test_units(conn, window, timeline, filter_sql, params)
    for test, units, bad, flaky, failed, days in rows:
        most = attempts.get(test, {})
        ev = timeline.evidence_at(
            test, units, set(bad), set(flaky), set(failed), max(most.values(), default=1), most
        )
        if ev is None:
            continue
        out[test] = ev
        if days:
            bad_days[test] = days
        key = members.get(test)
        if key is not None:
            for target, positions in zip(pooled[key], (units, bad, flaky, failed), strict=True):
                target.update(positions)
    order = timeline.order

    def runs(positions: set[int]) -> set[int]:
        return {order[at] for at in positions}

    units_of: GroupUnits = {
        key: (runs(ran), runs(bad), runs(flaky), runs(failed))
        for key, (ran, bad, flaky, failed) in pooled.items()
    }
    return EvidencePass(out, units_of if pool is not None else None, bad_days)


def family_members(conn: sqlite3.Connection) -> dict[int, str]:
    """tests.id -> parent of every member of a parametrized family."""
    return {
        int(pk): str(parent)
        for pk, parent in conn.execute(
            "SELECT id, parent FROM tests WHERE parent IN "
            "(SELECT parent FROM tests WHERE test_id <> parent)"
        )
    }


def family_evidence(
    conn: sqlite3.Connection,
    window: Window,
    config: Config,
    suite: str | None,
    branch_kind: str | None,
    tests: Mapping[int, Evidence],
    units: GroupUnits | None = None,
) -> dict[str, Evidence]:
    """Evidence per parametrized family, pooled by run, over the runs of the suite and/or
    branch kind (`tests`: test_evidence of the same request, for the most attempts;
    `units`: group_units of family_members over the window, when the caller has them)."""
    members = family_members(conn)
    if not members:
        return {}
    most: dict[str, int] = {}
    for pk, parent in members.items():
        if pk in tests:
            most[parent] = max(most.get(parent, 0), tests[pk].max_attempts)
    timeline = Timeline(window_runs(conn, window, config, suite, branch_kind))
    out = {}
    if units is None:
        units = group_units(conn, members, window)
    for parent, sets in units.items():
        ev = timeline.evidence(parent, sets, most.get(parent, 0))
        if ev is not None:
            out[parent] = ev
    return out


def test_days(
    conn: sqlite3.Connection,
    window: Window,
    config: Config,
    test_pks: Iterable[int],
    suite: str | None,
    branch_kind: str | None,
) -> DayCounts:
    """Each test's days with a counted run of the suite and/or branch kind, with its runs and
    bad runs there (read.DayCounts): the entries of the day rows' run lists that pass the
    filter, the partial edge days from the filtered raw rows."""
    keys = sorted(set(test_pks))
    if not keys:
        return {}
    timeline = Timeline(window_runs(conn, window, config, suite, branch_kind))
    lists = RunLists(timeline)
    out: DayCounts = {}
    for test, runs, bad in conn.execute(
        "SELECT test, group_concat(run_list, ';'), group_concat(bad_list, ';')"
        " FROM test_day_seq WHERE test IN (SELECT value FROM json_each(:keys))"
        " AND day >= :lo_day AND day <= :hi_day GROUP BY test",
        {**window.params, "keys": json.dumps(keys)},
    ):
        days = timeline.day_counts(lists.joined(runs), lists.joined(bad))
        if days:
            out[test] = days
    params = {"suite": suite, "branch_kind": branch_kind}
    edges = edge_test_days(conn, keys, window, _run_filter(suite, branch_kind), params)
    return merge_days(out, edges)


@dataclass(slots=True)
class RunMasks:
    """Runs as bit masks over a window's counted-eligible runs: bit i is the i-th run by id.

    A mask is one int, which the garbage collector never walks; a set of run ids was a
    reference per run, walked by every full collection while an app loads a big history.
    """

    tests: dict[int, tuple[int, int]]  # per test: the runs it was counted in, its bad runs
    suites: dict[str, int]  # per suite, its runs


def mask_bits(mask: int) -> Iterator[int]:
    """The bits set in a mask, lowest first."""
    text = format(mask, "b")[::-1]
    bit = text.find("1")
    while bit >= 0:
        yield bit
        bit = text.find("1", bit + 1)


def _to_mask(field: bytearray) -> int:
    return int.from_bytes(field, "little")


def run_masks(
    conn: sqlite3.Connection,
    window: Window,
    config: Config,
    test_pks: Iterable[int],
    suite: str | None = None,
    branch_kind: str | None = None,
    *,
    bad_only: bool = False,
    runs: Mapping[int, WindowRun] | None = None,
) -> RunMasks:
    """Per test: the counted runs of the window it ran in and was bad in, of the suite and/or
    branch kind when given (the day rows' run lists, the partial edge days from the raw
    rows), as RunMasks. `bad_only`: the bad runs alone (the first mask is then 0), read from
    the days with a bad run. Tests with no such run are left out. `runs`: the window's runs
    of the filter (read.window_runs) when the caller has them: masks made from the same runs
    share their bits."""
    if runs is None:
        runs = window_runs(conn, window, config, suite, branch_kind)
    bit = {pk: i for i, pk in enumerate(sorted(runs))}
    size = (len(bit) + 7) // 8
    by_suite: dict[str, bytearray] = {}
    for pk, run in runs.items():
        field = by_suite.setdefault(run.suite, bytearray(size))
        field[bit[pk] >> 3] |= 1 << (bit[pk] & 7)
    suites = {name: _to_mask(field) for name, field in by_suite.items()}
    keys = sorted(set(test_pks))
    if not keys:
        return RunMasks({}, suites)
    # Built as bytearrays (no references either), turned into masks once complete.
    fields: dict[int, tuple[bytearray, bytearray]] = {}

    def fields_of(test: int) -> tuple[bytearray, bytearray]:
        found = fields.get(test)
        if found is None:
            found = fields[test] = (bytearray(size), bytearray(size))
        return found

    def add(field: bytearray, ids: Iterable[int]) -> None:
        for pk in ids:
            at = bit.get(pk)
            if at is not None:
                field[at >> 3] |= 1 << (at & 7)

    lists = ("NULL" if bad_only else "group_concat(run_list)") + ", group_concat(bad_list)"
    only_bad = " AND failed_runs > 0" if bad_only else ""
    for test, ran, bad in conn.execute(
        f"SELECT test, {lists} FROM test_day_seq"
        " WHERE test IN (SELECT value FROM json_each(:keys))"
        f" AND day >= :lo_day AND day <= :hi_day{only_bad} GROUP BY test",
        {**window.params, "keys": json.dumps(keys)},
    ):
        ran_field, bad_field = fields_of(int(test))
        add(ran_field, _ids(ran))
        add(bad_field, _ids(bad))
    units = q.TEST_UNITS.format(
        source="runs r CROSS JOIN test_runs tr ON tr.run = r.id",
        where=f"{rollups.EDGE_RUNS} AND tr.ts > :start AND tr.ts <= :now"
        f" AND {_run_filter(suite, branch_kind)}"
        " AND tr.test IN (SELECT value FROM json_each(:keys))",
    )
    params = {**window.params, "keys": json.dumps(keys), "suite": suite}
    params["branch_kind"] = branch_kind
    for test, run, bad_unit in conn.execute(f"SELECT key, run, bad FROM ({units})", params):
        if bad_only and not bad_unit:
            continue
        ran_field, bad_field = fields_of(int(test))
        if not bad_only:
            add(ran_field, (run,))
        if bad_unit:
            add(bad_field, (run,))
    tests = {}
    for test, (ran_field, bad_field) in fields.items():
        ran_mask, bad_mask = _to_mask(ran_field), _to_mask(bad_field)
        if ran_mask or bad_mask:
            tests[test] = (ran_mask, bad_mask)
    return RunMasks(tests, suites)


def run_days(
    conn: sqlite3.Connection,
    window: Window,
    config: Config,
    suite: str | None,
    branch_kind: str | None,
) -> dict[int, str]:
    """Run id -> day of the window's counted-eligible runs of the suite and/or branch kind
    (read.group_days counts a group's days over these)."""
    runs = window_runs(conn, window, config, suite, branch_kind)
    return {pk: run.ts[:10] for pk, run in runs.items()}


def signature_counts(
    conn: sqlite3.Connection,
    window: Window,
    tests: Iterable[int],
    suite: str | None,
    branch_kind: str | None,
) -> list[tuple[int, str, str, int, str]]:
    """(tests.id, signature hash, text, counted runs with it, latest ts) per test and
    signature over the filtered window: the raw rows of the days test_day_signatures names."""
    # The window's bounds are kept off the index (unary +): each (test, day) reads its day.
    sql = f"""
    SELECT tr.test, s.hash, s.text, count(*), max(tr.ts)
    FROM (
        SELECT DISTINCT test, day FROM test_day_signatures
        WHERE test IN (SELECT value FROM json_each(:keys))
            AND day >= :first_day AND day <= :last_day
    ) c
    CROSS JOIN test_runs tr ON tr.test = c.test AND tr.ts >= c.day
        AND tr.ts < date(c.day, '+1 day')
    CROSS JOIN runs r ON r.id = tr.run
    CROSS JOIN signatures s ON s.id = tr.signature
    WHERE +tr.ts > :start AND +tr.ts <= :now AND {q.COUNTED} AND {_run_filter(suite, branch_kind)}
    GROUP BY tr.test, tr.signature"""
    params = {
        **window.params,
        "keys": json.dumps(sorted(set(tests))),
        "suite": suite,
        "branch_kind": branch_kind,
    }
    return [
        (int(t), str(h), str(x), int(n), str(ts)) for t, h, x, n, ts in conn.execute(sql, params)
    ]
