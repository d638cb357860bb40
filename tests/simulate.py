"""A seeded CI history simulator with known truth, for the scoring rules' tests.

`simulate(db, Plan(...), seed=...)` writes a history straight into a store (the rows of
flaketui/core/history/store.py, as tests/core/history_builder.py writes them, but in bulk) and
returns what really happened to each test: its kind, its flake rate over time, its onset or
break day. A plan describes:

- suites: runs per day on main and on pull requests, whether the suite retries (always, never,
  or on a share of its runs: mixed retries), gating or not;
- tests per behaviour: healthy, rare noise (a tiny first-attempt failure rate, as shared CI
  machines produce), steady flakes, flakes starting at a known day (onset), flaky tests that
  break at a known day (a regression: every attempt fails from then on);
- outages: at a known moment, a run in which a share of the suite's tests fail with one
  signature; the red run is re-run on the same commit and passes;
- same-commit re-runs of red runs, as people press "re-run" on a red pull request.

Days count from `start`; `now` is the end of the last day. Everything is drawn from one
`random.Random(seed)`, so a seed gives one history.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import sqlite_utils

from flaketui.core.history.store import transaction
from flaketui.core.ingest.resign import SCHEME_KEY, scheme_of
from flaketui.core.ingest.signatures import sign
from flaketui.core.rollups import build as rollups
from flaketui.core.timeutil import to_iso

START = datetime(2026, 9, 1, tzinfo=UTC)
POD_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' generated-name suffixes
_PARAMS = re.compile(r"\[.*\]$")
OUTAGE_MESSAGE = (
    "ConnectionError: HTTPConnectionPool(host='10.0.{a}.{b}', port=5432): "
    "Max retries exceeded (pod db-7d9f8b6c5-{pod})"
)


@dataclass(frozen=True)
class Suite:
    """One CI suite: how often it runs and how it retries."""

    name: str = "unit"
    main_per_day: float = 8.0
    pr_per_day: float = 8.0
    retry_share: float = 1.0  # share of runs with reruns enabled (0: never, 1: always)
    max_attempts: int = 2
    rerun_red_share: float = 0.5  # share of red runs re-run on the same commit


@dataclass(frozen=True)
class Behaviour:
    """How one test fails over time (rates are per first attempt and per retry)."""

    kind: str  # healthy | rare | steady | onset | regression | flip-regression
    rate: float = 0.0  # flake rate (before onset: 0)
    onset_day: float | None = None  # flaky at `rate` from this day on
    break_day: float | None = None  # fails every attempt from this day on


@dataclass(frozen=True)
class Outage:
    """A shared service down: a share of one suite's tests fail in one run, then a re-run."""

    day: float
    suite: str = "unit"
    share: float = 0.2


@dataclass
class Plan:
    """What to simulate."""

    days: int = 90
    suites: tuple[Suite, ...] = (Suite(),)
    tests: dict[str, tuple[str, Behaviour]] = field(default_factory=dict)  # id -> (suite, how)
    outages: tuple[Outage, ...] = ()

    def add(self, prefix: str, count: int, how: Behaviour, suite: str = "unit") -> list[str]:
        """Add `count` tests named after `prefix`; returns their ids."""
        ids = [f"tests/test_{prefix}.py::test_{prefix}_{i:03d}" for i in range(count)]
        for test_id in ids:
            self.tests[test_id] = (suite, how)
        return ids


@dataclass
class Simulated:
    """The written history's truth."""

    now: datetime
    truth: dict[str, Behaviour]
    outage_runs: list[str]  # run ids of the outage runs (not their re-runs)


def rate_at(how: Behaviour, day: float) -> float:
    """The true first-attempt failure rate of a test on a day (1.0 once broken)."""
    if how.break_day is not None and day >= how.break_day:
        return 1.0
    if how.onset_day is not None and day < how.onset_day:
        return 0.0
    return how.rate


def _attempts(rng: random.Random, rate: float, retries: int, broken: bool) -> list[str]:
    out: list[str] = []
    for _ in range(retries):
        failed = broken or rng.random() < rate
        out.append(rng.choice(("fail", "fail", "error")) if failed else "pass")
        if not failed:
            break
    return out


