"""Co-failure groups: flaky tests that fail in the same runs (one leak, many victims), grouped
as one problem beside families and signature groups.

Rule, over the counted runs of the window (the report's suite and branch-kind filters apply):
- only tests judged flaky take part; a run where more than MAX_BAD_TESTS_PER_RUN of them
  failed is left out of the pairing (it says nothing about which of them belong together);
- two tests are linked when they failed together in at least COFAILURE_MIN_SHARED runs, those
  runs are at least COFAILURE_MIN_OVERLAP of the bad runs of the one that failed less often
  (the overlap coefficient), and, over the runs where both were counted, one fails
  significantly more often when the other fails than when it passes, within the runs of each
  suite: Fisher's exact test stratified by suite (two-sided, on the 2x2 tables of the two
  tests' bad and good runs, one per suite), the p-values of every pair tested adjusted
  together with Benjamini-Hochberg, at most `suspect_fdr`;
- a group is a connected set of linked tests (two tests or more).

When the rollups answer the window, each flaky test's bad runs and (for the tests of a
candidate pair) its counted runs are read as run masks from the day rows' run lists
(flaketui.core.rollups.filtered.run_masks) and paired in Python; else the same counts come
from the raw rows in SQL.

Two often-failing tests that fail independently share many runs by chance; the test of
independence keeps them apart. It is stratified because two tests that both fail only in one
suite (a nightly on bigger machines, a job that shuffles its order) share its runs whatever
their causes: over every run they would look linked, within each suite they are not.

Groups are disjoint, so each is pooled by run like a signature group
(flaketui.core.scoring.aggregates) and judged and ranked like the other groups. The cause
they share is the strongest suspect of the group pooled by run (flaketui.core.scoring.causes):
a run is bad when any member failed in it.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime

from flaketui.core.config import Config
from flaketui.core.history.dbhandle import Connected
from flaketui.core.rollups import build as rollups
from flaketui.core.rollups import filtered as rollup_filtered
from flaketui.core.rollups.evidence import counted_runs_cte
from flaketui.core.rollups.filtered import mask_bits
from flaketui.core.rollups.read import Window, window_runs
from flaketui.core.scoring.statistics import (
    FisherExact,
    benjamini_hochberg,
    stratified_fisher_exact,
)

COFAILURE_MIN_SHARED = 3
COFAILURE_MIN_OVERLAP = 0.5
MAX_BAD_TESTS_PER_RUN = 100
KEY_PREFIX = "cofail-"


# Per pair of flaky tests, the counted runs where both failed (runs with too many failures
# left out), and per test its bad runs: rows per test and pair, never one per run.
_SHARED_SQL = """
bad AS MATERIALIZED (SELECT test, run FROM counted WHERE bad),
crowded AS (SELECT run FROM bad GROUP BY run HAVING count(*) > :max_bad)
SELECT a.test, b.test, count(*) FROM bad a JOIN bad b ON b.run = a.run AND b.test > a.test
WHERE a.run NOT IN (SELECT run FROM crowded)
GROUP BY a.test, b.test HAVING count(*) >= :min_shared
"""
_BAD_SQL = "SELECT test, count(*) FROM counted WHERE bad GROUP BY test"

# Per suite: runs where both tests of a pair were counted, the first's and the second's bad
# runs among them, the runs where both failed.
_Stratum = tuple[int, int, int, int]
# Per candidate pair (first < second by tests.id): its strata, one per suite.
_Table = tuple[int, int, list[_Stratum]]

# Per candidate pair and suite, over the runs where both were counted: those runs, the
# first's and the second's bad runs among them, and the runs where both failed.
_TABLE_SQL = """
pairs AS (
    SELECT json_extract(value, '$[0]') AS first, json_extract(value, '$[1]') AS second
    FROM json_each(:pairs)
)
SELECT p.first, p.second, r.suite, count(*), sum(a.bad), sum(b.bad), sum(a.bad AND b.bad)
FROM pairs p JOIN counted a ON a.test = p.first
JOIN counted b ON b.test = p.second AND b.run = a.run
JOIN runs r ON r.id = a.run
GROUP BY p.first, p.second, r.suite
ORDER BY p.first, p.second, r.suite
"""


def _linked(strata: list[_Stratum], fisher: FisherExact) -> float | None:
    """The unadjusted p-value of a positive association between two tests within the suites,
    else None. A stratum: (runs where both were counted, the first's bad runs among them, the
    second's, the runs where both failed)."""
    # per suite: first's bad runs when second failed, against when second passed
    tables = [
        (together, second_bad, first_bad - together, both - second_bad)
        for both, first_bad, second_bad, together in strata
    ]
    observed = sum(table[0] for table in tables)
    # what the sum would be with no link: in each suite, first's bad runs spread evenly
    expected = sum(
        (bad_in + bad_rest) * runs_in / (runs_in + runs_rest)
        for bad_in, runs_in, bad_rest, runs_rest in tables
        if runs_in + runs_rest
    )
    if observed <= expected:
        return None
    return stratified_fisher_exact(tables, fisher)


def cofailure_groups(
    db: Connected,
    flaky: Mapping[int, str],
    now: datetime,
    config: Config,
    suite: str | None = None,
    branch_kind: str | None = None,
) -> list[list[int]]:
    """Groups of flaky tests (tests.id -> test id) failing in the same runs, see the module
    docstring; each group's tests.ids sorted by test id, groups by their first test id."""
    if len(flaky) < 2:
        return []
    if rollups.answers(db.conn, config):
        window = Window.of(db.conn, now, config)
        involved, tables = _tables_from_rollups(db, window, config, flaky, suite, branch_kind)
    else:
        involved, tables = _tables_from_rows(db, now, config, flaky, suite, branch_kind)
    kept: list[tuple[int, int, float]] = []
    fisher = FisherExact()  # the pairs share their margins: terms computed once for all
    for first, second, strata in tables:
        p_value = _linked(strata, fisher)
        if p_value is not None:
            kept.append((first, second, p_value))
    adjusted = benjamini_hochberg([p for _, _, p in kept])
    parent = {test: test for test in involved}

    def root(test: int) -> int:
        while parent[test] != test:
            parent[test] = parent[parent[test]]
            test = parent[test]
        return test

    for (first, second, _), q in zip(kept, adjusted, strict=True):
        if q <= config.suspect_fdr:
            parent[root(first)] = root(second)
    components: dict[int, list[int]] = defaultdict(list)
    for test in involved:
        components[root(test)].append(test)
    groups = [
        sorted(members, key=lambda pk: flaky[pk])
        for members in components.values()
        if len(members) > 1
    ]
    return sorted(groups, key=lambda members: flaky[members[0]])


def _tables_from_rows(
    db: Connected,
    now: datetime,
    config: Config,
    flaky: Mapping[int, str],
    suite: str | None,
    branch_kind: str | None,
) -> tuple[list[int], list[_Table]]:
    """The tests of the candidate pairs and each pair's table, from the raw rows."""
    conn = db.conn
    cte, params = counted_runs_cte(
        now, config, suite=suite, branch_kind=branch_kind, test_pks=list(flaky)
    )
    bad = {int(test): int(count) for test, count in conn.execute(f"WITH {cte} {_BAD_SQL}", params)}
    params.update(max_bad=MAX_BAD_TESTS_PER_RUN, min_shared=COFAILURE_MIN_SHARED)
    pairs = [
        (int(first), int(second))
        for first, second, shared in conn.execute(f"WITH {cte}, {_SHARED_SQL}", params)
        if shared >= COFAILURE_MIN_OVERLAP * min(bad[int(first)], bad[int(second)])
    ]
    if not pairs:
        return [], []
    involved = sorted({test for pair in pairs for test in pair})
    cte, params = counted_runs_cte(
        now, config, suite=suite, branch_kind=branch_kind, test_pks=involved
    )
    params["pairs"] = json.dumps(pairs)
    strata: dict[tuple[int, int], list[_Stratum]] = defaultdict(list)
    for first, second, _suite, both, first_bad, second_bad, together in conn.execute(
        f"WITH {cte}, {_TABLE_SQL}", params
    ):
        strata[int(first), int(second)].append(
            (int(both), int(first_bad), int(second_bad), int(together))
        )
    return involved, [(first, second, found) for (first, second), found in strata.items()]


def _tables_from_rollups(
    db: Connected,
    window: Window,
    config: Config,
    flaky: Mapping[int, str],
    suite: str | None,
    branch_kind: str | None,
) -> tuple[list[int], list[_Table]]:
    """What _tables_from_rows reads, from run masks: the flaky tests' bad runs first, then the
    counted runs of the tests in a candidate pair only.

    Every table the pairing keeps is an int, a bytearray or a dict of ints (none of which the
    garbage collector walks): at 10 000 tests, sets of runs and a dict keyed by pairs were
    millions of references, walked by each full collection an app loading the history made.
    """
    conn = db.conn
    # One set of runs for both reads: the bad runs' masks and the counted runs' share bits.
    runs = window_runs(conn, window, config, suite, branch_kind)
    found = rollup_filtered.run_masks(
        conn, window, config, flaky, suite, branch_kind, bad_only=True, runs=runs
    )
    bad = {test: masks[1] for test, masks in found.tests.items()}
    # Each bad (run, test), as one int ordered by run then test: the runs' failing tests in
    # test order, as the pairing reads them.
    stride = max(bad, default=0) + 1
    failures = array("q")
    for test in sorted(bad):
        failures.extend(run * stride + test for run in mask_bits(bad[test]))
    failures = array("q", sorted(failures))
    shared: dict[int, int] = {}
    start = 0
    while start < len(failures):
        run = failures[start] // stride
        end = start + 1
        while end < len(failures) and failures[end] // stride == run:
            end += 1
        if end - start <= MAX_BAD_TESTS_PER_RUN:
            tests = [failures[at] % stride for at in range(start, end)]
            for i, first in enumerate(tests):
                for second in tests[i + 1 :]:
                    key = first * stride + second
                    shared[key] = shared.get(key, 0) + 1
        start = end
    pairs = sorted(
        (first, second)
        for first, second, count in ((*divmod(key, stride), n) for key, n in shared.items())
        if count >= COFAILURE_MIN_SHARED
        and count >= COFAILURE_MIN_OVERLAP * min(bad[first].bit_count(), bad[second].bit_count())
    )
    if not pairs:
        return [], []
    involved = sorted({test for pair in pairs for test in pair})
    ran = rollup_filtered.run_masks(conn, window, config, involved, suite, branch_kind, runs=runs)
    tables = []
    for first, second in pairs:
        both = ran.tests[first][0] & ran.tests[second][0]
        first_bad, second_bad = bad[first] & both, bad[second] & both
        strata = []
        for name in sorted(ran.suites):
            in_suite = both & ran.suites[name]
            if not in_suite:
                continue
            in_first, in_second = first_bad & in_suite, second_bad & in_suite
            strata.append(
                (
                    in_suite.bit_count(),
                    in_first.bit_count(),
                    in_second.bit_count(),
                    (in_first & in_second).bit_count(),
                )
            )
        tables.append((first, second, strata))
    return involved, tables


def group_key(test_ids: list[str]) -> str:
    """A stable key for the group of these tests."""
    digest = hashlib.sha1("\n".join(sorted(test_ids)).encode(), usedforsecurity=False)
    return KEY_PREFIX + digest.hexdigest()[:12]


def group_label(test_ids: list[str], cause: str | None) -> str:
    """The group's name in lists: the cause the tests share, else the first tests' names."""
    if cause:
        return f"fail together {cause}" if cause.startswith("after ") else f"fail together: {cause}"
    names = [test_id.rsplit("::", 1)[-1] for test_id in sorted(test_ids)]
    shown = ", ".join(names[:2]) + (", …" if len(names) > 2 else "")
    return f"fail together: {shown}"
