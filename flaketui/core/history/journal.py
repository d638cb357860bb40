"""The attempt journal: attempts the pytest recorder appended during its session, not stored yet.

The recorder appends each batch of complete attempts to one table in arrival order, with no
index and no test row to resolve, so a test session pays for none of the history's
test-ordered trees. The next process that may write the history stores them (`land`, which
store.open_connection calls before it folds rollups), in one transaction:
- a test row per test id and per predecessor, first seen at its run's time, its file the part
  of the id before '::' (the predecessor only: as the writer infers it);
- the signatures the recorder computed, the first example kept;
- results, numbered after the attempts the run already holds for the test, in arrival order;
- the per-run test rows of the tests landed, recomputed from the run's results;
- the runs listed for the rollups' next fold.
Until then no reader sees the attempts: one that may not write the history refuses it
(store.fold_deferred). Rows of a run deleted since are dropped.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from flaketui.core.testids import file_of_test, parent_of

JOURNAL_TABLE = "attempt_journal"
# Rows are flat arrays of strings, numbers and nulls, which cannot hold a cycle: the encoder
# skips its cycle check (about a tenth of the work of encoding a batch).
_ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False)

# One row per batch: its attempts as one JSON array of JournalRow arrays, so a batch costs the
# recorder one row to insert whatever its size.
JOURNAL_SCHEMA = f"""
CREATE TABLE {JOURNAL_TABLE} (
    id          INTEGER PRIMARY KEY,    -- arrival order of the batches
    run         INTEGER NOT NULL,       -- runs.id
    attempts    TEXT NOT NULL           -- JSON: an array of journal rows (JournalRow in
                                        --   flaketui.core.history.journal), in arrival order
);
"""

# test_id, outcome, duration_ms, position, predecessor (the test id that ran just before on the
# worker), timeout_ms, worker_id, message (masked and capped, as results.message), signature
# (its hash; fail and error only), signature_text. The fields a passing attempt of a serial
# session leaves null come last, and a row may end before them: a field past a row's end is
# null. The recorder queues such an attempt as a PassRow (or with its timeout), half the fields
# of a FullRow for the encoder to write, which costs it per field.
FullRow = tuple[
    str, str, int | None, int | None, str | None, int | None, str | None, str | None,
    str | None, str | None,
]  # fmt: skip
PassRow = tuple[str, str, int | None, int | None, str | None]
JournalRow = FullRow | PassRow | tuple[str, str, int | None, int | None, str | None, int | None]

_ROWS = "temp.journal_rows"
_FIELDS = (
    "test_id", "outcome", "duration_ms", "position", "predecessor", "timeout_ms", "worker_id",
    "message", "signature", "signature_text",
)  # fmt: skip
# The batches up to :last as one row per attempt, numbered in arrival order (id); a field past
# the end of a short row extracts as null.
_EXPAND_SQL = f"""
CREATE TEMP TABLE journal_rows AS
SELECT row_number() OVER (ORDER BY b.id, e.key) AS id, b.run AS run,
    {", ".join(f"json_extract(e.value, '$[{i}]') AS {name}" for i, name in enumerate(_FIELDS))}
FROM {JOURNAL_TABLE} b, json_each(b.attempts) e
WHERE b.id <= :last
"""

_TEST_NAMES_SQL = f"""
SELECT name, min(ts), max(own) FROM (
    SELECT j.test_id AS name, r.ts AS ts, 1 AS own FROM {_ROWS} j JOIN runs r ON r.id = j.run
    UNION ALL
    SELECT j.predecessor, r.ts, 0 FROM {_ROWS} j JOIN runs r ON r.id = j.run
    WHERE j.predecessor IS NOT NULL
) GROUP BY name
"""

_SIGNATURES_SQL = f"""
INSERT OR IGNORE INTO signatures (hash, text, example)
SELECT signature, signature_text, message FROM {_ROWS} WHERE signature IS NOT NULL ORDER BY id
"""

_RESULTS_SQL = f"""
INSERT INTO results (run, test, attempt, outcome, worker_id, duration_ms, message, signature,
    predecessor, position, timeout_ms)
SELECT j.run, t.id,
    coalesce((SELECT max(r.attempt) FROM results r WHERE r.run = j.run AND r.test = t.id), 0)
        + row_number() OVER (PARTITION BY j.run, t.id ORDER BY j.id),
    j.outcome, j.worker_id, j.duration_ms, j.message, s.id, p.id, j.position, j.timeout_ms
FROM {_ROWS} j
JOIN runs ON runs.id = j.run
JOIN tests t ON t.test_id = j.test_id
LEFT JOIN signatures s ON s.hash = j.signature
LEFT JOIN tests p ON p.test_id = j.predecessor
"""


def append(conn: sqlite3.Connection, run_pk: int, rows: Sequence[JournalRow]) -> None:
    """Append a batch of one run's attempts (inside the caller's write transaction)."""
    conn.execute(
        f"INSERT INTO {JOURNAL_TABLE} (run, attempts) VALUES (?, ?)",
        (run_pk, _ENCODER.encode(rows)),
    )


def waiting(conn: sqlite3.Connection) -> int:
    """How many journaled attempts wait to be stored (0 in a history without the journal; the
    number of batches when one of them is not valid JSON)."""
    try:
        (batches,) = conn.execute(f"SELECT count(*) FROM {JOURNAL_TABLE}").fetchone()
    except sqlite3.OperationalError:  # no such table: a history from before the journal
        return 0
    if not batches:
        return 0
    try:
        (attempts,) = conn.execute(
            f"SELECT sum(json_array_length(attempts)) FROM {JOURNAL_TABLE}"
        ).fetchone()
    except sqlite3.OperationalError:  # malformed JSON: storing them will say so
        return int(batches)
    return int(attempts or batches)


def land(conn: sqlite3.Connection) -> int:
    """Store every journaled attempt (inside the caller's write transaction); how many."""
    # Loaded here, not with the module: the recorder appends and never lands.
    from flaketui.core.history.derived_rows import UPSERT_TEST_SQL, refresh_test_runs
    from flaketui.core.rollups import pending as rollups_pending

    last = conn.execute(f"SELECT max(id) FROM {JOURNAL_TABLE}").fetchone()[0]
    if last is None:
        return 0
    conn.execute("DROP TABLE IF EXISTS temp.journal_rows")
    conn.execute(_EXPAND_SQL, {"last": int(last)})
    try:
        names = conn.execute(_TEST_NAMES_SQL).fetchall()
        conn.executemany(
            UPSERT_TEST_SQL,
            [
                (
                    name,
                    parent_of(name),
                    file_of_test(name, name.split("::", 1)[0] if own else None),
                    ts,
                )
                for name, ts, own in names
            ],
        )
        conn.execute(_SIGNATURES_SQL)
        landed = conn.execute(_RESULTS_SQL).rowcount
        runs = conn.execute(
            f"SELECT j.run, r.ts, json_group_array(DISTINCT t.id) FROM {_ROWS} j"
            " JOIN runs r ON r.id = j.run JOIN tests t ON t.test_id = j.test_id"
            " GROUP BY j.run ORDER BY min(j.id)"
        ).fetchall()
        for run_pk, ts, tests in runs:
            refresh_test_runs(conn, int(run_pk), str(ts), [int(t) for t in json.loads(tests)])
            rollups_pending.defer(conn, int(run_pk))
    finally:
        conn.execute("DROP TABLE temp.journal_rows")
    conn.execute(f"DELETE FROM {JOURNAL_TABLE} WHERE id <= ?", (int(last),))
    return int(landed)
