"""Push a SQLite history's raw rows to the server: the one write path of every server writer.

Ingest and the pytest plugin write a run into a private staging history with the ordinary
writer (parsing, redaction, signatures, attempt numbering) and push it; `merge` pushes
published histories the same way. A push is one server transaction, so a run lands whole or
not at all, and it follows the rules of merging histories:
- a run new to the server is copied whole; a run the server has gains the tests its copy lacks
  (other shards), and a test both hold keeps the server's attempts: pushing twice adds nothing;
- tests match by test_id (first_seen becomes the earlier one), signatures by hash (the
  server's example wins), incidents by (tag, window, signature), audit rows by every column
  (pg.columns.AUDIT_COLUMNS); each suspected outage keeps its review (pg.reviews).
Many writers push at once: rows arrive through COPY into temporary tables and are inserted
with ON CONFLICT DO NOTHING in key order; writers of one run id take a transaction-scoped
advisory lock on it, so shards of one run never interleave their test checks.
An ingest's push also names the test ids that files of its run's reports share (``shared``):
the server's attempts of such an id stored under the plain id, from a known file, move to that
file's id (``<file>::<id>``) in the same transaction, numbered after the attempts it holds, as
an ingest into a history file moves them; each move leaves a row in ``deletions`` (kind
``attempts``, key ``[run_id, test_id, file]``) for replicas to drop their copies. Shards pushed
at once read the server's run before either landed: a plain id that the run holds from two
files once the push's rows are in is moved as well, under the run's lock (_moves). A merge's
push does the same for an id the server's copy and the pushed copy of a run hold from
different files (_merge_clashes). Either moves the server's attempts before its own land,
and lands its own under their file's id, numbered after the attempts that id holds
(_move_shared). Once the push's attempts are in, a plain id moved from is seen first at the
earliest run still holding it, or removed when nothing names it (_settle), as in a history
file; a push holds its tests' rows so that another's removal never takes one it is about to
refer to (_hold_tests). A pushed test the server holds with another file takes the file of its
latest run naming one (_take_files).
A push takes the rows it writes in one pass in id order as it starts (_push_tests): those of
the pushed tests it changes, and those of its moves, which it finds before any of its rows
land, under its runs' locks (_moves, _merge_clashes): the plain ids moved from, and the file
ids moved to, inserted with the pushed tests in id order (_file_ids). A test's row another
push removes before this one holds it is inserted again with the others: the push lets go of
every row it took and takes them all again, in id order. After that pass it waits for no test
row another push holds: such a row, a test to take a file, a plain id to settle or to remove,
is left to a short transaction once the push has committed (_after_others), which waits for
that push and then sees its runs.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flaketui.core.history.derived_rows import file_of_attempts, latest_file
from flaketui.core.history.outages import REJECTED, outage_states, rejected_rules
from flaketui.core.history.pg.columns import (
    PREDECESSOR,
    both_have,
    server_audit_columns,
    shared_columns,
)
from flaketui.core.history.pg.connect import driver
from flaketui.core.history.pg.reviews import lock_reviews, take_into_server
from flaketui.core.history.pg.schema import same_run, same_test
from flaketui.core.testids import file_of_test, origin_file, parent_of, stored_clashes
from flaketui.core.words import plural

# The meta key naming how the history's failure signatures were computed.
SCHEME_KEY = "signature_scheme"


@dataclass
class PushSummary:
    """What a push added to the server."""

    runs_added: int = 0
    runs_extended: int = 0
    runs_unchanged: int = 0
    results_added: int = 0
    incidents_added: int = 0
    audit_rows_added: int = 0
    decisions_kept: list[str] = field(default_factory=list)  # outages decided otherwise here
    # Test rows the push left to pushes holding them and could not tidy after its commit
    # (_after_others failed): a moved test keeps its older file, or a plain id no attempt
    # names stays, until a later push of the same tests.
    left_untidy: int = 0
    # By run id, the tests the server's copy of each pushed run holds once the push's attempts
    # are in, counted in its transaction (push_history's count_tests; else empty). A Counter,
    # as every field adds up over the summaries of several pushes (merge).
    tests: Counter[str] = field(default_factory=Counter)


def untidy_line(count: int) -> str:
    """The line saying what a push left untidy after its commit (PushSummary.left_untidy): the
    push landed, and a later push of those tests tidies them. Shared by the commands writing to
    a server and the pytest plugin."""
    them = "it" if count == 1 else "them"
    return (
        f"{plural(count, 'test')} another writer held {'was' if count == 1 else 'were'} left"
        f" untidy (an older file, or no attempts): a later push of {them} tidies {them}"
    )


def _quoted(columns: Iterable[str]) -> str:
    return ", ".join(f'"{c}"' for c in columns)


def _copy(pg: Any, table: str, columns: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """COPY rows into a (temporary) table."""
    with pg.cursor() as cur, cur.copy(f"COPY {table} ({_quoted(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def push_history(
    pg: Any,
    src: sqlite3.Connection,
    *,
    append: bool = False,
    shared: Mapping[str, Collection[str]] | None = None,
    count_tests: bool = False,
) -> PushSummary:
    """Copy every raw row of a SQLite history to the server in ONE transaction.

    ``append``: the source holds new report files of its runs (an ingest or a recorder's
    staging history), so a test the server's run already holds gains these attempts, numbered
    after its last one, as an ingest into a file appends them; a run whose report files the
    server already has all of is left alone (a repeated ingest). Without it, merge's rules.
    ``shared``: by run id, the test ids that the files of the run's reports share (the
    ingest's IngestResult.shared): the server's attempts of such an id under the plain id,
    from a known file, move to that file's id (module doc).
    ``count_tests``: count each pushed run's tests on the server before the push commits
    (PushSummary.tests), so that a caller saying how many the run holds reads nothing once
    the run has landed: a failure there would pass for a push that failed.
    """
    summary = PushSummary()
    run_cols = shared_columns(src, pg, "runs")
    result_cols = shared_columns(src, pg, "results")
    run_ids = sorted(str(r[0]) for r in src.execute("SELECT run_id FROM runs"))
    files: dict[int, str] = {}  # tests whose file another push held (_take_files)
    orphans: list[int] = []  # plain ids left without attempts that another push held (_settle)
    unsettled: dict[int, str] = {}  # plain ids moved from that another push held (_settle)
    with pg.transaction():
        if run_ids:
            pg.execute(
                "SELECT pg_advisory_xact_lock(h) FROM (SELECT DISTINCT hashtextextended(k, 0) AS h"
                " FROM unnest(%s::text[]) AS k ORDER BY h) AS locks",
                (run_ids,),
            )
        _push_signatures(pg, src)
        _stage_tests(pg, src)
        moves: dict[str, set[str]] = {}
        pred = False
        if run_ids:
            pred = _stage_runs(pg, src, run_cols, result_cols)
            if "origin" in result_cols:
                moves = _moves(pg, shared or {}) if append else _merge_clashes(pg)
        _push_tests(pg, _file_ids(pg, moves, append))
        if run_ids:
            left = _push_runs(pg, run_cols, result_cols, summary, append, pred, moves)
            orphans, unsettled = _settle(pg, left)
            files = _take_files(pg)
            if count_tests:
                summary.tests = _count_tests(pg)
        _push_scheme(pg, src)
        theirs = outage_states(src)
        before = lock_reviews(pg) if theirs or _has_incidents(src) else {}
        summary.incidents_added = _push_incidents(pg, src, before)
        summary.decisions_kept = take_into_server(pg, theirs, rejected_rules(src), before)
        summary.audit_rows_added = _push_audit(pg, src)
    # Committed: a failure from here on (a lost connection) is no failed push, which a caller
    # would retry or keep as unsent, recording the run twice.
    try:
        _after_others(pg, files, orphans, unsettled)
    except driver().Error:
        summary.left_untidy = len(files) + len(orphans) + len(unsettled)
    return summary


def _count_tests(pg: Any) -> Counter[str]:
    """By run id, the tests the server's copy of each pushed run (s_runs) holds."""
    return Counter(
        {
            str(run_id): int(count)
            for run_id, count in pg.execute(
                "SELECT r.run_id, count(DISTINCT x.test) FROM runs AS r"
                f" JOIN s_runs AS s ON {same_run('s.run_id', 'r.run_id')}"
                " JOIN results AS x ON x.run = r.id GROUP BY r.run_id"
            ).fetchall()
        }
    )


