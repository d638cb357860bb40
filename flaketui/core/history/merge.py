"""Merge other histories into one: copy their runs, remapping integer ids, idempotently.

Rules:
- A run whose run_id is new to DEST is copied whole: its row (with its original ``source``),
  report-file hashes, changed files, results and recomputed per-test outcomes.
- A run whose run_id DEST already has gains only the tests DEST's copy lacks (the other shards
  of a sharded CI run, published as separate histories), plus missing file hashes and changed
  files; a test both copies hold keeps DEST's attempts, and the run's metadata stays DEST's.
  A test id the two copies hold from different files (shards' same-named JUnit cases, each
  stored under the plain id where its shard's history held no other: testids.stored_clashes)
  is two tests, as when one history ingests every shard: the attempts of each copy whose case
  named its file go to ``<file>::<id>``, DEST's moved there (derived_rows.separate_stored) and
  SRC's copied there, unless DEST holds that test already. Attempts of an unknown file stay
  under the plain id, by the rule above; a plain id no run holds afterwards is dropped, and
  one that runs still hold is seen first at the earliest of them and has the file they name,
  as after an ingest (derived_rows.settle_left). A file's id has that file.
- Tests are matched by test_id (first_seen becomes the earlier of the two; a DEST test without
  a file takes SRC's, and its runs whose commit changed it are edited; one the two give
  different files takes that of its latest run naming one, whichever history holds it, as an
  ingest gives it: derived_rows.take_latest_files), signatures by hash
  (DEST's example wins), incidents by (tag, start_ts, end_ts, signature), audit rows by
  every column (ts, who, action, test_id, mode, reason, ticket, scores, source and the moment
  it was written, written_at): the audit log only grows, so two decisions that differ in
  anything are both kept.
- Incident decisions travel with the runs: once merged, every rule of DEST tags the untagged
  runs it matches, whichever history they came from. A suspected outage keeps its review:
  still proposed, accepted, or rejected (its runs count, it is not proposed again). A decision
  beats a proposal awaiting review; where the two histories decided differently (one
  accepted, the other rejected), DEST's decision stays and the merge names the outage.
Merging the same source twice therefore changes nothing the second time. Each source merges in
one transaction. Into a history that holds nothing at all, the first source is copied whole
instead, with its ids and rollups kept: through SQLite's backup into a file not there yet
(copy_to_new), table by table into an existing blank one (_copy_into_blank).
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from flaketui.core.errors import HistoryError
from flaketui.core.history.dbhandle import Connected
from flaketui.core.history.derived_rows import (
    UPSERT_TEST_SQL,
    file_test,
    of_known_files,
    refresh_test_runs,
    separate_stored,
    set_files,
    settle_left,
    take_latest_files,
)
from flaketui.core.history.incidents import apply_rules
from flaketui.core.history.outages import (
    REJECTED,
    outage_states,
    rejected_rules,
    take_states,
)
from flaketui.core.history.pg.columns import AUDIT_COLUMNS, add_audit_rows
from flaketui.core.history.store import foreign_keys_off, history_file, may_write, transaction
from flaketui.core.rollups import build as rollups
from flaketui.core.rollups import pending as rollups_pending
from flaketui.core.testids import stored_clashes

RUN_COLUMNS = (
    "run_id, suite, branch, branch_kind, commit_sha, ts, worker_count, runner_host, ci_url,"
    " incident, source, finished, os, python, platform, order_seed"
)
RESULT_COLUMNS = (
    "test, attempt, outcome, worker_id, duration_ms, message, signature, predecessor, position,"
    " timeout_ms, leg, origin"
)


@dataclass
class MergeSummary:
    """What merging added to the destination history."""

    sources: int = 0
    runs_added: int = 0
    runs_extended: int = 0  # present in DEST, gained tests from a source
    runs_unchanged: int = 0
    results_added: int = 0
    incidents_added: int = 0
    audit_rows_added: int = 0
    decisions_kept: list[str] = field(default_factory=list)  # outages decided otherwise in SRC


def _database_file(conn: sqlite3.Connection) -> Path | None:
    for _, name, file in conn.execute("PRAGMA database_list"):
        if name == "main" and file:
            return Path(file).resolve()
    return None


def _id_map(
    conn: sqlite3.Connection, sql: str, keys: Iterable[str], src_ids: dict[str, int]
) -> dict[int, int]:
    """Map source row ids to DEST row ids through a natural key (test_id or hash)."""
    mapping: dict[int, int] = {}
    for dest_id, key in conn.execute(sql, (json.dumps(list(keys)),)):
        mapping[src_ids[key]] = int(dest_id)
    return mapping


def _other_files(dest: sqlite3.Connection, src: sqlite3.Connection) -> list[str]:
    """The ids of the tests DEST holds with another file than SRC gives them: once SRC's runs
    are in, each takes the file of its latest run naming one (_take_files)."""
    files = {
        str(test_id): str(test_file)
        for test_id, test_file in src.execute(
            "SELECT test_id, test_file FROM tests WHERE test_file IS NOT NULL"
        )
    }
    return [
        str(test_id)
        for test_id, test_file in dest.execute(
            "SELECT test_id, test_file FROM tests"
            " WHERE test_id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(files)),),
        )
        if test_file != files[str(test_id)]
    ]


def _take_files(dest: sqlite3.Connection, test_ids: list[str]) -> None:
    """The tests of these ids take the file of their latest run naming one, in DEST with SRC's
    runs (derived_rows.take_latest_files); one no run names keeps DEST's."""
    if test_ids:
        take_latest_files(
            dest,
            (
                int(row[0])
                for row in dest.execute(
                    "SELECT id FROM tests WHERE test_id IN (SELECT value FROM json_each(?))",
                    (json.dumps(sorted(test_ids)),),
                )
            ),
        )


