"""Benchmark JUnit ingest against a bare streaming parse of the same files.

Usage: python bench/ingest.py --results 100000 [--repeat 3] [--seed 6]
       python bench/ingest.py --report-mb 500      (one big report: peak memory)
       python bench/ingest.py --history H1M.db [--runs 16] [--repeat 3]   (`flaketui ingest`)

Default mode: writes about N results as pytest-style JUnit files (one file per CI run, every test
of the suite in each, failure messages with volatile parts), then medians of --repeat rounds of
- ingest_s: `ingest_reports` of every file (one run each) into a fresh history, in this process,
  as `flaketui ingest` calls it (each run's per-test rows left waiting, by run, for the fold to
  file; the history is created and opened before the clock starts: once per history, not per
  report), then the fold of the runs still waiting for their rollups (what the next reader would
  do first; tail_fold_s), so that every rollup row and every filed row is paid for;
- parse_s: the anchor, expat fed 64 KiB chunks with one start-element handler counting
  <testcase>: the floor of reading the same bytes as XML, nothing built or stored;
- store_floor_s (informational, not an anchor): inserting rows already built from the same
  files, one `results` and one `test_runs` row per result with the real schema and indexes, one
  transaction per file: what the schema costs a writer that computes nothing;
- backfill_s (informational): the same runs, with the same metadata, as one manifest backfill
  (`flaketui ingest --manifest`), which commits runs in batches; backfill_ratio = it / parse;
- run_keyed_floor_ratio, run_indexed_floor_ratio, staged_floor_ratio (informational): the store
  floor with `test_runs` keyed by run instead of by test and time, the same with an index on
  (test, ts) for the readers of one test's runs, and with its rows staged by run and moved into
  the test-ordered table STAGE_RUNS runs at a time: what other layouts of that table would cost;
- parser_s (informational): flaketui's own parser yielding every case row, nothing stored;
- append_floor_s (informational): the same built rows appended to tables with no key, index or
  constraint, a transaction per file: the least any schema keeping the history's rows can pay here.
  parser_s + append_floor_s is a lower bound for a single-threaded ingest of these files
  (lower_bound_ratio): what any ingest of them, whatever its target, has to fit in.
--report-mb M: one report of about M MB is ingested by a child process; peak_rss_mb is that
child's peak resident set (import_rss_mb: the same child doing nothing but the imports).
--history PATH [--runs N]: the command a CI job runs, `flaketui ingest`, N times in a row (each a
new run of every test of PATH, a few failing), into a copy of PATH (command_s: the mean seconds
of a command, every fold and outage proposal included) and, the anchor, into a new history
(new_command_s, same reports, same round): history_ratio = command_s / new_command_s, what a
big history adds to each ingest. Each round also times `flaketui merge` of the copy into a
missing file (merge_new_s) over copying the file (file_copy_s): merge_ratio.
The last stdout line is one JSON object: results, results_per_s, parse_ratio (ingest / parse,
target <= 8), backfill_ratio (target <= 6), store_floor_ratio (store floor / parse),
parser_ratio, append_floor_ratio, lower_bound_ratio (both / parse) and, with --report-mb,
report_mb and peak_rss_mb (target < 200).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import xml.parsers.expat
from datetime import datetime, timedelta
from pathlib import Path
from xml.sax.saxutils import quoteattr

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import NOW, emit, log, machine, median, out_dir, peak_rss_mb, timed
from generate import _message, _suite_tests, tests_for

from flaketui.core.models import RunMeta

CHUNK_BYTES = 64 * 1024
TRACEBACK = "".join(f'    frame {i}: File "src/app/mod{i}.py", line {i * 7}\n' for i in range(30))


def _case_xml(test_id: str, test_file: str, outcome: str, message: str | None, secs: float) -> str:
    module, _, name = test_id.partition("::")
    classname = module.removesuffix(".py").replace("/", ".")
    head = (
        f'<testcase classname="{classname}" name={quoteattr(name)} file="{test_file}"'
        f' time="{secs:.3f}"'
    )
    if outcome == "pass":
        return head + "/>\n"
    if outcome == "skipped":
        return head + '><skipped message="not on this platform"/></testcase>\n'
    tag = "failure" if outcome == "fail" else "error"
    body = f"{message}\n{TRACEBACK}".replace("&", "&amp;").replace("<", "&lt;")
    return f"{head}><{tag} message={quoteattr(message or '')}>{body}</{tag}></testcase>\n"


def write_report(path: Path, cases: list[str], ts: str) -> None:
    """One pytest-style JUnit file."""
    with path.open("w", encoding="utf-8") as fh:
        fh.write('<?xml version="1.0" encoding="utf-8"?>\n<testsuites>')
        fh.write(f'<testsuite name="pytest" tests="{len(cases)}" timestamp="{ts}">\n')
        fh.writelines(cases)
        fh.write("</testsuite></testsuites>\n")


def _outcome(fail_p: float, skipped: bool, rng: random.Random) -> tuple[str, str | None]:
    if skipped:
        return "skipped", None
    if fail_p and rng.random() < fail_p:
        return ("fail" if rng.random() < 0.8 else "error"), _message(rng)
    return "pass", None


def ensure_reports(results: int, seed: int) -> list[Path]:
    """Cached JUnit files of about `results` cases: one per run, every test in each."""
    folder = out_dir() / f"junit-{results}-s{seed}"
    done = folder / "DONE"
    if done.exists():
        return sorted(folder.glob("run-*.xml"))
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    tests = _suite_tests(tests_for(results), rng)
    runs = max(1, round(results / len(tests)))
    for index in range(runs):
        ts = (NOW - timedelta(days=90 * (runs - index) / runs)).strftime("%Y-%m-%dT%H:%M:%S")
        cases = []
        for test in tests:
            outcome, message = _outcome(test.fail_p, test.skipped, rng)
            cases.append(_case_xml(test.test_id, test.test_file, outcome, message, 0.01))
        write_report(folder / f"run-{index:05d}.xml", cases, ts)
    done.touch()
    return sorted(folder.glob("run-*.xml"))


def ensure_big_report(megabytes: int, seed: int) -> Path:
    """One report of about `megabytes` MB with distinct test ids (a huge sharded suite)."""
    path = out_dir() / f"junit-big-{megabytes}mb-s{seed}.xml"
    if path.exists():
        return path
    rng = random.Random(seed)
    target = megabytes * 1_000_000
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write('<?xml version="1.0" encoding="utf-8"?>\n<testsuites>')
        fh.write(f'<testsuite name="pytest" timestamp="{NOW:%Y-%m-%dT%H:%M:%S}">\n')
        index = 0
        while fh.tell() < target:
            module = index // 50
            test_file = f"tests/big/pkg{module % 97}/test_m{module}.py"
            test_id = f"{test_file}::test_case_{index % 50}[p{index}]"
            outcome, message = _outcome(0.04, index % 100 == 0, rng)
            fh.write(_case_xml(test_id, test_file, outcome, message, 0.002))
            index += 1
        fh.write("</testsuite></testsuites>\n")
    tmp.rename(path)
    return path


def bare_parse(paths: list[Path]) -> int:
    """The anchor: expat over every file, counting <testcase> starts."""
    count = 0

    def start(name: str, _attrs: dict[str, str]) -> None:
        nonlocal count
        if name == "testcase":
            count += 1

    for path in paths:
        parser = xml.parsers.expat.ParserCreate()
        parser.StartElementHandler = start
        with path.open("rb") as fh:
            while chunk := fh.read(CHUNK_BYTES):
                parser.Parse(chunk, False)
        parser.Parse(b"", True)
    return count


def _meta(index: int, files: int) -> RunMeta:
    """The metadata of the index-th run (one an hour, ending at NOW)."""
    return RunMeta(
        run_id=f"ingest-{index}",
        suite="ci",
        branch="main",
        branch_kind="main",
        ts=NOW - timedelta(hours=files - index),
    )


def ingest_all(paths: list[Path], conn: sqlite3.Connection, tail: list[float] | None = None) -> int:
    """Ingest each file as its own run into the history, then fold the runs whose rollups still
    wait (appending the fold's seconds to `tail`); returns the result rows added."""
    from flaketui.core.history.store import transaction
    from flaketui.core.ingest.writer import ingest_reports
    from flaketui.core.rollups.build import fold_pending

    added = 0
    for index, path in enumerate(paths):
        added += ingest_reports(conn, [path], _meta(index, len(paths)), stage=True).results
    start = time.perf_counter()
    with transaction(conn):
        fold_pending(conn)
    if tail is not None:
        tail.append(time.perf_counter() - start)
    return added


def backfill_all(paths: list[Path], conn: sqlite3.Connection, folder: Path) -> int:
    """The same runs (same metadata) as one `flaketui ingest --manifest` backfill; results added.

    The manifest is written before the clock starts (see main); this only ingests it.
    """
    from flaketui.core.ingest.manifest import ingest_manifest

    summary = ingest_manifest(conn, folder / "runs.jsonl")
    if summary.refused:
        raise SystemExit(f"manifest refused: {summary.refused[:3]}")
    return summary.results_landed


def write_manifest(paths: list[Path], folder: Path) -> None:
    """A backfill manifest naming every file as its own run, with _meta's metadata."""
    lines = []
    for index, path in enumerate(paths):
        meta = _meta(index, len(paths))
        assert meta.ts is not None
        lines.append(
            json.dumps(
                {
                    "file": str(path),
                    "run_id": meta.run_id,
                    "suite": meta.suite,
                    "branch": meta.branch,
                    "branch_kind": meta.branch_kind,
                    "timestamp": meta.ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
            )
        )
    (folder / "runs.jsonl").write_text("\n".join(lines) + "\n")


def fresh_history(db_path: Path) -> sqlite3.Connection:
    """A new, migrated history (plain sqlite3, as the CLI and the plugin open it)."""
    from flaketui.core.history.store import open_connection

    return open_connection(db_path)


def _built_rows(paths: list[Path]) -> tuple[dict[str, int], list[tuple[list, list]]]:
    """Every file's rows built ahead of a floor's clock: test pks, then per run its `results`
    rows (test, attempt, outcome, worker, duration, message, signature) and `test_runs` rows
    (test, outcome, attempts, first attempt's duration)."""
    from flaketui.core.ingest.junit import iter_case_rows

    test_pks: dict[str, int] = {}
    runs = []
    for path in paths:
        results, test_runs = [], []
        for test_id, _, attempts, _ in iter_case_rows(path):
            pk = test_pks.setdefault(test_id, len(test_pks) + 1)
            for number, (outcome, duration, message, worker, *_) in enumerate(attempts, 1):
                results.append((pk, number, outcome, worker, duration, message, None))
            outcome = "fail" if attempts[0][0] != "pass" else "pass"
            test_runs.append((pk, outcome, len(attempts), attempts[0][1]))
        runs.append((results, test_runs))
    return test_pks, runs


def _insert_runs(
    conn: sqlite3.Connection, runs: list[tuple[list, list]], *, staged: bool = False
) -> float:
    """Seconds to insert each run's built rows, one transaction per run (staged: `test_runs`
    rows go to STAGED_TABLE, moved into `test_runs` in test order every STAGE_RUNS runs)."""
    target = "staged_test_runs" if staged else "test_runs"
    start = time.perf_counter()
    for index, (results, test_runs) in enumerate(runs):
        ts = f"2026-11-{1 + index % 28:02d}T{index % 24:02d}:00:00Z"
        conn.execute("BEGIN IMMEDIATE")
        run = conn.execute(
            "INSERT INTO runs (run_id, ts, source) VALUES (?, ?, 'junit')", (f"floor-{index}", ts)
        ).lastrowid
        conn.executemany(
            "INSERT INTO results (run, test, attempt, outcome, worker_id, duration_ms, message,"
            " signature) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(run, *row) for row in results],
        )
        conn.executemany(
            f"INSERT INTO {target} (test, run, ts, outcome, bad, attempts, failed_attempts,"
            " worker_id, signature, edited, first_duration_ms)"
            " VALUES (?, ?, ?, ?, 0, ?, 0, NULL, NULL, 0, ?)",
            [(pk, run, ts, outcome, count, first) for pk, outcome, count, first in test_runs],
        )
        conn.execute("COMMIT")
        if staged and ((index + 1) % STAGE_RUNS == 0 or index + 1 == len(runs)):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(f"INSERT INTO test_runs SELECT * FROM {target} ORDER BY test, ts, run")
            conn.execute(f"DELETE FROM {target}")
            conn.execute("COMMIT")
    return time.perf_counter() - start


# Other layouts of test_runs, measured as store_floor is (informational): keyed by run, in the
# order runs arrive; the same with an index in test and time order (what per-test readers need
# from a table kept in run order); or staged so (a table with no key) and moved into the real,
# test-ordered table STAGE_RUNS runs at a time, as a fold could.
STAGE_RUNS = 16
TEST_RUNS_COLUMNS = """test INTEGER NOT NULL, run INTEGER NOT NULL, ts TEXT NOT NULL,
    outcome TEXT NOT NULL, bad INTEGER NOT NULL, attempts INTEGER NOT NULL,
    failed_attempts INTEGER NOT NULL, worker_id TEXT, signature INTEGER,
    edited INTEGER NOT NULL DEFAULT 0, first_duration_ms INTEGER, first_timeout_ms INTEGER,
    first_position INTEGER"""
LAYOUTS = {
    "test": [],
    "run": [
        "DROP TABLE test_runs",
        f"CREATE TABLE test_runs ({TEST_RUNS_COLUMNS}, PRIMARY KEY (run, test)) WITHOUT ROWID",
    ],
    "run_indexed": [
        "DROP TABLE test_runs",
        f"CREATE TABLE test_runs ({TEST_RUNS_COLUMNS}, PRIMARY KEY (run, test)) WITHOUT ROWID",
        "CREATE INDEX test_runs_by_test ON test_runs (test, ts)",
    ],
    "staged": [f"CREATE TABLE staged_test_runs ({TEST_RUNS_COLUMNS})"],
}


def store_floor(paths: list[Path], db_path: Path, layout: str = "test") -> tuple[float, int]:
    """Informational: seconds to store already-built rows, one transaction per file.

    The rows of every file are parsed and built first (untimed); then only the rows the schema
    needs per result (one `results` row and one `test_runs` row, with their indexes) are inserted
    with executemany, as a writer that computed nothing would. Tests and signatures are inserted
    untimed beforehand. No rollups. Commits checkpoint as ingest's do (WRITE_CHECKPOINT_PAGES).
    This is the schema's floor, not a competitor.
    """
    from flaketui.core.ingest.rows import WRITE_CHECKPOINT_PAGES

    test_pks, runs = _built_rows(paths)
    conn = fresh_history(db_path)
    for statement in LAYOUTS[layout]:
        conn.execute(statement)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute(f"PRAGMA wal_autocheckpoint = {WRITE_CHECKPOINT_PAGES}")  # as ingest writes
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO tests (id, test_id, parent, first_seen) VALUES (?, ?, ?, '2026-01-01')",
        [(pk, test_id, test_id) for test_id, pk in test_pks.items()],
    )
    conn.execute("COMMIT")
    seconds = _insert_runs(conn, runs, staged=layout == "staged")
    conn.close()
    return seconds, sum(len(results) for results, _ in runs)


APPEND_SCHEMA = """
CREATE TABLE runs (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, ts TEXT NOT NULL, source TEXT);
CREATE TABLE results (run INTEGER, test INTEGER, attempt INTEGER, outcome TEXT, worker_id TEXT,
    duration_ms INTEGER, message TEXT, signature INTEGER);
CREATE TABLE test_runs (test INTEGER, run INTEGER, ts TEXT, outcome TEXT, bad INTEGER,
    attempts INTEGER, failed_attempts INTEGER, worker_id TEXT, signature INTEGER, edited INTEGER,
    first_duration_ms INTEGER, first_timeout_ms INTEGER, first_position INTEGER);
"""


def append_floor(paths: list[Path], db_path: Path) -> float:
    """Informational: seconds to append the same built rows to tables with no key, no index and
    no constraint, in a WAL history as flaketui opens one and ingest writes it (checkpoints past
    WRITE_CHECKPOINT_PAGES), one transaction per file.

    The least any design can pay in this process to keep what the history stores per run (a row per
    attempt, a row per test and run) with each run committed on its own: every per-test ordering
    (a key or index on the test, the rollups) costs on top of it.
    """
    from flaketui.core.ingest.rows import WRITE_CHECKPOINT_PAGES

    _, runs = _built_rows(paths)
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(f"PRAGMA wal_autocheckpoint = {WRITE_CHECKPOINT_PAGES}")
    conn.executescript(APPEND_SCHEMA)
    seconds = _insert_runs(conn, runs)
    conn.close()
    return seconds


def parser_only(paths: list[Path]) -> float:
    """Informational: seconds for flaketui's own JUnit parser to yield every case row."""
    from flaketui.core.ingest.junit import iter_case_rows

    start = time.perf_counter()
    for path in paths:
        for _ in iter_case_rows(path):
            pass
    return time.perf_counter() - start


def _child(argv: list[str]) -> None:
    """Child process of --report-mb: ingest one file (or only import) and print the results."""
    if argv[0] == "imports":
        print(0)
        return
    conn = fresh_history(Path(argv[1]))
    print(ingest_all([Path(argv[0])], conn))
    conn.close()


def _big(megabytes: int, seed: int) -> dict[str, object]:
    path = ensure_big_report(megabytes, seed)
    script = str(Path(__file__).resolve())
    subprocess.run([sys.executable, script, "--child", "imports"], check=True, capture_output=True)
    import_rss = peak_rss_mb(children=True)  # RUSAGE_CHILDREN: the max over waited-for children
    with tempfile.TemporaryDirectory() as tmp:
        db_path = Path(tmp) / "big.db"
        ingest_s, proc = timed(
            lambda: subprocess.run(
                [sys.executable, script, "--child", str(path), str(db_path)],
                check=True,
                capture_output=True,
                text=True,
            )
        )
    rss = peak_rss_mb(children=True)  # the max over children: the ingest child is the larger
    parse_s, results = timed(lambda: bare_parse([path]))
    return {
        "report_mb": round(path.stat().st_size / 1e6, 1),
        "results": int(proc.stdout.strip().splitlines()[-1]),
        "cases": results,
        "ingest_s": round(ingest_s, 2),
        "parse_s": round(parse_s, 2),
        "parse_ratio": round(ingest_s / parse_s, 3),
        "results_per_s": round(results / ingest_s),
        "peak_rss_mb": rss,
        "import_rss_mb": import_rss,
    }


def history_report(history: Path, path: Path, failing: int = 5) -> int:
    """A pytest-style report of every test of the history (the first `failing` of them failing
    with one message), written to path; returns its cases."""
    conn = sqlite3.connect(f"{history.resolve().as_uri()}?mode=ro", uri=True)
    try:
        test_ids = [str(t) for (t,) in conn.execute("SELECT test_id FROM tests ORDER BY id")]
    finally:
        conn.close()
    cases = []
    for index, test_id in enumerate(test_ids):
        module = test_id.partition("::")[0]
        outcome, message = ("fail", "AssertionError: boom") if index < failing else ("pass", None)
        cases.append(_case_xml(test_id, module, outcome, message, 0.01))
    write_report(path, cases, NOW.strftime("%Y-%m-%dT%H:%M:%S"))
    return len(cases)


def ingest_commands(
    target: Path,
    report: Path,
    runs: int,
    first: int,
    cwd: Path,
    *,
    env: dict[str, str] | None = None,
    start: datetime = NOW,
) -> list[float]:
    """Seconds of each of `runs` `flaketui ingest` commands of report into target, each a new
    run (ids from `first` on, a minute apart from `start` + `first` minutes: by default after
    the generated histories' newest run); `env`: the commands' environment (this one's)."""
    env = {k: v for k, v in (env or os.environ).items() if k != "FLAKETUI_INCIDENT"}
    seconds = []
    for index in range(first, first + runs):
        ts = (start + timedelta(minutes=index)).strftime("%Y-%m-%dT%H:%M:%SZ")
        command = [
            sys.executable, "-m", "flaketui", "ingest", str(target), str(report),
            "--run-id", f"bench-{index}", "--timestamp", ts, "--suite", "ci",
            "--branch", "main", "--no-detect",
        ]  # fmt: skip
        elapsed, proc = timed(
            lambda: subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)  # noqa: B023
        )
        if proc.returncode != 0:
            raise SystemExit(f"flaketui ingest failed: {proc.stderr.strip()[-2000:]}")
        seconds.append(elapsed)
    return seconds


