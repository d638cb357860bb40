"""The server's schema: the raw history only, versioned with migrations of its own.

Tables mirror the SQLite history's raw tables (runs, run_files, run_changed_files, tests,
signatures, results, incidents, audit_log) with the same columns and text timestamps, so rows
copy across unchanged; rollups exist only in the local replicas. Surrogate ids are the
server's own: pushes and syncs match rows by their natural keys (run_id, test_id, signature
hash).

Change ids. Every row carries ``change``, the id of the transaction that last wrote it
(``pg_current_xact_id()``, an xid8), and deletions leave a row in ``deletions``. Transaction
ids are handed out when transactions start, not when they commit, so a plain sequence would let
a sync skip a row committed late with a small id. A sync therefore reads up to the xmin of its
snapshot (``pg_snapshot_xmin(pg_current_snapshot())``): every transaction below it has ended,
so no row can appear later below that watermark. A long open transaction on the server holds
the watermark back (its rows and later ones wait for the next sync); none is ever skipped.
"""

from __future__ import annotations

from typing import Any

# A fixed key for pg_advisory_xact_lock: one process migrates at a time.
MIGRATION_LOCK = 0x666C616B  # "flak"
CHANGE = "change xid8 NOT NULL DEFAULT pg_current_xact_id()"

SCHEMA_V1 = f"""
CREATE TABLE flaketui_meta (
    key    text PRIMARY KEY,
    value  text NOT NULL
);
INSERT INTO flaketui_meta (key, value) VALUES ('history_id', gen_random_uuid()::text);
CREATE TABLE runs (
    id            bigserial PRIMARY KEY,
    run_id        text NOT NULL UNIQUE,
    suite         text NOT NULL DEFAULT 'default',
    branch        text,
    branch_kind   text NOT NULL DEFAULT 'pr' CHECK (branch_kind IN ('main', 'pr', 'release')),
    commit_sha    text,
    ts            text NOT NULL,
    worker_count  integer NOT NULL DEFAULT 1,
    runner_host   text,
    ci_url        text,
    incident      text,
    source        text NOT NULL,
    finished      integer NOT NULL DEFAULT 1,
    {CHANGE}
);
CREATE INDEX runs_ts ON runs (ts);
CREATE INDEX runs_change ON runs (change);
CREATE TABLE run_files (
    run           bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    content_hash  text NOT NULL,
    {CHANGE},
    PRIMARY KEY (run, content_hash)
);
CREATE TABLE run_changed_files (
    run   bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    path  text NOT NULL,
    {CHANGE},
    PRIMARY KEY (run, path)
);
CREATE TABLE tests (
    id          bigserial PRIMARY KEY,
    test_id     text NOT NULL UNIQUE,
    parent      text NOT NULL,
    test_file   text,
    first_seen  text NOT NULL,
    {CHANGE}
);
CREATE INDEX tests_change ON tests (change);
CREATE TABLE signatures (
    id       bigserial PRIMARY KEY,
    hash     text NOT NULL UNIQUE,
    text     text NOT NULL,
    example  text NOT NULL,
    {CHANGE}
);
CREATE TABLE results (
    run          bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    test         bigint NOT NULL REFERENCES tests (id),
    attempt      integer NOT NULL,
    outcome      text NOT NULL CHECK (outcome IN ('pass', 'fail', 'error', 'skipped')),
    worker_id    text,
    duration_ms  integer,
    message      text,
    signature    bigint REFERENCES signatures (id),
    {CHANGE},
    PRIMARY KEY (run, test, attempt)
);
CREATE INDEX results_change ON results (change, run, test, attempt);
CREATE INDEX results_test ON results (test);
CREATE TABLE incidents (
    id          bigserial PRIMARY KEY,
    tag         text NOT NULL,
    start_ts    text,
    end_ts      text,
    signature   text,
    created_at  text NOT NULL,
    note        text,
    {CHANGE}
);
CREATE TABLE audit_log (
    id          bigserial PRIMARY KEY,
    ts          text NOT NULL,
    who         text NOT NULL,
    action      text NOT NULL,
    test_id     text NOT NULL,
    mode        text,
    reason      text,
    ticket      text,
    scores      text,
    source      text NOT NULL DEFAULT 'cli',
    {CHANGE},
    UNIQUE (ts, who, action, test_id)
);
CREATE INDEX audit_log_change ON audit_log (change);
CREATE TABLE deletions (
    id      bigserial PRIMARY KEY,
    kind    text NOT NULL,          -- 'run': a pruned run, key = its run_id
    key     text NOT NULL,
    {CHANGE}
);
CREATE INDEX deletions_change ON deletions (change);
"""

