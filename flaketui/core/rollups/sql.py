"""SQL of the sequence rollups: per-day sequence facts, mixed commits, signature counts.

Day rows hold, per key (a test, or a family pooled by run) and UTC day, the counted runs of
that day reduced to what a time-ordered analysis needs when days are chained: counts, the
first and last bad state, flips inside the day, the clean runs after the day's last failure,
the same on the default branch alone (bad stretches started, recoveries, the trailing bad
run count), and the recency sums relative to the day's start (as in test_day_rollups).
Chaining ordered day rows (flaketui.core.rollups.read.sequences) gives exactly what
`flaketui.core.rollups.evidence.ANALYSIS` computes over the raw rows.

Every statement reads the counted runs (not skipped, not edited, no incident, no diagnose
experiment);
the window (time range) is the caller's `{where}`.
"""

from __future__ import annotations

# Counted raw units, one per (key, run). {source} joins test_runs tr and runs r (and tests t).
COUNTED = (
    "r.incident IS NULL AND r.source <> 'diagnose' AND tr.outcome <> 'skipped' AND tr.edited = 0"
)
TEST_UNITS = f"""
SELECT tr.test AS key, tr.run AS run, tr.ts AS ts, tr.bad AS bad,
    tr.outcome = 'flaky' AS flaky, tr.outcome <> 'pass' AS failed_any,
    r.branch_kind = 'main' AS is_main, r.commit_sha AS commit_sha
FROM {{source}}
WHERE {COUNTED} AND {{where}}"""

# A family's unit is a run in which any member ran (flaketui.core.rollups.evidence's pooling rule).
FAMILY_UNITS = f"""
SELECT t.parent AS key, tr.run AS run, min(tr.ts) AS ts, max(tr.bad) AS bad,
    max(tr.outcome = 'flaky') AS flaky, max(tr.outcome <> 'pass') AS failed_any,
    min(r.branch_kind = 'main') AS is_main, min(r.commit_sha) AS commit_sha
FROM {{source}}
WHERE {COUNTED} AND {{where}}
GROUP BY t.parent, tr.run"""

TEST_SOURCE = "test_runs tr JOIN runs r ON r.id = tr.run"
FAMILY_SOURCE = "test_runs tr JOIN runs r ON r.id = tr.run JOIN tests t ON t.id = tr.test"

SEQ_COLUMNS = (
    "runs, main_runs, flaky_runs, failed_runs, failed_any_runs, main_bad, first_bad, last_bad,"
    " flips_in, tail_clean, main_first_bad, main_last_bad, main_starts_in, main_recov_in,"
    " main_trail_bad, main_trail_flaky, main_w, main_w_bad, other_w, other_w_bad"
)
LIST_COLUMNS = "run_list, bad_list, flaky_list, fail_list"


def seq_schema(table: str, key: str, key_type: str, lists: bool) -> str:
    """CREATE TABLE of a day-row table keyed (key, day)."""
    extra = "".join(f"    {name} TEXT,\n" for name in LIST_COLUMNS.split(", ")) if lists else ""
    return f"""
CREATE TABLE IF NOT EXISTS {table} (
    {key}            {key_type} NOT NULL,
    day              TEXT NOT NULL,     -- 'YYYY-MM-DD' (UTC)
    runs             INTEGER NOT NULL,  -- counted units (runs) of the day
    main_runs        INTEGER NOT NULL,
    flaky_runs       INTEGER NOT NULL,
    failed_runs      INTEGER NOT NULL,  -- bad: first attempt failed
    failed_any_runs  INTEGER NOT NULL,  -- outcome other than pass
    main_bad         INTEGER NOT NULL,
    first_bad        INTEGER NOT NULL,  -- bad state of the day's first and last unit
    last_bad         INTEGER NOT NULL,
    flips_in         INTEGER NOT NULL,  -- good/bad changes between the day's units
    tail_clean       INTEGER NOT NULL,  -- units after the day's last failed one (all if none)
    main_first_bad   INTEGER,           -- the same on the default branch (NULL: no main unit)
    main_last_bad    INTEGER,
    main_starts_in   INTEGER NOT NULL,  -- main bad units after a good main unit of the day
    main_recov_in    INTEGER NOT NULL,  -- main good units after a bad main unit of the day
    main_trail_bad   INTEGER NOT NULL,  -- main units after the day's last good main unit
    main_trail_flaky INTEGER NOT NULL,  -- ... of which flaky
    main_w           REAL NOT NULL,     -- sum of 2^((ts - day)/h) over main units
    main_w_bad       REAL NOT NULL,     -- ... over main units that failed in any attempt
    other_w          REAL NOT NULL,
    other_w_bad      REAL NOT NULL,
{extra}    PRIMARY KEY ({key}, day)
) WITHOUT ROWID"""


