"""`flaketui diagnose`: reproduce a flaky test locally under controlled experiments, classify it.

Experiments, each `runs` sessions unless said otherwise (one pytest session per repetition:
pytest runs a node id once per session):
1. alone: the test by itself;
2. after its predecessors: the tests that ran before it on the same worker in its latest
   recorded bad run (else the predecessor suspects), then the test, up to 3 times;
3. workers: the test with those predecessors at one worker, then at the worker count where the
   history shows it failing most (at least 2; only when the interpreter that runs the sessions
   has pytest-xdist);
4. random orders: the test and its predecessors shuffled, one seed per session.

A session counts only when the test ran in it (see SessionResult.not_run): one in which pytest
did not start, did not collect the test, stopped before it or skipped it is neither a pass nor a
failure, and each experiment says how many it had and why. When the opening session alone does
not run the test, diagnose stops there with the reason: nothing else would run it either.

Classification, first match wins:
- ``fails-every-time``: it failed in every session alone (a break, not a flake, here);
- ``order-dependent``: it failed more often after other tests than alone, in one of two groups
  of serial sessions, each compared with the sessions alone on its own: the recorded order
  (after its predecessors, and at one worker), or the random orders in which at least one
  test ran before it. The group needs at least two failures and Fisher's exact test
  p <= 0.05 (see order_evidence). The polluter is found by bisecting the tests that ran
  before it in a failing session (halves tried in order, each up to twice);
- ``concurrency-dependent``: it failed more at many workers than at one (Fisher's exact test
  p <= 0.05, or never at one and at least twice at many);
- ``non-deterministic``: it failed alone in some sessions: the reproduced rate with its Wilson
  interval (and the history's duration suspect, when it has one: a test near its timeout);
- ``not-reproducible``: no experiment made it fail here, or too rarely for any of the above;
  the history's suspects (a host, an OS, a Python...) point at what differs from this machine.

When the test's latest bad recorded run shuffled its order with a recorded seed
(pytest-randomly, pytest-random-order), the diagnosis also gives the command that replays that
order (`replay`); a ``not-reproducible`` test's reproduction command is that replay.

Every session is stored in the history as a run with source ``diagnose`` (suite ``diagnose``),
which scoring, rollups, the outcome sequence and incident proposals ignore.
"""

from __future__ import annotations

import json
import platform
import random
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from flaketui.core.config import Config
from flaketui.core.diagnosis.sessions import (
    SESSION_TIMEOUT_S,
    DiagnoseError,
    PytestSessions,
    SessionResult,
    check_node_id,
)
from flaketui.core.history.dbhandle import Connected
from flaketui.core.ingest.writer import RunRecorder
from flaketui.core.models import Attempt, CaseResult, RunMeta
from flaketui.core.scoring.causes import CauseAnalysis, analyse, dimension_rows
from flaketui.core.scoring.order import latest_seed_replay
from flaketui.core.scoring.statistics import fisher_exact, wilson_interval
from flaketui.core.words import plural

EXPERIMENT_SOURCE = "diagnose"
LABELS = (
    "order-dependent",
    "concurrency-dependent",
    "non-deterministic",
    "fails-every-time",
    "not-reproducible",
)
AFTER_REPEATS = 3
BISECT_TRIES = 2
MAX_PREDECESSORS = 200

_LATEST_BAD_SQL = """
SELECT a.run, coalesce(a.worker_id, ''), a.position FROM tests t
JOIN test_runs tr ON tr.test = t.id
JOIN results a ON a.run = tr.run AND a.test = tr.test
JOIN runs r ON r.id = a.run
WHERE t.test_id IN (SELECT value FROM json_each(?)) AND a.attempt = 1
  AND a.outcome IN ('fail', 'error') AND a.position IS NOT NULL AND r.source <> 'diagnose'
ORDER BY r.ts DESC, r.id DESC LIMIT 1
"""
_BEFORE_SQL = """
SELECT t.test_id FROM results a JOIN tests t ON t.id = a.test
WHERE a.run = ? AND a.attempt = 1 AND coalesce(a.worker_id, '') = ? AND a.position < ?
ORDER BY a.position
"""

Progress = Callable[[int, int, str], None]