def _merge_tests(dest: sqlite3.Connection, src: sqlite3.Connection) -> dict[int, int]:
    rows = src.execute("SELECT id, test_id, parent, test_file, first_seen FROM tests").fetchall()
    # A DEST test without a file learns SRC's, and its runs whose commit changed it are edited.
    files = {str(row[1]): row[3] for row in rows if row[3] is not None}
    set_files(
        dest,
        {
            int(pk): files[str(test_id)]
            for pk, test_id in dest.execute(
                "SELECT id, test_id FROM tests WHERE test_file IS NULL"
                " AND test_id IN (SELECT value FROM json_each(?))",
                (json.dumps(sorted(files)),),
            ).fetchall()
        },
    )
    dest.executemany(
        UPSERT_TEST_SQL,
        [row[1:] for row in rows],
    )
    src_ids = {str(row[1]): int(row[0]) for row in rows}
    return _id_map(
        dest,
        "SELECT id, test_id FROM tests WHERE test_id IN (SELECT value FROM json_each(?))",
        src_ids,
        src_ids,
    )


def _merge_signatures(dest: sqlite3.Connection, src: sqlite3.Connection) -> dict[int, int]:
    rows = src.execute("SELECT id, hash, text, example FROM signatures").fetchall()
    dest.executemany(
        "INSERT OR IGNORE INTO signatures (hash, text, example) VALUES (?, ?, ?)",
        [row[1:] for row in rows],
    )
    src_ids = {str(row[1]): int(row[0]) for row in rows}
    return _id_map(
        dest,
        "SELECT id, hash FROM signatures WHERE hash IN (SELECT value FROM json_each(?))",
        src_ids,
        src_ids,
    )


