"""A small deterministic history for the app's tests and benchmark: every story the app shows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from flaketui.core.history.store import open_history
from flaketui.core.ingest.writer import RunRecorder
from flaketui.core.models import Attempt, CaseResult, RunMeta

NOW = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)
WORKER_COUNTS = (1, 4, 8, 16)
BILLING = "tests/test_billing.py::test_charge"
BILLING_PARAMS = ("usd", "eur", "gbp", "jpy")
AUTH = "tests/test_auth.py::test_login"
SEARCH = "tests/test_search.py::test_query"
CART = "tests/test_cart.py::test_total"
TIMEOUT = "TimeoutError: connection to 10.0.0.{n}:5432 timed out after 30s"
DEADLOCK = "sqlite3.OperationalError: database is locked (worker gw{n})"
ASSERT = "AssertionError: expected 3 results, got {n}"


def _attempts(bad: bool, retry: bool, message: str, worker: str) -> list[Attempt]:
    if not bad:
        return [Attempt("pass", 10, None, worker)]
    first = Attempt("fail", 10, message, worker)
    return [first, Attempt("pass", 10, None, worker)] if retry else [first]


def cases_for_run(index: int, workers: int) -> list[CaseResult]:
    """The results of run `index` (0 = oldest) at a given worker count."""
    worker = f"gw{index % workers}" if workers > 1 else "master"
    cases = []
    for p, param in enumerate(BILLING_PARAMS):
        # The billing family's failure rate climbs with parallelism: a shared-resource race.
        bad = (index * 7 + p * 3) % 16 < {1: 0, 4: 2, 8: 5, 16: 9}[workers]
        cases.append(
            CaseResult(
                f"{BILLING}[{param}]",
                "tests/test_billing.py",
                _attempts(bad, True, DEADLOCK.format(n=index % workers), worker),
            )
        )
    auth_bad = index % 4 == 1
    cases.append(
        CaseResult(
            AUTH, "tests/test_auth.py", _attempts(auth_bad, True, TIMEOUT.format(n=index), worker)
        )
    )
    search_bad = index >= 40
    cases.append(
        CaseResult(
            SEARCH,
            "tests/test_search.py",
            _attempts(search_bad, False, ASSERT.format(n=index), worker),
        )
    )
    cases.append(CaseResult(CART, "tests/test_cart.py", _attempts(False, True, "", worker)))
    return cases


def run_meta(index: int, ts: datetime, workers: int) -> RunMeta:
    """Main-branch run metadata with a commit per run."""
    return RunMeta(
        run_id=f"run-{index:04d}",
        suite="unit",
        branch="main",
        branch_kind="main",
        commit_sha=f"{index:04d}" + "c0ffee" * 6,
        ts=ts,
        worker_count=workers,
        runner_host="ci-1",
    )


def record_run(path: Path, index: int, ts: datetime) -> None:
    """Append one run to the history (as the pytest plugin would)."""
    workers = WORKER_COUNTS[index % len(WORKER_COUNTS)]
    db = open_history(path)
    try:
        recorder = RunRecorder(db, run_meta(index, ts, workers))
        recorder.add(cases_for_run(index, workers))
        recorder.finish()
    finally:
        db.conn.close()


def build_history(path: Path, *, runs: int = 60, now: datetime = NOW) -> Path:
    """Write `runs` main-branch runs, evenly spread over the 30 days before `now`."""
    step = timedelta(days=30) / runs
    for index in range(runs):
        record_run(path, index, now - timedelta(days=30) + step * index)
    return path