def _push_scheme(pg: Any, src: sqlite3.Connection) -> None:
    """The first writer's signature scheme becomes the server's (replicas report a scheme their
    configuration does not match, as any history does)."""
    row = src.execute("SELECT value FROM meta WHERE key = ?", (SCHEME_KEY,)).fetchone()
    if row is not None:
        pg.execute(
            "INSERT INTO flaketui_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
            (SCHEME_KEY, str(row[0])),
        )


def _push_signatures(pg: Any, src: sqlite3.Connection) -> None:
    pg.execute(
        "CREATE TEMP TABLE s_signatures ON COMMIT DROP AS"
        " SELECT hash, text, example FROM signatures WITH NO DATA"
    )
    _copy(pg, "s_signatures", ("hash", "text", "example"),
          src.execute("SELECT hash, text, example FROM signatures"))  # fmt: skip
    pg.execute(
        "INSERT INTO signatures (hash, text, example)"
        " SELECT hash, text, example FROM s_signatures ORDER BY hash ON CONFLICT (hash) DO NOTHING"
    )


def _stage_tests(pg: Any, src: sqlite3.Connection) -> None:
    pg.execute(
        "CREATE TEMP TABLE s_tests ON COMMIT DROP AS"
        " SELECT test_id, parent, test_file, first_seen FROM tests WITH NO DATA"
    )
    _copy(pg, "s_tests", ("test_id", "parent", "test_file", "first_seen"),
          src.execute("SELECT test_id, parent, test_file, first_seen FROM tests"))  # fmt: skip


def _push_tests(pg: Any, moving: Sequence[str]) -> None:
    """Insert the pushed tests (s_tests, with the file ids the push's moves create: _file_ids)
    and take, in one pass in id order, every row the push writes later: those it teaches,
    those whose file it may change, and the plain ids it moves attempts from (``moving``);
    then hold the rows of the pushed tests (_hold_tests). A row another writer's push removed
    since the insert is not inserted on its own, after rows of higher ids are taken: the
    insert would wait for a push inserting the same test, which may wait for a row this one
    took. The rows taken are let go (the savepoint rolled back) and all taken again from the
    insert on, in id order, the new row with them."""
    while True:
        with pg.transaction() as taking:  # a savepoint: rolled back, its row locks go with it
            _take_tests(pg, moving)
            if _hold_tests(pg):
                return
            raise driver().Rollback(taking)


