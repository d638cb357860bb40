"""Shared helpers for the reliability suite: report builders, history snapshots, child processes."""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import sys
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from flaketui.core.history.merge import RUN_COLUMNS
from tests.child_processes import PACKAGE_ROOT, child_context

TS = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
TABLES = (
    "runs",
    "run_files",
    "run_changed_files",
    "tests",
    "signatures",
    "results",
    "test_runs",
    "incidents",
    "audit_log",
    "meta",
)
CHILD_SCRIPT = Path(__file__).with_name("reliability_child.py")


def run_child(target: Any, args: tuple[Any, ...], *, delay: float = -1) -> tuple[int | None, float]:
    """Run target(*args, ready) in a child (tests/child_processes.py), SIGKILLed `delay` seconds
    after it sets `ready` (when delay >= 0); (exit code, seconds from ready to its end)."""
    ctx = child_context()
    ready = ctx.Event()
    proc = ctx.Process(target=target, args=(*args, ready))
    proc.start()
    assert ready.wait(60)
    started = time.monotonic()
    if delay >= 0:
        time.sleep(delay)
        if proc.is_alive():
            os.kill(proc.pid, signal.SIGKILL)
    proc.join(120)
    return proc.exitcode, time.monotonic() - started


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a fresh Python child that must import the same flaketui (the one this
    test process imported, a mutated copy on PYTHONPATH included)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def child_command(*args: str | Path) -> list[str]:
    """argv running reliability_child.py (which blocks optional heavy imports) in a fresh Python."""
    return [sys.executable, str(CHILD_SCRIPT), *map(str, args)]


# ---- report builders ------------------------------------------------------------------------


def junit_case(cls: str, name: str, outcome: str = "pass", message: str = "boom") -> str:
    """One <testcase> element (message is inserted as is: escape it yourself)."""
    inner = {
        "pass": "",
        "fail": f'<failure message="{message}">trace</failure>',
        "error": f'<error message="{message}"/>',
        "skipped": "<skipped/>",
    }[outcome]
    return f'<testcase classname="{cls}" name="{name}" time="0.010">{inner}</testcase>'


def write_report(path: Path, cases: Iterable[str], suite: str = "s") -> Path:
    """A bare-<testsuite> JUnit report holding cases."""
    with path.open("w", encoding="utf-8") as fh:
        fh.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="{suite}">\n')
        for case in cases:
            fh.write(case + "\n")
        fh.write("</testsuite>\n")
    return path


def large_report(path: Path, cases: int, tag: str = "big") -> Path:
    """A report of `cases` tests, one in ten failing with a distinct-looking message."""
    outcomes = ("fail", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skipped")
    return write_report(
        path,
        (
            junit_case(
                f"pkg.{tag}.mod{n % 40}",
                f"test_{n}",
                outcomes[n % 10],
                f"AssertionError: expected {n} got {n + 1} at /tmp/w{n % 7}/x.py",
            )
            for n in range(cases)
        ),
    )


# ---- history snapshots ------------------------------------------------------------------------


def connect(db: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection (recovers a WAL left by a killed writer on first read)."""
    return sqlite3.connect(db, timeout=30)


Snapshot = dict[str, frozenset[tuple[object, ...]]]


def snapshot(db: Path) -> Snapshot:
    """Every row of every history table (all have keys): equal snapshots, untouched history."""
    conn = connect(db)
    try:
        return {
            table: frozenset(tuple(row) for row in conn.execute(f"SELECT * FROM {table}"))
            for table in TABLES
        }
    finally:
        conn.close()


def run_fingerprints(db: Path) -> dict[object, tuple[object, ...]]:
    """Per run: its row (but ran_at_least, a count the outage search fills in when it first
    needs it), and the count and sums of its results and per-test rows (cheap), the latter
    wherever they are: filed into test_runs, or still waiting to be."""
    conn = connect(db)
    try:
        return {
            row[0]: tuple(row)
            for row in conn.execute(
                f"SELECT r.id, {RUN_COLUMNS},"
                " (SELECT count(*) || '/' || sum(attempt) || '/' || sum(length(outcome)) || '/'"
                "  || total(length(message)) || '/' || total(duration_ms) || '/' || total(test)"
                "  FROM results WHERE run = r.id),"
                " (SELECT count(*) || '/' || sum(bad) || '/' || sum(attempts) || '/' || total(test)"
                "  FROM (SELECT bad, attempts, test FROM test_runs WHERE run = r.id UNION ALL"
                "  SELECT bad, attempts, test FROM test_runs_waiting WHERE run = r.id))"
                " FROM runs r"
            )
        }
    finally:
        conn.close()


def integrity(db: Path) -> tuple[str, list[tuple[object, ...]]]:
    """PRAGMA integrity_check's verdict and the foreign-key violations."""
    conn = connect(db)
    try:
        verdict = str(conn.execute("PRAGMA integrity_check").fetchone()[0])
        violations = [tuple(row) for row in conn.execute("PRAGMA foreign_key_check")]
        return verdict, violations
    finally:
        conn.close()


def run_counts(db: Path, run_id: str) -> tuple[int, int, int] | None:
    """(results, test_runs, run_files) rows of one run, or None when the run is absent."""
    conn = connect(db)
    try:
        row = conn.execute("SELECT id FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        return tuple(  # type: ignore[return-value]
            int(
                conn.execute(f"SELECT count(*) FROM {table} WHERE run = ?", (row[0],)).fetchone()[0]
            )
            for table in ("results", "test_runs", "run_files")
        )
    finally:
        conn.close()


def file_state(path: Path) -> tuple[bytes, int, int]:
    """Bytes, mtime (ns) and mode of a file, to prove it was not touched."""
    stat = path.stat()
    return path.read_bytes(), stat.st_mtime_ns, stat.st_mode


def sha256(path: Path) -> str:
    """The file's content hash."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---- CLI --------------------------------------------------------------------------------------


def invoke(*args: str | Path) -> Result:
    """Run the flaketui CLI in-process (commands registered) with the given arguments."""
    from flaketui.cli.commands import cli

    return CliRunner().invoke(cli, [str(a) for a in args])


def assert_one_line_error(result: Result, *needles: str) -> str:
    """The command failed with a single `Error: ...` line naming every needle, no traceback."""
    output = result.output
    assert result.exit_code == 1, (result.exit_code, output, result.exc_info)
    assert isinstance(result.exception, SystemExit), result.exc_info
    assert output.startswith("Error: "), output
    assert output.count("\n") == 1, output
    assert "Traceback" not in output
    for needle in needles:
        assert needle in output, (needle, output)
    return output
