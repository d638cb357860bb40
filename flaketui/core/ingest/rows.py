"""The rows of one run: the run itself, its attempts (results) and per-test outcomes (test_runs).

A (test, run) row is first written from the one case that brought the test's attempts; when more
attempts of that test arrive in the same run (a repeat in one report, a later shard, a later
recorder batch) the row is marked dirty and recomputed from the stored results by SQL, so the
rules of SPEC §4 hold however attempts are split.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator

from flaketui.core.config import Config
from flaketui.core.errors import ReportError
from flaketui.core.ingest.redact import clean_message
from flaketui.core.ingest.runmeta import file_of_test, normalise_path
from flaketui.core.models import OUTCOMES, CaseResult, RunMeta
from flaketui.core.signatures import sign
from flaketui.core.timeutil import to_iso, utc_now

BATCH_CASES = 2_000
MAX_CACHED_IDS = 200_000  # keeps memory flat on huge reports
# Page cache while writing: the default 2 MB spills index pages mid-transaction on big runs.
WRITE_CACHE_KIB = 64 * 1024
FAILED = frozenset({"fail", "error"})


def parent_of(test_id: str) -> str:
    """The test id with one trailing ``[...]`` parameter block (brackets may nest) stripped."""
    if not test_id.endswith("]"):
        return test_id
    depth = 0
    for index in range(len(test_id) - 1, -1, -1):
        char = test_id[index]
        if char == "]":
            depth += 1
        elif char == "[":
            depth -= 1
            if depth == 0:
                return test_id[:index] if index > 0 else test_id
    return test_id


# ---- run rows -------------------------------------------------------------------------------


def find_run(conn: sqlite3.Connection, run_id: str) -> tuple[int, str] | None:
    row = conn.execute("SELECT id, ts FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else (int(row[0]), str(row[1]))


def create_run(conn: sqlite3.Connection, meta: RunMeta, source: str, finished: int) -> int:
    """Insert a run with its changed files and incident tag; meta has its defaults applied."""
    assert meta.run_id is not None and meta.ts is not None
    cursor = conn.execute(
        "INSERT INTO runs (run_id, suite, branch, branch_kind, commit_sha, ts, worker_count,"
        " runner_host, ci_url, incident, source, finished)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            meta.run_id,
            meta.suite,
            meta.branch,
            meta.branch_kind,
            meta.commit_sha,
            to_iso(meta.ts),
            meta.worker_count,
            meta.runner_host,
            meta.ci_url,
            meta.incident,
            source,
            finished,
        ),
    )
    run_pk = int(cursor.lastrowid or 0)
    paths = sorted({normalise_path(p) for p in meta.changed_files if p.strip()})
    conn.executemany(
        "INSERT OR IGNORE INTO run_changed_files (run, path) VALUES (?, ?)",
        [(run_pk, p) for p in paths],
    )
    if meta.incident:
        conn.execute(
            "INSERT INTO incidents (tag, created_at, note)"
            " SELECT ?, ?, 'tagged at ingest'"
            " WHERE NOT EXISTS (SELECT 1 FROM incidents WHERE tag = ?)",
            (meta.incident, to_iso(utc_now()), meta.incident),
        )
    return run_pk


# ---- per (test, run) outcome ------------------------------------------------------------------

_REFRESH_SQL = """
INSERT OR REPLACE INTO test_runs
    (test, run, ts, outcome, bad, attempts, failed_attempts, worker_id, signature, edited)
SELECT a.test, :run, :ts,
    CASE WHEN a.failed + a.passed = 0 THEN 'skipped'
         WHEN a.failed = 0 THEN 'pass'
         WHEN a.passed = 0 THEN 'fail'
         ELSE 'flaky' END,
    coalesce(a.first_fail = a.first_real, 0),
    a.attempts, a.failed,
    (SELECT r.worker_id FROM results r
      WHERE r.run = :run AND r.test = a.test AND r.attempt = a.first_attempt),
    (SELECT r.signature FROM results r
      WHERE r.run = :run AND r.test = a.test AND r.attempt = a.first_fail),
    EXISTS (SELECT 1 FROM tests t JOIN run_changed_files c ON c.run = :run AND c.path = t.test_file
             WHERE t.id = a.test)