def _take_tests(pg: Any, moving: Sequence[str]) -> None:
    """_push_tests' insert and its one pass in id order."""
    pg.execute(
        "INSERT INTO tests (test_id, parent, test_file, first_seen)"
        " SELECT test_id, parent, test_file, first_seen FROM s_tests ORDER BY test_id"
        " ON CONFLICT DO NOTHING"
    )
    # Rows this push teaches something (an earlier first sighting, a file), or may move to
    # another file once its runs are in (_take_files), and the plain ids its moves leave
    # (_settle writes their first sighting and file; their removal, FOR UPDATE, conflicts
    # with other pushes' holds and skips the rows they hold): locked in id order, all at
    # once, FOR NO KEY UPDATE as the UPDATE itself locks them (it changes no key). FOR UPDATE
    # would also conflict with the FOR KEY SHARE locks other writers' results take on these
    # rows through their foreign key, in their own order, and deadlock with them. The locking
    # query is MATERIALIZED: inlined, the planner would move `teaches` into it and leave the
    # rows that only differ in file unlocked, for _take_files to lock late, out of this order.
    pg.execute(
        "WITH u AS MATERIALIZED (SELECT t2.id, s.first_seen, s.test_file,"
        " coalesce(s.first_seen < t2.first_seen"
        " OR (t2.test_file IS NULL AND s.test_file IS NOT NULL), false) AS teaches"
        f" FROM tests AS t2 LEFT JOIN s_tests AS s ON {same_test('s.test_id', 't2.test_id')}"
        " WHERE t2.id IN (SELECT t3.id FROM tests AS t3"
        f" JOIN s_tests AS s3 ON {same_test('s3.test_id', 't3.test_id')}"
        " WHERE s3.first_seen < t3.first_seen"
        " OR (s3.test_file IS NOT NULL AND t3.test_file IS DISTINCT FROM s3.test_file)"
        " UNION SELECT t4.id FROM tests AS t4"
        " WHERE md5(t4.test_id) IN (SELECT md5(k) FROM unnest(%s::text[]) AS k)"
        " AND t4.test_id = ANY(%s::text[]))"
        " ORDER BY t2.id FOR NO KEY UPDATE OF t2)"
        " UPDATE tests AS t SET first_seen = least(t.first_seen, u.first_seen),"
        " test_file = coalesce(t.test_file, u.test_file), change = pg_current_xact_id()"
        " FROM u WHERE t.id = u.id AND u.teaches",
        (list(moving), list(moving)),
    )


def _hold_tests(pg: Any) -> bool:
    """Lock the server's rows of the pushed tests FOR KEY SHARE until the push ends, as the
    foreign keys of its results would lock them one by one later: another writer's push does
    not remove a row this push is about to refer to (_settle skips the rows others hold).
    Whether every one is held: not when such a push removed one since this one inserted its
    tests (_push_tests then takes them all again)."""
    wanted = int(pg.execute("SELECT count(*) FROM s_tests").fetchone()[0])
    held = pg.execute(
        "SELECT count(*) FROM (SELECT t.id FROM tests AS t"
        f" JOIN s_tests AS s ON {same_test('s.test_id', 't.test_id')}"
        " ORDER BY t.id FOR KEY SHARE OF t) AS held"
    ).fetchone()[0]
    return int(held) == wanted


def _stage_runs(
    pg: Any, src: sqlite3.Connection, run_cols: Sequence[str], result_cols: Sequence[str]
) -> bool:
    """Copy the runs, their files and results into temporary tables (s_runs, s_run_files,
    s_run_changed_files, s_results) and name the runs whose every report file the server had
    already (s_done: nothing of them is new to an append). Whether results travel with their
    predecessor."""
    cols = _quoted(run_cols)
    # The predecessor (a tests.id) travels as its test_id and becomes the server's tests.id.
    pred = both_have(src, pg, "results", PREDECESSOR)
    pg.execute(f"CREATE TEMP TABLE s_runs ON COMMIT DROP AS SELECT {cols} FROM runs WITH NO DATA")
    _copy(pg, "s_runs", run_cols, src.execute(f"SELECT {cols} FROM runs"))
    for table, column in _CHILDREN:
        pg.execute(
            f"CREATE TEMP TABLE s_{table} (run_id text NOT NULL, {column} text NOT NULL)"
            " ON COMMIT DROP"
        )
        _copy(pg, f"s_{table}", ("run_id", column), src.execute(
            f"SELECT r.run_id, c.{column} FROM {table} AS c JOIN runs AS r ON r.id = c.run"
        ))  # fmt: skip
    pg.execute(
        "CREATE TEMP TABLE s_done ON COMMIT DROP AS SELECT s.run_id FROM s_run_files AS s"
        f" JOIN runs AS r ON {same_run('r.run_id', 's.run_id')} LEFT JOIN run_files AS f"
        " ON f.run = r.id AND f.content_hash = s.content_hash"
        " GROUP BY s.run_id HAVING bool_and(f.run IS NOT NULL)"
    )
    rcols = _quoted(result_cols)
    pg.execute(
        "CREATE TEMP TABLE s_results ON COMMIT DROP AS SELECT ''::text AS run_key,"
        f" ''::text AS test_key, ''::text AS sig_key, ''::text AS pred_key, {rcols}"
        " FROM results WITH NO DATA"
    )
    selected = ", ".join(f'x."{c}"' for c in result_cols)
    pred_key = "p.test_id" if pred else "NULL"
    _copy(pg, "s_results", ("run_key", "test_key", "sig_key", "pred_key", *result_cols),
          src.execute(
        f"SELECT r.run_id, t.test_id, g.hash, {pred_key}, {selected} FROM results AS x"
        " JOIN runs AS r ON r.id = x.run JOIN tests AS t ON t.id = x.test"
        " LEFT JOIN signatures AS g ON g.id = x.signature"
        + (" LEFT JOIN tests AS p ON p.id = x.predecessor" if pred else "")
    ))  # fmt: skip
    return pred


