"""Team history on PostgreSQL: concurrent ingest into the server against the same ingests into
one SQLite file, and a sync of N results against COPYing the same rows out of PostgreSQL.

    python bench/team.py                      # 8 writers x 4 runs x 1 000 tests; sync 1 M results
    python bench/team.py --small              # a quick check that everything works
    python bench/team.py --url postgresql://u@host/emptydb   # an existing, empty database

Without --url a throwaway cluster is started (tests/pgcluster.py: PostgreSQL's server binaries
must be installed) and stopped at the end. Anchors, measured in the same run:
- ingest: the same reports ingested by the same number of concurrent processes into one SQLite
  history (ratio = server results/s over SQLite results/s; above 1 the server takes more);
- sync: `COPY (SELECT ...) TO STDOUT` of the very rows a sync pulls, the floor of reading them
  (ratio = sync seconds over COPY seconds, rollups included).
Prints one JSON object as the last line of stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.pgcluster

from common import emit, loadavg, log, machine, out_dir

from flaketui.core.models import RunMeta
from flaketui.core.timeutil import parse_iso


def write_report(path: Path, writer: int, run: int, tests: int) -> Path:
    """A JUnit report: shared test ids across writers, one in twenty failing."""
    with path.open("w", encoding="utf-8") as fh:
        fh.write('<?xml version="1.0"?>\n<testsuite name="bench">\n')
        for n in range(tests):
            failure = ""
            if (n + run + writer) % 20 == 0:
                failure = f'<failure message="AssertionError: expected {n} got {n + 1}"/>'
            fh.write(f'<testcase classname="pkg.mod{n % 50}" name="test_{n}" time="0.01">'
                     f"{failure}</testcase>\n")  # fmt: skip
        fh.write("</testsuite>\n")
    return path


def _ingest_worker(args: tuple[str, list[tuple[str, str, str]]]) -> int:
    """One writer process: its runs, one after another; the results it added."""
    target, runs = args
    added = 0
    for report, run_id, ts in runs:
        meta = RunMeta(run_id=run_id, ts=parse_iso(ts))
        if target.startswith("postgresql://"):
            from flaketui.core.ingest.server import ingest_to_server

            added += ingest_to_server(target, [Path(report)], meta).results
        else:
            from flaketui.core.history.store import open_connection
            from flaketui.core.ingest.writer import ingest_reports

            conn = open_connection(target)
            try:
                added += ingest_reports(conn, [Path(report)], meta).results
            finally:
                conn.close()
    return added


def concurrent_ingest(target: str, plan: list[list[tuple[str, str, str]]]) -> dict[str, Any]:
    """Run every writer's plan at once in its own process; wall time and results/s."""
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(len(plan)) as pool:
        start = time.perf_counter()
        added = sum(pool.map(_ingest_worker, [(target, runs) for runs in plan]))
        seconds = time.perf_counter() - start
    return {"seconds": round(seconds, 3), "results": added,
            "results_per_s": round(added / seconds, 1)}  # fmt: skip