@dataclass(slots=True)
class Experiment:
    """One experiment's sessions: how many ran and in how many the test failed."""

    name: str
    sessions: int = 0
    failed: int = 0
    note: str = ""
    # Random orders: the sessions in which at least one test ran before it, and its failures
    # in them (a shuffle that puts it first runs nothing before it).
    preceded: int = 0
    preceded_failed: int = 0
    # Sessions that did not run the test (not counted above), and the first one's reason.
    not_run: int = 0
    not_run_reason: str = ""

    def tally(self, result: SessionResult, test_id: str) -> bool | None:
        """Count a session: whether the test failed in it, None when it did not run there."""
        reason = result.not_run(test_id)
        if reason is not None:
            self.not_run += 1
            self.not_run_reason = self.not_run_reason or reason
            return None
        failed = result.failed(test_id)
        self.sessions += 1
        self.failed += failed
        return failed

    def counts(self) -> str:
        """`failed 1/4`, and the sessions that did not run the test with the first reason."""
        text = f"failed {self.failed}/{self.sessions}" if self.sessions else ""
        if self.not_run:
            text += "; " if text else ""
            text += f"the test did not run in {plural(self.not_run, 'session')}: "
            text += self.not_run_reason
        return text


@dataclass(slots=True)
class Diagnosis:
    """What diagnose found for one test."""

    test_id: str
    label: str  # one of LABELS
    summary: str
    experiments: list[Experiment]
    command: list[str]  # a reproduction command for the user
    polluter: str | None = None
    rate: float | None = None  # reproduced rate alone, with its Wilson interval
    rate_low: float | None = None
    rate_high: float | None = None
    stored_runs: int = 0
    cancelled: bool = False
    skipped: list[str] = field(default_factory=list)  # experiments left out, and why
    # The latest bad recorded run's random order, when its seed was recorded: a command that
    # replays it (the whole suite, see flaketui.core.scoring.order), and that run's id.
    replay: list[str] | None = None
    replay_run: str | None = None


class _Budget:
    """Sessions left and the deadline; raises _Stop when cancelled or out of time."""

    def __init__(self, minutes: float | None, cancel: threading.Event | None) -> None:
        self.minutes = minutes
        self.deadline = None if minutes is None else time.monotonic() + minutes * 60
        self.cancel = cancel

    def check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise _Stop("cancelled")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise _Stop("time budget used up")

    def session_limit(self) -> float:
        """How long the next session may run: its own limit, or less when the budget ends
        sooner."""
        if self.deadline is None:
            return SESSION_TIMEOUT_S
        return max(0.0, min(SESSION_TIMEOUT_S, self.deadline - time.monotonic()))

    def nothing_ran(self, test_id: str, reason: str) -> DiagnoseError:
        """The refusal of a diagnose stopped before any session ended: with no session there
        is no verdict to give, and none may say the test was tried."""
        if reason == "cancelled":
            why = "cancelled before any session finished"
        else:
            why = f"the time budget of {self.minutes:g} minutes ran out before any session finished"
        return DiagnoseError(f"{test_id}: {why}; nothing was stored")


class _Stop(Exception):
    """Ends the experiments early (cancel, or the time budget)."""


def recorded_predecessors(db: Connected, test_ids: list[str]) -> list[str]:
    """The tests that ran before the test on its worker in its latest recorded bad run."""
    conn = db.conn
    row = conn.execute(_LATEST_BAD_SQL, (json.dumps(test_ids),)).fetchone()
    if row is None:
        return []
    return [str(test) for (test,) in conn.execute(_BEFORE_SQL, row) if test not in test_ids]