_CHILDREN = (("run_files", "content_hash"), ("run_changed_files", "path"))


def _push_runs(
    pg: Any,
    run_cols: Sequence[str],
    result_cols: Sequence[str],
    summary: PushSummary,
    append: bool,
    pred: bool,
    moves: Mapping[str, Collection[str]],
) -> dict[int, str]:
    """The runs, their files and results (staged: _stage_runs); the plain ids its runs' files
    share (``moves``: _moves, _merge_clashes) are moved first (_move_shared), and those moved
    from returned (_separate's, for _settle)."""
    cols = _quoted(run_cols)
    added = {
        str(row[0])
        for row in pg.execute(
            f"INSERT INTO runs ({cols}) SELECT {cols} FROM s_runs ORDER BY run_id"
            " ON CONFLICT DO NOTHING RETURNING run_id"
        ).fetchall()
    }
    for table, column in _CHILDREN:
        pg.execute(
            f"INSERT INTO {table} (run, {column}) SELECT r.id, s.{column} FROM s_{table} AS s"
            f" JOIN runs AS r ON {same_run('r.run_id', 's.run_id')}"
            " ORDER BY 1, 2 ON CONFLICT DO NOTHING"
        )
    rcols = _quoted(result_cols)
    # Inserted columns: the remapped ids, then those copied as they are.
    keys = "run, test, signature" + (f", {PREDECESSOR}" if pred else "")
    key_values = "r.id, t.id, g.id" + (", pt.id" if pred else "")
    key_joins = (
        f" JOIN runs AS r ON {same_run('r.run_id', 's.run_key')}"
        f" JOIN tests AS t ON {same_test('t.test_id', 's.test_key')}"
        " LEFT JOIN signatures AS g ON g.hash = s.sig_key"
        + (f" LEFT JOIN tests AS pt ON {same_test('pt.test_id', 's.pred_key')}" if pred else "")
    )
    left = _move_shared(pg, moves, append)
    if append:
        chosen = ", ".join(
            "s.attempt + coalesce(m.top, 0)" if c == "attempt" else f's."{c}"' for c in result_cols
        )
        landed = pg.execute(
            f"INSERT INTO results ({keys}, {rcols})"
            f" SELECT {key_values}, {chosen} FROM s_results AS s{key_joins}"
            " LEFT JOIN (SELECT y.run, y.test, max(y.attempt) AS top FROM results AS y"
            " JOIN runs AS yr ON yr.id = y.run"
            f" JOIN s_runs AS ys ON {same_run('ys.run_id', 'yr.run_id')}"
            " GROUP BY y.run, y.test) AS m ON m.run = r.id AND m.test = t.id"
            " WHERE s.run_key NOT IN (SELECT run_id FROM s_done)"
            " ON CONFLICT DO NOTHING RETURNING run"
        ).fetchall()
    else:
        chosen = ", ".join(f's."{c}"' for c in result_cols)
        # A test the server's copy of the run already holds keeps its attempts (module doc).
        landed = pg.execute(
            f"INSERT INTO results ({keys}, {rcols})"
            f" SELECT {key_values}, {chosen} FROM s_results AS s{key_joins}"
            " WHERE NOT EXISTS (SELECT 1 FROM results AS y WHERE y.run = r.id AND y.test = t.id)"
            " ON CONFLICT DO NOTHING RETURNING run"
        ).fetchall()
    grown = {int(row[0]) for row in landed}
    summary.results_added += len(landed)
    summary.runs_added += len(added)
    server_ids = dict(
        pg.execute(
            "SELECT r.run_id, r.id FROM runs AS r"
            f" JOIN s_runs AS s ON {same_run('s.run_id', 'r.run_id')}"
        )
    )
    for run_id in {str(r[0]) for r in pg.execute("SELECT run_id FROM s_runs")} - added:
        if server_ids.get(run_id) in grown:
            summary.runs_extended += 1
        else:
            summary.runs_unchanged += 1
    return left


