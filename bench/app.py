"""Benchmark the app: time to the first ranked screen beside a bare Textual app (SPEC §9).

Usage: python bench/app.py --results 1000000 [--repeat 3] [--history PATH]

Builds (or reuses with --history) a synthetic history of about N results, then measures, headless
and in this one process, medians of --repeat runs of:
- bare_app_s: a bare Textual app showing an empty DataTable, from construction to first paint;
- first_screen_s: flaketui from make_app() to the ranked list filled;
- max_stall_ms: the worst lateness of a 10 ms timer from flaketui's first paint until the ranked
  list is filled (event-loop stalls while loading).
The last line printed is one JSON object with first_screen_s, bare_app_s, ratio, max_stall_ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from textual.app import App, ComposeResult
from textual.widgets import DataTable

from flaketui.core.ingest.writer import RunRecorder
from flaketui.core.models import Attempt, CaseResult, RunMeta
from flaketui.core.store import open_history
from flaketui.tui.app import make_app
from flaketui.tui.widgets.flake_table import FlakeTable

NOW = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)
SIZE = (160, 48)
TICK_S = 0.010
TIMEOUT_S = 600.0


def generate(path: Path, results: int, *, seed: int = 5) -> int:
    """Write about `results` results: T tests x R runs over 60 days, a few percent flaky."""
    tests = max(50, min(20_000, results // 200))
    runs = max(1, results // tests)
    rng = random.Random(seed)
    flaky = {i: rng.uniform(0.02, 0.3) for i in rng.sample(range(tests), max(1, tests // 20))}
    broken_after = {i: rng.randrange(runs) for i in rng.sample(range(tests), max(1, tests // 200))}
    db = open_history(path)
    written = 0
    try:
        for run in range(runs):
            ts = NOW - timedelta(days=60) + timedelta(days=60) * run / runs
            workers = (1, 4, 8, 16)[run % 4]
            meta = RunMeta(
                run_id=f"bench-{run:06d}",
                suite="unit" if run % 5 else "nightly",
                branch="main" if run % 3 else f"pr-{run}",
                branch_kind="main" if run % 3 else "pr",
                commit_sha=f"{run:08x}" * 5,
                ts=ts,
                worker_count=workers,
            )
            cases = []
            for test in range(tests):
                bad = (test in broken_after and run >= broken_after[test]) or (
                    test in flaky and rng.random() < flaky[test]
                )
                worker = f"gw{test % workers}"
                attempts = [Attempt("pass", 5, None, worker)]
                if bad:
                    message = f"AssertionError: value {rng.randrange(1000)} at 0x{test:x}"
                    retried = test in flaky
                    attempts = [Attempt("fail", 5, message, worker)] + attempts * retried
                module = test // 40
                cases.append(CaseResult(f"tests/test_m{module}.py::test_{test}", None, attempts))
            recorder = RunRecorder(db, meta)
            recorder.add(cases)
            recorder.finish()
            written += sum(len(c.attempts) for c in cases)
    finally:
        db.conn.close()
    return written


class BareApp(App[None]):
    """The framework's floor: an app showing an empty table."""

    def compose(self) -> ComposeResult:
        """One empty DataTable."""
        yield DataTable()


async def bare_app_seconds() -> float:
    """Construction to first paint of the bare app."""
    started = time.perf_counter()
    app = BareApp()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        return time.perf_counter() - started


async def first_screen_seconds(history: Path, skip_file: Path) -> tuple[float, float]:
    """make_app() to the ranked list filled, and the worst 10 ms timer lateness meanwhile."""
    started = time.perf_counter()
    app = make_app(history, now=NOW, skip_file=skip_file, watch=False)
    worst = 0.0
    async with app.run_test(size=SIZE) as pilot:
        # Stalls are counted from the list screen's first paint: before it, Textual is still
        # building the screen (compose, styles, first render), as the bare app does too.
        while not app.main_screen.is_mounted:
            await asyncio.sleep(0.005)
        await pilot.pause()
        await pilot.pause()
        last = time.perf_counter()

        def tick() -> None:
            nonlocal last, worst
            current = time.perf_counter()
            worst = max(worst, current - last - TICK_S)
            last = current

        app.set_interval(TICK_S, tick)
        table = app.main_screen.query_one(FlakeTable)
        while app.main_screen.data is None or (table.row_count == 0 and _expects_rows(app)):
            if time.perf_counter() - started > TIMEOUT_S:
                raise SystemExit("the first screen never appeared")
            await asyncio.sleep(0.005)
        await pilot.pause()
        elapsed = time.perf_counter() - started
    return elapsed, worst


def _expects_rows(app: object) -> bool:
    data = app.main_screen.data  # type: ignore[attr-defined]
    return any(t.verdict == "flaky" for t in data.report.tests)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the JSON summary last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--results", type=int, default=100_000, help="results to generate")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measure (median)")
    parser.add_argument("--history", type=Path, help="reuse (or create) this history file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="flaketui-bench-") as tmp:
        history = args.history or Path(tmp) / "history.db"
        if not history.exists():
            started = time.perf_counter()
            count = generate(history, args.results)
            print(
                f"generated {count} results in {time.perf_counter() - started:.1f} s",
                file=sys.stderr,
            )
        skip_file = Path(tmp) / "quarantine.json"
        bare: list[float] = []
        first: list[float] = []
        stalls: list[float] = []
        for _ in range(args.repeat):
            bare.append(asyncio.run(bare_app_seconds()))
            elapsed, stall = asyncio.run(first_screen_seconds(history, skip_file))
            first.append(elapsed)
            stalls.append(stall)
            print(
                f"bare {bare[-1]:.3f} s  first screen {elapsed:.3f} s  stall {stall * 1000:.1f} ms",
                file=sys.stderr,
            )
    summary = {
        "results": args.results,
        "first_screen_s": round(statistics.median(first), 3),
        "bare_app_s": round(statistics.median(bare), 3),
        "ratio": round(statistics.median(first) / statistics.median(bare), 2),
        "max_stall_ms": round(max(stalls) * 1000, 1),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