def merge_command(target: Path, source: Path, cwd: Path) -> float:
    """Seconds of `flaketui merge target source` into a missing target (a CI job's first step
    when it carries its history from run to run)."""
    command = [sys.executable, "-m", "flaketui", "merge", str(target), str(source)]
    elapsed, proc = timed(lambda: subprocess.run(command, cwd=cwd, capture_output=True, text=True))
    if proc.returncode != 0:
        raise SystemExit(f"flaketui merge failed: {proc.stderr.strip()[-2000:]}")
    return elapsed


def into_history(history: Path, runs: int, repeat: int) -> dict[str, object]:
    """--history: `flaketui ingest` into a copy of history against into a new one."""
    if not history.is_file():
        raise SystemExit(f"{history}: no such history")
    big, new, carried, copied = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        report = root / "run.xml"
        cases = history_report(history, report)
        for round_ in range(repeat):
            copy = root / "copy.db"
            shutil.copyfile(history, copy)  # untimed; the cached history is never written
            copied.append(timed(lambda: shutil.copyfile(copy, root / "file-copy.db"))[0])  # noqa: B023
            carried.append(merge_command(root / "carried.db", copy, root))
            fresh = root / "new.db"
            new_s = ingest_commands(fresh, report, runs, round_ * runs, root)
            big_s = ingest_commands(copy, report, runs, round_ * runs, root)
            for path in (copy, fresh, root / "carried.db", root / "file-copy.db"):
                path.unlink()
            big.append(sum(big_s) / runs)
            new.append(sum(new_s) / runs)
            log(
                f"round {round_ + 1}: into the history {big[-1]:.3f}s a command"
                f" (slowest {max(big_s):.3f}s), into a new one {new[-1]:.3f}s;"
                f" merged into a new file {carried[-1]:.3f}s, copied {copied[-1]:.3f}s"
            )
    command_s, new_command_s = median(big), median(new)
    return {
        "history": str(history),
        "cases": cases,
        "runs": runs,
        "repeat": repeat,
        "command_s": command_s,
        "new_command_s": new_command_s,
        "history_ratio": round(command_s / new_command_s, 3),
        "merge_new_s": median(carried),
        "file_copy_s": median(copied),
        "merge_ratio": round(median(carried) / median(copied), 3),
    }


