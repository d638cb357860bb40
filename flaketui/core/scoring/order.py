"""The order view of a test: which tests ran before it on its worker in its bad runs against
its good runs, ranked as candidate polluters.

Runs: the target's counted runs whose order was recorded (the pytest plugin stores each
attempt's position on its worker; reports do not say), the newest MAX_ORDER_RUNS of them, a
family's params pooled by run as the scorer pools them (see flaketui.core.scoring.causes).

For every test that ran before the target's first attempt on the same worker in at least one
of those runs, the target's bad runs with that test before it are compared with its bad runs
without it by Fisher's exact test (two-sided); the p-values of all the candidates are adjusted
together with Benjamini-Hochberg. A candidate is a `polluter` when the target fails more often
with it before than without it (it leaves state behind), a `dependency` when the target fails
less often with it (it sets up something the target relies on, and the target fails when the
schedule separates them).

A significant polluter (adjusted p-value at most `suspect_fdr`) is `explained_by` a stronger one
when, in the runs where none of the stronger significant polluters ran before the target, it
no longer makes the target fail significantly more (unadjusted p-value): a test that merely
tends to run between the real polluter and its victim. Candidates are ranked unexplained
first, then by unadjusted p-value, then by the difference of the two failure rates, then by id.

A test that ran before the target in every recorded run cannot be told apart from the others
(a fixed order): it is counted, not ranked.

Seed replay: when the target's latest bad counted run recorded the seed of the plugin that
shuffled its order (runs.order_seed: 'randomly:N' from pytest-randomly, 'random-order:N[:bucket]'
from pytest-random-order), `replay_args` gives the pytest options that shuffle the same way
again: `-p randomly --randomly-seed=N`, or `-p random_order --random-order-seed=N
[--random-order-bucket=B] -p no:randomly`.
The same seed gives the same order only over the same collected tests, so the replay runs the
suite as that run did, not the test alone; with several workers xdist's scheduling still
varies from run to run.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from flaketui.core.config import Config
from flaketui.core.history.dbhandle import Connected
from flaketui.core.rollups.evidence import counted_runs_cte
from flaketui.core.scoring.causes import Unit, analyse
from flaketui.core.scoring.detail import Target
from flaketui.core.scoring.statistics import FisherExact, benjamini_hochberg

ROLES = ("polluter", "dependency", "neutral")
RANDOM_ORDER_BUCKETS = ("class", "module", "package", "parent", "grandparent", "global")
_SEED = re.compile(r"[A-Za-z0-9_.]+")

_LATEST_SEEDED_BAD_SQL = """
SELECT r.order_seed, c.worker_count, r.run_id FROM counted c CROSS JOIN runs r ON r.id = c.run
WHERE c.bad AND r.order_seed IS NOT NULL AND r.order_seed <> ''
ORDER BY c.ts DESC, c.run DESC LIMIT 1
"""


@dataclass(slots=True)
class Candidate:
    """A test that ran before the target on its worker in some of its recorded runs."""

    test_id: str
    role: str  # one of ROLES
    bad_before: int  # bad runs of the target with this test before it
    good_before: int  # good runs of the target with this test before it
    rate_with: float  # the target's failure rate in runs with this test before it
    rate_without: float  # ... and in the other recorded runs
    p_value: float  # Fisher's exact test, Benjamini-Hochberg adjusted
    p_raw: float
    suspect: bool = False  # also one of the target's suspects (scoring.causes)
    explained_by: str | None = None  # a stronger polluter that accounts for this one


@dataclass(slots=True)
class SeedReplay:
    """The latest bad run of a target that recorded its random-order seed."""

    run_id: str
    order_seed: str  # as recorded: 'randomly:N' or 'random-order:N'
    worker_count: int
    args: list[str]  # pytest options that replay the order (replay_args)

    def command(self) -> list[str]:
        """A pytest command line replaying that run's order (its worker count included)."""
        workers = ["-n", str(self.worker_count)] if self.worker_count > 1 else []
        return ["pytest", *self.args, *workers]


@dataclass(slots=True)
class OrderView:
    """A test's or family's recorded runs with their order, and the candidate polluters."""

    key: str
    kind: str
    members: list[str]
    now: datetime
    runs: int  # counted runs
    ordered_runs: int  # of those, runs whose order was recorded
    bad_runs: int  # bad runs among the ordered runs
    good_runs: int
    always_before: list[str] = field(default_factory=list)  # ran before it in every run
    candidates: list[Candidate] = field(default_factory=list)
    replay: SeedReplay | None = None