class _Writer:
    """Bulk rows of one history, written in one transaction."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self.db = db
        self.runs: list[tuple[object, ...]] = []
        self.results: list[tuple[object, ...]] = []
        self.test_runs: list[tuple[object, ...]] = []
        self.tests: dict[str, int] = {}
        self.first_seen: dict[str, str] = {}
        self.signatures: dict[str, tuple[int, str, str]] = {}

    def test_pk(self, test_id: str, ts: str) -> int:
        if test_id not in self.tests:
            self.tests[test_id] = len(self.tests) + 1
            self.first_seen[test_id] = ts
        return self.tests[test_id]

    def signature_pk(self, message: str) -> int | None:
        signature = sign(message)
        if signature is None:
            return None
        if signature.hash not in self.signatures:
            self.signatures[signature.hash] = (len(self.signatures) + 1, signature.text, message)
        return self.signatures[signature.hash][0]

    def run(self, run_id: str, suite: str, kind: str, commit: str, ts: str) -> int:
        pk = len(self.runs) + 1
        branch = "main" if kind == "main" else "feature"
        self.runs.append((pk, run_id, suite, branch, kind, commit, ts, 1, None, "junit", 1))
        return pk

    def result(self, run_pk: int, ts: str, test_id: str, attempts: list[str], msg: str) -> None:
        test = self.test_pk(test_id, ts)
        first_sig = None
        for number, outcome in enumerate(attempts, start=1):
            failed = outcome != "pass"
            sig = self.signature_pk(msg) if failed else None
            first_sig = first_sig or sig
            self.results.append(
                (run_pk, test, number, outcome, None, 10, msg if failed else None, sig)
            )
        bad = int(attempts[0] != "pass")
        if all(o == "pass" for o in attempts):
            outcome = "pass"
        elif attempts[-1] == "pass":
            outcome = "flaky"
        else:
            outcome = "fail"
        failed_attempts = sum(o != "pass" for o in attempts)
        self.test_runs.append(
            (test, run_pk, ts, outcome, bad, len(attempts), failed_attempts, None, first_sig, 0, 10)
        )

    def flush(self) -> None:
        conn = self.db.conn
        with transaction(conn):
            conn.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (SCHEME_KEY, scheme_of(()))
            )
            conn.executemany(
                "INSERT INTO runs (id, run_id, suite, branch, branch_kind, commit_sha, ts, "
                "worker_count, incident, source, finished) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                self.runs,
            )
            conn.executemany(
                "INSERT INTO tests (id, test_id, parent, test_file, first_seen) VALUES (?,?,?,?,?)",
                [
                    (pk, tid, _PARAMS.sub("", tid), tid.split("::")[0], self.first_seen[tid])
                    for tid, pk in self.tests.items()
                ],
            )
            conn.executemany(
                "INSERT INTO signatures (id, hash, text, example) VALUES (?,?,?,?)",
                [(pk, h, text, ex) for h, (pk, text, ex) in self.signatures.items()],
            )
            conn.executemany(
                "INSERT INTO results (run, test, attempt, outcome, worker_id, duration_ms, "
                "message, signature) VALUES (?,?,?,?,?,?,?,?)",
                self.results,
            )
            conn.executemany(
                "INSERT INTO test_runs (test, run, ts, outcome, bad, attempts, failed_attempts, "
                "worker_id, signature, edited, first_duration_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                self.test_runs,
            )
            rollups.rebuild(conn)


def simulate(db: sqlite_utils.Database, plan: Plan, *, seed: int) -> Simulated:
    """Write the plan's history into an empty store; return its truth."""
    rng = random.Random(seed)
    out = _Writer(db)
    outage_runs: list[str] = []
    events: list[tuple[float, Suite, str, Outage | None]] = []
    for suite in plan.suites:
        for kind, per_day in (("main", suite.main_per_day), ("pr", suite.pr_per_day)):
            count = int(per_day * plan.days)
            events.extend((rng.uniform(0, plan.days), suite, kind, None) for _ in range(count))
    by_name = {s.name: s for s in plan.suites}
    events.extend((o.day, by_name[o.suite], "main", o) for o in plan.outages)
    events.sort(key=lambda e: e[0])
    members: dict[str, list[tuple[str, Behaviour]]] = {}
    for test_id, (suite_name, how) in sorted(plan.tests.items()):
        members.setdefault(suite_name, []).append((test_id, how))
    for number, (day, suite, kind, outage) in enumerate(events):
        commit = f"{suite.name}-{number:06d}"
        retries = suite.max_attempts if rng.random() < suite.retry_share else 1
        ts = START + timedelta(days=day)
        tests = members.get(suite.name, [])
        down: set[str] = set()
        if outage is not None:
            down = {t for t, _ in rng.sample(tests, round(outage.share * len(tests)))}
        attempt_sets = []
        for test_id, how in tests:
            rate = rate_at(how, day)
            if test_id in down:
                attempts = ["error"] * retries  # the service stays down for the whole run
            else:
                attempts = _attempts(rng, rate, retries, rate >= 1.0)
            attempt_sets.append((test_id, attempts, test_id in down))
        red = any(a[-1] != "pass" for _t, a, _d in attempt_sets)
        tries = [(ts, attempt_sets)]
        if outage is not None or (red and rng.random() < suite.rerun_red_share):
            again = []
            for test_id, how in tests:
                rate = rate_at(how, day)
                again.append((test_id, _attempts(rng, rate, retries, rate >= 1.0), False))
            tries.append((ts + timedelta(minutes=30), again))
        for index, (when, sets) in enumerate(tries):
            run_id = f"{suite.name}-{number:06d}-{index}"
            if outage is not None and index == 0:
                outage_runs.append(run_id)
            stamp = to_iso(when)
            run_pk = out.run(run_id, suite.name, kind, commit, stamp)
            for test_id, attempts, in_outage in sets:
                if in_outage:
                    msg = OUTAGE_MESSAGE.format(
                        a=rng.randrange(256),
                        b=rng.randrange(256),
                        pod="".join(rng.choice(POD_ALPHABET) for _ in range(5)),
                    )
                else:
                    name = test_id.rsplit("::", 1)[-1]
                    msg = f"AssertionError: {name} expected 200, got {rng.choice((500, 503))}"
                out.result(run_pk, stamp, test_id, attempts, msg)
    out.flush()
    now = START + timedelta(days=plan.days)
    return Simulated(now=now, truth={t: how for t, (_s, how) in plan.tests.items()},
                     outage_runs=outage_runs)  # fmt: skip