# Version 2: the SQLite history's version 2 columns, what cause analysis reads (see
# flaketui.core.history.store.SCHEMA_V2): the run's environment and order seed, and per attempt
# the test that ran just before it on the same worker (a tests.id of the server, remapped
# through test_id by push and sync), its position on that worker and its timeout. Nullable
# columns without defaults: adding them rewrites nothing, so an existing server upgrades at
# once whatever its size; older rows keep NULL, as they do in an upgraded history file. No
# foreign key on predecessor (it would scan results to validate): a pruned predecessor syncs
# as NULL.
SCHEMA_V2 = """
ALTER TABLE runs
    ADD COLUMN os text,
    ADD COLUMN python text,
    ADD COLUMN platform text,
    ADD COLUMN order_seed text;
ALTER TABLE results
    ADD COLUMN predecessor bigint,
    ADD COLUMN position integer,
    ADD COLUMN timeout_ms integer;
"""

# Version 3: the SQLite history's version 6 column (flaketui.core.history.store.SCHEMA_V6):
# audit_log.written_at, when the row was written, beside ts, the moment the decision holds
# for. Rows from before it get written_at = ts, as in an upgraded history file. Filling them
# leaves their change ids alone: replicas fill their own copies the same way when they upgrade.
SCHEMA_V3 = """
ALTER TABLE audit_log ADD COLUMN written_at text;
UPDATE audit_log SET written_at = ts;
ALTER TABLE audit_log ALTER COLUMN written_at SET NOT NULL;
"""

# Version 4: the review of each suspected outage, what a history file keeps in its meta values
# (flaketui.core.history.outages: REVIEW_KEY and REJECTED_KEY): one row per outage proposed
# (awaiting review) or rejected, with a rejected outage's rule (window and signature) when it
# was kept. An accepted outage is an ordinary incident row and has no row here.
SCHEMA_V4 = f"""
CREATE TABLE outage_reviews (
    tag        text PRIMARY KEY,
    state      text NOT NULL CHECK (state IN ('proposed', 'rejected')),
    start_ts   text,
    end_ts     text,
    signature  text,
    {CHANGE}
);
"""

# Version 5: test ids of any length. A btree index row holds at most 2704 bytes, so the unique
# keys holding a test id (tests.test_id; audit_log's ts, who, action, test_id) refused a long
# parametrized id, and with it the whole run, which a history file stores. Uniqueness is kept
# on the id's md5 instead (same_test): every lookup by test id compares the md5 too, so it
# reads the index.
SCHEMA_V5 = """
ALTER TABLE tests DROP CONSTRAINT tests_test_id_key;
CREATE UNIQUE INDEX tests_test_key ON tests (md5(test_id));
ALTER TABLE audit_log DROP CONSTRAINT audit_log_ts_who_action_test_id_key;
CREATE UNIQUE INDEX audit_log_key ON audit_log (ts, who, action, md5(test_id));
"""


def same_test(left: str, right: str) -> str:
    """The condition that two test id expressions name one test, by the indexed md5 first."""
    return f"md5({left}) = md5({right}) AND {left} = {right}"


def same_run(left: str, right: str) -> str:
    """The condition that two run id expressions name one run, by the indexed md5 first."""
    return f"md5({left}) = md5({right}) AND {left} = {right}"


def run_among(column: str) -> str:
    """The condition that run id `column` is one of the array parameter given twice (%s, %s),
    by the indexed md5 first."""
    return (
        f"md5({column}) IN (SELECT md5(k) FROM unnest(%s::text[]) AS k)"
        f" AND {column} = ANY(%s::text[])"
    )


