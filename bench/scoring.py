"""Benchmark a full rescore against its two anchors, in one process, on one history.

Usage: python bench/scoring.py --results 1000000 [--repeat 3] [--seed 6] [--history PATH]

Medians of --repeat interleaved rounds of:
- rescore_s: flaketui.core.scoring.report.build_report as of bench NOW (every score of every test,
  family and signature group, verdicts and ranks: what `flaketui report` and the app rank by);
- scan_s: the grouped-scan anchor, one pass over the raw result rows:
  SELECT test, count(*), sum(outcome != 'pass') FROM results GROUP BY test;
- pandas_s: the recency score vectorised: one query of the counted (test, run) rows, the decay
  and branch weights as column arithmetic, one groupby; no Python loop over rows.
The last stdout line is one JSON object: results, rescore_s, scan_s, pandas_s, scan_ratio
(rescore / scan, target <= 1.0), scan_plan (the anchor's query plan: a table scan),
pandas_speedup (pandas / rescore, target >= 5) and recency_max_diff (largest
|pandas - flaketui| recency score: the anchor computes the same thing).
The rescore reads the rollups (flaketui.core.rollups.build and the sequence tables of
flaketui.core.rollups.sequences), which the writer keeps; a history written before them (or before
their current version) gets them built once, outside the timed rounds: rollup_build_s.
Also rollup_s: rollups.build.test_base alone, the per-test stage-1 facts (counts, recency
sums, first/last times, blast-radius inputs), with rollup_scan_ratio / rollup_pandas_speedup.
Filtered reports in the same rounds: filtered_suite_s (`report --suite` of the suite with the
most runs) and filtered_kind_s (`--branch-kind pr`); filtered_ratio is the median over rounds
of the slower of the two divided by that round's unfiltered rescore (target <= 1.2).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import pandas as pd
from common import NOW, emit, log, machine, median, timed
from generate import ensure_history

from flaketui.core.config import Config
from flaketui.core.history.store import open_history, transaction
from flaketui.core.rollups import build as rollups
from flaketui.core.scoring.report import build_report
from flaketui.core.timeutil import to_iso

SCAN_SQL = "SELECT test, count(*), sum(outcome != 'pass') FROM results GROUP BY test"
# One query: counted run-level rows, filters done by SQLite as any competent user would.
PANDAS_SQL = """
SELECT tr.test, tr.ts, r.branch_kind, tr.outcome
FROM test_runs tr JOIN runs r ON r.id = tr.run
WHERE tr.ts > ? AND tr.ts <= ? AND r.incident IS NULL
  AND tr.outcome <> 'skipped' AND tr.edited = 0
