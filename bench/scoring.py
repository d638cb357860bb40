"""Benchmark a full rescore against its two anchors, in one process, on one history (SPEC §9).

Usage: python bench/scoring.py --results 1000000 [--repeat 3] [--seed 6] [--history PATH]

Medians of --repeat interleaved rounds of:
- rescore_s: flaketui.core.report.build_report as of bench NOW (every score of every test,
  family and signature group, verdicts and ranks: what `flaketui report` and the app rank by);
- scan_s: the grouped-scan anchor, one pass over the raw result rows:
  SELECT test, count(*), sum(outcome != 'pass') FROM results GROUP BY test;
- pandas_s: seed 004's score vectorised: one query of the counted (test, run) rows, the decay
  and branch weights as column arithmetic, one groupby; no Python loop over rows.
The last stdout line is one JSON object: results, rescore_s, scan_s, pandas_s, scan_ratio
(rescore / scan, target <= 1.0), pandas_speedup (pandas / rescore, target >= 5) and
recency_max_diff (largest |pandas - flaketui| recency score: the anchor computes the same thing).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pandas as pd  # noqa: E402
from common import NOW, emit, log, machine, median, timed  # noqa: E402
from generate import ensure_history  # noqa: E402

from flaketui.core.config import Config  # noqa: E402
from flaketui.core.report import build_report  # noqa: E402
from flaketui.core.store import open_history  # noqa: E402
from flaketui.core.timeutil import to_iso  # noqa: E402

SCAN_SQL = "SELECT test, count(*), sum(outcome != 'pass') FROM results GROUP BY test"
# The seed's "1 query": counted run-level rows, filters done by SQLite as any competent user would.
PANDAS_SQL = """
SELECT tr.test, tr.ts, r.branch_kind, tr.outcome
FROM test_runs tr JOIN runs r ON r.id = tr.run
WHERE tr.ts > ? AND tr.ts <= ? AND r.incident IS NULL
  AND tr.outcome <> 'skipped' AND tr.edited = 0
"""


def grouped_scan(conn: sqlite3.Connection) -> int:
    """The anchor: one grouped pass over the raw results; returns the groups seen."""
    return len(conn.execute(SCAN_SQL).fetchall())


def pandas_scores(conn: sqlite3.Connection, config: Config) -> pd.Series:
    """Seed 004's recency score per test id row, vectorised."""
    start = to_iso(NOW - timedelta(days=config.window_days))
    frame = pd.read_sql_query(PANDAS_SQL, conn, params=(start, to_iso(NOW)))
    ts = pd.to_datetime(frame["ts"], format="%Y-%m-%dT%H:%M:%SZ", utc=True)
    age_days = ((pd.Timestamp(NOW) - ts).dt.total_seconds() / 86400.0).clip(lower=0.0)
    branch = (frame["branch_kind"] == "main").map({True: config.main_weight, False: 1.0})
    branch = branch.where(frame["branch_kind"] == "main", config.other_weight)
    weight = 0.5 ** (age_days / config.half_life_days) * branch
    bad = frame["outcome"] != "pass"  # fail and flaky (pass after retry); error is fail here
    sums = pd.DataFrame({"test": frame["test"], "wb": weight * bad, "w": weight})
    grouped = sums.groupby("test", sort=False).sum()
    return grouped["wb"] / (grouped["w"] + config.alpha)


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
    rescore, scan, pandas_times = [], [], []
    report = None
    series = None
    for round_ in range(args.repeat):
        seconds, report = timed(lambda: build_report(db, now=NOW, config=config))
        rescore.append(seconds)
        scan.append(timed(lambda: grouped_scan(conn))[0])
        seconds, series = timed(lambda: pandas_scores(conn, config))
        pandas_times.append(seconds)
        log(f"round {round_ + 1}: rescore {rescore[-1]:.3f}s scan {scan[-1]:.3f}s "
            f"pandas {pandas_times[-1]:.3f}s")
    assert report is not None and series is not None
    ids = dict(conn.execute("SELECT test_id, id FROM tests").fetchall())
    diff = max(
        (abs(series.get(ids[t.test_id], 0.0) - t.scores.recency_score) for t in report.tests),
        default=0.0,
    )
    rescore_s, scan_s, pandas_s = median(rescore), median(scan), median(pandas_times)
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
            "pandas_speedup": round(pandas_s / rescore_s, 3),
            "recency_max_diff": float(diff),
            "machine": machine(),
        }
    )


if __name__ == "__main__":
    main()