FROM (
    SELECT test,
        count(*) AS attempts,
        sum(outcome IN ('fail', 'error')) AS failed,
        sum(outcome = 'pass') AS passed,
        min(attempt) AS first_attempt,
        min(CASE WHEN outcome != 'skipped' THEN attempt END) AS first_real,
        min(CASE WHEN outcome IN ('fail', 'error') THEN attempt END) AS first_fail
    FROM results
    WHERE {where}
    GROUP BY test
) AS a
"""
_REFRESH_RUN_SQL = _REFRESH_SQL.format(where="run = :run")
# With a list of tests, search the (run, test) primary key instead of scanning the whole run.
_REFRESH_TESTS_SQL = _REFRESH_SQL.format(
    where="run = :run AND test IN (SELECT value FROM json_each(:tests))"
)


def refresh_test_runs(
    conn: sqlite3.Connection, run_pk: int, ts: str, tests: Iterable[int] | None = None
) -> None:
    """Recompute the test_runs rows of one run (of the given test row ids, or all of them)."""
    if tests is None:
        conn.execute(_REFRESH_RUN_SQL, {"run": run_pk, "ts": ts})
    else:
        test_list = json.dumps(sorted(set(tests)))
        conn.execute(_REFRESH_TESTS_SQL, {"run": run_pk, "ts": ts, "tests": test_list})


# ---- result rows ------------------------------------------------------------------------------

# A (test, run) row written from one case; a second case of the same test in the run (a repeat,
# a later shard or recorder batch) marks it dirty instead, and refresh_dirty recomputes it.
DIRTY_ATTEMPTS = -1
_UPSERT_TEST_RUN_SQL = (
    "INSERT INTO test_runs (test, run, ts, outcome, bad, attempts, failed_attempts, worker_id,"
    " signature, edited) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, EXISTS (SELECT 1 FROM tests t"
    " JOIN run_changed_files c ON c.run = ?2 AND c.path = t.test_file WHERE t.id = ?1))"
    f" ON CONFLICT (test, run) DO UPDATE SET attempts = {DIRTY_ATTEMPTS}"
)
_UPSERT_TEST_RUN_UNEDITED_SQL = (
    "INSERT INTO test_runs (test, run, ts, outcome, bad, attempts, failed_attempts, worker_id,"
    " signature, edited) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 0)"
    f" ON CONFLICT (test, run) DO UPDATE SET attempts = {DIRTY_ATTEMPTS}"
)


def _run_outcome(failed: int, passed: int) -> str:
    """SPEC §4 outcome of one test in one run from its attempt counts (mixed = flaky)."""
    if failed + passed == 0:
        return "skipped"
    if failed == 0:
        return "pass"
    return "fail" if passed == 0 else "flaky"


_INSERT_RESULT_SQL = (
    "INSERT INTO results (run, test, attempt, outcome, worker_id, duration_ms, message, signature)"
    " VALUES (?1, ?2, coalesce((SELECT max(attempt) FROM results WHERE run = ?1 AND test = ?2), 0)"
    " + 1, ?3, ?4, ?5, ?6, ?7)"
)


class RunWriter:
    """Appends attempts to one run, resolving test and signature ids through bounded caches."""

    def __init__(self, conn: sqlite3.Connection, run_pk: int, ts: str, config: Config) -> None:
        _grow_cache(conn)
        self.conn = conn
        self.run_pk = run_pk
        self.ts = ts
        self.mask_patterns = config.mask_patterns
        # test_id -> row id, for rows this run's ts and files leave unchanged
        self.test_ids: dict[str, int] = {}
        self.fileless: set[str] = set()  # cached tests whose stored test_file is NULL
        self.signature_ids: dict[str, int] = {}
        # cleaned message -> signature hash and text (None: no signature)
        self.signed: dict[str, tuple[str, str] | None] = {}
        self.has_changed_files = (
            conn.execute(
                "SELECT 1 FROM run_changed_files WHERE run = ? LIMIT 1", (run_pk,)
            ).fetchone()
            is not None
        )
        self._preload_tests()

    def forget(self) -> None:
        """Drop the cached row ids (after a rollback they may name rows that no longer exist)."""
        self.test_ids.clear()
        self.fileless.clear()
        self.signature_ids.clear()

    def write(self, cases: Iterable[CaseResult], touched: set[int] | None = None) -> int:
        """Insert every attempt of cases and their per-run rows (repeats are marked dirty, see
        refresh_dirty); return the rows added, collecting the test row ids into touched."""
        added = 0
        for batch in _batched(cases, BATCH_CASES):
            added += self._write_batch(batch, touched)
        return added

    def _write_batch(self, batch: list[CaseResult], touched: set[int] | None) -> int:
        if len(self.test_ids) > MAX_CACHED_IDS or len(self.signature_ids) > MAX_CACHED_IDS:
            self.forget()  # bound memory; before any lookup, so this batch's ids stay cached
        test_pks = self._resolve_tests(batch)
        if touched is not None:
            touched.update(test_pks)
        pending_signatures: dict[str, tuple[str, str]] = {}
        prepared: list[tuple[int, str, str | None, int | None, str | None, str | None]] = []
        summaries: list[tuple[int, str, int, int, int, str | None, str | None]] = []
        for case, test_pk in zip(batch, test_pks, strict=True):
            first_failure: str | None = None
            failed = passed = 0
            bad = -1  # unknown until the first non-skipped attempt
            for attempt in case.attempts:
                outcome = attempt.outcome
                if outcome not in OUTCOMES:
                    raise ReportError(f"{case.test_id}: unknown outcome {outcome!r}")
                message = clean_message(attempt.message)
                sig_hash = None
                if outcome in FAILED:
                    failed += 1
                    if bad < 0:
                        bad = 1
                    if message is not None:
                        signed = self._sign(message)
                        if signed is not None:
                            sig_hash = signed[0]
                            if sig_hash not in self.signature_ids:
                                pending_signatures.setdefault(sig_hash, (signed[1], message))
                    if failed == 1:
                        first_failure = sig_hash
                elif outcome == "pass":
                    passed += 1
                    if bad < 0:
                        bad = 0
                prepared.append(
                    (test_pk, outcome, attempt.worker_id, attempt.duration_ms, message, sig_hash)
                )
            if case.attempts:
                summaries.append(
                    (
                        test_pk,
                        _run_outcome(failed, passed),
                        max(bad, 0),
                        len(case.attempts),
                        failed,
                        case.attempts[0].worker_id,
                        first_failure,
                    )
                )
        if pending_signatures:
            self._insert_signatures(pending_signatures)
        signature_ids = self.signature_ids
        self.conn.executemany(
            _INSERT_RESULT_SQL,
            [
                (self.run_pk, test_pk, outcome, worker, duration, message,
                 None if sig is None else signature_ids[sig])
                for test_pk, outcome, worker, duration, message, sig in prepared
            ],
        )  # fmt: skip
        self.conn.executemany(
            _UPSERT_TEST_RUN_SQL if self.has_changed_files else _UPSERT_TEST_RUN_UNEDITED_SQL,
            [
                (test_pk, self.run_pk, self.ts, outcome, bad, attempts, failed, worker,
                 None if sig is None else signature_ids[sig])
                for test_pk, outcome, bad, attempts, failed, worker, sig in summaries
            ],
        )  # fmt: skip
        return len(prepared)

    def refresh_dirty(self, tests: Iterable[int] | None = None) -> None:
        """Recompute the per-run rows a repeated test marked dirty (of tests, or the whole run)."""
        if tests is None:
            dirty = self.conn.execute(
                "SELECT test FROM test_runs WHERE run = ? AND attempts = ?",
                (self.run_pk, DIRTY_ATTEMPTS),
            ).fetchall()
        else:
            dirty = self.conn.execute(
                "SELECT test FROM test_runs WHERE run = ? AND attempts = ?"
                " AND test IN (SELECT value FROM json_each(?))",
                (self.run_pk, DIRTY_ATTEMPTS, json.dumps(sorted(set(tests)))),
            ).fetchall()
        if dirty:
            refresh_test_runs(self.conn, self.run_pk, self.ts, [int(row[0]) for row in dirty])

    def _sign(self, message: str) -> tuple[str, str] | None:
        if message not in self.signed:
            if len(self.signed) > MAX_CACHED_IDS:
                self.signed.clear()
            signature = sign(message, self.mask_patterns)
            self.signed[message] = None if signature is None else (signature.hash, signature.text)
        return self.signed[message]

    def _insert_signatures(self, pending: dict[str, tuple[str, str]]) -> None:
        """Insert new signatures (the first example wins) and cache their row ids."""
        self.conn.executemany(
            "INSERT OR IGNORE INTO signatures (hash, text, example) VALUES (?, ?, ?)",
            [(h, text, example) for h, (text, example) in pending.items()],
        )
        for pk, sig_hash in self.conn.execute(
            "SELECT id, hash FROM signatures WHERE hash IN (SELECT value FROM json_each(?))",
            (json.dumps(list(pending)),),
        ):
            self.signature_ids[sig_hash] = int(pk)

    def _preload_tests(self) -> None:
        """Cache every test row this run cannot change, when the table is small enough."""
        count = int(self.conn.execute("SELECT count(*) FROM tests").fetchone()[0])
        if count > MAX_CACHED_IDS:
            return
        for test_id, pk, fileless in self.conn.execute(
            "SELECT test_id, id, test_file IS NULL FROM tests WHERE first_seen <= ?", (self.ts,)
        ):
            self.test_ids[test_id] = int(pk)
            if fileless:
                self.fileless.add(test_id)

    def _resolve_tests(self, batch: list[CaseResult]) -> list[int]:
        """Row ids of the batch's tests, upserting unseen ones (first_seen = earliest run ts)."""
        missing: dict[str, tuple[str, str | None]] = {}
        for case in batch:
            test_id = case.test_id
            if test_id in missing:
                continue
            if test_id in self.test_ids:
                if test_id not in self.fileless:
                    continue
                test_file = file_of_test(test_id, case.test_file)
                if test_file is None:
                    continue
                # A stored test without a file learns it from this case.
                self.fileless.discard(test_id)
                missing[test_id] = (parent_of(test_id), test_file)
            else:
                missing[test_id] = (parent_of(test_id), file_of_test(test_id, case.test_file))
        if missing:
            self.conn.executemany(
                "INSERT INTO tests (test_id, parent, test_file, first_seen) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (test_id) DO UPDATE SET"
                " first_seen = min(first_seen, excluded.first_seen),"
                " test_file = coalesce(test_file, excluded.test_file)"
                " WHERE first_seen > excluded.first_seen"
                " OR (test_file IS NULL AND excluded.test_file IS NOT NULL)",
                [(tid, parent, tfile, self.ts) for tid, (parent, tfile) in missing.items()],
            )
            for pk, test_id, fileless in self.conn.execute(
                "SELECT id, test_id, test_file IS NULL FROM tests"
                " WHERE test_id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(missing)),),
            ):
                self.test_ids[test_id] = int(pk)
                if fileless:
                    self.fileless.add(test_id)
        return [self.test_ids[case.test_id] for case in batch]


def _grow_cache(conn: sqlite3.Connection) -> None:
    """Raise the connection's page cache to WRITE_CACHE_KIB unless it is already larger."""
    size = int(conn.execute("PRAGMA cache_size").fetchone()[0])
    current_kib = -size if size < 0 else size * 4  # positive values count pages (~4 KiB)
    if current_kib < WRITE_CACHE_KIB:
        conn.execute(f"PRAGMA cache_size = -{WRITE_CACHE_KIB}")


def _batched(cases: Iterable[CaseResult], size: int) -> Iterator[list[CaseResult]]:
    batch: list[CaseResult] = []
    for case in cases:
        batch.append(case)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
