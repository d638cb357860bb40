"""Generated histories with known causes of flakiness, written through the real run writer.

Every run shuffles its tests over its workers (a random order, as pytest-randomly gives) and
draws its host, worker count, Python and hour; each kind of flaky test fails for its own
reason, and random flakes fail with a fixed probability whatever the run.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from flaketui.core.history.store import open_history
from flaketui.core.ingest.writer import RunRecorder
from flaketui.core.models import Attempt, CaseResult, RunMeta

NOW = datetime(2026, 11, 30, tzinfo=UTC)
HOSTS = [f"ci-runner-{n:02d}" for n in range(1, 13)]
BAD_HOST = "ci-runner-11"
POLLUTER = "tests/test_state.py::test_sets_global"
TIMEOUT_MS = 30_000


@dataclass
class Kinds:
    """Which flaky tests a history holds (ids are fixed per kind)."""

    host: bool = True
    workers: bool = True
    order: bool = True
    timing: bool = True
    random_flakes: int = 4


HOST_TEST = "tests/test_net.py::test_download"
WORKERS_TEST = "tests/test_db.py::test_pool"
ORDER_TEST = "tests/test_view.py::test_reads_global"
TIMING_TEST = "tests/test_report.py::test_big_export"


def random_test(index: int) -> str:
    return f"tests/test_misc.py::test_random_{index:03d}"


def build(path: Path, *, seed: int, runs: int = 240, kinds: Kinds | None = None) -> Path:
    """Write a history of `runs` runs over the 30 days before NOW into path."""
    db = open_history(path)
    for meta, cases in generate(seed=seed, runs=runs, kinds=kinds):
        recorder = RunRecorder(db, meta)
        recorder.add(cases)
        recorder.finish()
    db.conn.close()
    return path


def generate(
    *, seed: int, runs: int = 240, kinds: Kinds | None = None
) -> Iterator[tuple[RunMeta, list[CaseResult]]]:
    """The runs `build` writes, each as the plugin's recorder receives it."""
    kinds = kinds or Kinds()
    rng = random.Random(seed)
    fillers = [f"tests/test_fill.py::test_{n:03d}" for n in range(24)]
    random_rates = {random_test(n): rng.uniform(0.08, 0.35) for n in range(kinds.random_flakes)}
    start = NOW - timedelta(days=30)
    for number in range(runs):
        ts = start + timedelta(minutes=rng.randrange(30 * 24 * 60))
        workers = rng.choice([1, 2, 4, 8])
        host = rng.choice(HOSTS)
        meta = RunMeta(
            run_id=f"run-{seed}-{number:04d}",
            suite="unit",
            branch="main" if rng.random() < 0.5 else "feature",
            branch_kind="main" if rng.random() < 0.5 else "pr",
            ts=ts,
            worker_count=workers,
            runner_host=host,
            os="Linux",
            python=rng.choice(["3.11.9", "3.12.4"]),
            order_seed=f"randomly:{rng.randrange(10**6)}",
        )
        tests = [*fillers, *random_rates, POLLUTER]
        for flag, test in (
            (kinds.host, HOST_TEST),
            (kinds.workers, WORKERS_TEST),
            (kinds.order, ORDER_TEST),
            (kinds.timing, TIMING_TEST),
        ):
            if flag:
                tests.append(test)
        rng.shuffle(tests)
        order: dict[str, list[str]] = {}
        cases = []
        for index, test in enumerate(tests):
            worker = f"gw{index % workers}" if workers > 1 else None
            ran = order.setdefault(worker or "", [])
            before = ran[-1] if ran else None
            ran.append(test)
            duration, timeout = rng.randint(5, 400), None
            if test == HOST_TEST:
                fails = rng.random() < (0.6 if host == BAD_HOST else 0.02)
            elif test == WORKERS_TEST:
                fails = rng.random() < (0.5 if workers >= 8 else 0.02)
            elif test == ORDER_TEST:
                fails = POLLUTER in ran[:-1]
            elif test == TIMING_TEST:
                timeout = TIMEOUT_MS
                duration = max(1000, int(rng.gauss(27_000, 3_000)))
                fails = duration >= TIMEOUT_MS
                duration = min(duration, TIMEOUT_MS + 50)
            elif test in random_rates:
                fails = rng.random() < random_rates[test]
            else:
                fails = False
            first = Attempt(
                "fail" if fails else "pass",
                duration,
                "AssertionError: boom" if fails else None,
                worker,
                before,
                len(ran),
                timeout,
            )
            attempts = [first]
            if fails:
                attempts.append(Attempt("pass", duration, None, worker, test, len(ran) + 1))
            cases.append(CaseResult(test, test.split("::")[0], attempts))
        yield meta, cases