def _copy_results(
    dest: sqlite3.Connection,
    src: sqlite3.Connection,
    src_run: int,
    dest_run: int,
    tests: dict[int, int],
    signatures: dict[int, int],
    skip_tests: set[int],
    of_files: dict[tuple[int, str], int] | None = None,
) -> int:
    """Copy a source run's results into a DEST run, except those of DEST tests in skip_tests.

    of_files: the DEST test of a source test's attempts whose case named a file, by (source
    test, file), where not the test of the same id (_file_tests).
    """
    rows = []
    for (
        test,
        attempt,
        outcome,
        worker,
        duration,
        message,
        signature,
        before,
        position,
        timeout,
        leg,
        origin,
    ) in src.execute(f"SELECT {RESULT_COLUMNS} FROM results WHERE run = ?", (src_run,)):
        dest_test = tests[test]
        if of_files and origin is not None:
            dest_test = of_files.get((test, origin), dest_test)
        if dest_test in skip_tests:
            continue
        rows.append(
            (
                dest_run,
                dest_test,
                attempt,
                outcome,
                worker,
                duration,
                message,
                None if signature is None else signatures[signature],
                None if before is None else tests.get(before),
                position,
                timeout,
                leg,
                origin,
            )
        )
    dest.executemany(
        f"INSERT INTO results (run, {RESULT_COLUMNS}) VALUES ({', '.join('?' * 13)})",
        rows,
    )
    return len(rows)


def _copy_run_children(
    dest: sqlite3.Connection, src: sqlite3.Connection, src_run: int, dest_run: int
) -> bool:
    """Add the source run's file hashes and changed files DEST lacks; True if any was new."""
    before = dest.total_changes
    for table, column in (("run_files", "content_hash"), ("run_changed_files", "path")):
        values = [
            row[0] for row in src.execute(f"SELECT {column} FROM {table} WHERE run = ?", (src_run,))
        ]
        dest.executemany(
            f"INSERT OR IGNORE INTO {table} (run, {column}) VALUES (?, ?)",
            [(dest_run, value) for value in values],
        )
    return dest.total_changes != before


def _shared_in_run(
    dest: sqlite3.Connection, src: sqlite3.Connection, dest_run: int, src_run: int
) -> set[str]:
    """The test ids that files of the two copies of a run share (testids.stored_clashes, each
    copy's attempts of a known file against the other's)."""
    sql = (
        "SELECT DISTINCT t.test_id, x.origin FROM results AS x JOIN tests AS t ON t.id = x.test"
        " WHERE x.run = ?"
    )
    ours = [(str(t), o) for t, o in dest.execute(sql, (dest_run,))]
    theirs = [(str(t), o) for t, o in src.execute(sql, (src_run,))]

    def files(held: list[tuple[str, str | None]]) -> dict[str, str]:
        return {test_id: origin for test_id, origin in held if origin is not None}

    return stored_clashes(ours, files(theirs)) | stored_clashes(theirs, files(ours))


def _file_tests(
    dest: sqlite3.Connection, src: sqlite3.Connection, src_run: int, ts: str, shared: set[str]
) -> dict[tuple[int, str], int]:
    """By (source test, file), the DEST test ``<file>::<id>`` of the source run's attempts of a
    shared id whose case named its file (created in DEST if need be)."""
    return {
        (src_pk, origin): file_test(dest, test_id, origin, ts)
        for src_pk, test_id, origin in of_known_files(src, src_run, shared)
    }