class Diagnoser:
    """Runs the experiments for one test and stores their sessions."""

    def __init__(
        self,
        db: Connected,
        sessions: PytestSessions,
        *,
        runs: int,
        minutes: float | None,
        config: Config,
        now: datetime,
        cancel: threading.Event | None = None,
        progress: Progress | None = None,
        store: bool = True,
    ) -> None:
        self.db = db
        self.sessions = sessions
        self.runs = runs
        self.budget = _Budget(minutes, cancel)
        self.config = config
        self.now = now
        self.progress = progress
        self.store = store
        self.done = 0
        self.planned = 0
        self.results: list[tuple[SessionResult, int]] = []  # session, worker count
        self.batch = uuid.uuid4().hex[:8]

    def _session(self, node_ids: list[str], what: str, workers: int = 1) -> SessionResult:
        self.budget.check()
        if self.progress is not None:
            self.progress(self.done, self.planned, what)
        limit = self.budget.session_limit()
        result = self.sessions.run(
            node_ids, workers=workers, cancel=self.budget.cancel, timeout_s=limit
        )
        self.done += 1
        if result.cancelled:
            raise _Stop("cancelled")
        if result.timed_out is not None and limit < SESSION_TIMEOUT_S:
            raise _Stop("time budget used up")  # cut by the budget: no result, not stored
        self.results.append((result, workers))
        if self.progress is not None:
            self.progress(self.done, self.planned, what)
        return result

    def diagnose(self, test_id: str) -> Diagnosis:
        """Run the experiments on a test of the history and classify it."""
        repo = self.sessions.repo
        check_node_id(repo, test_id)
        self.sessions.check_interpreter()
        analysis = analyse(self.db, test_id, now=self.now, config=self.config)
        before = [t for t in recorded_predecessors(self.db, analysis.members) if _usable(repo, t)][
            -MAX_PREDECESSORS:
        ]
        if not before:
            before = [
                s.value
                for s in analysis.suspects
                if s.dimension == "predecessor" and _usable(repo, s.value)
            ]
        counts = dimension_rows(analysis.units, "worker_count", self.config)
        many = max(
            (row for row in counts if int(row.value) > 1),
            key=lambda row: (row.fail_rate, int(row.value)),
            default=None,
        )
        workers = max(2, int(many.value)) if many is not None else 2
        use_xdist = self.sessions.has_xdist
        self.planned = self.runs + (AFTER_REPEATS if before else 0) + self.runs
        self.planned += 2 * self.runs if use_xdist else 0
        experiments: dict[str, Experiment] = {}
        skipped: list[str] = []
        polluter: str | None = None
        failing_order: list[str] | None = None
        stop_reason = ""
        try:
            alone = experiments["alone"] = Experiment("alone")
            for _ in range(self.runs):
                result = self._session([test_id], "alone")
                first = not alone.sessions and not alone.not_run
                alone.tally(result, test_id)
                if first and alone.not_run:
                    raise DiagnoseError(
                        f"{test_id} did not run with {self.sessions.python} -m pytest: "
                        f"{alone.not_run_reason}"
                    )
            if before:
                after = experiments["after"] = Experiment("after predecessors")
                for _ in range(AFTER_REPEATS):
                    result = self._session([*before, test_id], "after predecessors")
                    if after.tally(result, test_id):
                        failing_order = list(before)
            else:
                skipped.append("after predecessors: the history recorded none")
            if use_xdist:
                workload = [*before, test_id]
                serial = experiments["serial"] = Experiment("1 worker")
                parallel = experiments["parallel"] = Experiment(f"{workers} workers")
                for _ in range(self.runs):
                    serial.tally(self._session(workload, "1 worker"), test_id)
                    result = self._session(workload, f"{workers} workers", workers)
                    parallel.tally(result, test_id)
            else:
                skipped.append(f"workers: pytest-xdist is not installed for {self.sessions.python}")
            if before:
                shuffled = experiments["random"] = Experiment("random orders")
                rng = random.Random(test_id)  # the same orders for the same test
                for _ in range(self.runs):
                    order = [*before, test_id]
                    rng.shuffle(order)
                    ahead = order[: order.index(test_id)]
                    failed = shuffled.tally(self._session(order, "random orders"), test_id)
                    if failed is None:
                        continue
                    shuffled.preceded += bool(ahead)
                    if failed:
                        shuffled.preceded_failed += bool(ahead)
                        if failing_order is None and ahead:
                            failing_order = ahead
            else:
                skipped.append("random orders: no recorded predecessors to shuffle")
            alone_low = experiments["alone"].failed < experiments["alone"].sessions
            if failing_order is not None and alone_low and order_evidence(experiments):
                polluter = self._bisect(failing_order, test_id)
        except _Stop as stop:
            stop_reason = str(stop)
        if stop_reason and not self.results:  # "did not fail here in 0 sessions" would lie
            raise self.budget.nothing_ran(test_id, stop_reason)
        replay = latest_seed_replay(self.db, analysis.members, now=self.now, config=self.config)
        diagnosis = self._classify(test_id, experiments, polluter, workers, before, analysis)
        if replay is not None:
            diagnosis.replay, diagnosis.replay_run = replay.command(), replay.run_id
            if diagnosis.label == "not-reproducible":
                # Nothing here made it fail: replaying CI's order is the next thing to try.
                diagnosis.command = diagnosis.replay
        diagnosis.skipped = skipped + ([f"stopped early: {stop_reason}"] if stop_reason else [])
        diagnosis.cancelled = stop_reason == "cancelled"
        if self.store:
            diagnosis.stored_runs = self._store()
        return diagnosis

    def _bisect(self, candidates: list[str], test_id: str) -> str | None:
        """The one test that makes test_id fail when run before it, halving candidates."""
        while len(candidates) > 1:
            half = len(candidates) // 2
            for part in (candidates[:half], candidates[half:]):
                if self._fails_after(part, test_id):
                    candidates = part
                    break
            else:
                return None  # neither half alone: several tests together
        if candidates and self._fails_after(candidates, test_id):
            return candidates[0]
        return None

    def _fails_after(self, before: list[str], test_id: str) -> bool:
        for _ in range(BISECT_TRIES):
            if self._session([*before, test_id], "bisecting the polluter").failed(test_id):
                return True
        return False

    def _classify(
        self,
        test_id: str,
        experiments: dict[str, Experiment],
        polluter: str | None,
        workers: int,
        before: list[str],
        analysis: CauseAnalysis,
    ) -> Diagnosis:
        alone = experiments.get("alone", Experiment("alone"))
        listed = list(experiments.values())
        rate = low = high = None
        if alone.sessions:
            rate = alone.failed / alone.sessions
            low, high = wilson_interval(alone.failed, alone.sessions, self.config.z)
        repro = [test_id]

        def make(label: str, summary: str, command: list[str]) -> Diagnosis:
            return Diagnosis(
                test_id, label, summary, listed, command, polluter, rate, low, high
            )  # fmt: skip

        if alone.sessions and alone.failed == alone.sessions:
            return make(
                "fails-every-time",
                f"failed in all {alone.sessions} sessions alone: broken here, not flaky",
                self.sessions.command(repro),
            )
        evidence = order_evidence(experiments)
        if evidence is not None:
            counts = (
                f"failed {evidence.failed}/{evidence.sessions} {evidence.name} against "
                f"{alone.failed}/{alone.sessions} alone"
            )
            if polluter is not None:
                return make(
                    "order-dependent",
                    f"fails after {polluter}: {counts}",
                    self.sessions.command([polluter, test_id]),
                )
            return make(
                "order-dependent",
                f"fails after the tests that ran before it: {counts}; no single polluter was "
                "isolated",
                self.sessions.command([*before, test_id]),
            )
        serial, parallel = experiments.get("serial"), experiments.get("parallel")
        if serial is not None and parallel is not None and parallel.failed > serial.failed:
            p_value = fisher_exact(
                parallel.failed, parallel.sessions, serial.failed, serial.sessions
            )
            if p_value <= 0.05 or (serial.failed == 0 and parallel.failed >= 2):
                return make(
                    "concurrency-dependent",
                    f"failed {parallel.failed}/{parallel.sessions} at {workers} workers against "
                    f"{serial.failed}/{serial.sessions} at one",
                    self.sessions.command([*before, test_id], workers),
                )
        if alone.failed:
            assert rate is not None and low is not None and high is not None
            slow = [s.label for s in analysis.suspects if s.dimension == "duration"]
            return make(
                "non-deterministic",
                f"failed {alone.failed}/{alone.sessions} alone: rate {rate:.0%} "
                f"(Wilson 95% {low:.0%}-{high:.0%})"
                + (f"; in the history {slow[0]}" if slow else ""),
                self.sessions.command(repro),
            )
        hint = ", ".join(s.label for s in analysis.suspects[:3])
        where = f"; the history points at {hint}" if hint else ""
        total = sum(e.sessions for e in listed)
        failed = sum(e.failed for e in listed)
        not_run = sum(e.not_run for e in listed)
        seen = (
            f"failed in {failed} of {total} sessions here, none alone, too few to single out a "
            "cause"
            if failed
            else f"did not fail here in {plural(total, 'session')}"
        )
        if not_run:
            seen += f" ({not_run} more did not run it)"
        return make(
            "not-reproducible",
            f"{seen}: look at what differs from CI{where}",
            self.sessions.command(repro),
        )

    def _store(self) -> int:
        """Each session as a run with source 'diagnose'; how many runs were written."""
        written = 0
        host = socket.gethostname() or None
        for number, (result, workers) in enumerate(self.results, start=1):
            cases = []
            previous: str | None = None
            asked = [t for t in result.order if t in result.outcomes]
            extra = [t for t in result.outcomes if t not in asked]
            for position, test in enumerate([*asked, *extra], start=1):
                serial = workers == 1
                cases.append(
                    CaseResult(
                        test,
                        test.split("::", 1)[0],
                        [
                            Attempt(
                                result.outcomes[test],
                                result.durations.get(test),
                                None,
                                None,
                                previous if serial else None,
                                position if serial else None,
                            )
                        ],
                    )
                )
                previous = test
            if not cases:
                continue
            meta = RunMeta(
                run_id=f"diagnose-{self.batch}-{number:03d}",
                suite="diagnose",
                branch_kind="pr",
                ts=datetime.now(UTC),
                worker_count=workers,
                runner_host=host,
                os=platform.system() or None,
                python=platform.python_version(),
                platform=f"{sys.platform}-{platform.machine()}",
            )
            recorder = RunRecorder(self.db.conn, meta, source=EXPERIMENT_SOURCE, config=self.config)
            recorder.add(cases)
            recorder.finish()
            written += 1
        return written


