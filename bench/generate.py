"""Generate a CI-shaped history of about N results through the real writer (RunRecorder).

Usage: python bench/generate.py --results 1000000 [--seed 6] [--out PATH]

Shape: runs spread over the 90 days before NOW, about 10 a day on main, as many PR
runs and one nightly; 1 000 to 10 000 tests (a third parametrized); a few percent flaky, a few
regressions on main; retries once in the `ci` suite (main and PR), never in `nightly`; failure
messages with volatile parts (addresses, ports, temp paths, timings, ids); PR commits that edit
test files; one incident afternoon tagged at ingest. Histories are cached under bench/out/ by
(results, seed); the last stdout line is a JSON object.
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import NOW, emit, log, out_dir, timed

from flaketui.core.history.store import open_history
from flaketui.core.ingest.writer import RunRecorder
from flaketui.core.models import Attempt, CaseResult, RunMeta

DAYS = 90
MAIN_PER_DAY, PR_PER_DAY, NIGHTLY_PER_DAY = 10, 10, 1
FLAKY_SHARE = 0.04
REGRESSION_SHARE = 0.005
SKIPPED_SHARE = 0.01
PR_BREAK_P = 0.002  # a PR author breaking a test on purpose
MESSAGES = (
    "AssertionError: expected 200, got 503 from http://10.0.{a}.{b}:{port}/api/v1/items",
    "TimeoutError: waited {secs}s for /tmp/pytest-of-ci/pytest-{n}/test_{n}0/lock",
    "ConnectionResetError: [Errno 104] peer 10.1.{a}.{b}:{port} reset (request {hex})",
    "KeyError: 'row-{n}' not in <Table object at 0x{hex}>",
    "sqlite3.OperationalError: database is locked after {secs}s (worker gw{a})",
)


def tests_for(results: int) -> int:
    """Tests in the suite: results / 1000 between 1 000 and 10 000 (fewer for tiny histories)."""
    return min(10_000, max(results // 1000, min(1000, max(20, results // 20))))


@dataclass(slots=True)
class _Test:
    test_id: str
    test_file: str
    fail_p: float = 0.0  # flaky tests: chance an attempt fails
    broken_from: int = -1  # regressions: main run index from which it fails
    skipped: bool = False


def _suite_tests(count: int, rng: random.Random) -> list[_Test]:
    tests: list[_Test] = []
    module = 0
    while len(tests) < count:
        module += 1
        test_file = f"tests/pkg{module % 37}/test_mod{module}.py"
        for fn in range(rng.randint(3, 12)):
            if rng.random() < 0.33:
                for param in range(rng.randint(2, 8)):
                    tests.append(_Test(f"{test_file}::test_fn{fn}[case-{param}]", test_file))
            else:
                tests.append(_Test(f"{test_file}::test_fn{fn}", test_file))
    tests = tests[:count]
    for test in rng.sample(tests, max(1, int(count * FLAKY_SHARE))):
        test.fail_p = rng.uniform(0.02, 0.3)
    for test in rng.sample(tests, max(1, int(count * SKIPPED_SHARE))):
        test.skipped, test.fail_p = True, 0.0
    return tests


def _message(rng: random.Random) -> str:
    template = MESSAGES[rng.randrange(len(MESSAGES))]
    return template.format(
        a=rng.randrange(256),
        b=rng.randrange(256),
        port=rng.randrange(1024, 65535),
        secs=f"{rng.uniform(1, 60):.2f}",
        n=rng.randrange(100_000),
        hex=f"{rng.getrandbits(48):012x}",
    )


def _schedule(runs: int, rng: random.Random) -> list[tuple[str, float]]:
    """(kind, days before NOW) of every run, oldest first: main, pr and nightly in proportion."""
    per_day = MAIN_PER_DAY + PR_PER_DAY + NIGHTLY_PER_DAY
    kinds = ["main"] * MAIN_PER_DAY + ["pr"] * PR_PER_DAY + ["nightly"] * NIGHTLY_PER_DAY
    small = ["nightly"] + ["main", "pr"] * MAIN_PER_DAY
    out = []
    for index in range(runs):
        # Tiny histories still get every kind: the nightly first, then main and PR alternating.
        kind = kinds[index % per_day] if runs >= per_day * 2 else small[index % per_day]
        age = rng.uniform(0.01, DAYS - 0.01)
        if kind == "nightly":
            age = int(age) + (18 - 3.28) / 24  # 03:17 UTC, NOW being 18:00
        out.append((kind, age))
    out.sort(key=lambda item: -item[1])
    return out


def _attempts(test: _Test, kind: str, main_index: int, rng: random.Random) -> list[Attempt]:
    retries = 1 if kind != "nightly" else 0
    worker = f"gw{rng.randrange(16 if kind == 'nightly' else 4)}"
    if test.skipped:
        return [Attempt("skipped", 0, None, worker)]
    duration = int(rng.expovariate(1 / 40))
    if kind == "main" and 0 <= test.broken_from <= main_index:
        return [Attempt("fail", duration, _message(rng), worker) for _ in range(1 + retries)]
    fail_p = test.fail_p + (PR_BREAK_P if kind == "pr" else 0.0)
    if fail_p == 0.0 or rng.random() >= fail_p:
        return [Attempt("pass", duration, None, worker)]
    attempts = [Attempt("fail" if rng.random() < 0.8 else "error", duration, _message(rng), worker)]
    for _ in range(retries):
        ok = rng.random() >= fail_p
        attempts.append(Attempt("pass" if ok else "fail", duration, None if ok else _message(rng)))
        if ok:
            break
    return attempts


def generate(
    path: Path, results: int, *, seed: int = 6, tests_count: int | None = None
) -> dict[str, int]:
    """Write a history of about `results` result rows (tests_count tests) to a new file."""
    rng = random.Random(seed)
    tests = _suite_tests(tests_count or tests_for(results), rng)
    runs = max(2, round(results / len(tests)))
    schedule = _schedule(runs, rng)
    main_runs = sum(1 for kind, _ in schedule if kind == "main")
    for test in rng.sample(tests, max(1, int(len(tests) * REGRESSION_SHARE))):
        if not test.skipped:
            test.broken_from = rng.randrange(max(1, main_runs))
    incident_run = rng.randrange(len(schedule))
    files = sorted({t.test_file for t in tests})
    db = open_history(path)
    # Bench-only: no fsync per run (a crash just means regenerating the cache).
    db.conn.execute("PRAGMA synchronous = OFF")
    written = main_index = 0
    try:
        for index, (kind, age) in enumerate(schedule):
            incident = index == incident_run
            changed = rng.sample(files, rng.randint(1, 3)) if kind == "pr" else []
            meta = RunMeta(
                run_id=f"bench-{seed}-{index}",
                suite="nightly" if kind == "nightly" else "ci",
                branch="main" if kind != "pr" else f"feature/{rng.randrange(200)}",
                branch_kind="pr" if kind == "pr" else "main",
                commit_sha=f"{rng.getrandbits(160):040x}",
                ts=(NOW - timedelta(days=age)).replace(microsecond=0),
                worker_count=16 if kind == "nightly" else 4,
                runner_host=f"runner-{rng.randrange(12)}",
                incident="infra-outage" if incident else None,
                changed_files=changed,
            )
            cases = []
            for test in tests:
                if incident and not test.skipped and rng.random() < 0.8:
                    attempts = [Attempt("error", 5, _message(rng))]
                else:
                    attempts = _attempts(test, kind, main_index, rng)
                cases.append(CaseResult(test.test_id, test.test_file, attempts))
            recorder = RunRecorder(db, meta, source="pytest")
            recorder.add(cases)
            recorder.finish()
            written += recorder.results
            main_index += kind == "main"
            if index % 100 == 0:
                log(f"generate: run {index}/{len(schedule)}, {written} results")
    finally:
        db.conn.close()
    return {"results": written, "runs": len(schedule), "tests": len(tests)}


def history_name(results: int, seed: int, tests: int | None = None) -> str:
    """The cache file name of a generated history."""
    return f"history-{results}{f'-t{tests}' if tests else ''}-s{seed}.db"


def ensure_history(
    results: int, seed: int = 6, out: Path | None = None, *, tests: int | None = None
) -> Path:
    """The cached history for (results, seed, tests), generated on first use."""
    path = out or out_dir() / history_name(results, seed, tests)
    if path.exists():
        _current_rollups(path)
        return path
    tmp = path.with_suffix(".tmp.db")
    for stale in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
        stale.unlink(missing_ok=True)
    generate(tmp, results, seed=seed, tests_count=tests)
    tmp.rename(path)
    return path


def _current_rollups(path: Path) -> None:
    """Rebuild a cached history's rollups when this flaketui keeps another set: a bench must
    not measure the raw-row fallback of an older cache."""
    from flaketui.core.history.store import open_history, transaction
    from flaketui.core.rollups import build as rollups

    db = open_history(path)
    try:
        if not rollups.enabled(db.conn):
            print(f"{path.name}: rollups from another version, rebuilding", file=sys.stderr)
            with transaction(db.conn):
                rollups.rebuild(db.conn)
    finally:
        db.conn.close()


def main() -> None:
    """Command line: generate (or reuse) a history and print its size and time."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--tests", type=int, default=None, help="tests in the suite (default: from --results)"
    )
    args = parser.parse_args()
    path = args.out or out_dir() / history_name(args.results, args.seed, args.tests)
    existed = path.exists()
    elapsed, path = timed(
        lambda: ensure_history(args.results, args.seed, args.out, tests=args.tests)
    )
    import sqlite3

    conn = sqlite3.connect(path)
    (count,) = conn.execute("SELECT count(*) FROM results").fetchone()
    (runs,) = conn.execute("SELECT count(*) FROM runs").fetchone()
    (tests,) = conn.execute("SELECT count(*) FROM tests").fetchone()
    conn.close()
    emit(
        {
            "path": str(path),
            "results": count,
            "runs": runs,
            "tests": tests,
            "cached": existed,
            "generate_s": round(elapsed, 2),
            "size_mb": round(path.stat().st_size / 1e6, 1),
        }
    )


if __name__ == "__main__":
    main()