"""


def grouped_scan(conn: sqlite3.Connection) -> int:
    """The anchor: one grouped pass over the raw results; returns the groups seen."""
    return len(conn.execute(SCAN_SQL).fetchall())


def scan_plan(conn: sqlite3.Connection) -> str:
    """How SQLite runs the anchor, as EXPLAIN QUERY PLAN words it ("SCAN results; USE TEMP
    B-TREE FOR GROUP BY"): an index on results.test would turn it into a walk of that index
    with a table lookup per row, several times slower, and flatter scan_ratio."""
    return "; ".join(str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + SCAN_SQL))


def pandas_scores(conn: sqlite3.Connection, config: Config) -> pd.Series:
    """The recency score per test id row, vectorised."""
    start = to_iso(NOW - timedelta(days=config.window_days))
    frame = pd.read_sql_query(PANDAS_SQL, conn, params=(start, to_iso(NOW)))
    ts = pd.to_datetime(frame["ts"], format="%Y-%m-%dT%H:%M:%SZ", utc=True)
    age_days = ((pd.Timestamp(NOW) - ts).dt.total_seconds() / 86400.0).clip(lower=0.0)
    branch = np.where(frame["branch_kind"] == "main", config.main_weight, config.other_weight)
    weight = 0.5 ** (age_days / config.half_life_days) * branch
    bad = frame["outcome"] != "pass"  # fail and flaky (pass after retry); error is fail here
    sums = pd.DataFrame({"test": frame["test"], "wb": weight * bad, "w": weight})
    grouped = sums.groupby("test", sort=False).sum()
    return grouped["wb"] / (grouped["w"] + config.laplace_alpha)


def _rebuild(conn: sqlite3.Connection) -> int:
    with transaction(conn):
        return rollups.rebuild(conn)


def main() -> None:
    """Command line: run the rounds and print the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--history", type=Path, default=None)
    args = parser.parse_args()
    path = args.history or ensure_history(args.results, args.seed)
    db = open_history(path, create=False)
    conn = db.conn
    config = Config()
    (results,) = conn.execute("SELECT count(*) FROM results").fetchone()
    grouped_scan(conn)  # warm the OS cache so round 1 is not a cold read
    build_s = 0.0
    if not rollups.enabled(conn):  # a history written before rollups existed: build them once
        build_s = timed(lambda: _rebuild(conn))[0]
        log(f"rollups built in {build_s:.3f}s")
    rescore, scan, pandas_times, rollup_times = [], [], [], []
    suite_times, kind_times, filtered_ratios = [], [], []
    (busiest,) = conn.execute(
        "SELECT suite FROM runs GROUP BY suite ORDER BY count(*) DESC, suite LIMIT 1"
    ).fetchone()
    report = None
    series = None
    base = None
    for round_ in range(args.repeat):
        # The slow rescore last, so a huge history logs its anchors before it.
        scan.append(timed(lambda: grouped_scan(conn))[0])
        seconds, series = timed(lambda: pandas_scores(conn, config))
        pandas_times.append(seconds)
        seconds, base = timed(lambda: rollups.test_base(conn, NOW, config))
        rollup_times.append(seconds)
        log(
            f"round {round_ + 1}: scan {scan[-1]:.3f}s pandas {pandas_times[-1]:.3f}s "
            f"rollup {rollup_times[-1]:.3f}s"
        )
        seconds, report = timed(lambda: build_report(db, now=NOW, config=config))
        rescore.append(seconds)
        suite_times.append(
            timed(lambda: build_report(db, now=NOW, config=config, suite=busiest))[0]
        )
        kind_times.append(
            timed(lambda: build_report(db, now=NOW, config=config, branch_kind="pr"))[0]
        )
        filtered_ratios.append(max(suite_times[-1], kind_times[-1]) / rescore[-1])
        log(
            f"round {round_ + 1}: rescore {rescore[-1]:.3f}s, --suite {busiest}"
            f" {suite_times[-1]:.3f}s, --branch-kind pr {kind_times[-1]:.3f}s"
        )
    assert report is not None and series is not None and base is not None
    alpha = config.laplace_alpha
    rollup_diff = max(
        (
            abs(series.get(row["key"], 0.0) - row["weighted_bad"] / (row["weighted_total"] + alpha))
            for row in base
        ),
        default=0.0,
    )
    ids = dict(conn.execute("SELECT test_id, id FROM tests").fetchall())
    diff = max(
        (abs(series.get(ids[t.test_id], 0.0) - t.scores.recency_score) for t in report.tests),
        default=0.0,
    )
    rescore_s, scan_s, pandas_s = median(rescore), median(scan), median(pandas_times)
    rollup_s = median(rollup_times)
    emit(
        {
            "bench": "scoring",
            "results": results,
            "tests": len(report.tests),
            "repeat": args.repeat,
            "rescore_s": rescore_s,
            "scan_s": scan_s,
            "pandas_s": pandas_s,
            "scan_ratio": round(rescore_s / scan_s, 3),
            "scan_plan": scan_plan(conn),
            "pandas_speedup": round(pandas_s / rescore_s, 3),
            "recency_max_diff": float(diff),
            "rollup_s": rollup_s,
            "rollup_scan_ratio": round(rollup_s / scan_s, 3),
            "rollup_pandas_speedup": round(pandas_s / rollup_s, 3),
            "rollup_recency_max_diff": float(rollup_diff),
            "rollup_build_s": round(build_s, 3),
            "filtered_suite": busiest,
            "filtered_suite_s": median(suite_times),
            "filtered_kind_s": median(kind_times),
            "filtered_ratio": round(statistics.median(filtered_ratios), 3),
            "machine": machine(),
        }
    )
    conn.close()


if __name__ == "__main__":
    main()