def _merge_runs(
    dest: sqlite3.Connection,
    src: sqlite3.Connection,
    tests: dict[int, int],
    signatures: dict[int, int],
    summary: MergeSummary,
) -> None:
    # Ids files of a run share, by the time of the earliest such run: kept only where a run
    # holds them, and seen first at the earliest run that does (derived_rows.settle_left).
    plain: dict[str, str] = {}
    # Histories whose attempts name no file (the recorder's, older ones) share no id by file.
    files_known = any(
        conn.execute("SELECT 1 FROM results WHERE origin IS NOT NULL LIMIT 1").fetchone()
        for conn in (src, dest)
    )
    for src_run, run_id in src.execute("SELECT id, run_id FROM runs ORDER BY ts, id").fetchall():
        found = dest.execute("SELECT id, ts FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if found is None:
            row = src.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (src_run,)).fetchone()
            cursor = dest.execute(
                f"INSERT INTO runs ({RUN_COLUMNS})"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            dest_run, ts = int(cursor.lastrowid or 0), str(row[5])
            _copy_run_children(dest, src, src_run, dest_run)
            summary.results_added += _copy_results(
                dest, src, src_run, dest_run, tests, signatures, set()
            )
            refresh_test_runs(dest, dest_run, ts)
            rollups_pending.defer(dest, dest_run)  # folded with the others, below
            summary.runs_added += 1
            continue
        dest_run, ts = int(found[0]), str(found[1])
        shared = _shared_in_run(dest, src, dest_run, src_run) if files_known else set()
        moved = bool(shared) and separate_stored(dest, dest_run, ts, shared)
        if moved:  # a plain id the move left with no run was dropped: map SRC's to it again
            tests.update(_merge_tests(dest, src))
        for test_id in shared:
            plain[test_id] = min(plain.get(test_id, ts), ts)
        of_files = _file_tests(dest, src, src_run, ts, shared) if shared else None
        present = {
            int(r[0])
            for r in dest.execute("SELECT DISTINCT test FROM results WHERE run = ?", (dest_run,))
        }
        children_added = _copy_run_children(dest, src, src_run, dest_run)
        added = _copy_results(dest, src, src_run, dest_run, tests, signatures, present, of_files)
        if added or children_added or moved:
            refresh_test_runs(dest, dest_run, ts)
            rollups_pending.defer(dest, dest_run)
            summary.results_added += added
            summary.runs_extended += 1
        else:
            summary.runs_unchanged += 1
    # The source's runs are folded into the rollups together, in the same transaction: the
    # rollups are exact when it commits, and a day's rollup pages are rewritten once for all
    # of its runs rather than once per run.
    rollups.fold_pending(dest)
    # After every run is in: SRC's tests, merged again after each move, bring the first_seen
    # of the runs whose attempts moved away.
    for ts in sorted(set(plain.values())):
        settle_left(
            dest,
            ts,
            (
                int(row[0])
                for row in dest.execute(
                    "SELECT id FROM tests WHERE test_id IN (SELECT value FROM json_each(?))",
                    (json.dumps(sorted(t for t, seen in plain.items() if seen == ts)),),
                )
            ),
        )


def _merge_incidents(
    dest: sqlite3.Connection, src: sqlite3.Connection, reviewed: dict[str, str]
) -> int:
    """Copy SRC's incident rows DEST lacks, but an outage DEST rejected (in `reviewed`)."""
    before = dest.total_changes
    for row in src.execute(
        "SELECT tag, start_ts, end_ts, signature, created_at, note FROM incidents ORDER BY id"
    ).fetchall():
        if reviewed.get(row[0]) == REJECTED:
            continue
        dest.execute(
            "INSERT INTO incidents (tag, start_ts, end_ts, signature, created_at, note)"
            " SELECT :tag, :start, :end, :signature, :created, :note WHERE NOT EXISTS"
            " (SELECT 1 FROM incidents WHERE tag = :tag AND start_ts IS :start"
            " AND end_ts IS :end AND signature IS :signature)",
            dict(zip(("tag", "start", "end", "signature", "created", "note"), row, strict=True)),
        )
    return dest.total_changes - before


def _merge_audit(dest: sqlite3.Connection, src: sqlite3.Connection) -> int:
    return add_audit_rows(
        dest,
        src.execute(f"SELECT {', '.join(AUDIT_COLUMNS)} FROM audit_log ORDER BY id").fetchall(),
    )


def copy_to_new(dest: Path, source: Path) -> MergeSummary | None:
    """Merge the history at source into dest, a file not there yet, by copying it whole with
    SQLite's online backup: one consistent snapshot of source, ids, rollups and all, the same
    content a row-by-row merge into a new history gives (1 M results: 0.4 s instead of 5).

    The copy is written beside dest under a hidden name and linked into place only while dest
    is still missing: a history that appears meanwhile is never overwritten, and a copy cut
    short is never seen under dest's name (nor left behind, but by a killed process). The
    caller then opens dest and merges the other sources into it (merge_histories, `copied`).

    None, having written nothing, when dest exists, its folder does not, the source is not a
    file this process may write (read in place, as store.reads_in_place says), the folder
    takes no hard link, or the copy fails: the caller merges row by row instead.
    """
    if dest.exists() or dest.is_symlink() or not dest.parent.is_dir() or not may_write(source):
        return None
    part = dest.with_name(f".{dest.name}.{secrets.token_hex(6)}.part")
    try:
        # Created as SQLite would create dest (O_EXCL: never another's file; the umask applies).
        os.close(os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except OSError:
        return None
    try:
        try:
            counts = _backup(source, part)
            os.link(part, dest)
        except (sqlite3.Error, OSError):
            # dest appeared meanwhile, the file system has no hard links, or the copy failed
            # (a full disk, a source locked past the busy timeout): merged row by row instead,
            # which waits for locks as any writer does and reports what stops it.
            return None
    finally:
        for suffix in ("", "-journal", "-wal", "-shm"):
            Path(f"{part}{suffix}").unlink(missing_ok=True)
    return MergeSummary(
        sources=1,
        runs_added=counts["runs"],
        results_added=counts["results"],
        incidents_added=counts["incidents"],
        audit_rows_added=counts["audit_log"],
    )


def _backup(source: Path, part: Path) -> dict[str, int]:
    """Copy source into the new file part (SQLite's backup, one step: one snapshot); the rows
    of the tables a merge summary counts."""
    copy = sqlite3.connect(part, isolation_level=None)
    try:
        read = sqlite3.connect(source, isolation_level=None)
        try:
            read.backup(copy)
        finally:
            read.close()
        return {
            table: int(copy.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            for table in ("runs", "results", "incidents", "audit_log")
        }
    finally:
        copy.close()


# What a history holds that makes it no longer blank (a table a new history lacks is empty).
_HOLDINGS = ("meta", "runs", "tests", "signatures", "incidents", "audit_log", "attempt_journal")


def _copy_into_blank(dest: sqlite3.Connection, path: Path, summary: MergeSummary) -> bool:
    """Merge the history at path into dest by copying its tables whole, ids, rollups and all,
    when dest holds nothing at all (a new file: the first merge of a CI job). Row by row, with
    ids remapped and the rollups rebuilt, that took 84 s for 1 M results; copied, 5 s.

    False, changing nothing, unless dest holds nothing, the source is a file this process may
    write (read in place, as store.reads_in_place says), and every table both have has the same
    columns. The copy is one transaction that holds dest's write lock from before it looks at
    dest, so a merge that lands meanwhile is never overwritten; the source is only read. The
    source's rules tag its untagged runs afterwards, as after any merge.
    """
    if not may_write(path) or dest.in_transaction:
        return False
    dest.execute("ATTACH DATABASE ? AS merged_source", (str(path),))
    try:
        foreign_keys = int(dest.execute("PRAGMA foreign_keys").fetchone()[0])
        dest.execute("PRAGMA foreign_keys = OFF")  # rows arrive table by table, parents first
        try:
            with transaction(dest, main_only=True):  # the source is only read
                copied = _copy_tables(dest)
                if copied:
                    apply_rules(dest, None)
        finally:
            dest.execute(f"PRAGMA foreign_keys = {foreign_keys}")
    finally:
        dest.execute("DETACH DATABASE merged_source")
    if copied is None:
        return False
    summary.runs_added += copied.get("runs", 0)
    summary.results_added += copied.get("results", 0)
    summary.incidents_added += copied.get("incidents", 0)
    summary.audit_rows_added += copied.get("audit_log", 0)
    return True


def _copy_tables(dest: sqlite3.Connection) -> dict[str, int] | None:
    """Copy every table of merged_source into dest's (inside dest's write transaction): rows
    by table; None, having written nothing, when dest holds anything or a table differs."""
    tables = [
        str(name)
        for (name,) in dest.execute(
            "SELECT name FROM merged_source.sqlite_master WHERE type = 'table'"
            " AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
        )
    ]
    present = {
        str(name)
        for (name,) in dest.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")
    }
    for name in present:
        if dest.execute(f'SELECT EXISTS (SELECT 1 FROM main."{name}")').fetchone()[0]:
            return None  # not blank: merged row by row
    if not set(_HOLDINGS) <= present:
        return None
    columns: dict[str, list[str]] = {}
    for name in tables:
        columns[name] = [
            str(row[1]) for row in dest.execute(f'PRAGMA merged_source.table_info("{name}")')
        ]
        if name in present:
            mine = [str(row[1]) for row in dest.execute(f'PRAGMA main.table_info("{name}")')]
            if sorted(mine) != sorted(columns[name]):
                return None
    copied = {}
    for name in tables:
        if name not in present:  # a rollup table a new history makes at its first write
            dest.execute(_source_sql("table", name, dest)[0])
        # Indexes are made after the rows: kept up row by row, one in another order than the
        # table's key costs a random insert per row (1 M per-run rows: 6.4 s, against 1.7).
        indexes = _source_sql("index", name, dest)
        for (index,) in dest.execute(
            "SELECT name FROM main.sqlite_master WHERE type = 'index' AND tbl_name = ?"
            " AND sql IS NOT NULL",
            (name,),
        ).fetchall():
            dest.execute(f'DROP INDEX main."{index}"')
        names = ", ".join(f'"{column}"' for column in columns[name])
        copied[name] = dest.execute(
            f'INSERT INTO main."{name}" ({names}) SELECT {names} FROM merged_source."{name}"'
        ).rowcount
        for sql in indexes:
            dest.execute(sql)
    return copied


def _source_sql(kind: str, table: str, dest: sqlite3.Connection) -> list[str]:
    """The CREATE statements of merged_source's table, or of its own indexes."""
    column = "name" if kind == "table" else "tbl_name"
    return [
        str(sql)
        for (sql,) in dest.execute(
            f"SELECT sql FROM merged_source.sqlite_master WHERE type = ? AND {column} = ?"
            " AND sql IS NOT NULL ORDER BY rowid",
            (kind, table),
        )
    ]


def merge_histories(
    dest: Connected, sources: Sequence[Path], *, copied: MergeSummary | None = None
) -> MergeSummary:
    """Import the runs of other history files into dest; each source atomically, idempotently.

    `copied`: what copy_to_new copied into dest before it was opened (counted in the summary);
    dest's rules tag its untagged runs first, as after any merge.
    """
    summary = MergeSummary() if copied is None else copied
    if copied is not None:
        with transaction(dest.conn):
            apply_rules(dest.conn, None)
    dest_file = _database_file(dest.conn)
    with ExitStack() as held:  # each source closed on leaving, however the merge ends
        opened = []
        for path in sources:  # open all first: a bad source refuses the whole merge up front
            if dest_file is not None and Path(path).resolve() == dest_file:
                raise HistoryError(f"{path}: cannot merge a history into itself")
            opened.append(held.enter_context(history_file(path, create=False, readonly=True)))
        for path, source in zip(sources, opened, strict=True):
            src = source.conn
            if summary.sources == 0 and _copy_into_blank(dest.conn, Path(path), summary):
                summary.sources += 1
                continue
            # Every id the merge stores is one it mapped or created (its tests, signatures and
            # runs): unchecked references keep each statement from journaling the pages it
            # changes, as an ingest's do. CHECK constraints stay: the rows come from another file.
            with foreign_keys_off(dest.conn, unchecked=False), transaction(dest.conn):
                reviewed = outage_states(dest.conn)
                signatures = _merge_signatures(dest.conn, src)
                other_files = _other_files(dest.conn, src)
                tests = _merge_tests(dest.conn, src)
                _merge_runs(dest.conn, src, tests, signatures, summary)
                _take_files(dest.conn, other_files)
                summary.incidents_added += _merge_incidents(dest.conn, src, reviewed)
                summary.decisions_kept += take_states(
                    dest.conn, outage_states(src), rejected_rules(src), reviewed
                )
                apply_rules(dest.conn, None)
                summary.audit_rows_added += _merge_audit(dest.conn, src)
            summary.sources += 1
    return summary