def _moves(pg: Any, shared: Mapping[str, Collection[str]]) -> dict[str, set[str]]:
    """By run id, the plain ids whose attempts of a known file an append moves to that file's
    id (_separate): those the ingest found its run's files share (``shared``), and those the
    push brings attempts of a known file to that the server's run holds from another file as
    well (shards whose ingests read the run before either pushed). Read before any row of the
    push lands, under the runs' locks: no other writer changes the runs' attempts."""
    found: dict[str, set[str]] = {}
    for run_id, test_id in pg.execute(
        "SELECT k.run_key, k.test_key FROM"
        " (SELECT DISTINCT run_key, test_key FROM s_results WHERE origin IS NOT NULL) AS k"
        " JOIN (SELECT s.run_key, s.test_key, s.origin FROM s_results AS s"
        " WHERE s.origin IS NOT NULL AND s.run_key NOT IN (SELECT run_id FROM s_done)"
        " UNION SELECT r.run_id, t.test_id, x.origin FROM results AS x"
        " JOIN runs AS r ON r.id = x.run JOIN tests AS t ON t.id = x.test"
        " JOIN (SELECT DISTINCT run_key, test_key FROM s_results WHERE origin IS NOT NULL) AS n"
        f" ON {same_run('r.run_id', 'n.run_key')} AND {same_test('t.test_id', 'n.test_key')}"
        " WHERE x.origin IS NOT NULL) AS h ON h.run_key = k.run_key AND h.test_key = k.test_key"
        " GROUP BY k.run_key, k.test_key HAVING count(DISTINCT h.origin) > 1"
    ).fetchall():
        found.setdefault(str(run_id), set()).add(str(test_id))
    for run_id, ids in shared.items():
        if ids:
            found.setdefault(run_id, set()).update(ids)
    return found


def _file_ids(pg: Any, moves: Mapping[str, Collection[str]], append: bool) -> list[str]:
    """The file ids (``<file>::<id>``) the moves create (_file_test) join the pushed tests
    (s_tests), seen first at the earliest moved run, with their file: _push_tests inserts
    them with the others, in id order. Each is one of the server's run's attempts of a known
    file under a moved plain id, or the push's (an append's of a run it adds to). The plain
    ids moved from, for _push_tests to take."""
    pairs = sorted((run_id, test_id) for run_id, ids in moves.items() for test_id in ids)
    if not pairs:
        return []
    runs, ids = [list(column) for column in zip(*pairs, strict=True)]
    rows = pg.execute(
        "WITH m AS (SELECT * FROM unnest(%s::text[], %s::text[]) AS m (run_id, test_id))"
        " SELECT m.test_id, x.origin, r.ts FROM m"
        f" JOIN runs AS r ON {same_run('r.run_id', 'm.run_id')}"
        f" JOIN tests AS t ON {same_test('t.test_id', 'm.test_id')}"
        " JOIN results AS x ON x.run = r.id AND x.test = t.id WHERE x.origin IS NOT NULL"
        " UNION SELECT m.test_id, s.origin, coalesce(r.ts, sr.ts) FROM m"
        " JOIN s_results AS s ON s.run_key = m.run_id AND s.test_key = m.test_id"
        " JOIN s_runs AS sr ON sr.run_id = m.run_id"
        f" LEFT JOIN runs AS r ON {same_run('r.run_id', 'm.run_id')}"
        " WHERE s.origin IS NOT NULL"
        + (" AND m.run_id NOT IN (SELECT run_id FROM s_done)" if append else ""),
        (runs, ids),
    ).fetchall()
    created: dict[str, tuple[str | None, str]] = {}
    for test_id, origin, ts in rows:
        new_id = f"{origin}::{test_id}"
        seen = created.get(new_id)
        if seen is None or str(ts) < seen[1]:
            created[new_id] = (file_of_test(new_id, origin_file(str(origin))), str(ts))
    pg.execute(
        "CREATE TEMP TABLE s_file_ids ON COMMIT DROP AS"
        " SELECT test_id, parent, test_file, first_seen FROM tests WITH NO DATA"
    )
    _copy(pg, "s_file_ids", ("test_id", "parent", "test_file", "first_seen"),
          ((new_id, parent_of(new_id), test_file, ts)
           for new_id, (test_file, ts) in sorted(created.items())))  # fmt: skip
    # A pushed test of the same id takes the move's file and the earlier first sighting, as
    # _file_test gives the row.
    pg.execute(
        "UPDATE s_tests AS s SET test_file = f.test_file,"
        " first_seen = least(s.first_seen, f.first_seen) FROM s_file_ids AS f"
        " WHERE s.test_id = f.test_id"
    )
    pg.execute(
        "INSERT INTO s_tests (test_id, parent, test_file, first_seen)"
        " SELECT test_id, parent, test_file, first_seen FROM s_file_ids AS f"
        " WHERE NOT EXISTS (SELECT 1 FROM s_tests AS s WHERE s.test_id = f.test_id)"
    )
    return sorted(set(ids))