def main() -> None:
    """Command line: run the rounds and print the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--report-mb", type=int, default=0)
    parser.add_argument("--history", type=Path, help="a history to ingest runs into (a copy)")
    parser.add_argument("--runs", type=int, default=16, help="commands a round (--history)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child)
        return
    if args.report_mb:
        emit({"bench": "ingest-big", **_big(args.report_mb, args.seed), "machine": machine()})
        return
    if args.history:
        result = into_history(args.history, args.runs, args.repeat)
        emit({"bench": "ingest-history", **result, "machine": machine()})
        return
    paths = ensure_reports(args.results, args.seed)
    # Every file read once, untimed: the first step of a round (ingest) would otherwise pay
    # reading from disk what every later step reads from the page cache.
    bare_parse(paths)
    ingest_times, parse_times, floor_times = [], [], []
    tail_times: list[float] = []
    parser_times, append_times, backfill_times = [], [], []
    layout_times: dict[str, list[float]] = {"run": [], "run_indexed": [], "staged": []}
    results = 0
    for round_ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            # Opening (creating) the history is outside the timing: once per history, not per
            # report. Round 1 used to include importing the library too.
            conn = fresh_history(Path(tmp) / "h.db")
            seconds, results = timed(lambda: ingest_all(paths, conn, tail_times))  # noqa: B023
            conn.close()
            ingest_times.append(seconds)
            write_manifest(paths, Path(tmp))
            conn = fresh_history(Path(tmp) / "backfill.db")
            backfill_s, backfilled = timed(lambda: backfill_all(paths, conn, Path(tmp)))  # noqa: B023
            conn.close()
            if backfilled != results:
                raise SystemExit(f"backfill stored {backfilled} results, ingest {results}")
            backfill_times.append(backfill_s)
            parse_times.append(timed(lambda: bare_parse(paths))[0])
            floor_times.append(store_floor(paths, Path(tmp) / "floor.db")[0])
            for layout, times in layout_times.items():
                times.append(store_floor(paths, Path(tmp) / f"floor-{layout}.db", layout)[0])
            parser_times.append(parser_only(paths))
            append_times.append(append_floor(paths, Path(tmp) / "append.db"))
        log(
            f"round {round_ + 1}: ingest {ingest_times[-1]:.3f}s parse {parse_times[-1]:.3f}s"
            f" store floor {floor_times[-1]:.3f}s parser {parser_times[-1]:.3f}s"
            f" append floor {append_times[-1]:.3f}s backfill {backfill_times[-1]:.3f}s"
        )
    ingest_s, parse_s, floor_s = median(ingest_times), median(parse_times), median(floor_times)
    parser_s, append_s = median(parser_times), median(append_times)
    backfill_s = median(backfill_times)
    emit(
        {
            "bench": "ingest",
            "results": results,
            "files": len(paths),
            "repeat": args.repeat,
            "ingest_s": ingest_s,
            "parse_s": parse_s,
            "results_per_s": round(results / ingest_s),
            "parse_ratio": round(ingest_s / parse_s, 3),
            "tail_fold_s": median(tail_times),
            "backfill_s": backfill_s,
            "backfill_ratio": round(backfill_s / parse_s, 3),
            "store_floor_s": floor_s,
            "store_floor_ratio": round(floor_s / parse_s, 3),
            "run_keyed_floor_ratio": round(median(layout_times["run"]) / parse_s, 3),
            "run_indexed_floor_ratio": round(median(layout_times["run_indexed"]) / parse_s, 3),
            "staged_floor_ratio": round(median(layout_times["staged"]) / parse_s, 3),
            "parser_s": parser_s,
            "parser_ratio": round(parser_s / parse_s, 3),
            "append_floor_s": append_s,
            "append_floor_ratio": round(append_s / parse_s, 3),
            "lower_bound_ratio": round((parser_s + append_s) / parse_s, 3),
            "peak_rss_mb": peak_rss_mb(),
            "machine": machine(),
        }
    )


if __name__ == "__main__":
    main()