def order_candidates(units: list[Unit], config: Config) -> tuple[list[Candidate], list[str]]:
    """The ranked candidates of the units whose order is known, and the tests always before."""
    ordered = [unit for unit in units if "predecessor" in unit.values]
    total, total_bad = len(ordered), sum(unit.bad for unit in ordered)
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # test -> [runs, bad runs]
    for unit in ordered:
        for test in unit.values["predecessor"]:
            counts[test][0] += 1
            counts[test][1] += unit.bad
    always = sorted(test for test, (runs, _) in counts.items() if runs == total)
    tests: list[tuple[str, int, int, int, int, float]] = []
    fisher = FisherExact()  # every candidate splits the same runs
    for test, (runs, bad) in counts.items():
        if runs == total:
            continue
        rest_runs, rest_bad = total - runs, total_bad - bad
        tests.append((test, bad, runs, rest_bad, rest_runs, fisher(bad, runs, rest_bad, rest_runs)))
    adjusted = benjamini_hochberg([test[-1] for test in tests])
    candidates = []
    for (test, bad, runs, rest_bad, rest_runs, p_raw), q in zip(tests, adjusted, strict=True):
        rate, rest_rate = bad / runs, rest_bad / rest_runs
        role = "polluter" if rate > rest_rate else "dependency" if rate < rest_rate else "neutral"
        candidates.append(Candidate(test, role, bad, runs - bad, rate, rest_rate, q, p_raw))
    candidates.sort(
        key=lambda c: (c.p_raw, -abs(c.rate_with - c.rate_without), ROLES.index(c.role), c.test_id)
    )
    _explain(ordered, candidates, config, fisher)
    candidates.sort(key=lambda c: c.explained_by is not None)  # stable: keeps the ranking
    return candidates, always


def _explain(
    ordered: list[Unit], candidates: list[Candidate], config: Config, fisher: FisherExact
) -> None:
    """Mark the significant polluters that a stronger one accounts for (explained_by)."""
    kept: list[str] = []
    for candidate in candidates:
        if candidate.role != "polluter" or candidate.p_value > config.suspect_fdr:
            continue
        if kept:
            rest = [u for u in ordered if not any(k in u.values["predecessor"] for k in kept)]
            inside = [u for u in rest if candidate.test_id in u.values["predecessor"]]
            bad, runs = sum(u.bad for u in inside), len(inside)
            rest_bad, rest_runs = sum(u.bad for u in rest) - bad, len(rest) - runs
            holds = (
                runs > 0
                and rest_runs > 0
                and bad / runs > rest_bad / rest_runs
                and fisher(bad, runs, rest_bad, rest_runs) <= config.suspect_fdr
            )
            if not holds:
                candidate.explained_by = kept[0]
                continue
        kept.append(candidate.test_id)


def order_view(
    db: Connected, test_or_parent: str | Target, *, now: datetime, config: Config
) -> OrderView:
    """The order view of a test or family (an exact test id first, else a family)."""
    analysis = analyse(db, test_or_parent, now=now, config=config)
    candidates, always = order_candidates(analysis.units, config)
    suspects = {s.value for s in analysis.suspects if s.dimension == "predecessor"}
    for candidate in candidates:
        candidate.suspect = candidate.test_id in suspects
    ordered = [unit for unit in analysis.units if "predecessor" in unit.values]
    bad = sum(unit.bad for unit in ordered)
    return OrderView(
        key=analysis.key,
        kind=analysis.kind,
        members=analysis.members,
        now=now,
        runs=analysis.runs,
        ordered_runs=len(ordered),
        bad_runs=bad,
        good_runs=len(ordered) - bad,
        always_before=always,
        candidates=candidates,
        replay=latest_seed_replay(db, analysis.members, now=now, config=config),
    )


def replay_args(order_seed: str | None) -> list[str] | None:
    """pytest options that shuffle as the recorded seed did; None when it names no plugin."""
    plugin, _, rest = (order_seed or "").partition(":")
    seed, _, bucket = rest.partition(":")
    if not _SEED.fullmatch(seed):
        return None  # data from CI never becomes an option
    if plugin == "randomly" and seed.isdigit() and not bucket:
        return ["-p", "randomly", f"--randomly-seed={seed}"]
    if plugin == "random-order" and (not bucket or bucket in RANDOM_ORDER_BUCKETS):
        where = [f"--random-order-bucket={bucket}"] if bucket else []
        return ["-p", "random_order", f"--random-order-seed={seed}", *where, "-p", "no:randomly"]
    return None


def latest_seed_replay(
    db: Connected, test_ids: list[str], *, now: datetime, config: Config
) -> SeedReplay | None:
    """The newest bad counted run of these tests with a usable random-order seed, if any."""
    cte, params = counted_runs_cte(now, config, test_ids=test_ids)
    row = db.conn.execute(f"WITH {cte} {_LATEST_SEEDED_BAD_SQL}", params).fetchone()
    if row is None:
        return None
    args = replay_args(str(row[0]))
    if args is None:
        return None
    return SeedReplay(str(row[2]), str(row[0]), int(row[1] or 1), args)