_LISTS_SELECT = """,
    group_concat(run) AS run_list, group_concat(CASE WHEN bad THEN run END) AS bad_list,
    group_concat(CASE WHEN flaky THEN run END) AS flaky_list,
    group_concat(CASE WHEN failed_any THEN run END) AS fail_list"""


def day_rows(units: str, lists: bool) -> str:
    """`WITH u AS (units), ... SELECT key, day, <SEQ_COLUMNS>[, lists]` grouped by key and day."""
    return f"""
WITH u AS ({units}),
w AS (
    SELECT key, substr(ts, 1, 10) AS day, run, ts, bad, flaky, failed_any, is_main,
        row_number() OVER k AS rn, count(*) OVER kd AS cnt, lag(bad) OVER k AS prev_bad,
        sum(failed_any) OVER k_after AS fails_after,
        sum(is_main AND NOT bad) OVER k_after AS main_goods_after,
        row_number() OVER km AS mrn, count(*) OVER kmd AS mcnt, lag(bad) OVER km AS mprev,
        exp(:ln2_per_h * (julianday(ts) - julianday(substr(ts, 1, 10)))) AS wt
    FROM u
    WINDOW kd AS (PARTITION BY key, substr(ts, 1, 10)),
        k AS (kd ORDER BY ts, run),
        k_after AS (k ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING),
        kmd AS (PARTITION BY key, substr(ts, 1, 10), is_main),
        km AS (kmd ORDER BY ts, run)
)
SELECT key, day, count(*) AS runs, sum(is_main) AS main_runs, sum(flaky) AS flaky_runs,
    sum(bad) AS failed_runs, sum(failed_any) AS failed_any_runs,
    sum(is_main AND bad) AS main_bad,
    max(CASE WHEN rn = 1 THEN bad END) AS first_bad,
    max(CASE WHEN rn = cnt THEN bad END) AS last_bad,
    sum(prev_bad IS NOT NULL AND prev_bad <> bad) AS flips_in,
    sum(fails_after = 0) AS tail_clean,
    max(CASE WHEN is_main AND mrn = 1 THEN bad END) AS main_first_bad,
    max(CASE WHEN is_main AND mrn = mcnt THEN bad END) AS main_last_bad,
    sum(is_main AND bad AND mprev IS 0) AS main_starts_in,
    sum(is_main AND NOT bad AND mprev IS 1) AS main_recov_in,
    sum(is_main AND main_goods_after = 0) AS main_trail_bad,
    sum(is_main AND main_goods_after = 0 AND flaky) AS main_trail_flaky,
    total(CASE WHEN is_main THEN wt END) AS main_w,
    total(CASE WHEN is_main AND failed_any THEN wt END) AS main_w_bad,
    total(CASE WHEN NOT is_main THEN wt END) AS other_w,
    total(CASE WHEN NOT is_main AND failed_any THEN wt END) AS other_w_bad{
        _LISTS_SELECT if lists else ""
    }
FROM w GROUP BY key, day"""


# Mixed commits: (key, commit) pairs with both a good and a bad counted unit over the whole
# history, with the time span of their units; a pair wholly inside a window is mixed there.
def mixed_rows(units: str) -> str:
    """key, commit_sha, first_ts, last_ts of the mixed pairs among `units` (+ commit_sha)."""
    return f"""
SELECT key, commit_sha, min(ts) AS first_ts, max(ts) AS last_ts
FROM ({units})
WHERE commit_sha IS NOT NULL
GROUP BY key, commit_sha HAVING min(bad) = 0 AND max(bad) = 1"""


def mixed_schema(table: str, key: str, key_type: str) -> str:
    """CREATE TABLE of a mixed-commit table."""
    return f"""
CREATE TABLE IF NOT EXISTS {table} (
    {key}       {key_type} NOT NULL,
    commit_sha  TEXT NOT NULL,
    first_ts    TEXT NOT NULL,  -- first and last counted unit of the pair
    last_ts     TEXT NOT NULL,
    PRIMARY KEY ({key}, commit_sha)
) WITHOUT ROWID"""


SIGNATURE_SCHEMA = """
CREATE TABLE IF NOT EXISTS test_day_signatures (
    test       INTEGER NOT NULL,
    day        TEXT NOT NULL,
    signature  INTEGER NOT NULL,   -- first failure's signature of the counted test-runs
    runs       INTEGER NOT NULL,
    last_ts    TEXT NOT NULL,
    PRIMARY KEY (test, day, signature)
) WITHOUT ROWID"""

SIGNATURE_ROWS = f"""
SELECT tr.test AS test, substr(tr.ts, 1, 10) AS day, tr.signature AS signature,
    count(*) AS runs, max(tr.ts) AS last_ts
FROM {{source}}
WHERE {COUNTED} AND tr.signature IS NOT NULL AND {{where}}
GROUP BY tr.test, substr(tr.ts, 1, 10), tr.signature"""
