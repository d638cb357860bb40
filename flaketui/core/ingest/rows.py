"""The rows of one run: the run itself, its attempts (results) and per-test outcomes (test_runs).

A (test, run) row is first written from the one case that brought the test's attempts; when more
attempts of that test arrive in the same run (a repeat in one report, a later shard, a later
recorder batch) the row is marked dirty and recomputed from the stored results by SQL, so the
counting rules hold however attempts are split. Each attempt records its leg, the report file it
came from (RunWriter.leg): attempts of one leg are retries of each other, and legs combine as
flaketui.core.history.derived_rows describes. An attempt whose case named its file records that
file too (its origin; see flaketui.core.ingest.writer for what a later shard does with it); the
rows of cases naming none are written by the same statements as before origins were stored.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import groupby

from flaketui.core.config import Config
from flaketui.core.errors import ReportError
from flaketui.core.history.derived_rows import (
    UPSERT_TEST_SQL,
    refresh_test_runs,
    set_files,
    take_latest_files,
)
from flaketui.core.history.store import foreign_keys_off
from flaketui.core.ingest.redact import clean_message
from flaketui.core.ingest.signatures import sign
from flaketui.core.models import OUTCOMES, CaseResult
from flaketui.core.rollups.pending import WAITING_TABLE, file_waiting
from flaketui.core.testids import file_of_test, names_file, origin_file, parent_of

BATCH_CASES = 2_000
MAX_CACHED_IDS = 200_000  # keeps memory flat on huge reports
# Page cache while writing: the default 2 MB spills index pages mid-transaction on big runs.
# Not more: SQLite's sorters (GROUP BY, index builds) may use as much again, and 64 MiB put a
# 500 MB report at ~250 MB RSS (16 MiB: a 1 000-test run dirties ~3 500 pages, which fit).
WRITE_CACHE_KIB = 16 * 1024
# WAL pages before a commit checkpoints, while ingesting. A 1 000-test run's commit writes
# ~3 500 pages, past SQLite's default of 1 000: every run paid a checkpoint (its syncs, and the
# pages copied back one run at a time). 16 384 pages (64 MiB of 4 KiB pages) checkpoint every
# few runs, each page copied back once for all of them.
WRITE_CHECKPOINT_PAGES = 16_384
FAILED = frozenset({"fail", "error"})


# ---- run rows -------------------------------------------------------------------------------


# ---- result rows ------------------------------------------------------------------------------

# A (test, run) row written from one case; a second case of the same test in the run (a repeat,
# a later shard or recorder batch) marks it dirty instead, and refresh_dirty recomputes it.
DIRTY_ATTEMPTS = -1
# No `?NNN` placeholders (Python 3.12.0 to 3.12.3 warn on each one bound from a sequence): plain
# `?`, the row of a statement with EXISTS repeating its run and test at the end (_edited_rows).
_UPSERT_TEST_RUN_SQL = (
    "INSERT INTO test_runs (test, run, ts, outcome, bad, attempts, failed_attempts, worker_id,"
    " signature, first_duration_ms, first_timeout_ms, first_position, edited)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, EXISTS (SELECT 1 FROM tests t"
    " JOIN run_changed_files c ON c.run = ? AND c.path = t.test_file WHERE t.id = ?))"
    f" ON CONFLICT (test, ts, run) DO UPDATE SET attempts = {DIRTY_ATTEMPTS}"
)
_UPSERT_TEST_RUN_UNEDITED_SQL = (
    "INSERT INTO test_runs (test, run, ts, outcome, bad, attempts, failed_attempts, worker_id,"
    " signature, first_duration_ms, first_timeout_ms, first_position, edited)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)"
    f" ON CONFLICT (test, ts, run) DO UPDATE SET attempts = {DIRTY_ATTEMPTS}"
)


def leg_of(content_hash: str) -> int:
    """The leg of a report file's attempts: 31 bits of its SHA-256 (hex), which SQLite stores
    in four bytes per attempt; two reports of one run sharing them is a chance in millions."""
    return int(content_hash[:8], 16) & 0x7FFF_FFFF


def _run_outcome(failed: int, passed: int) -> str:
    """The outcome of one test in one leg of a run from its attempt counts (mixed = flaky)."""
    if failed + passed == 0:
        return "skipped"
    if failed == 0:
        return "pass"
    return "fail" if passed == 0 else "flaky"


# The attempt is numbered after the test's earlier ones in the run; its row repeats its run and
# test at the end (_numbered_rows).
_INSERT_RESULT_SQL = (
    "INSERT INTO results (run, test, outcome, worker_id, duration_ms, message, signature,"
    " predecessor, position, timeout_ms, leg, attempt)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, coalesce((SELECT max(attempt) FROM results"
    " WHERE run = ? AND test = ?), 0) + 1)"
)
# The attempts of a case that named its file take these, with the file (origin) last: the rows
# of the others bind no more values than before.
_RESULT_VALUES = 11  # the values of an _INSERT_RESULT_SQL row
_INSERT_RESULT_ORIGIN_SQL = (
    "INSERT INTO results (run, test, outcome, worker_id, duration_ms, message, signature,"
    " predecessor, position, timeout_ms, leg, origin, attempt)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, coalesce((SELECT max(attempt) FROM results"
    " WHERE run = ? AND test = ?), 0) + 1)"
)
# A test's first case in a run whose rows only this transaction writes (see RunWriter.exclusive):
# attempt numbers are counted here and the per-run row cannot exist yet, so plain inserts do.
_INSERT_NEW_RESULT_SQL = (
    "INSERT INTO results (run, test, attempt, outcome, worker_id, duration_ms, message, signature,"
    " predecessor, position, timeout_ms, leg) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_NEW_RESULT_ORIGIN_SQL = (
    "INSERT INTO results (run, test, attempt, outcome, worker_id, duration_ms, message, signature,"
    " predecessor, position, timeout_ms, leg, origin)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_NEW_TEST_RUN_SQL = (
    "INSERT INTO test_runs (test, run, ts, outcome, bad, attempts, failed_attempts, worker_id,"
    " signature, first_duration_ms, first_timeout_ms, first_position, edited)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, EXISTS (SELECT 1 FROM tests t"
    " JOIN run_changed_files c ON c.run = ? AND c.path = t.test_file WHERE t.id = ?))"
)
_INSERT_NEW_TEST_RUN_UNEDITED_SQL = (
    "INSERT INTO test_runs (test, run, ts, outcome, bad, attempts, failed_attempts, worker_id,"
    " signature, first_duration_ms, first_timeout_ms, first_position, edited)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)"
)
# The commonest rows, a test's first case in the run with one passing attempt and no message,
# go in one statement per batch and worker from a JSON object {test row id: [duration_ms,
# predecessor row id, position, timeout_ms]} instead of one executemany step each: a step
# re-evaluates the outcome CHECK's IN list by building a temporary index (~15 000
# instructions), and binding the row's None values costs the sqlite3 module an adaptation
# lookup each (~3 000) -- more than inserting the row.
# Each test's values come out of its list through json_each joined once per position (a
# missing one reads as null), not json_extract: any function call in an INSERT ... SELECT, as
# the default ABORT conflict action, makes SQLite keep a statement journal, a copy of every
# page the statement changes (in a temporary file past 64 KiB) -- a second write of each page
# of test_runs the run's rows land in when its tests have earlier runs. OR FAIL stops at a
# conflict as ABORT does but leaves the statement's rows to the caller, whose transaction
# rolls back with the error.
_PASS_FIELDS = (
    " LEFT JOIN json_each(p.value) d ON d.key = 0 LEFT JOIN json_each(p.value) b ON b.key = 1"
    " LEFT JOIN json_each(p.value) n ON n.key = 2 LEFT JOIN json_each(p.value) o ON o.key = 3"
)
_INSERT_NEW_PASSES_SQL = (
    "INSERT OR FAIL INTO results (run, test, attempt, outcome, worker_id, duration_ms,"
    " predecessor, position, timeout_ms, leg) SELECT :run, CAST(p.key AS INTEGER), 1, 'pass',"
    f" :worker, d.value, b.value, n.value, o.value, :leg FROM json_each(:tests) p{_PASS_FIELDS}"
)
# The same for cases naming their file, the file fifth in each test's list.
_INSERT_NEW_ORIGIN_PASSES_SQL = (
    "INSERT OR FAIL INTO results (run, test, attempt, outcome, worker_id, duration_ms,"
    " predecessor, position, timeout_ms, leg, origin) SELECT :run, CAST(p.key AS INTEGER), 1,"
    " 'pass', :worker, d.value, b.value, n.value, o.value, :leg, f.value FROM json_each(:tests) p"
    f"{_PASS_FIELDS} LEFT JOIN json_each(p.value) f ON f.key = 4"
)
_INSERT_NEW_PASS_RUNS_SQL = (
    "INSERT OR FAIL INTO test_runs (test, run, ts, outcome, bad, attempts, failed_attempts,"
    " worker_id, first_duration_ms, first_timeout_ms, first_position, edited)"
    " SELECT CAST(p.key AS INTEGER), :run, :ts, 'pass', 0, 1, 0, :worker, d.value, o.value,"
    " n.value, EXISTS (SELECT 1 FROM tests t JOIN run_changed_files c ON c.run = :run"
    " AND c.path = t.test_file WHERE t.id = CAST(p.key AS INTEGER))"
    f" FROM json_each(:tests) p{_PASS_FIELDS}"
)
_INSERT_NEW_PASS_RUNS_UNEDITED_SQL = (
    "INSERT OR FAIL INTO test_runs (test, run, ts, outcome, bad, attempts, failed_attempts,"
    " worker_id, first_duration_ms, first_timeout_ms, first_position, edited)"
    " SELECT CAST(p.key AS INTEGER), :run, :ts, 'pass', 0, 1, 0, :worker, d.value, o.value,"
    f" n.value, 0 FROM json_each(:tests) p{_PASS_FIELDS}"
)


def _into_waiting(sql: str) -> str:
    """An insert of per-test rows made to write them to the waiting table instead."""
    assert sql.count("INTO test_runs (") == 1
    return sql.replace("INTO test_runs (", f"INTO {WAITING_TABLE} (")


# A run left waiting for the fold writes its per-test rows by run (see RunWriter `stage`).
_WAITING_INSERTS = {
    sql: _into_waiting(sql)
    for sql in (
        _INSERT_NEW_TEST_RUN_SQL,
        _INSERT_NEW_TEST_RUN_UNEDITED_SQL,
        _INSERT_NEW_PASS_RUNS_SQL,
        _INSERT_NEW_PASS_RUNS_UNEDITED_SQL,
    )
}


def _numbered_rows(rows: Iterable[tuple[object, ...]]) -> list[tuple[object, ...]]:
    """Rows (run, test, ...) for _INSERT_RESULT_SQL: each with its run and test again, last."""
    return [(*row, row[0], row[1]) for row in rows]


def _edited_rows(rows: Iterable[tuple[object, ...]]) -> list[tuple[object, ...]]:
    """Per-test rows (test, run, ...) for the statements that set `edited`: each with its run
    and test again, last."""
    return [(*row, row[1], row[0]) for row in rows]


_OUTCOME_SET = frozenset(OUTCOMES)
# Caches are bounded by the characters of their keys as well as by entries, so memory stays flat
# however long the ids or messages are.
MAX_CACHED_CHARS = 8_000_000

# One attempt row: outcome, duration_ms, message, worker_id, predecessor (a test id), position,
# timeout_ms (flaketui.core.ingest.junit.AttemptRow); one case: test_id, test_file, attempts and
# origin, the file the case named (None: it named none, or its id starts with its file)
AttemptRow = tuple[str, int | None, str | None, str | None, str | None, int | None, int | None]
CaseRow = tuple[str, str | None, Sequence[AttemptRow], str | None]


def case_rows(cases: Iterable[CaseResult]) -> Iterator[CaseRow]:
    """CaseResults as the plain rows the writer takes."""
    for case in cases:
        yield (
            case.test_id,
            case.test_file,
            [
                (
                    a.outcome,
                    a.duration_ms,
                    a.message,
                    a.worker_id,
                    a.predecessor,
                    a.position,
                    a.timeout_ms,
                )
                for a in case.attempts
            ],
            None,
        )


class RunWriter:
    """Appends attempts to one run, resolving test and signature ids through bounded caches.

    ``exclusive``: nobody else writes the run while this writer does (ingest_reports: one
    transaction; the recorder: several, calling track_run again when another connection has
    committed in between). The tests the run already holds are read into a bitmap, and a test's
    first case in the run is written with plain inserts (attempts numbered here, per-run row
    computed here); only repeats take the SQL paths (max(attempt) + 1, dirty per-run row).
    Without it every case takes them.

    ``stage``: the run is new and its writer leaves it waiting for the fold: its per-test rows
    go to the waiting table, keyed by run (flaketui.core.rollups.pending), until the writer
    meets a case that changes rows already written (a repeat, a test taking another file),
    when it files them into test_runs and writes there from then on. A writer that does not
    stage files the run's waiting rows first.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        run_pk: int,
        ts: str,
        config: Config,
        *,
        exclusive: bool = False,
        stage: bool = False,
    ) -> None:
        _grow_cache(conn)
        if not stage and not exclusive:
            file_waiting(conn, run_pk)  # (track_run does, for an exclusive writer)
        self.staged = stage
        self.conn = conn
        self.run_pk = run_pk
        self.ts = ts
        self.mask_patterns = config.mask_patterns
        # test_id -> row id, for rows this run's ts and files leave unchanged
        self.test_ids: dict[str, int] = {}
        self.test_id_chars = 0
        # cached test_id -> its stored test_file (names shared through file_names)
        self.files: dict[str, str | None] = {}
        self.file_names: dict[str, str] = {}
        self.signature_ids: dict[str, int] = {}
        # cleaned message -> signature hash and text (None: no signature)
        self.signed: dict[str, tuple[str, str] | None] = {}
        self.signed_chars = 0
        self.has_changed_files = (
            conn.execute(
                "SELECT 1 FROM run_changed_files WHERE run = ? LIMIT 1", (run_pk,)
            ).fetchone()
            is not None
        )
        # The leg of the attempts written next: the report file they come from (leg_of), None
        # for the recorder's.
        self.leg: int | None = None
        # exclusive: one byte per test row id, 1 when the run may already hold its attempts
        self.seen: bytearray | None = None
        self.repeats = not exclusive  # whether a repeat may have marked a per-run row dirty
        if exclusive:
            self.track_run()

    def track_run(self) -> None:
        """Read which tests the run holds; until someone else writes it, a test's first case
        takes the plain-insert path. Call it inside the write transaction."""
        if not self.staged:
            file_waiting(self.conn, self.run_pk)  # another writer may have left them
        self.seen = bytearray()
        for (test_pk,) in self.conn.execute(
            "SELECT DISTINCT test FROM results WHERE run = ?", (self.run_pk,)
        ):
            self._mark_seen(int(test_pk))

    def _mark_seen(self, test_pk: int) -> None:
        seen = self.seen
        assert seen is not None
        if test_pk >= len(seen):
            seen.extend(bytes(max(test_pk + 1 - len(seen), len(seen) // 2, 4096)))
        seen[test_pk] = 1

    def _file_staged(self) -> None:
        """File the waiting per-test rows into test_runs before rows there change (every
        run's: a test taking another file changes its rows in all of them)."""
        if self.staged:
            file_waiting(self.conn)
            self.staged = False

    def forget(self) -> None:
        """Drop the cached row ids (after a rollback they may name rows that no longer exist)."""
        self.test_ids.clear()
        self.test_id_chars = 0
        self.files.clear()
        self.file_names.clear()
        self.signature_ids.clear()

    def write(self, cases: Iterable[CaseResult], touched: set[int] | None = None) -> int:
        """Insert every attempt of cases and their per-run rows (repeats are marked dirty, see
        refresh_dirty); return the rows added, collecting the test row ids into touched."""
        return self.write_rows(case_rows(cases), touched)

    def write_rows(self, cases: Iterable[CaseRow], touched: set[int] | None = None) -> int:
        """write() for plain (test_id, test_file, attempts, origin) rows, as the parsers yield."""
        added = 0
        for batch in _batched(cases, BATCH_CASES):
            added += self._write_batch(batch, touched)
        return added

    def _write_batch(self, batch: list[CaseRow], touched: set[int] | None) -> int:
        if (
            len(self.test_ids) > MAX_CACHED_IDS
            or self.test_id_chars > MAX_CACHED_CHARS
            or len(self.signature_ids) > MAX_CACHED_IDS
        ):
            self.forget()  # bound memory; before any lookup, so this batch's ids stay cached
        test_pks = self._resolve_tests(batch)
        predecessors = self._resolve_predecessors(batch)
        if touched is not None:
            touched.update(test_pks)
        run_pk, ts, seen, leg = self.run_pk, self.ts, self.seen, self.leg
        new_results: list[tuple[object, ...]] = []
        new_runs: list[tuple[object, ...]] = []
        passes: dict[str | None, dict[int, list[int | None]]] = {}  # see _INSERT_NEW_PASSES_SQL
        more_results: list[tuple[object, ...]] = []
        more_runs: list[tuple[object, ...]] = []
        # The attempts of cases naming their file, with it: passes as above (the file fifth),
        # rows for the _ORIGIN statements, and repeats in more_results with the file last
        # (repeats are numbered in the order they are inserted: one list keeps document order).
        origin_passes: dict[str | None, dict[int, list[int | str | None]]] = {}
        new_origin_results: list[tuple[object, ...]] = []
        more_with_file = False
        for (test_id, _, attempts, origin), test_pk in zip(batch, test_pks, strict=True):
            if not attempts:
                continue
            new = seen is not None and (test_pk >= len(seen) or not seen[test_pk])
            if new:
                self._mark_seen(test_pk)
            if len(attempts) == 1 and attempts[0][0] == "pass" and attempts[0][2] is None:
                # The common case, spelled out: one passing attempt, no message.
                _, duration, _, worker, before, position, timeout = attempts[0]
                before_pk = None if before is None else predecessors.get(before)
                if origin is not None:
                    if new:
                        with_file = origin_passes.get(worker)
                        if with_file is None:
                            with_file = origin_passes[worker] = {}
                        with_file[test_pk] = [duration, before_pk, position, timeout, origin]
                    else:
                        more_with_file = True
                        more_results.append(
                            (run_pk, test_pk, "pass", worker, duration, None, None, before_pk,
                             position, timeout, leg, origin)
                        )  # fmt: skip
                        more_runs.append(
                            (test_pk, run_pk, ts, "pass", 0, 1, 0, worker, None, duration,
                             timeout, position)
                        )  # fmt: skip
                elif new:
                    by_test = passes.get(worker)
                    if by_test is None:
                        by_test = passes[worker] = {}
                    by_test[test_pk] = [duration, before_pk, position, timeout]
                else:
                    more_results.append(
                        (run_pk, test_pk, "pass", worker, duration, None, None, before_pk,
                         position, timeout, leg)
                    )  # fmt: skip
                    more_runs.append(
                        (test_pk, run_pk, ts, "pass", 0, 1, 0, worker, None, duration, timeout,
                         position)
                    )  # fmt: skip
                continue
            first_signature: int | None = None
            failed = passed = 0
            bad = -1  # unknown until the first non-skipped attempt
            for number, attempt in enumerate(attempts, 1):
                outcome, duration, raw_message, worker, before, position, timeout = attempt
                before_pk = None if before is None else predecessors.get(before)
                if outcome not in _OUTCOME_SET:
                    raise ReportError(f"{test_id}: unknown outcome {outcome!r}")
                message = clean_message(raw_message)
                signature = None
                if outcome == "fail" or outcome == "error":
                    failed += 1
                    if bad < 0:
                        bad = 1
                    if message is not None:
                        signature = self._signature_id(message)
                    if failed == 1:
                        first_signature = signature
                elif outcome == "pass":
                    passed += 1
                    if bad < 0:
                        bad = 0
                if origin is not None:
                    if new:
                        new_origin_results.append(
                            (run_pk, test_pk, number, outcome, worker, duration, message,
                             signature, before_pk, position, timeout, leg, origin)
                        )  # fmt: skip
                    else:
                        more_with_file = True
                        more_results.append(
                            (run_pk, test_pk, outcome, worker, duration, message, signature,
                             before_pk, position, timeout, leg, origin)
                        )  # fmt: skip
                elif new:
                    new_results.append(
                        (run_pk, test_pk, number, outcome, worker, duration, message, signature,
                         before_pk, position, timeout, leg)
                    )  # fmt: skip
                else:
                    more_results.append(
                        (run_pk, test_pk, outcome, worker, duration, message, signature,
                         before_pk, position, timeout, leg)
                    )  # fmt: skip
            first = attempts[0]
            summary = (
                test_pk, run_pk, ts, _run_outcome(failed, passed), max(bad, 0), len(attempts),
                failed, first[3], first_signature, first[1], first[6], first[5],
            )  # fmt: skip
            (new_runs if new else more_runs).append(summary)
        conn = self.conn
        groups: list[tuple[str, str | None, Mapping[int, Sequence[object]]]] = [
            (_INSERT_NEW_PASSES_SQL, worker, by_test) for worker, by_test in passes.items()
        ]
        groups.extend(
            (_INSERT_NEW_ORIGIN_PASSES_SQL, worker, with_file)
            for worker, with_file in origin_passes.items()
        )
        for insert, worker, group in groups:
            values = {
                "run": run_pk,
                "tests": json.dumps(group, sort_keys=True),
                "worker": worker,
                "leg": leg,
                "ts": ts,
            }
            conn.execute(insert, values)
            insert_runs = (
                _INSERT_NEW_PASS_RUNS_SQL
                if self.has_changed_files
                else _INSERT_NEW_PASS_RUNS_UNEDITED_SQL
            )
            conn.execute(_WAITING_INSERTS[insert_runs] if self.staged else insert_runs, values)
        if new_results or new_origin_results:
            if new_results:
                conn.executemany(_INSERT_NEW_RESULT_SQL, new_results)
            if new_origin_results:
                conn.executemany(_INSERT_NEW_RESULT_ORIGIN_SQL, new_origin_results)
            if self.has_changed_files:
                conn.executemany(
                    _WAITING_INSERTS[_INSERT_NEW_TEST_RUN_SQL]
                    if self.staged
                    else _INSERT_NEW_TEST_RUN_SQL,
                    _edited_rows(new_runs),
                )
            else:
                conn.executemany(
                    _WAITING_INSERTS[_INSERT_NEW_TEST_RUN_UNEDITED_SQL]
                    if self.staged
                    else _INSERT_NEW_TEST_RUN_UNEDITED_SQL,
                    new_runs,
                )
        if more_results:
            # After the new rows: a repeat later in this batch continues their numbering.
            self.repeats = True
            self._file_staged()  # a repeat updates its test's row in test_runs
            if more_with_file:
                # Each stretch of rows of one kind in turn (the file adds a value to the row).
                for width, stretch in groupby(more_results, len):
                    conn.executemany(
                        _INSERT_RESULT_ORIGIN_SQL if width > _RESULT_VALUES else _INSERT_RESULT_SQL,
                        _numbered_rows(stretch),
                    )
            else:
                conn.executemany(_INSERT_RESULT_SQL, _numbered_rows(more_results))
            if self.has_changed_files:
                conn.executemany(_UPSERT_TEST_RUN_SQL, _edited_rows(more_runs))
            else:
                conn.executemany(_UPSERT_TEST_RUN_UNEDITED_SQL, more_runs)
        passed = sum(len(group) for _, _, group in groups)
        return passed + len(new_results) + len(new_origin_results) + len(more_results)

    def refresh_dirty(self, tests: Iterable[int] | None = None) -> None:
        """Recompute the per-run rows a repeated test marked dirty (of tests, or the whole run)."""
        if not self.repeats:
            return
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

    def _signature_id(self, message: str) -> int | None:
        """The signatures row id of a cleaned failure message (inserted when new)."""
        if message in self.signed:
            signed = self.signed[message]
        else:
            if len(self.signed) > MAX_CACHED_IDS or self.signed_chars > MAX_CACHED_CHARS:
                self.signed.clear()
                self.signed_chars = 0
            signature = sign(message, self.mask_patterns)
            signed = None if signature is None else (signature.hash, signature.text)
            self.signed[message] = signed
            self.signed_chars += len(message)
        if signed is None:
            return None
        sig_hash, text = signed
        pk = self.signature_ids.get(sig_hash)
        if pk is None:
            # New signatures are rare next to results: one insert each, the first example wins.
            self.conn.execute(
                "INSERT OR IGNORE INTO signatures (hash, text, example) VALUES (?, ?, ?)",
                (sig_hash, text, message),
            )
            row = self.conn.execute("SELECT id FROM signatures WHERE hash = ?", (sig_hash,))
            pk = self.signature_ids[sig_hash] = int(row.fetchone()[0])
        return pk

    def _resolve_predecessors(self, batch: list[CaseRow]) -> dict[str, int]:
        """Row ids of the tests named as predecessors in the batch (they ran in this run)."""
        names = {
            attempt[4]
            for _, _, attempts, _ in batch
            for attempt in attempts
            if attempt[4] is not None
        }
        if not names:
            return {}
        unknown = [name for name in names if name not in self.test_ids]
        if unknown:
            self._resolve_tests([(name, None, (), None) for name in unknown])
        return {name: self.test_ids[name] for name in names}

    def _cache_known(self, test_ids: list[str]) -> dict[str, tuple[int, str | None]]:
        """Cache the stored rows of test_ids that this run's ts cannot change (first_seen), with
        their files; return the others (seen first after this run) with their row ids and
        files (a case may teach them one, or name another)."""
        rows = self.conn.execute(
            "SELECT id, test_id, test_file, first_seen > ? FROM tests"
            " WHERE test_id IN (SELECT value FROM json_each(?))",
            (self.ts, json.dumps(test_ids)),
        ).fetchall()
        cache, files, names = self.test_ids, self.files, self.file_names  # per test: inlined
        later: dict[str, tuple[int, str | None]] = {}
        for pk, test_id, test_file, after in rows:
            if after:
                later[test_id] = (pk, test_file)
                continue
            cache[test_id] = pk
            self.test_id_chars += len(test_id)
            files[test_id] = (
                test_file if test_file is None else names.setdefault(test_file, test_file)
            )
        return later

    def _resolve_tests(self, batch: list[CaseRow]) -> list[int]:
        """Row ids of the batch's tests, upserting unseen ones (first_seen = earliest run ts).

        A test's file is that of the latest run whose case named one (derived_rows): a case
        naming the file its test has stored, or naming none, costs a lookup; one naming another
        file reads the test's runs from this one on (take_latest_files), where a backfilled
        older run leaves the file of a later one in place."""
        test_ids, files = self.test_ids, self.files
        unknown = {test_id for test_id, _, _, _ in batch if test_id not in test_ids}
        # One indexed lookup per test of this batch (not a read of the whole tests table).
        later = self._cache_known(list(unknown)) if unknown else {}
        missing: dict[str, tuple[str, str | None]] = {}
        learned: dict[int, str | None] = {}
        named: dict[str, str] = {}  # test_id -> another file than the stored one its case named
        for test_id, case_file, _, origin in batch:
            if test_id in test_ids:
                stored = files[test_id]
                given = case_file or origin
                if given == stored:
                    continue
                if origin is not None and (case_file or names_file(origin)):
                    test_file = file_of_test(test_id, given)
                    if test_file is not None and test_file != stored:
                        named[test_id] = test_file
                    continue
                if stored is not None:
                    continue
                test_file = file_of_test(test_id, case_file)
                if test_file is None:
                    continue
                # A stored test without a file learns it from this case, and its stored runs
                # whose commit changed that file are edited.
                files[test_id] = test_file
                learned[test_ids[test_id]] = test_file
            elif test_id not in missing:
                test_file = file_of_test(test_id, _named_file(case_file, origin))
                missing[test_id] = (parent_of(test_id), test_file)
                if test_file is None or test_id not in later:
                    continue  # a new test takes the case's file (the upsert)
                pk, stored = later.pop(test_id)
                if stored is None:
                    learned[pk] = test_file
                elif (
                    origin is not None and test_file != stored and (case_file or names_file(origin))
                ):
                    named[test_id] = test_file
        if learned:
            self._file_staged()  # the tests' rows of this run change with their file
            set_files(self.conn, learned)
        if missing:
            self.conn.executemany(
                UPSERT_TEST_SQL,
                [(tid, parent, tfile, self.ts) for tid, (parent, tfile) in missing.items()],
            )
            for pk, test_id, test_file in self.conn.execute(
                "SELECT id, test_id, test_file FROM tests"
                " WHERE test_id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(missing)),),
            ):
                if test_id not in test_ids:
                    self.test_id_chars += len(test_id)
                test_ids[test_id] = int(pk)
                files[test_id] = (
                    test_file
                    if test_file is None
                    else self.file_names.setdefault(test_file, test_file)
                )
        if named:
            self._file_staged()
            self._take_files(named)
        return [test_ids[test_id] for test_id, _, _, _ in batch]

    def _take_files(self, named: dict[str, str]) -> None:
        """The tests whose cases named another file than their stored one take it where this
        run is the latest naming one (derived_rows.take_latest_files)."""
        files = self.files
        moved = {self.test_ids[t]: file for t, file in named.items() if files[t] != file}
        if not moved:
            return
        take_latest_files(self.conn, (), self.ts, moved)
        for test_id, test_file in self.conn.execute(
            "SELECT test_id, test_file FROM tests WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(moved)),),
        ):
            files[test_id] = test_file


def _named_file(case_file: str | None, origin: str | None) -> str | None:
    """The file a case names: its own (a ``file`` attribute), else its origin where that is a
    path (its suite's file; not a karma describe block)."""
    return case_file or origin_file(origin)


def _grow_cache(conn: sqlite3.Connection) -> None:
    """Raise the connection's page cache to WRITE_CACHE_KIB unless it is already larger."""
    size = int(conn.execute("PRAGMA cache_size").fetchone()[0])
    current_kib = -size if size < 0 else size * 4  # positive values count pages (~4 KiB)
    if current_kib < WRITE_CACHE_KIB:
        conn.execute(f"PRAGMA cache_size = -{WRITE_CACHE_KIB}")


@contextmanager
def bulk_settings(conn: sqlite3.Connection) -> Iterator[None]:
    """Connection settings for one ingest transaction (entered outside it), restored after:
    foreign keys and CHECK constraints unchecked (foreign_keys_off), the page cache grown to
    WRITE_CACHE_KIB, commits checkpointing past WRITE_CHECKPOINT_PAGES of WAL (not SQLite's
    default 1 000)."""
    cache_size = int(conn.execute("PRAGMA cache_size").fetchone()[0])
    checkpoint = int(conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
    _grow_cache(conn)
    if 0 < checkpoint < WRITE_CHECKPOINT_PAGES:
        conn.execute(f"PRAGMA wal_autocheckpoint = {WRITE_CHECKPOINT_PAGES}")
    try:
        with foreign_keys_off(conn):
            yield
    finally:
        conn.execute(f"PRAGMA cache_size = {cache_size}")
        conn.execute(f"PRAGMA wal_autocheckpoint = {checkpoint}")


def _batched(cases: Iterable[CaseRow], size: int) -> Iterator[list[CaseRow]]:
    batch: list[CaseRow] = []
    for case in cases:
        batch.append(case)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
