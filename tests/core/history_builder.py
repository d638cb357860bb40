"""Write synthetic runs and results straight into a history, for scoring tests.

Usage::

    hb = HistoryBuilder(db)
    hb.run(ts="2026-11-01T12:00:00Z", branch_kind="main", commit="c1", suite="unit").result(
        "tests/test_a.py::test_a", ["fail", "pass"], message="AssertionError: 1 != 2"
    )
    hb.sequence("tests/test_b.py::test_b", "PPFRP", start=T0, step=timedelta(hours=6))

Rows follow flaketui/core/history/store.py exactly (runs, run_changed_files, tests, signatures,
results, test_runs), with the per-run outcome computed here, so tests can start
from a known history without the ingest writer.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta

import sqlite_utils

from flaketui.core.history.store import transaction
from flaketui.core.ingest.resign import SCHEME_KEY, scheme_of
from flaketui.core.ingest.signatures import sign
from flaketui.core.timeutil import parse_iso, to_iso

_PARAMS = re.compile(r"\[.*\]$")
DEFAULT_MESSAGE = "AssertionError: assert 1 == 2"
# One letter per run in `sequence`: the attempts that run made.
PATTERN_ATTEMPTS = {
    "P": ["pass"],
    "F": ["fail"],
    "E": ["error"],
    "R": ["fail", "pass"],  # flaky: failed, passed on retry
    "X": ["fail", "fail"],  # failed every retry
    "S": ["skipped"],
}


def _ts(value: datetime | str) -> str:
    return to_iso(parse_iso(value) if isinstance(value, str) else value)


def run_outcome(outcomes: Sequence[str]) -> tuple[str, int]:
    """(test_runs.outcome, bad) for the attempts of one test in one run."""
    ran = [o for o in outcomes if o != "skipped"]
    if not ran:
        return "skipped", 0
    bad = int(ran[0] in ("fail", "error"))
    if all(o == "pass" for o in ran):
        return "pass", 0
    if any(o == "pass" for o in ran):
        return "flaky", bad
    return "fail", bad


class RunBuilder:
    """One run being filled with results."""

    def __init__(self, history: HistoryBuilder, run_pk: int, ts: str, changed: set[str]) -> None:
        self.history = history
        self.run_pk = run_pk
        self.ts = ts
        self.changed = changed

    def result(
        self,
        test_id: str,
        outcomes: Sequence[str],
        *,
        message: str | None = DEFAULT_MESSAGE,
        worker_id: str | None = None,
        test_file: str | None = None,
        duration_ms: int | None = 10,
    ) -> RunBuilder:
        """Record the attempts of one test in this run, in order; chainable."""
        conn = self.history.db.conn
        test_file = test_file or (test_id.split("::")[0] if "::" in test_id else None)
        with transaction(conn):
            test_pk = self.history.test_pk(test_id, test_file, self.ts)
            first_sig: int | None = None
            for attempt, outcome in enumerate(outcomes, start=1):
                failed = outcome in ("fail", "error")
                sig_pk = self.history.signature_pk(message) if failed else None
                if failed and first_sig is None:
                    first_sig = sig_pk
                conn.execute(
                    "INSERT INTO results (run, test, attempt, outcome, worker_id, duration_ms, "
                    "message, signature) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        self.run_pk,
                        test_pk,
                        attempt,
                        outcome,
                        worker_id,
                        duration_ms,
                        message if failed else None,
                        sig_pk,
                    ),
                )
            outcome, bad = run_outcome(outcomes)
            conn.execute(
                "INSERT INTO test_runs (test, run, ts, outcome, bad, attempts, failed_attempts, "
                "worker_id, signature, edited, first_duration_ms)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    test_pk,
                    self.run_pk,
                    self.ts,
                    outcome,
                    bad,
                    len(outcomes),
                    sum(o in ("fail", "error") for o in outcomes),
                    worker_id,
                    first_sig,
                    int(test_file is not None and test_file in self.changed),
                    duration_ms,
                ),
            )
        return self


class HistoryBuilder:
    """Creates runs and results with direct SQL following the schema of store.py."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self.db = db
        # Messages are signed here with the current algorithm and no user patterns: say so, as
        # the ingest does, so reading commands do not call the signatures stale.
        db.conn.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (SCHEME_KEY, scheme_of(()))
        )
        self._run_numbers = itertools.count(1)
        self._commit_numbers = itertools.count(1)

    def run(
        self,
        *,
        ts: datetime | str,
        branch_kind: str = "main",
        commit: str | None = None,
        suite: str = "unit",
        worker_count: int = 1,
        incident: str | None = None,
        changed_files: Iterable[str] = (),
        run_id: str | None = None,
        branch: str | None = None,
        finished: bool = True,
    ) -> RunBuilder:
        """Insert one run (a fresh commit unless given) and return its builder."""
        number = next(self._run_numbers)
        stamp = _ts(ts)
        commit = commit if commit is not None else f"c{next(self._commit_numbers):04d}"
        branch = branch or {"main": "main", "release": "release/1"}.get(branch_kind, "feature")
        changed = set(changed_files)
        conn = self.db.conn
        with transaction(conn):
            cursor = conn.execute(
                "INSERT INTO runs (run_id, suite, branch, branch_kind, commit_sha, ts, "
                "worker_count, incident, source, finished) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id or f"run-{number:05d}",
                    suite,
                    branch,
                    branch_kind,
                    commit,
                    stamp,
                    worker_count,
                    incident,
                    "junit",
                    int(finished),
                ),
            )
            run_pk = int(cursor.lastrowid or 0)
            conn.executemany(
                "INSERT INTO run_changed_files (run, path) VALUES (?, ?)",
                [(run_pk, path) for path in sorted(changed)],
            )
        return RunBuilder(self, run_pk, stamp, changed)

    def sequence(
        self,
        test_id: str,
        pattern: str,
        *,
        start: datetime,
        step: timedelta = timedelta(hours=1),
        branch_kind: str = "main",
        suite: str = "unit",
        commits: Sequence[str] | None = None,
        message: str | None = DEFAULT_MESSAGE,
    ) -> list[RunBuilder]:
        """One run per letter of pattern (P pass, F fail, E error, R flaky, X all retries fail,
        S skipped), `step` apart from `start`; one fresh commit per run unless given."""
        builders = []
        for index, letter in enumerate(pattern):
            commit = commits[index] if commits is not None else None
            run = self.run(
                ts=start + index * step, branch_kind=branch_kind, commit=commit, suite=suite
            )
            run.result(test_id, PATTERN_ATTEMPTS[letter], message=message)
            builders.append(run)
        return builders

    def test_pk(self, test_id: str, test_file: str | None, ts: str) -> int:
        """tests.id of test_id, inserting it (or moving first_seen earlier) as needed."""
        conn = self.db.conn
        row = conn.execute(
            "SELECT id, first_seen FROM tests WHERE test_id = ?", (test_id,)
        ).fetchone()
        if row is not None:
            if ts < row[1]:
                conn.execute("UPDATE tests SET first_seen = ? WHERE id = ?", (ts, row[0]))
            return int(row[0])
        cursor = conn.execute(
            "INSERT INTO tests (test_id, parent, test_file, first_seen) VALUES (?, ?, ?, ?)",
            (test_id, _PARAMS.sub("", test_id), test_file, ts),
        )
        return int(cursor.lastrowid or 0)

    def signature_pk(self, message: str | None) -> int | None:
        """signatures.id of a failure message, inserting it as needed."""
        signature = sign(message)
        if signature is None:
            return None
        conn = self.db.conn
        conn.execute(
            "INSERT OR IGNORE INTO signatures (hash, text, example) VALUES (?, ?, ?)",
            (signature.hash, signature.text, message),
        )
        row = conn.execute("SELECT id FROM signatures WHERE hash = ?", (signature.hash,)).fetchone()
        return int(row[0])


def utc(year: int, month: int, day: int, hour: int = 0) -> datetime:
    """A UTC datetime, for brevity in tests."""
    return datetime(year, month, day, hour, tzinfo=UTC)