def _separate(pg: Any, shared: Mapping[str, Collection[str]]) -> dict[int, str]:
    """Move the runs' attempts stored under a plain id their files share, whose case named its
    file, to ``<file>::<id>`` (the SQLite writer's separate_stored, on the server); the row ids
    of the plain ids the server holds, each with the time of the earliest of the runs (for
    _settle: a pushed history may have brought the time of a run whose attempts of the id
    went to their files' ids)."""
    left: dict[int, str] = {}
    for run_id, ids in sorted(shared.items()):
        names = sorted(ids)
        if not names:
            continue
        for pk, ts in pg.execute(
            "SELECT t.id, r.ts FROM tests AS t JOIN runs AS r"
            f" ON {same_run('r.run_id', '%s')}"
            " WHERE md5(t.test_id) IN (SELECT md5(k) FROM unnest(%s::text[]) AS k)"
            " AND t.test_id = ANY(%s::text[])",
            (run_id, run_id, names, names),
        ).fetchall():
            left[int(pk)] = min(left.get(int(pk), str(ts)), str(ts))
        held = pg.execute(
            "SELECT DISTINCT x.run, x.test, t.test_id, x.origin, r.ts"
            " FROM results AS x JOIN runs AS r ON r.id = x.run JOIN tests AS t ON t.id = x.test"
            f" WHERE {same_run('r.run_id', '%s')}"
            " AND md5(t.test_id) IN (SELECT md5(k) FROM unnest(%s::text[]) AS k)"
            " AND t.test_id = ANY(%s::text[]) AND x.origin IS NOT NULL ORDER BY 3, 4",
            (run_id, run_id, names, names),
        ).fetchall()
        for run_pk, old_pk, test_id, origin, ts in held:
            new_pk = _file_test(pg, test_id, origin, ts)
            pg.execute(
                "UPDATE results SET test = %s, change = pg_current_xact_id(), attempt = attempt"
                " + (SELECT coalesce(max(attempt), 0) FROM results WHERE run = %s AND test = %s)"
                " WHERE run = %s AND test = %s AND origin = %s",
                (new_pk, run_pk, new_pk, run_pk, old_pk, origin),
            )
            pg.execute(
                "INSERT INTO deletions (kind, key) VALUES ('attempts', %s)",
                (json.dumps([run_id, test_id, origin]),),
            )
    return left


def _settle(
    pg: Any, left: Mapping[int, str], *, wait: bool = False
) -> tuple[list[int], dict[int, str]]:
    """Once the push's results are in, the plain ids its runs' files share (row id: the time of
    the earliest such run), as derived_rows.settle_left leaves a history file's: one seen first
    at that run is seen first at the earliest run still holding its attempts, has the file
    they name (derived_rows.file_of_attempts), and one that no attempt and no audit row names is
    removed, unless another writer's push holds its row
    (_hold_tests: it is about to refer to it); those are returned, for _after_others. Replicas
    drop their copy on their own when they drop the moved attempts.

    _push_tests took the rows of the plain ids it knew the push moves from; any other row
    another push holds is not waited for (SKIP LOCKED, unless ``wait``: after the push's
    commit, holding nothing else) and is returned as well, with its time, to be settled by
    _after_others once that push is done."""
    if not left:
        return [], {}
    lock = "FOR NO KEY UPDATE" if wait else "FOR NO KEY UPDATE SKIP LOCKED"
    held = {
        int(row[0])
        for row in pg.execute(
            f"SELECT id FROM tests WHERE id = ANY(%s) ORDER BY id {lock}", (sorted(left),)
        ).fetchall()
    }
    unsettled = {pk: ts for pk, ts in left.items() if pk not in held}
    left = {pk: ts for pk, ts in left.items() if pk in held}
    if not left:
        return [], unsettled
    by_time: dict[str, list[int]] = {}
    for pk, ts in left.items():
        by_time.setdefault(ts, []).append(pk)
    for ts, pks in sorted(by_time.items()):
        pg.execute(
            "UPDATE tests AS t SET first_seen = m.first, change = pg_current_xact_id()"
            " FROM (SELECT x.test, min(r.ts) AS first FROM results AS x"
            " JOIN runs AS r ON r.id = x.run WHERE x.test = ANY(%s) GROUP BY x.test) AS m"
            " WHERE t.id = m.test AND t.first_seen >= %s AND t.first_seen <> m.first",
            (sorted(pks), ts),
        )
    # The file of each: that its remaining attempts name (derived_rows.file_of_attempts).
    named = _named(pg, sorted(left))
    for pk, test_id, stored in pg.execute(
        "SELECT id, test_id, test_file FROM tests WHERE id = ANY(%s) ORDER BY id", (sorted(left),)
    ).fetchall():
        test_file = file_of_attempts(str(test_id), named.get(int(pk), ()))
        if test_file != stored:
            pg.execute(
                "UPDATE tests SET test_file = %s, change = pg_current_xact_id() WHERE id = %s",
                (test_file, pk),
            )
    orphans = [int(row[0]) for row in pg.execute(_ORPHANS, (sorted(left),)).fetchall()]
    if not orphans:
        return [], unsettled
    removed = {
        int(row[0])
        for row in pg.execute(
            f"DELETE FROM tests WHERE id IN ({_ORPHANS} FOR UPDATE SKIP LOCKED) RETURNING id",
            (orphans,),
        ).fetchall()
    }
    return [pk for pk in orphans if pk not in removed], unsettled


# Of the test row ids given, those no attempt and no audit row names.
_ORPHANS = (
    "SELECT t.id FROM tests AS t WHERE t.id = ANY(%s)"
    " AND NOT EXISTS (SELECT 1 FROM results AS x WHERE x.test = t.id)"
    " AND NOT EXISTS (SELECT 1 FROM audit_log AS a WHERE a.test_id = t.test_id) ORDER BY t.id"
)