def fill_server(url: str, results: int, tests: int) -> None:
    """N synthetic results straight into the server (runs of `tests` tests, one attempt each)."""
    import psycopg

    from flaketui.core.history.pg.connect import connect

    connect(url).close()  # the schema
    runs = max(1, results // tests)
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(
            "INSERT INTO tests (test_id, parent, test_file, first_seen)"
            " SELECT 'pkg/test_m' || (n %% 100) || '.py::test_' || n,"
            " 'pkg/test_m' || (n %% 100) || '.py::test_' || n, 'pkg/test_m' || (n %% 100) || '.py',"
            " '2026-10-01T00:00:00Z' FROM generate_series(1, %s) AS n",
            (tests,),
        )
        pg.execute(
            "INSERT INTO signatures (hash, text, example)"
            " VALUES ('0123456789abcdef', 'AssertionError: <NUM>', 'AssertionError: 1')"
        )
        pg.execute(
            "INSERT INTO runs (run_id, suite, branch, branch_kind, ts, source)"
            " SELECT 'bench-' || r, 'bench', 'main', 'main',"
            " to_char(timestamp '2026-10-01' + r * interval '37 minutes',"
            " 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), 'junit' FROM generate_series(1, %s) AS r",
            (runs,),
        )
        pg.execute(
            "INSERT INTO results (run, test, attempt, outcome, duration_ms, message, signature)"
            " SELECT r.id, t.id, 1, CASE WHEN (r.id + t.id) % 23 = 0 THEN 'fail' ELSE 'pass' END,"
            " 10, CASE WHEN (r.id + t.id) % 23 = 0 THEN 'AssertionError: 1' END,"
            " CASE WHEN (r.id + t.id) % 23 = 0 THEN (SELECT id FROM signatures LIMIT 1) END"
            " FROM runs AS r CROSS JOIN tests AS t"
        )
        pg.execute("ANALYZE")


def copy_floor(url: str) -> tuple[float, int]:
    """COPY the rows a sync pulls (results with their run, test and signature keys) to the
    client and drop them: the floor of reading them out of PostgreSQL."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg, pg.cursor() as cur:
        start = time.perf_counter()
        size = 0
        with cur.copy(
            "COPY (SELECT x.change::text, x.run, x.test, x.attempt, r.run_id, t.test_id, g.hash,"
            " x.outcome, x.worker_id, x.duration_ms, x.message FROM results AS x"
            " JOIN runs AS r ON r.id = x.run JOIN tests AS t ON t.id = x.test"
            " LEFT JOIN signatures AS g ON g.id = x.signature"
            " ORDER BY x.change, x.run, x.test, x.attempt) TO STDOUT"
        ) as copy:
            for block in copy:
                size += len(block)
        return time.perf_counter() - start, size


def timed_sync(url: str, replica: Path) -> tuple[float, int]:
    from flaketui.core.history.pg.connect import connect
    from flaketui.core.history.pg.sync import sync_replica
    from flaketui.core.history.store import open_connection

    replica.unlink(missing_ok=True)
    conn = open_connection(replica)
    pg = connect(url)
    try:
        start = time.perf_counter()
        summary = sync_replica(pg, conn)
        return time.perf_counter() - start, summary.results_added
    finally:
        pg.close()
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="an existing, empty PostgreSQL database (default: a "
                        "throwaway cluster)")  # fmt: skip
    parser.add_argument("--small", action="store_true", help="tiny sizes: check it works")
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--runs", type=int, default=4, help="runs per writer")
    parser.add_argument("--tests", type=int, default=1_000, help="tests per run")
    parser.add_argument("--sync-results", type=int, default=1_000_000)
    args = parser.parse_args()
    if args.small:
        args.writers, args.runs, args.tests, args.sync_results = 4, 2, 200, 20_000
    work = out_dir() / "team"
    work.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        if args.url:
            ingest_url = sync_url = args.url
            if args.sync_results:
                log("--url: the sync half needs a second empty database; only ingest is measured")
                args.sync_results = 0
        else:
            from tests.pgcluster import find_bindir, running_cluster

            bindir = find_bindir()
            if bindir is None:
                raise SystemExit("PostgreSQL's server binaries are missing (initdb, pg_ctl)")
            cluster = stack.enter_context(running_cluster(bindir))
            ingest_url, sync_url = cluster.create_database(), cluster.create_database()
        plan = [
            [(str(write_report(work / f"w{w}-r{r}.xml", w, r, args.tests)), f"w{w}-r{r}",
              f"2026-11-{1 + r % 28:02d}T{w % 24:02d}:00:00Z") for r in range(args.runs)]
            for w in range(args.writers)
        ]  # fmt: skip
        sqlite_file = work / "team-sqlite.db"
        sqlite_file.unlink(missing_ok=True)
        log(f"ingest: {args.writers} writers x {args.runs} runs x {args.tests} tests")
        server = concurrent_ingest(ingest_url, plan)
        local = concurrent_ingest(str(sqlite_file), plan)
        result: dict[str, Any] = {
            "benchmark": "team",
            "machine": machine(),
            "loadavg": loadavg(),
            "ingest": {
                "writers": args.writers, "runs_per_writer": args.runs, "tests": args.tests,
                "server": server, "sqlite": local,
                "ratio_server_over_sqlite": round(
                    server["results_per_s"] / local["results_per_s"], 3),
            },
        }  # fmt: skip
        if args.sync_results:
            log(f"sync: filling the server with {args.sync_results} results")
            fill_server(sync_url, args.sync_results, min(args.tests * 5, args.sync_results))
            copy_s, copied = copy_floor(sync_url)
            sync_s, synced = timed_sync(sync_url, work / "team-replica.db")
            result["sync"] = {
                "results": synced, "sync_seconds": round(sync_s, 3),
                "copy_seconds": round(copy_s, 3), "copy_bytes": copied,
                "ratio_sync_over_copy": round(sync_s / copy_s, 2),
                "sync_results_per_s": round(synced / sync_s, 1),
            }  # fmt: skip
    emit(result)


if __name__ == "__main__":
    main()
