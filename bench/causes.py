"""Benchmark cause analysis against the report it completes, with and without recorded order.

Usage: python bench/causes.py --results 1000000 [--repeat 3] [--seed 6]

Cause analysis (flaketui.core.scoring.causes.attach_causes) reads the counted runs of every
flaky test, flaky family and co-failure group of a report and compares their failure rates
under every recorded dimension: what `flaketui report --format json|csv|html` and the app's
cause column wait for. Medians of --repeat interleaved rounds, in one process:
- report_s: build_report as of bench NOW on the cached history (the anchor);
- causes_s: attach_causes on that report. The generated history is what JUnit reports give:
  no order, so no predecessor dimension;
- ordered_causes_s: the same on a copy of the history whose first attempts carry the order the
  pytest plugin records: on each worker of each run, its tests in one fixed shuffled order
  (positions 0, 1, ...). As the runs spread tests over their workers differently, every
  flaky target gets hundreds of predecessors to compare; ordered_report_s is its anchor.
- shared_causes_s, ordered_shared_causes_s: the same analyses shared with a child process
  (attach_causes(..., shared_from=the history), as `flaketui report` runs them), each checked
  to find the same causes as the in-process one.
The last stdout line is one JSON object with those figures and causes_ratio (causes / report),
ordered_causes_ratio (ordered causes / ordered report), shared_causes_ratio and
ordered_shared_causes_ratio (shared causes / the same report).
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import NOW, emit, log, machine, median, timed
from generate import ensure_history

from flaketui.core.config import Config
from flaketui.core.history.store import open_history
from flaketui.core.scoring.causes import attach_causes
from flaketui.core.scoring.report import build_report

# Each first attempt's position on its worker: the worker's tests in a fixed shuffled order.
ORDER_SQL = """
WITH placed AS (
    SELECT run, test, row_number() OVER (
        PARTITION BY run, coalesce(worker_id, '') ORDER BY (test * 7919) % 1009, test
    ) - 1 AS position
    FROM results WHERE attempt = 1
)
UPDATE results SET position = placed.position FROM placed
WHERE results.run = placed.run AND results.test = placed.test AND results.attempt = 1
"""
# The per-run rows keep their first attempt's position, as every writer keeps it.
FIRST_POSITION_SQL = """
UPDATE test_runs SET first_position = (
    SELECT a.position FROM results a
    WHERE a.run = test_runs.run AND a.test = test_runs.test AND a.attempt = 1
)
"""


def ensure_ordered(path: Path) -> Path:
    """The cached copy of a history with a recorded order (made on first use)."""
    ordered = path.with_name(f"{path.stem}-ordered.db")
    if ordered.exists():
        return ordered
    tmp = ordered.with_suffix(".tmp.db")
    shutil.copyfile(path, tmp)
    conn = sqlite3.connect(tmp, isolation_level=None)
    try:
        conn.execute("BEGIN")
        conn.execute(ORDER_SQL)
        conn.execute(FIRST_POSITION_SQL)
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    tmp.rename(ordered)
    return ordered


def one_round(path: Path, config: Config) -> tuple[float, float, int, float]:
    """(report seconds, causes seconds, suspects found, shared causes seconds) on one
    history; SystemExit when the shared analysis finds other causes than the in-process one."""
    db = open_history(path, readonly=True)
    try:
        report_s, report = timed(lambda: build_report(db, now=NOW, config=config))
        causes_s, complete = timed(lambda: attach_causes(db, report, config))
        shared_s, shared = timed(lambda: attach_causes(db, report, config, shared_from=path))
    finally:
        db.close()
    if shared != complete:
        raise SystemExit(f"{path}: the shared analysis found other causes")
    found = sum(len(t.causes) for t in complete.tests)
    found += sum(len(g.causes) for g in complete.families)
    return report_s, causes_s, found, shared_s


def main() -> None:
    """Command line: run the rounds and print the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=6)
    args = parser.parse_args()
    path = ensure_history(args.results, args.seed)
    ordered = ensure_ordered(path)
    config = Config()
    plain: list[tuple[float, float, int, float]] = []
    with_order: list[tuple[float, float, int, float]] = []
    for number in range(args.repeat):
        plain.append(one_round(path, config))
        with_order.append(one_round(ordered, config))
        log(
            f"round {number + 1}: report {plain[-1][0]:.3f}s causes {plain[-1][1]:.2f}s"
            f" (shared {plain[-1][3]:.2f}s) | ordered report {with_order[-1][0]:.3f}s causes"
            f" {with_order[-1][1]:.2f}s (shared {with_order[-1][3]:.2f}s)"
        )
    emit(
        {
            "bench": "causes",
            "results": args.results,
            "history": str(path),
            "ordered_history": str(ordered),
            "repeat": args.repeat,
            "report_s": round(median([r for r, _, _, _ in plain]), 4),
            "causes_s": round(median([c for _, c, _, _ in plain]), 4),
            "causes_ratio": round(median([c / r for r, c, _, _ in plain]), 2),
            "shared_causes_s": round(median([h for _, _, _, h in plain]), 4),
            "shared_causes_ratio": round(median([h / r for r, _, _, h in plain]), 2),
            "suspects": plain[0][2],
            "ordered_report_s": round(median([r for r, _, _, _ in with_order]), 4),
            "ordered_causes_s": round(median([c for _, c, _, _ in with_order]), 4),
            "ordered_causes_ratio": round(median([c / r for r, c, _, _ in with_order]), 2),
            "ordered_shared_causes_s": round(median([h for _, _, _, h in with_order]), 4),
            "ordered_shared_causes_ratio": round(median([h / r for r, _, _, h in with_order]), 2),
            "ordered_suspects": with_order[0][2],
            "machine": machine(),
        }
    )


if __name__ == "__main__":
    main()