def _take_files(pg: Any) -> dict[int, str]:
    """Once the push's attempts are in, a pushed test the server holds with another file takes
    the file of its latest run naming one (derived_rows.latest_file), as in a history file; one
    no run names keeps the server's. Its row is read after its runs are: of two pushes of one
    test, the second sees the first's runs.

    It locks no row it has to wait for: _push_tests locked the rows whose file differed then,
    and those of this push's moves; a row another writer's push moved since is taken
    only if no push holds it (SKIP LOCKED), as waiting for one here, holding other rows, may
    close a cycle with it. The rows another push holds are returned, with the pushed file, for
    _after_others."""
    differ = {
        int(pk): str(test_file)
        for pk, test_file in pg.execute(
            "SELECT t.id, s.test_file FROM tests AS t"
            f" JOIN s_tests AS s ON {same_test('s.test_id', 't.test_id')}"
            " WHERE s.test_file IS NOT NULL AND t.test_file IS DISTINCT FROM s.test_file"
        ).fetchall()
    }
    if not differ:
        return {}
    held = [
        int(row[0])
        for row in pg.execute(
            "SELECT id FROM tests WHERE id = ANY(%s) ORDER BY id FOR NO KEY UPDATE SKIP LOCKED",
            (sorted(differ),),
        ).fetchall()
    ]
    _latest_files(pg, held)
    taken = set(held)
    return {pk: test_file for pk, test_file in differ.items() if pk not in taken}


def _named(pg: Any, pks: Sequence[int]) -> dict[int, list[tuple[str, str]]]:
    """The origins the tests' attempts name, as (origin, run time) pairs by row id: the
    server's derived_rows.named_since, over every run."""
    named: dict[int, list[tuple[str, str]]] = {}
    for pk, origin, ts in pg.execute(
        "SELECT DISTINCT x.test, x.origin, r.ts FROM results AS x JOIN runs AS r ON r.id = x.run"
        " WHERE x.test = ANY(%s) AND x.origin IS NOT NULL",
        (list(pks),),
    ).fetchall():
        named.setdefault(int(pk), []).append((str(origin), str(ts)))
    return named


def _latest_files(pg: Any, pks: Sequence[int]) -> None:
    """The tests' rows (locked) take the file of their latest run naming one, if any."""
    if not pks:
        return
    named = _named(pg, pks)
    for pk, stored in pg.execute(
        "SELECT id, test_file FROM tests WHERE id = ANY(%s) ORDER BY id", (list(pks),)
    ).fetchall():
        test_file = latest_file(named.get(int(pk), ()))
        if test_file is not None and test_file != stored:
            pg.execute(
                "UPDATE tests SET test_file = %s, change = pg_current_xact_id() WHERE id = %s",
                (test_file, pk),
            )


def _after_others(
    pg: Any,
    files: Mapping[int, str],
    orphans: Sequence[int],
    unsettled: Mapping[int, str] | None = None,
) -> None:
    """Once the push has committed, what it left to pushes holding the rows then: the plain
    ids moved from of `unsettled` (_settle) are settled, the tests of `files` (_take_files)
    still held with another file than the pushed one take the file of their latest run, and
    the plain ids of `orphans` (_settle, and those settled here) that no attempt and no audit
    row names once the holders are done are removed: these read the rows and runs after the
    holders committed. Each transaction here waits only while it takes its locks, in one
    statement in id order (the removals a row each), and never after; a push waits out of id
    order for no test row once its first pass is done (_push_tests), so no cycle goes through
    them."""
    if unsettled:
        with pg.transaction():
            more, _ = _settle(pg, unsettled, wait=True)
        orphans = sorted({*orphans, *more})
    if files:
        with pg.transaction():
            held = [
                int(row[0])
                for row in pg.execute(
                    "SELECT id FROM tests WHERE id = ANY(%s) ORDER BY id FOR NO KEY UPDATE",
                    (sorted(files),),
                ).fetchall()
            ]
            moved = [
                int(pk)
                for pk, stored in pg.execute(
                    "SELECT id, test_file FROM tests WHERE id = ANY(%s) ORDER BY id", (held,)
                ).fetchall()
                if stored != files[int(pk)]
            ]
            _latest_files(pg, moved)
    for pk in sorted(orphans):  # one row a transaction: the wait holds no other row
        with pg.transaction():
            row = pg.execute("SELECT 1 FROM tests WHERE id = %s FOR UPDATE", (pk,)).fetchone()
            if row and pg.execute(_ORPHANS, ([pk],)).fetchone():
                pg.execute("DELETE FROM tests WHERE id = %s", (pk,))


def _file_test(pg: Any, test_id: str, origin: str, ts: object) -> int:
    """The server's row id of ``<origin>::<test_id>`` (created, seen first at ts, if need be),
    whose file is origin, unless a describe block (derived_rows.file_test). A push's move
    finds the row in place: its first pass inserted it, or took it where it writes it
    (_file_ids), so neither statement here waits for another push."""
    new_id = f"{origin}::{test_id}"
    test_file = file_of_test(new_id, origin_file(origin))
    pg.execute(
        "INSERT INTO tests (test_id, parent, test_file, first_seen)"
        " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
        (new_id, parent_of(new_id), test_file, ts),
    )
    pg.execute(
        "UPDATE tests SET first_seen = least(first_seen, %s), test_file = %s,"
        f" change = pg_current_xact_id() WHERE {same_test('test_id', '%s')}"
        " AND (first_seen > %s OR test_file IS DISTINCT FROM %s)",
        (ts, test_file, new_id, new_id, ts, test_file),
    )
    return int(
        pg.execute(
            f"SELECT id FROM tests WHERE {same_test('test_id', '%s')}", (new_id, new_id)
        ).fetchone()[0]
    )