# Version 6: the SQLite history's version 7 column (flaketui.core.history.store.SCHEMA_V7):
# results.leg, the report file an attempt came from, NULL for earlier rows. Nullable without a
# default: adding it rewrites nothing.
SCHEMA_V6 = """
ALTER TABLE results ADD COLUMN leg integer;
"""

# Version 7: an audit row is one decision in all its columns, as merging history files takes
# it: two rows of one moment, person, action and test that differ in anything else (reason,
# mode, ticket, scores, source, when written) are two rows. The unique key covers every column
# as one md5 of a fixed-width encoding: each column is 'v' and its md5, or 'n' for NULL (so
# NULL and '' differ, and no text can pass for a column boundary), so an index row stays small
# whatever the lengths. A server's rows were unique under the coarser key, so they are under
# this one. The columns are spelled out here, not taken from pg.columns: a migration never
# changes once released.
AUDIT_KEY_V7 = " || ".join(
    f"coalesce('v' || md5({column}), 'n')"
    for column in (
        "ts",
        "who",
        "action",
        "test_id",
        "mode",
        "reason",
        "ticket",
        "scores",
        "source",
        "written_at",
    )
)
SCHEMA_V7 = f"""
DROP INDEX audit_log_key;
CREATE UNIQUE INDEX audit_log_key ON audit_log (md5({AUDIT_KEY_V7}));
"""

# Version 8: run ids of any length, as version 5 took test ids: the unique key on runs.run_id
# refused a run id over 2704 bytes, and the run with it, on every push. Uniqueness is kept on
# the id's md5 (same_run, run_among): every lookup by run id compares the md5 too, so it reads
# the index.
SCHEMA_V8 = """
ALTER TABLE runs DROP CONSTRAINT runs_run_id_key;
CREATE UNIQUE INDEX runs_run_key ON runs (md5(run_id));
"""

# Version 9: the SQLite history's version 8 column (flaketui.core.history.store.SCHEMA_V8):
# results.origin, the file a JUnit case named, NULL where it named none and for earlier rows.
# Nullable without a default: adding it rewrites nothing.
SCHEMA_V9 = """
ALTER TABLE results ADD COLUMN origin text;
"""

# Each migration takes the schema from version i to i + 1; never edit a released one.
MIGRATIONS: list[str] = [
    SCHEMA_V1,
    SCHEMA_V2,
    SCHEMA_V3,
    SCHEMA_V4,
    SCHEMA_V5,
    SCHEMA_V6,
    SCHEMA_V7,
    SCHEMA_V8,
    SCHEMA_V9,
]
SCHEMA_VERSION = len(MIGRATIONS)


def schema_version(conn: Any) -> int:
    """The server's schema version (0 for a database flaketui has never written)."""
    if conn.execute("SELECT to_regclass('flaketui_meta')").fetchone()[0] is None:
        return 0
    row = conn.execute("SELECT value FROM flaketui_meta WHERE key = 'schema_version'").fetchone()
    return 0 if row is None else int(row[0])


def migrate(conn: Any) -> None:
    """Apply pending migrations in one transaction, one process at a time.

    The lock is a session advisory lock taken before the migrating transaction starts: a
    transaction that began before another process's migration committed could still see the
    tables as missing (catalog caches are refreshed when a transaction starts).
    """
    from flaketui.core.errors import HistoryError

    if schema_version(conn) == SCHEMA_VERSION:
        return
    conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    try:
        with conn.transaction():
            version = schema_version(conn)  # another process may have migrated meanwhile
            if version > SCHEMA_VERSION:
                raise HistoryError(
                    f"the server's history schema version {version} is newer than this "
                    f"flaketui supports ({SCHEMA_VERSION}); upgrade flaketui"
                )
            for target in range(version, SCHEMA_VERSION):
                conn.execute(MIGRATIONS[target])
            conn.execute(
                "INSERT INTO flaketui_meta (key, value) VALUES ('schema_version', %s)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


def history_id(conn: Any) -> str:
    """The server history's identity (a replica syncs from one server only)."""
    return str(
        conn.execute("SELECT value FROM flaketui_meta WHERE key = 'history_id'").fetchone()[0]
    )
