-- The history schema at version 11: what the migrations in store.py leave in sqlite_master,
-- in their words. A new history is created from it in one transaction. Written by
-- `python -m flaketui.core.history.schema_file` (or `make docs`); do not edit by hand.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE runs (
    id            INTEGER PRIMARY KEY,
    run_id        TEXT NOT NULL UNIQUE,
    suite         TEXT NOT NULL DEFAULT 'default',
    branch        TEXT,
    branch_kind   TEXT NOT NULL DEFAULT 'pr' CHECK (branch_kind IN ('main', 'pr', 'release')),
    commit_sha    TEXT,
    ts            TEXT NOT NULL,            -- ISO 8601 UTC, 'YYYY-MM-DDTHH:MM:SSZ'
    worker_count  INTEGER NOT NULL DEFAULT 1,
    runner_host   TEXT,
    ci_url        TEXT,
    incident      TEXT,                     -- incident tag, or NULL
    source        TEXT NOT NULL,            -- 'junit' | 'pytest' | 'merge'
    finished      INTEGER NOT NULL DEFAULT 1 -- 0 while recording or when interrupted
, os TEXT, python TEXT, platform TEXT, order_seed TEXT, ran_at_least INTEGER);
CREATE INDEX runs_ts ON runs (ts);
CREATE TABLE run_files (
    run           INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    content_hash  TEXT NOT NULL,            -- sha256 of a report file ingested into this run
    PRIMARY KEY (run, content_hash)
) WITHOUT ROWID;
CREATE TABLE run_changed_files (
    run   INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    path  TEXT NOT NULL,
    PRIMARY KEY (run, path)
) WITHOUT ROWID;
CREATE TABLE tests (
    id          INTEGER PRIMARY KEY,
    test_id     TEXT NOT NULL UNIQUE,       -- pytest node id, else 'classname::name'
    parent      TEXT NOT NULL,              -- test_id with its trailing [params] stripped
    test_file   TEXT,
    first_seen  TEXT NOT NULL
);
CREATE INDEX tests_parent ON tests (parent);
CREATE TABLE signatures (
    id       INTEGER PRIMARY KEY,
    hash     TEXT NOT NULL UNIQUE,
    text     TEXT NOT NULL,                 -- normalised message with <NUM>, <HEX>, <PATH>, ...
    example  TEXT NOT NULL                  -- one raw (masked, capped) message
);
CREATE TABLE results (
    run          INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    test         INTEGER NOT NULL REFERENCES tests (id),
    attempt      INTEGER NOT NULL,          -- 1 = first attempt
    outcome      TEXT NOT NULL CHECK (outcome IN ('pass', 'fail', 'error', 'skipped')),
    worker_id    TEXT,
    duration_ms  INTEGER,
    message      TEXT,                      -- capped, secrets masked
    signature    INTEGER REFERENCES signatures (id), predecessor INTEGER, position INTEGER, timeout_ms INTEGER, leg INTEGER, origin TEXT,
    PRIMARY KEY (run, test, attempt)
) WITHOUT ROWID;
CREATE TABLE incidents (
    id          INTEGER PRIMARY KEY,
    tag         TEXT NOT NULL,
    start_ts    TEXT,                       -- window incidents: [start_ts, end_ts]
    end_ts      TEXT,
    signature   TEXT,                       -- signature incidents: a signature hash
    created_at  TEXT NOT NULL,
    note        TEXT
);
CREATE TABLE "test_runs" (
    test        INTEGER NOT NULL REFERENCES tests (id),
    run         INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    ts          TEXT NOT NULL,              -- copy of runs.ts, which never changes
    outcome     TEXT NOT NULL CHECK (outcome IN ('pass', 'fail', 'flaky', 'skipped')),
    bad         INTEGER NOT NULL,
    attempts    INTEGER NOT NULL,
    failed_attempts INTEGER NOT NULL,
    worker_id   TEXT,
    signature   INTEGER REFERENCES signatures (id),
    edited      INTEGER NOT NULL DEFAULT 0, first_duration_ms INTEGER, first_timeout_ms INTEGER, first_position INTEGER,
    PRIMARY KEY (test, ts, run)
) WITHOUT ROWID;
CREATE INDEX test_runs_run ON test_runs (run);
CREATE TABLE attempt_journal (
    id          INTEGER PRIMARY KEY,    -- arrival order of the batches
    run         INTEGER NOT NULL,       -- runs.id
    attempts    TEXT NOT NULL           -- JSON: an array of journal rows (JournalRow in
                                        --   flaketui.core.history.journal), in arrival order
);
CREATE TABLE "audit_log" (
    id          INTEGER PRIMARY KEY,
    ts          TEXT NOT NULL,
    who         TEXT NOT NULL,
    action      TEXT NOT NULL,
    test_id     TEXT NOT NULL,
    mode        TEXT,
    reason      TEXT,
    ticket      TEXT,
    scores      TEXT,
    source      TEXT NOT NULL DEFAULT 'cli',
    written_at  TEXT NOT NULL               -- ISO 8601 UTC, when the row was written
);
CREATE INDEX audit_log_test ON audit_log (test_id, ts);
CREATE INDEX audit_log_written ON audit_log (written_at);
CREATE INDEX test_runs_failed ON test_runs (ts, signature, bad) WHERE bad = 1;
CREATE TABLE test_runs_waiting (
    test        INTEGER NOT NULL REFERENCES tests (id),
    run         INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    ts          TEXT NOT NULL,
    outcome     TEXT NOT NULL CHECK (outcome IN ('pass', 'fail', 'flaky', 'skipped')),
    bad         INTEGER NOT NULL,
    attempts    INTEGER NOT NULL,
    failed_attempts INTEGER NOT NULL,
    worker_id   TEXT,
    signature   INTEGER REFERENCES signatures (id),
    edited      INTEGER NOT NULL DEFAULT 0,
    first_duration_ms INTEGER,
    first_timeout_ms INTEGER,
    first_position INTEGER,
    PRIMARY KEY (run, test)
) WITHOUT ROWID;
PRAGMA user_version = 11;