def _merge_clashes(pg: Any) -> dict[str, set[str]]:
    """Before any row of a merge lands (s_results staged), by run id: test ids the server's
    copy of a run and the pushed copy hold from different files (testids.stored_clashes, each
    way), to become a test per file (_move_shared), as in a history file's merge
    (flaketui.core.history.merge). A pushed history whose attempts name no file (the
    recorder's, an older one) is compared as a history file's merge compares it: its
    file-prefixed ids against the server's attempts of a known file, the only ones read
    then."""
    named = pg.execute("SELECT 1 FROM s_results WHERE origin IS NOT NULL LIMIT 1").fetchone()
    held: dict[str, tuple[list[tuple[str, str | None]], list[tuple[str, str | None]]]] = {}
    for run_id, test_id, origin in pg.execute(
        "SELECT DISTINCT r.run_id, t.test_id, x.origin FROM results AS x"
        " JOIN runs AS r ON r.id = x.run JOIN tests AS t ON t.id = x.test"
        " JOIN (SELECT DISTINCT run_key FROM s_results) AS s"
        f" ON {same_run('r.run_id', 's.run_key')}"
        + ("" if named else " WHERE x.origin IS NOT NULL")
    ).fetchall():
        held.setdefault(str(run_id), ([], []))[0].append((str(test_id), origin))
    if not held:
        return {}
    for run_id, test_id, origin in pg.execute(
        "SELECT DISTINCT run_key, test_key, origin FROM s_results"
    ).fetchall():
        if str(run_id) in held:
            held[str(run_id)][1].append((str(test_id), origin))
    shared: dict[str, set[str]] = {}
    for run_id, (ours, theirs) in held.items():
        found = stored_clashes(ours, _files(theirs)) | stored_clashes(theirs, _files(ours))
        if found:
            shared[run_id] = found
    return shared


def _move_shared(
    pg: Any, shared: Mapping[str, Collection[str]], append: bool = False
) -> dict[int, str]:
    """Before the push's results land: the test ids of ``shared`` (_moves, _merge_clashes)
    become a test per file. The server's attempts of a known file move to their file's id
    (_separate), and the pushed ones are keyed to theirs, where the server's copy then holds
    them already (a merge) or they land, an append's numbered after the attempts the file's
    id holds, as a history file's ingest numbers a case whose id its run's files share; keyed
    to the plain id, they would be numbered after the attempts of the other file there. The
    plain ids moved from, for _settle."""
    if not shared:
        return {}
    left = _separate(pg, shared)
    done = " AND s.run_key NOT IN (SELECT run_id FROM s_done)" if append else ""
    for run_id, ids in sorted(shared.items()):
        for test_id, origin, ts in pg.execute(
            "SELECT DISTINCT s.test_key, s.origin, r.ts FROM s_results AS s"
            f" JOIN runs AS r ON {same_run('r.run_id', 's.run_key')}"
            " WHERE s.run_key = %s AND s.test_key = ANY(%s::text[]) AND s.origin IS NOT NULL"
            f"{done} ORDER BY 1, 3",
            (run_id, sorted(ids)),
        ).fetchall():
            _file_test(pg, str(test_id), str(origin), ts)
        pg.execute(
            "UPDATE s_results SET test_key = origin || '::' || test_key"
            " WHERE run_key = %s AND test_key = ANY(%s::text[]) AND origin IS NOT NULL",
            (run_id, sorted(ids)),
        )
    return left


def _files(held: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    return {test_id: origin for test_id, origin in held if origin is not None}


def _has_incidents(src: sqlite3.Connection) -> bool:
    return src.execute("SELECT 1 FROM incidents LIMIT 1").fetchone() is not None


def _push_incidents(pg: Any, src: sqlite3.Connection, before: dict[str, str]) -> int:
    """Copy the incident rows the server lacks, but those of an outage the server rejected
    (`before`: its outage states, under the incidents' lock)."""
    rows = src.execute(
        "SELECT tag, start_ts, end_ts, signature, created_at, note FROM incidents ORDER BY id"
    ).fetchall()
    added = 0
    with pg.cursor() as cur:
        for row in rows:
            if before.get(str(row[0])) == REJECTED:
                continue
            cur.execute(
                "INSERT INTO incidents (tag, start_ts, end_ts, signature, created_at, note)"
                " SELECT %s, %s, %s, %s, %s, %s WHERE NOT EXISTS (SELECT 1 FROM incidents"
                " WHERE tag = %s AND start_ts IS NOT DISTINCT FROM %s"
                " AND end_ts IS NOT DISTINCT FROM %s AND signature IS NOT DISTINCT FROM %s)",
                (*row, row[0], row[1], row[2], row[3]),
            )
            added += cur.rowcount
    return added


def _push_audit(pg: Any, src: sqlite3.Connection) -> int:
    columns = server_audit_columns(pg)
    rows = src.execute(f"SELECT {', '.join(columns)} FROM audit_log ORDER BY id").fetchall()
    if not rows:
        return 0
    pg.execute(
        f"CREATE TEMP TABLE s_audit ON COMMIT DROP AS SELECT {', '.join(columns)}"
        " FROM audit_log WITH NO DATA"
    )
    _copy(pg, "s_audit", columns, rows)
    cur = pg.execute(
        f"INSERT INTO audit_log ({', '.join(columns)}) SELECT {', '.join(columns)} FROM s_audit"
        f" ORDER BY {', '.join(columns)} ON CONFLICT DO NOTHING"
    )
    return int(cur.rowcount)