ORDER_P = 0.05  # Fisher's exact test, two-sided
ORDER_MIN_FAILED = 2


def order_evidence(experiments: dict[str, Experiment]) -> Experiment | None:
    """The sessions after other tests in which it failed significantly more than alone, if any.

    Two groups, each compared with the sessions alone on its own:
    - the recorded order: the sessions after its predecessors and the sessions at one worker,
      which run the same tests in the same order;
    - the random orders in which at least one test ran before it.
    Pooling them would hide an order dependence: a shuffle puts the polluter after the test
    about half the time, so a test failing 3/3 after its predecessors and 0/4 in random orders
    would count 3/7 against 0/4 alone, which is no evidence. A group counts when it failed at
    least ORDER_MIN_FAILED times, at a higher rate than alone, with Fisher's exact test
    p <= ORDER_P; the recorded order is tried first.
    """
    alone = experiments.get("alone")
    if alone is None or not alone.sessions:
        return None
    recorded = [experiments[k] for k in ("after", "serial") if k in experiments]
    groups = [
        Experiment(
            "after its predecessors in their recorded order",
            sum(e.sessions for e in recorded),
            sum(e.failed for e in recorded),
        )
    ]
    shuffled = experiments.get("random")
    if shuffled is not None:
        groups.append(
            Experiment(
                "in random orders with tests before it",
                shuffled.preceded,
                shuffled.preceded_failed,
            )
        )
    for group in groups:
        if fails_more_than_alone(group.failed, group.sessions, alone.failed, alone.sessions):
            return group
    return None


def fails_more_than_alone(failed: int, sessions: int, alone_failed: int, alone: int) -> bool:
    """Whether failed/sessions after other tests is significantly more than alone_failed/alone."""
    if failed < ORDER_MIN_FAILED or not alone:
        return False
    if failed * alone <= alone_failed * sessions:
        return False
    return fisher_exact(failed, sessions, alone_failed, alone) <= ORDER_P


def _usable(repo: Path, test_id: str) -> bool:
    """Whether a recorded test id may be passed to pytest (see check_node_id)."""
    try:
        check_node_id(repo, test_id)
    except DiagnoseError:
        return False
    return True
