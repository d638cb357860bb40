"""The shared history on PostgreSQL against a real server: addresses, writes, sync, reports."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from flaketui.cli import cli
from flaketui.core.config import load_config
from flaketui.core.history.address import is_server_url, mask_url, scrub
from tests.connections import connected, open_connection, sqlite_connect
from tests.core.junit_shards import file_shard
from tests.pgcluster import Cluster

REPORTS = Path(__file__).resolve().parents[2] / "sample_data" / "reports"
NOW = "2026-11-30T18:00:00Z"
# (report, run id, timestamp): two of them shards of one run, one a second file of a run
PLAN = [
    ("main-unit.xml", "r-main", "2026-11-20T10:00:00Z"),
    ("nightly-16-workers-shard1.xml", "r-nightly", "2026-11-21T02:00:00Z"),
    ("nightly-16-workers-shard2.xml", "r-nightly", "2026-11-21T02:00:00Z"),
    ("outage-unit.xml", "r-outage", "2026-11-22T10:00:00Z"),
    ("pr-unit-retries.xml", "r-pr", "2026-11-23T10:00:00Z"),
    ("pr-unit-retries.xml", "r-main", "2026-11-20T10:00:00Z"),
]


def invoke(*args: object) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def fail(*args: object) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    return result.output


def ingest_plan(target: object) -> None:
    for report, run_id, ts in PLAN:
        invoke(
            "ingest",
            target,
            REPORTS / report,
            "--run-id",
            run_id,
            "--timestamp",
            ts,
            "--no-detect",
            "--branch",
            "main",
        )


def report(history: Path) -> object:
    return json.loads(invoke("report", history, "--now", NOW, "--format", "json"))


def server_count(url: str, sql: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        return int(conn.execute(sql).fetchone()[0])


# ---- addresses and credentials ----------------------------------------------------------------


def test_addresses() -> None:
    assert is_server_url("postgresql://h/db") and is_server_url("postgres://h/db")
    assert not is_server_url("history.db") and not is_server_url(Path("postgresql:/h"))
    assert mask_url("postgresql://u:s3cr%40t@h:5/db") == "postgresql://u:****@h:5/db"
    assert mask_url("postgresql://h/db?user=u&password=zz&x=1") == (
        "postgresql://h/db?user=u&password=****&x=1"
    )
    assert mask_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert scrub("auth s3cr@t failed", "postgresql://u:s3cr%40t@h/db") == "auth **** failed"


def test_wrong_password_is_one_line_and_masked(pg_cluster: Cluster, tmp_path: Path) -> None:
    url = pg_cluster.url().replace(pg_cluster.password, "not-the-password-42")
    output = fail("ingest", url, REPORTS / "main-unit.xml", "--no-detect")
    assert "not-the-password-42" not in output
    assert "****" in output and "password authentication failed" in output


def test_unreachable_server_is_one_line(tmp_path: Path) -> None:
    output = fail("sync", "postgresql://u:hush-hush@127.0.0.1:1/db", tmp_path / "r.db")
    assert "hush-hush" not in output and "connecting failed" in output


def test_credentials_from_libpq_environment_and_pgpass(
    pg_cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = pg_cluster.create_database()
    bare = url.replace(f":{pg_cluster.password}@", "@")
    monkeypatch.setenv("PGPASSWORD", pg_cluster.password)
    invoke("ingest", bare, REPORTS / "main-unit.xml", "--no-detect", "--run-id", "a")
    monkeypatch.delenv("PGPASSWORD")
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"127.0.0.1:{pg_cluster.port}:*:flaketui:{pg_cluster.password}\n")
    pgpass.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(pgpass))
    out = invoke("sync", bare, tmp_path / "replica.db")
    assert "1 run" in out
    # The password is stored nowhere in the replica.
    assert pg_cluster.password.encode() not in (tmp_path / "replica.db").read_bytes()


def test_without_the_extra_a_one_line_error_names_it(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from flaketui.cli import main\n"
        "sys.argv = ['flaketui', 'sync', 'postgresql://u:pw@127.0.0.1:1/db', "
        f"{str(tmp_path / 'r.db')!r}]\n"
        "main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "Error: a postgresql:// history needs psycopg 3: install the PostgreSQL extra: "
        "pip install 'flaketui[postgres]'"
    ]


# ---- writes, idempotency, sync, reports ----------------------------------------------------------


def test_replica_report_equals_direct_ingest(pg_url: str, tmp_path: Path) -> None:
    direct = tmp_path / "direct.db"
    ingest_plan(direct)
    ingest_plan(pg_url)
    ingest_plan(pg_url)  # idempotent by run id and report file
    replica = tmp_path / "replica.db"
    invoke("sync", pg_url, replica)
    assert report(replica) == report(direct)
    raw = (
        "SELECT r.run_id, t.test_id, x.attempt, x.outcome, x.message FROM results x"
        " JOIN runs r ON r.id = x.run JOIN tests t ON t.id = x.test ORDER BY 1, 2, 3"
    )
    assert sqlite_connect(replica).execute(raw).fetchall() == (
        sqlite_connect(direct).execute(raw).fetchall()
    )
    out = invoke("sync", pg_url, replica)
    assert "0 runs and 0 results added" in out


PROPERTIES_REPORT = """<testsuite name="s" timestamp="2026-11-29T08:00:00">
<properties><property name="os" value="Windows"/><property name="python_version" value="3.13.1"/>
<property name="platform" value="win-amd64"/><property name="random_seed" value="4242"/>
</properties>
<testcase classname="tests.test_win" name="test_path"><failure message="boom"/></testcase>
<testcase classname="tests.test_win" name="test_drive"/></testsuite>
"""
# Every run and attempt column as a history file holds it, ids replaced by natural keys.
RUN_ROWS = (
    "SELECT run_id, suite, branch, branch_kind, commit_sha, ts, worker_count, runner_host,"
    " ci_url, incident, source, finished, os, python, platform, order_seed FROM runs ORDER BY 1"
)
RESULT_ROWS = (
    "SELECT r.run_id, t.test_id, x.attempt, x.outcome, x.worker_id, x.duration_ms, x.message,"
    " g.hash, p.test_id, x.position, x.timeout_ms FROM results x JOIN runs r ON r.id = x.run"
    " JOIN tests t ON t.id = x.test LEFT JOIN signatures g ON g.id = x.signature"
    " LEFT JOIN tests p ON p.id = x.predecessor ORDER BY 1, 2, 3"
)


def test_replica_keeps_the_cause_columns_and_reports_the_same_causes(
    pg_url: str, tmp_path: Path
) -> None:
    from dataclasses import replace

    from flaketui.core.history.pg.connect import connect
    from flaketui.core.history.pg.push import push_history
    from flaketui.core.history.pg.staging import staging_history
    from flaketui.core.history.pg.sync import sync_replica
    from flaketui.core.ingest.writer import RunRecorder
    from tests.connections import open_history
    from tests.core.cause_history import HOST_TEST, ORDER_TEST, TIMING_TEST, generate

    direct = tmp_path / "direct.db"
    db = open_history(direct)
    pg = connect(pg_url)
    try:
        # Each run recorded as the plugin records it: into the file, and into a staging
        # history pushed to the server (what `pytest --flaketui-db URL` does).
        for number, (meta, cases) in enumerate(generate(seed=11, runs=160)):
            meta = replace(meta, platform="linux-x86_64" if number % 3 else None)
            for target in (db, None):
                if target is not None:
                    recorder = RunRecorder(target, replace(meta))
                    recorder.add(cases)
                    recorder.finish()
                    continue
                with staging_history() as staged:
                    recorder = RunRecorder(staged, replace(meta))
                    recorder.add(cases)
                    recorder.finish()
                    push_history(pg, staged, append=True)
    finally:
        pg.close()
        db.conn.close()
    # A report stating its environment, ingested both ways.
    junit = tmp_path / "windows.xml"
    junit.write_text(PROPERTIES_REPORT)
    for target in (direct, pg_url):
        invoke("ingest", target, junit, "--run-id", "r-win", "--no-detect")
    replica = tmp_path / "replica.db"
    invoke("sync", pg_url, replica)
    # A second replica in small batches: a predecessor often lands in a later batch.
    small = open_history(tmp_path / "small.db")
    pg = connect(pg_url)
    try:
        assert sync_replica(pg, small.conn, batch_rows=997).batches > 5
    finally:
        pg.close()
        small.conn.close()
    raw = sqlite_connect(direct)
    runs, results = raw.execute(RUN_ROWS).fetchall(), raw.execute(RESULT_ROWS).fetchall()
    assert ("r-win", "Windows", "3.13.1", "win-amd64", "4242") in [
        (row[0], *row[12:]) for row in runs
    ]
    assert sum(row[8] is not None for row in results) > len(results) // 2
    assert {row[10] for row in results} == {None, 30_000}
    assert sqlite_connect(replica).execute(RUN_ROWS).fetchall() == runs
    # The small replica is synced without `sync`'s outage proposals, which tag runs.
    untagged = [(*row[:9], *row[10:]) for row in runs]
    got = sqlite_connect(tmp_path / "small.db").execute(RUN_ROWS).fetchall()
    assert [(*row[:9], *row[10:]) for row in got] == untagged
    for copy in (replica, tmp_path / "small.db"):
        assert sqlite_connect(copy).execute(RESULT_ROWS).fetchall() == results
    now = ("--now", "2026-11-30T00:00:00Z")
    expected = json.loads(invoke("report", direct, "--format", "json", *now))
    assert json.loads(invoke("report", replica, "--format", "json", *now)) == expected
    assert any(test["causes"] for test in expected["tests"])
    for test in (HOST_TEST, ORDER_TEST, TIMING_TEST):
        pivot = ("pivot", test, "--by", "all", "--format", "json", *now)
        wanted = json.loads(invoke(pivot[0], direct, *pivot[1:]))
        assert wanted["causes"], test
        assert json.loads(invoke(pivot[0], replica, *pivot[1:])) == wanted


def test_a_version_1_server_upgrades_and_its_replicas_follow(pg_url: str, tmp_path: Path) -> None:
    from flaketui.core.history.pg import schema
    from flaketui.core.history.pg.connect import connect
    from flaketui.core.history.pg.push import push_history
    from flaketui.core.history.pg.sync import sync_replica
    from tests.connections import open_history

    # A server as the first release of the schema left it, with a run in it.
    old = connect(pg_url, migrate=False)
    try:
        with old.transaction():
            old.execute(schema.MIGRATIONS[0])
            old.execute("INSERT INTO flaketui_meta (key, value) VALUES ('schema_version', '1')")
        staged = tmp_path / "old-run.db"
        invoke("ingest", staged, REPORTS / "main-unit.xml", "--run-id", "r-old", "--no-detect")
        push_history(old, open_history(staged, create=False).conn, append=True)
        replica = open_history(tmp_path / "replica.db")
        sync_replica(old, replica.conn)  # a replica of the old server
        replica.conn.close()
    finally:
        old.close()
    assert "os" not in server_columns(pg_url, "runs")
    # The next writer upgrades the server; the replica follows at its next sync.
    junit = tmp_path / "windows.xml"
    junit.write_text(PROPERTIES_REPORT)
    invoke("ingest", pg_url, junit, "--run-id", "r-new", "--no-detect")
    assert server_count(
        pg_url, "SELECT value::int FROM flaketui_meta WHERE key = 'schema_version'"
    ) == len(schema.MIGRATIONS)
    assert {"predecessor", "position", "timeout_ms"} <= set(server_columns(pg_url, "results"))
    assert "1 run" in invoke("sync", pg_url, tmp_path / "replica.db")
    got = sqlite_connect(tmp_path / "replica.db").execute(
        "SELECT run_id, os, python, platform, order_seed FROM runs ORDER BY 1"
    )
    assert got.fetchall() == [
        ("r-new", "Windows", "3.13.1", "win-amd64", "4242"),
        ("r-old", None, None, None, None),
    ]


def server_columns(url: str, table: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s", (table,)
        ).fetchall()
    return [str(row[0]) for row in rows]


def test_incremental_sync_pulls_only_new_rows(pg_url: str, tmp_path: Path) -> None:
    replica, direct = tmp_path / "replica.db", tmp_path / "direct.db"
    for index, (report_name, run_id, ts) in enumerate(PLAN):
        for target in (pg_url, direct):
            invoke(
                "ingest",
                target,
                REPORTS / report_name,
                "--run-id",
                run_id,
                "--timestamp",
                ts,
                "--no-detect",
            )
        if index % 2:
            invoke("sync", pg_url, replica)
    out = invoke("sync", pg_url, replica)
    assert report(replica) == report(direct)
    assert "0 results added" in invoke("sync", pg_url, replica)
    assert out


def test_an_incremental_sync_folds_its_runs_once_at_the_end(pg_url: str, tmp_path: Path) -> None:
    """Each batch of a sync into a replica that holds runs lists the runs it touched as waiting
    (readers meanwhile score the raw rows); the sync's last transaction folds them all."""
    from flaketui.core.history.pg.connect import connect
    from flaketui.core.history.pg.sync import sync_replica
    from flaketui.core.rollups import pending as rollups_pending
    from tests.connections import open_history
    from tests.core.test_rollup_scoring import assert_maintained

    replica, direct = tmp_path / "replica.db", tmp_path / "direct.db"
    for index, (report_name, run_id, ts) in enumerate(PLAN):
        for target in (pg_url, direct):
            invoke("ingest", target, REPORTS / report_name, "--run-id", run_id,
                   "--timestamp", ts, "--no-detect")  # fmt: skip
        if index == 0:
            invoke("sync", pg_url, replica)  # the replica holds a run: later syncs add to it
    db = open_history(replica)
    waiting: list[int] = []
    pg = connect(pg_url)
    try:
        summary = sync_replica(
            pg,
            db.conn,
            batch_rows=7,
            progress=lambda done, total: waiting.append(rollups_pending.pending_runs(db.conn)),
        )
    finally:
        pg.close()
    assert summary.batches > 3
    assert max(waiting) >= 2  # batches of several runs waited together
    assert not rollups_pending.pending(db.conn)
    assert_maintained(db)
    db.conn.close()
    assert report(replica) == report(direct)


def test_a_sync_stopped_midway_leaves_its_runs_interrupted_until_the_next(
    pg_url: str, tmp_path: Path
) -> None:
    """The runs a stopped sync was copying into a replica that holds runs are read as
    interrupted ones (counted only for the tests they hold), not as whole runs; the next sync
    completes them and gives them the server's state."""
    from flaketui.core.history.pg.connect import connect
    from flaketui.core.history.pg.sync import REPLICA_HOLDING, sync_replica
    from tests.connections import open_history

    replica, direct = tmp_path / "replica.db", tmp_path / "direct.db"
    for index, (report_name, run_id, ts) in enumerate(PLAN):
        for target in (pg_url, direct):
            invoke("ingest", target, REPORTS / report_name, "--run-id", run_id,
                   "--timestamp", ts, "--no-detect", "--branch", "main")  # fmt: skip
        if index == 0:
            invoke("sync", pg_url, replica)
    whole = report(replica)
    assert isinstance(whole, dict) and whole["interrupted_runs"] == 0

    class Stop(Exception):
        pass

    def stop_after_two_batches(done: int, total: int) -> None:
        if done >= 2 * 50:
            raise Stop

    db = open_history(replica)
    pg = connect(pg_url)
    try:
        with pytest.raises(Stop):
            sync_replica(pg, db.conn, batch_rows=50, progress=stop_after_two_batches)
    finally:
        pg.close()
        db.conn.close()
    conn = sqlite_connect(replica)
    held = json.loads(
        conn.execute("SELECT value FROM meta WHERE key = ?", (REPLICA_HOLDING,)).fetchone()[0]
    )
    states = dict(conn.execute("SELECT run_id, finished FROM runs").fetchall())
    conn.close()
    assert held and all(states[run_id] == 0 for run_id in held)
    assert states["r-main"] == 1 or "r-main" in held  # its second file may be among them
    partial = report(replica)
    assert isinstance(partial, dict) and partial["interrupted_runs"] == len(held)
    invoke("sync", pg_url, replica)
    conn = sqlite_connect(replica)
    assert (
        conn.execute("SELECT value FROM meta WHERE key = ?", (REPLICA_HOLDING,)).fetchone() is None
    )
    assert {finished for _, finished in conn.execute("SELECT run_id, finished FROM runs")} == {1}
    conn.close()
    assert report(replica) == report(direct)


def test_a_sync_whose_connection_is_lost_midway_says_the_next_completes_it(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    from flaketui.cli.commands import sync as sync_command
    from flaketui.core.history.pg import sync

    replica = tmp_path / "replica.db"
    invoke("ingest", pg_url, REPORTS / PLAN[0][0], "--run-id", "r-main", "--timestamp",
           PLAN[0][2], "--no-detect")  # fmt: skip
    invoke("sync", pg_url, replica)
    for report_name, run_id, ts in PLAN[1:]:
        invoke("ingest", pg_url, REPORTS / report_name, "--run-id", run_id, "--timestamp", ts,
               "--no-detect")  # fmt: skip
    monkeypatch.setattr(
        sync_command, "sync_replica", functools.partial(sync.sync_replica, batch_rows=50)
    )
    landed = sync._Puller.apply

    def apply_then_lose_the_server(puller: Any, rows: list[tuple[Any, ...]]) -> list[int]:
        cursor = landed(puller, rows)
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = 'flaketui' AND pid <> pg_backend_pid()"
            )
        return cursor

    monkeypatch.setattr(sync._Puller, "apply", apply_then_lose_the_server)
    line = fail("sync", pg_url, replica)
    assert "(the replica keeps what landed; the next sync completes it; retry)" in line, line
    partial = report(replica)
    assert isinstance(partial, dict) and partial["interrupted_runs"] >= 1
    monkeypatch.undo()
    invoke("sync", pg_url, replica)
    whole = report(replica)
    assert isinstance(whole, dict) and whole["interrupted_runs"] == 0


def test_a_sync_batch_reads_only_its_own_rows_from_the_server(pg_url: str, tmp_path: Path) -> None:
    """Each batch is read by the index on (change, run, test, attempt), limited, and joined to
    its names after: reading past a cursor, the server touches the batch's rows, not every row
    still to come (it joined and sorted all of them, for every batch, when the join came
    first: 201 s for 1 M results)."""
    import psycopg

    from flaketui.core.history.pg.connect import connect
    from flaketui.core.history.pg.sync import sync_replica
    from tests.connections import open_history

    connect(pg_url).close()  # the schema
    with psycopg.connect(pg_url, autocommit=True) as server:
        server.execute(
            "INSERT INTO tests (test_id, parent, test_file, first_seen) SELECT 'm.py::t' || n,"
            " 'm.py::t' || n, 'm.py', '2026-11-01T00:00:00Z' FROM generate_series(1, 500) AS n"
        )
        server.execute(
            "INSERT INTO runs (run_id, suite, branch, branch_kind, ts, source)"
            " SELECT 'r' || n, 'ci', 'main', 'main', '2026-11-0' || (1 + n % 9) || 'T10:00:00Z',"
            " 'junit' FROM generate_series(1, 60) AS n"
        )
        server.execute(
            "INSERT INTO results (run, test, attempt, outcome) SELECT r.id, t.id, 1, 'pass'"
            " FROM runs AS r CROSS JOIN tests AS t"
        )
        server.execute("ANALYZE")
    scanned: list[int] = []
    pg = connect(pg_url)

    class Explained:
        """The server connection, each batch's query also run under EXPLAIN ANALYZE."""

        def __getattr__(self, name: str) -> Any:
            return getattr(pg, name)

        def execute(self, sql: str, params: Any = None) -> Any:
            if sql.startswith("SELECT x.change::text"):
                plan = pg.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).fetchone()[0]
                scanned.append(_rows_read(plan[0]["Plan"], "results"))
            return pg.execute(sql, params)

    db = open_history(tmp_path / "replica.db")
    try:
        summary = sync_replica(Explained(), db.conn, batch_rows=1_000)
    finally:
        pg.close()
        db.conn.close()
    assert summary.results_added == 30_000
    assert len(scanned) == 31  # the last one finds nothing
    assert max(scanned) <= 1_001, scanned


def _rows_read(node: dict[str, Any], table: str) -> int:
    """The rows a JSON plan's scans of `table` returned, over all their loops."""
    own = 0
    if node.get("Relation Name") == table:
        own = int(node["Actual Rows"]) * int(node.get("Actual Loops", 1))
    return own + sum(_rows_read(child, table) for child in node.get("Plans", []))


def test_merge_both_directions(pg_url: str, tmp_path: Path) -> None:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    invoke("ingest", a, REPORTS / "main-unit.xml", "--run-id", "ra", "--no-detect")
    invoke("ingest", b, REPORTS / "outage-unit.xml", "--run-id", "rb", "--no-detect")
    out = invoke("merge", pg_url, a, b)
    assert "2 runs added" in out
    assert "0 runs added" in invoke("merge", pg_url, a, b)
    back = tmp_path / "back.db"
    invoke("merge", back, pg_url)
    both = tmp_path / "both.db"
    invoke("merge", both, a, b)
    assert report(back) == report(both)


def test_open_syncs_a_replica_into_the_cache_dir(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flaketui.cli.commands.sync import replica_path

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    invoke("ingest", pg_url, REPORTS / "main-unit.xml", "--run-id", "r", "--no-detect")
    path = replica_path(pg_url)
    assert path.parent == tmp_path / "cache" / "flaketui" / "replicas"
    assert replica_path(pg_url) == replica_path(mask_url(pg_url).replace("****", "other"))
    import click

    from flaketui.cli.commands.open import prepare_history
    from flaketui.core.quarantine.actions import quarantine
    from flaketui.core.timeutil import parse_iso
    from tests.connections import open_history

    with click.Context(cli):
        assert prepare_history(pg_url) == path
        assert sqlite_connect(path).execute("SELECT count(*) FROM runs").fetchone()[0] == 1
        # The app quarantines a test on the replica...
        replica = open_history(path, create=False)
        (test_id,) = replica.conn.execute("SELECT test_id FROM tests LIMIT 1").fetchone()
        quarantine(replica, tmp_path / "skip.json", test_id, reason="flaky",
                   now=parse_iso(NOW), config=load_config(tmp_path), source="app")  # fmt: skip
        replica.conn.close()
    # ...and its audit row reaches the server when the command ends.
    assert server_count(pg_url, "SELECT count(*) FROM audit_log WHERE source = 'app'") == 1


def test_a_late_commit_with_an_early_change_id_is_never_skipped(
    pg_url: str, tmp_path: Path
) -> None:
    from flaketui.core.history.pg.connect import connect
    from flaketui.core.history.pg.push import push_history
    from flaketui.core.history.pg.staging import staging_history
    from flaketui.core.ingest.writer import ingest_reports
    from flaketui.core.models import RunMeta
    from flaketui.core.timeutil import parse_iso

    # Other tests than "early"'s, so that "late" never waits on its uncommitted rows.
    other = tmp_path / "other.xml"
    other.write_text(
        '<testsuite name="s"><testcase classname="other.Mod" name="test_x"/></testsuite>'
    )
    invoke("ingest", pg_url, other, "--run-id", "first", "--no-detect")
    early = connect(pg_url)
    try:
        with staging_history() as staged:
            meta = RunMeta(run_id="early", ts=parse_iso("2026-11-20T10:00:00Z"))
            ingest_reports(staged, [REPORTS / "main-unit.xml"], meta)
            tx = early.transaction()
            tx.__enter__()
            early.execute("SELECT pg_current_xact_id()")  # its change id is taken first
            push_history(early, staged, append=True)
        invoke("ingest", pg_url, other, "--run-id", "late", "--no-detect")
        replica = tmp_path / "replica.db"
        invoke("sync", pg_url, replica)
        # "late" committed, but an older transaction is open: the watermark waits for it.
        got = sqlite_connect(replica).execute("SELECT run_id FROM runs").fetchall()
        assert got == [("first",)]
        tx.__exit__(None, None, None)
    finally:
        early.close()
    invoke("sync", pg_url, replica)
    runs = sqlite_connect(replica).execute("SELECT run_id FROM runs ORDER BY 1").fetchall()
    assert runs == [("early",), ("first",), ("late",)]


def test_a_newer_server_schema_is_refused_in_one_line(pg_url: str, tmp_path: Path) -> None:
    invoke("ingest", pg_url, REPORTS / "main-unit.xml", "--run-id", "r", "--no-detect")
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE flaketui_meta SET value = '99' WHERE key = 'schema_version'")
    output = fail("sync", pg_url, tmp_path / "replica.db")
    assert "schema version 99 is newer" in output and "upgrade flaketui" in output
    assert not (tmp_path / "replica.db").exists()


DECIDED, WRITTEN = "2026-11-25T23:59:59Z", "2026-11-30T17:00:00Z"


def test_audit_rows_keep_when_they_were_written_both_ways(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decision dated days before it was written (the lifecycle's --apply) keeps both moments
    through a push, a sync and a merge back; check on the server lists it as written then."""
    from flaketui.core.history.store import transaction
    from tests.connections import open_history

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    local = tmp_path / "local.db"
    invoke("ingest", local, REPORTS / "main-unit.xml", "--run-id", "r", "--no-detect")
    db = open_history(local)
    with transaction(db.conn):
        db.conn.execute(
            "INSERT INTO audit_log (ts, who, action, test_id, reason, source, written_at)"
            " VALUES (?, 'me', 'quarantine', 'tests/test_a.py::test_a', 'flaky', 'lifecycle', ?)",
            (DECIDED, WRITTEN),
        )
    db.conn.close()
    invoke("merge", pg_url, local)
    import psycopg

    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT ts, written_at FROM audit_log").fetchall() == [
            (DECIDED, WRITTEN)
        ]
    back = tmp_path / "back.db"
    invoke("merge", back, pg_url)
    assert sqlite_connect(back).execute("SELECT ts, written_at FROM audit_log").fetchall() == [
        (DECIDED, WRITTEN)
    ]
    summary = tmp_path / "summary.md"
    check = ("check", pg_url, "--now", NOW, "--since", "1d", "--fail-on", "")
    invoke(*check, "--summary-file", summary)
    assert "- Added (1):\n" in summary.read_text()
    assert f"on {DECIDED}: flaky" in summary.read_text()


def test_a_version_2_server_gives_its_audit_rows_written_at_their_date(
    pg_url: str, tmp_path: Path
) -> None:
    from flaketui.core.history.pg import schema
    from flaketui.core.history.pg.connect import connect
    from flaketui.core.history.pg.sync import sync_replica
    from tests.connections import open_history

    old = connect(pg_url, migrate=False)
    try:
        with old.transaction():
            old.execute(schema.MIGRATIONS[0])
            old.execute(schema.MIGRATIONS[1])
            old.execute("INSERT INTO flaketui_meta (key, value) VALUES ('schema_version', '2')")
            old.execute(
                "INSERT INTO audit_log (ts, who, action, test_id)"
                " VALUES (%s, 'me', 'release', 't')",
                (DECIDED,),
            )
        replica = open_history(tmp_path / "replica.db")
        sync_replica(old, replica.conn)  # a replica of the old server
        assert replica.conn.execute("SELECT ts, written_at FROM audit_log").fetchall() == [
            (DECIDED, DECIDED)
        ]
        replica.conn.close()
    finally:
        old.close()
    connect(pg_url).close()  # the next connection upgrades the server
    import psycopg

    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT ts, written_at FROM audit_log").fetchall() == [
            (DECIDED, DECIDED)
        ]
        version = "SELECT value FROM flaketui_meta WHERE key = 'schema_version'"
        assert conn.execute(version).fetchone() == (str(len(schema.MIGRATIONS)),)
        with pytest.raises(psycopg.errors.NotNullViolation):
            conn.execute(
                "INSERT INTO audit_log (ts, who, action, test_id) VALUES ('x', 'me', 'a', 't')"
            )


def test_legs_of_one_run_stay_apart_on_the_server(pg_url: str, tmp_path: Path) -> None:
    """Two matrix legs of one run, each ingested into the server on its own: the test ran once
    per leg, so a leg failing outright fails the run on every replica, in either order."""
    failing = tmp_path / "py311.xml"
    failing.write_text(
        '<testsuite name="s"><testcase classname="pkg.Cls" name="test_x">'
        '<failure message="AttributeError on 3.11"/></testcase></testsuite>\n'
    )
    passing = tmp_path / "py312.xml"
    passing.write_text(
        '<testsuite name="s"><testcase classname="pkg.Cls" name="test_x"/></testsuite>\n'
    )
    orders = (("r-fail-first", (failing, passing)), ("r-pass-first", (passing, failing)))
    for run_id, legs in orders:
        for leg in legs:
            invoke("ingest", pg_url, leg, "--run-id", run_id, "--no-detect",
                   "--timestamp", "2026-11-20T10:00:00Z")  # fmt: skip
    assert server_count(pg_url, "SELECT count(DISTINCT leg) FROM results") == 2
    replica = tmp_path / "replica.db"
    invoke("sync", pg_url, replica)
    got = sqlite_connect(replica).execute(
        "SELECT r.run_id, tr.outcome, tr.bad, tr.attempts FROM test_runs tr"
        " JOIN runs r ON r.id = tr.run ORDER BY 1"
    )
    assert got.fetchall() == [("r-fail-first", "fail", 1, 2), ("r-pass-first", "fail", 1, 2)]


def test_a_shard_with_other_metadata_is_refused_by_the_server(pg_url: str, tmp_path: Path) -> None:
    shard1, shard2 = tmp_path / "s1.xml", tmp_path / "s2.xml"
    shard1.write_text('<testsuite name="s"><testcase classname="a" name="t1"/></testsuite>\n')
    shard2.write_text('<testsuite name="s"><testcase classname="a" name="t2"/></testsuite>\n')
    invoke("ingest", pg_url, shard1, "--run-id", "N1", "--suite", "nightly", "--no-detect")
    line = fail("ingest", pg_url, shard2, "--run-id", "N1", "--suite", "unit", "--no-detect")
    assert "run 'N1' is stored with other metadata: suite 'nightly', not 'unit'" in line
    assert server_count(pg_url, "SELECT count(*) FROM results") == 1
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        json.dumps({"run_id": "N1", "file": "s2.xml", "suite": "unit",
                    "timestamp": "2026-11-01T02:00:00Z"}) + "\n"
    )  # fmt: skip
    result = CliRunner().invoke(cli, ["ingest", pg_url, "--manifest", str(manifest)])
    assert result.exit_code == 1
    assert "line 1: run 'N1' is stored with other metadata" in result.output
    assert server_count(pg_url, "SELECT count(*) FROM results") == 1
    invoke("ingest", pg_url, shard2, "--run-id", "N1", "--no-detect")
    assert server_count(pg_url, "SELECT count(*) FROM results") == 2


RUN_TESTS = (
    "SELECT t.test_id, tr.outcome, tr.bad, tr.attempts FROM test_runs tr"
    " JOIN tests t ON t.id = tr.test ORDER BY 1"
)


# The run two shards make: `parser::x` of each file apart, `parser::y` of one file alone.
TWO_SHARDS_TESTS = [
    ("parser::y", "pass", 0, 1),
    ("src/a.test.js::parser::x", "fail", 1, 1),
    ("src/b.test.js::parser::x", "pass", 0, 1),
]


def _two_shards(tmp_path: Path) -> dict[str, Path]:
    """Shard a (x failing, y) and shard b (x passing) of one run, by file."""
    return {
        "a": file_shard(
            tmp_path / "a.xml", ("src/a.test.js", "x", "fail"), ("src/a.test.js", "y", "pass")
        ),
        "b": file_shard(tmp_path / "b.xml", ("src/b.test.js", "x", "pass")),
    }


@pytest.mark.parametrize("first", ["a", "b"])
def test_shards_of_separate_ingests_keep_same_named_tests_apart_on_the_server(
    pg_url: str, tmp_path: Path, first: str
) -> None:
    """Each shard job ingests its report into the server's run on its own, and a replica syncs
    in between: the second shard's same-named case of another file moves the first's attempts
    to their file's id on the server, and the replica drops its copy under the plain id. The
    server, the replica and a history file ingested shard by shard agree, in either order."""
    shards = _two_shards(tmp_path)
    order = [shards[first], shards["b" if first == "a" else "a"]]
    meta = ["--run-id", "gh-77", "--no-detect", "--timestamp", "2026-11-20T10:00:00Z"]
    replica, local = tmp_path / "replica.db", tmp_path / "local.db"
    for shard in order:
        invoke("ingest", pg_url, shard, *meta)
        invoke("ingest", local, shard, *meta)
        invoke("sync", pg_url, replica)
    expected = TWO_SHARDS_TESTS
    assert sqlite_connect(local).execute(RUN_TESTS).fetchall() == expected
    assert sqlite_connect(replica).execute(RUN_TESTS).fetchall() == expected
    assert (
        server_count(
            pg_url,
            "SELECT count(*) FROM results x JOIN tests t ON t.id = x.test"
            " WHERE t.test_id = 'parser::x'",
        )
        == 0
    )
    assert report(replica) == report(local)


class _LostAfterCommit:
    """A server connection lost as soon as its outermost transaction has committed: any
    statement after it fails as a dropped connection does."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.depth = 0
        self.lost = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        import psycopg

        if self.lost:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return self.conn.execute(*args, **kwargs)

    @contextmanager
    def transaction(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        self.depth += 1
        try:
            with self.conn.transaction(*args, **kwargs) as tx:
                yield tx
        finally:
            self.depth -= 1
        self.lost = self.depth == 0


@pytest.mark.parametrize("first", ["a", "b"])
def test_an_ingest_whose_connection_is_lost_after_its_push_says_what_landed(
    pg_url: str, tmp_path: Path, first: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second shard's ingest loses its connection right after its push commits: the run
    landed, and the command says so, with the tests the server's run holds after both shards
    (x of each file apart, y), counted before the commit."""
    from flaketui.core.ingest import server

    shards = _two_shards(tmp_path)
    meta = ["--run-id", "gh-77", "--no-detect", "--timestamp", "2026-11-20T10:00:00Z"]
    alone = {"a": "2 tests", "b": "1 test"}[first]
    assert invoke("ingest", pg_url, shards[first], *meta).endswith(f", {alone} in the run\n")
    connect = server.connect
    monkeypatch.setattr(server, "connect", lambda url: _LostAfterCommit(connect(url)))
    second = shards["b" if first == "a" else "a"]
    output = invoke("ingest", pg_url, second, *meta)
    assert output.splitlines()[-1].endswith(", 3 tests in the run")
    assert server_count(pg_url, "SELECT count(DISTINCT test) FROM results") == 3


@pytest.mark.parametrize("first", ["a", "b"])
def test_histories_of_a_runs_shards_merge_into_the_server_as_one_ingest_of_both(
    pg_url: str, tmp_path: Path, first: str
) -> None:
    """Each shard job publishes a history holding its case under the plain id, and each is
    merged into the server on its own, a replica syncing in between: the second merge moves the
    server's attempts to their file's id and lands its own under theirs, the replica drops its
    copy under the plain id, and both agree with a history file ingesting both shards."""
    shards = _two_shards(tmp_path)
    meta = ["--run-id", "gh-77", "--no-detect", "--timestamp", "2026-11-20T10:00:00Z"]
    histories = {}
    for name, shard in shards.items():
        histories[name] = tmp_path / f"{name}.db"
        invoke("ingest", histories[name], shard, *meta)
    together, replica = tmp_path / "together.db", tmp_path / "replica.db"
    invoke("ingest", together, shards["a"], shards["b"], *meta)
    order = [histories[first], histories["b" if first == "a" else "a"]]
    for history in order:
        invoke("merge", pg_url, history)
        invoke("sync", pg_url, replica)
    expected = TWO_SHARDS_TESTS
    assert open_connection(together).execute(RUN_TESTS).fetchall() == expected
    assert sqlite_connect(replica).execute(RUN_TESTS).fetchall() == expected
    assert report(replica) == report(together)
    assert "0 results" in invoke("merge", pg_url, *order)
    fresh = tmp_path / "fresh.db"
    invoke("sync", pg_url, fresh)
    assert sqlite_connect(fresh).execute(RUN_TESTS).fetchall() == expected


def test_a_version_8_server_gains_origins_and_its_plain_ids_join_later_shards(
    pg_url: str, tmp_path: Path
) -> None:
    """A server from before origins were stored: its attempts say no file (NULL), so a later
    shard's same-named case of a known file joins such a test as a leg, as it did."""
    from flaketui.core.history.pg import schema
    from flaketui.core.history.pg.connect import connect
    from flaketui.core.history.pg.push import push_history
    from tests.connections import open_history

    old = connect(pg_url, migrate=False)
    try:
        with old.transaction():
            for migration in schema.MIGRATIONS[:8]:
                old.execute(migration)
            old.execute("INSERT INTO flaketui_meta (key, value) VALUES ('schema_version', '8')")
        staged = tmp_path / "old-run.db"
        first = file_shard(tmp_path / "a.xml", ("src/a.test.js", "x", "fail"))
        invoke("ingest", staged, first, "--run-id", "gh-77", "--no-detect")
        push_history(old, open_history(staged, create=False).conn, append=True)
    finally:
        old.close()
    assert "origin" not in server_columns(pg_url, "results")
    second = file_shard(tmp_path / "b.xml", ("src/b.test.js", "x", "pass"))
    invoke("ingest", pg_url, second, "--run-id", "gh-77", "--no-detect")
    assert server_count(
        pg_url, "SELECT value::int FROM flaketui_meta WHERE key = 'schema_version'"
    ) == len(schema.MIGRATIONS)
    assert server_count(pg_url, "SELECT count(*) FROM results WHERE origin IS NULL") == 1
    replica = tmp_path / "replica.db"
    invoke("sync", pg_url, replica)
    assert sqlite_connect(replica).execute(RUN_TESTS).fetchall() == [("parser::x", "fail", 1, 2)]


def test_shards_whose_ingests_read_the_run_before_either_pushed_are_told_apart(
    pg_url: str, tmp_path: Path
) -> None:
    """Two shard jobs stage their reports at once, neither seeing the other's case in the
    server's run: the second push finds the plain id held from two files under the run's lock
    and moves each file's attempts to its own id, as one ingest of both gives."""
    from flaketui.core.history.pg.connect import connect
    from flaketui.core.history.pg.push import push_history
    from tests.connections import open_history

    meta = ["--run-id", "gh-77", "--no-detect", "--timestamp", "2026-11-20T10:00:00Z"]
    a = file_shard(tmp_path / "a.xml", ("src/a.test.js", "x", "fail"))
    b = file_shard(tmp_path / "b.xml", ("src/b.test.js", "x", "pass"))
    staged = []
    for shard in (a, b):
        staged.append(tmp_path / f"staged-{shard.stem}.db")
        invoke("ingest", staged[-1], shard, *meta)
    replica, together = tmp_path / "replica.db", tmp_path / "together.db"
    pg = connect(pg_url)
    try:
        push_history(pg, open_history(staged[0], create=False).conn, append=True)
        invoke("sync", pg_url, replica)
        push_history(pg, open_history(staged[1], create=False).conn, append=True)
    finally:
        pg.close()
    invoke("sync", pg_url, replica)
    invoke("ingest", together, a, b, *meta)
    assert sqlite_connect(replica).execute(RUN_TESTS).fetchall() == [
        ("src/a.test.js::parser::x", "fail", 1, 1),
        ("src/b.test.js::parser::x", "pass", 0, 1),
    ]
    assert report(replica) == report(together)


def test_a_manifest_line_appending_a_shard_to_a_server_run_tells_its_file_apart(
    pg_url: str, tmp_path: Path
) -> None:
    """A backfill's line adding a shard to a run the server holds reads the server's copy of the
    run as an ingest does."""
    meta = ["--run-id", "gh-77", "--no-detect", "--timestamp", "2026-11-20T10:00:00Z"]
    invoke("ingest", pg_url, file_shard(tmp_path / "a.xml", ("src/a.test.js", "x", "fail")), *meta)
    file_shard(tmp_path / "b.xml", ("src/b.test.js", "x", "pass"))
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        json.dumps({"run_id": "gh-77", "file": "b.xml", "timestamp": "2026-11-20T10:00:00Z"}) + "\n"
    )
    invoke("ingest", pg_url, "--manifest", manifest)
    replica = tmp_path / "replica.db"
    invoke("sync", pg_url, replica)
    assert sqlite_connect(replica).execute(RUN_TESTS).fetchall() == [
        ("src/a.test.js::parser::x", "fail", 1, 1),
        ("src/b.test.js::parser::x", "pass", 0, 1),
    ]


def stored_tests(history: Path | str) -> list[tuple[object, ...]]:
    """Every test of a history file or server with its first sighting."""
    sql = "SELECT test_id, first_seen FROM tests ORDER BY 1"
    if isinstance(history, Path):
        return [tuple(row) for row in sqlite_connect(history).execute(sql)]
    import psycopg

    with psycopg.connect(history) as conn:
        return [tuple(row) for row in conn.execute(sql).fetchall()]


SHARDS_AT = "2026-11-20T10:00:00Z"
LATER_AT = "2026-11-22T10:00:00Z"
# The tests of shards a and b, and of a later run holding `parser::x` of one file alone.
SPLIT_TESTS = [
    ("parser::y", SHARDS_AT),
    ("src/a.test.js::parser::x", SHARDS_AT),
    ("src/b.test.js::parser::x", SHARDS_AT),
]
LATER_X = ("parser::x", LATER_AT)


@pytest.mark.parametrize(
    "order", [("a", "b"), ("b", "a"), ("a", "later", "b"), ("later", "b", "a")]
)
def test_the_servers_tests_after_shards_are_a_history_files_in_any_order(
    pg_url: str, tmp_path: Path, order: tuple[str, ...]
) -> None:
    """Shards ingested one by one into the server (a later run in between or before), a replica
    syncing after each: the plain id the shards' run leaves is removed where no run holds it,
    and is seen first at the later run that does, on the server, the replica and a history
    file alike."""
    reports = {
        **_two_shards(tmp_path),
        "later": file_shard(tmp_path / "later.xml", ("src/a.test.js", "x", "pass")),
    }
    replica, local = tmp_path / "replica.db", tmp_path / "local.db"
    for name in order:
        run_id, ts = ("R2", LATER_AT) if name == "later" else ("R", SHARDS_AT)
        meta = ["--run-id", run_id, "--no-detect", "--timestamp", ts]
        invoke("ingest", pg_url, reports[name], *meta)
        invoke("ingest", local, reports[name], *meta)
        invoke("sync", pg_url, replica)
    expected = sorted([*SPLIT_TESTS, *([LATER_X] if "later" in order else [])])
    assert stored_tests(local) == expected
    assert stored_tests(pg_url) == expected
    assert stored_tests(replica) == expected


@pytest.mark.parametrize("first", ["a", "b"])
def test_the_servers_tests_after_merged_shard_histories_are_a_history_files(
    pg_url: str, tmp_path: Path, first: str
) -> None:
    """Each shard job's history merged into the server, one of them holding a later run of the
    plain id as well: the plain id is seen first at that run, on the server as in a history
    file merging the same histories; merging again changes nothing."""
    shards = _two_shards(tmp_path)
    later = file_shard(tmp_path / "later.xml", ("src/a.test.js", "x", "pass"))
    histories = {"a": tmp_path / "a.db", "b": tmp_path / "b.db"}
    for name, shard in shards.items():
        invoke("ingest", histories[name], shard, "--run-id", "R", "--timestamp", SHARDS_AT)
    invoke("ingest", histories["b"], later, "--run-id", "R2", "--timestamp", LATER_AT)
    order = [histories[first], histories["b" if first == "a" else "a"]]
    local, replica = tmp_path / "local.db", tmp_path / "replica.db"
    for history in order:
        invoke("merge", pg_url, history)
        invoke("merge", local, history)
    invoke("sync", pg_url, replica)
    expected = sorted([*SPLIT_TESTS, LATER_X])
    assert stored_tests(local) == expected
    assert stored_tests(pg_url) == expected
    assert stored_tests(replica) == expected
    assert "0 results" in invoke("merge", pg_url, *order)
    assert stored_tests(pg_url) == expected


def test_a_history_of_both_shards_naming_no_file_splits_the_servers_plain_id(
    pg_url: str, tmp_path: Path
) -> None:
    """A history from before files were kept, which ingested both shards at once (each file's
    case under its prefixed id, no attempt naming its file), merged into a server holding one
    shard under the plain id: the server's attempts move to their file's id, the plain id goes,
    and the server and its replica hold what a history file merging it holds."""
    shards = _two_shards(tmp_path)
    meta = ["--run-id", "gh-77", "--no-detect", "--timestamp", SHARDS_AT]
    older = tmp_path / "older.db"
    invoke("ingest", older, shards["a"], shards["b"], *meta)
    with connected(older) as conn:
        conn.execute("UPDATE results SET origin = NULL")
    local, replica = tmp_path / "local.db", tmp_path / "replica.db"
    for target in (pg_url, local):
        invoke("ingest", target, shards["a"], *meta)
        invoke("merge", target, older)
    invoke("sync", pg_url, replica)
    assert sqlite_connect(local).execute(RUN_TESTS).fetchall() == TWO_SHARDS_TESTS
    assert sqlite_connect(replica).execute(RUN_TESTS).fetchall() == TWO_SHARDS_TESTS
    assert stored_tests(pg_url) == stored_tests(local) == SPLIT_TESTS
    assert report(replica) == report(local)


class _Racing:
    """A server connection on which another writer runs `statement` just before this one first
    runs a statement containing `before`."""

    def __init__(self, pg: object, url: str, before: str, statement: str) -> None:
        self.pg, self.url, self.before, self.statement = pg, url, before, statement
        self.raced = False

    def __getattr__(self, name: str) -> object:
        return getattr(self.pg, name)

    def execute(self, sql: str, *args: object) -> object:
        if not self.raced and self.before in sql:
            import psycopg

            self.raced = True
            with psycopg.connect(self.url, autocommit=True) as other:
                other.execute(self.statement)
        return self.pg.execute(sql, *args)  # type: ignore[attr-defined]


# What a push leaving a plain id with no attempt does with it (pg.push._settle).
REMOVE_PLAIN_X = (
    "DELETE FROM tests WHERE id IN (SELECT t.id FROM tests AS t WHERE t.test_id = 'parser::x'"
    " AND NOT EXISTS (SELECT 1 FROM results AS x WHERE x.test = t.id) FOR UPDATE SKIP LOCKED)"
)


@pytest.mark.parametrize("before", ["FOR KEY SHARE", "INSERT INTO results"])
def test_a_push_keeps_its_tests_from_a_writer_removing_a_plain_id_meanwhile(
    pg_url: str, tmp_path: Path, before: str
) -> None:
    """Another writer's push removes the plain id a move left with no attempt while this push is
    about to land attempts of it: a row removed before this push holds its tests' rows is put
    back, and one it holds is left alone. Either way every attempt lands."""
    import psycopg

    from flaketui.core.history.pg.connect import connect
    from flaketui.core.history.pg.push import push_history
    from tests.connections import open_history

    staged = tmp_path / "staged.db"
    shard = file_shard(tmp_path / "a.xml", ("src/a.test.js", "x", "fail"))
    invoke("ingest", staged, shard, "--run-id", "R5", "--no-detect", "--timestamp", LATER_AT)
    pg = connect(pg_url)
    try:
        with psycopg.connect(pg_url, autocommit=True) as setup:
            setup.execute(
                "INSERT INTO tests (test_id, parent, test_file, first_seen)"
                " VALUES ('parser::x', 'parser::x', 'src/a.test.js', %s)",
                (SHARDS_AT,),
            )
        racing = _Racing(pg, pg_url, before, REMOVE_PLAIN_X)
        push_history(racing, open_history(staged, create=False).conn, append=True)
        assert racing.raced
    finally:
        pg.close()
    assert (
        server_count(
            pg_url,
            "SELECT count(*) FROM results x JOIN tests t ON t.id = x.test"
            " WHERE t.test_id = 'parser::x'",
        )
        == 1
    )


@pytest.mark.parametrize("how", ["ingest", "merge"])
def test_a_test_has_its_own_file_on_the_server_and_its_replicas(
    pg_url: str, tmp_path: Path, how: str
) -> None:
    """The later run of file a and shard b of an earlier run, then shard a and a run naming no
    file, ingested into the server one by one (or merged from two histories holding them), a
    replica syncing in between: each file's id has its file, the plain id that of the runs it
    still holds, on the server and in the replica, whose edited runs are a history file's."""
    from tests.cli.test_ingest_cli import (
        EDITED,
        EDITED_SQL,
        FILE_REPORTS,
        FILE_TESTS,
        ingest_file_report,
    )

    def ingest_into(target: Path | str, *indexes: int) -> None:
        for index in indexes:
            ingest_file_report(target, tmp_path, FILE_REPORTS, index)

    replica = tmp_path / "replica.db"
    if how == "ingest":
        for index in (2, 1, 0, 3):
            ingest_into(pg_url, index)
            invoke("sync", pg_url, replica)
    else:
        first, second = tmp_path / "first.db", tmp_path / "second.db"
        ingest_into(first, 2, 1)
        ingest_into(second, 0, 3)
        for history in (first, second):
            invoke("merge", pg_url, history)
            invoke("sync", pg_url, replica)
    files = "SELECT test_id, test_file FROM tests ORDER BY 1"
    assert sqlite_connect(replica).execute(files).fetchall() == FILE_TESTS
    assert sqlite_connect(replica).execute(EDITED_SQL).fetchall() == EDITED
    fresh = tmp_path / "fresh.db"
    invoke("sync", pg_url, fresh)
    assert sqlite_connect(fresh).execute(files).fetchall() == FILE_TESTS
    assert sqlite_connect(fresh).execute(EDITED_SQL).fetchall() == EDITED


@pytest.mark.parametrize("how", ["ingest", "backfill", "merge", "merge_reversed"])
def test_a_moved_test_has_the_file_of_its_latest_run_on_the_server_and_its_replicas(
    pg_url: str, tmp_path: Path, how: str
) -> None:
    """The runs of a test moved to another file, ingested into the server in time order or
    newest first, or merged from a history of its runs before the move and one of those
    after, a replica syncing in between: the test has the file its latest run names, on the
    server and in the replica, whose edited runs are a history file's."""
    from tests.cli.test_ingest_cli import (
        EDITED_SQL,
        MOVED_REPORTS,
        ingest_file_report,
        moved_expected,
    )

    def ingest_into(target: Path | str, *indexes: int) -> None:
        for index in indexes:
            ingest_file_report(target, tmp_path, MOVED_REPORTS, index)

    replica = tmp_path / "replica.db"
    every = list(range(len(MOVED_REPORTS)))
    if how in ("ingest", "backfill"):
        for index in every if how == "ingest" else every[::-1]:
            ingest_into(pg_url, index)
            invoke("sync", pg_url, replica)
    else:
        before, after = tmp_path / "before.db", tmp_path / "after.db"
        ingest_into(before, 0, 1, 3, 5)
        ingest_into(after, 2, 4)
        for history in (before, after) if how == "merge" else (after, before):
            invoke("merge", pg_url, history)
            invoke("sync", pg_url, replica)
    test_file, edited = moved_expected(every)
    files = "SELECT test_id, test_file FROM tests ORDER BY 1"
    import psycopg

    with psycopg.connect(pg_url) as conn:
        assert [tuple(row) for row in conn.execute(files).fetchall()] == [("parser::x", test_file)]
    assert sqlite_connect(replica).execute(files).fetchall() == [("parser::x", test_file)]
    assert sqlite_connect(replica).execute(EDITED_SQL).fetchall() == edited
    fresh = tmp_path / "fresh.db"
    invoke("sync", pg_url, fresh)
    assert sqlite_connect(fresh).execute(EDITED_SQL).fetchall() == edited


@pytest.mark.parametrize("how", ["ingest", "merge"])
def test_a_karma_describe_block_is_no_tests_file_on_the_server(
    pg_url: str, tmp_path: Path, how: str
) -> None:
    """Karma shards whose describe blocks share a test name, ingested into the server one by
    one (or merged from a history holding them): no test takes a block for its file, on the
    server or in a replica, as in a history file."""
    from tests.cli.test_ingest_cli import ingest_karma

    expected = [
        ("Calculator::Chrome_120::adds", None),
        ("Cart::Chrome_120::adds", None),
        ("Chrome_120::adds", None),
    ]
    if how == "ingest":
        ingest_karma(pg_url, tmp_path, (0, 1, 2))
    else:
        local = tmp_path / "local.db"
        ingest_karma(local, tmp_path, (0, 1, 2))
        invoke("merge", pg_url, local)
    replica = tmp_path / "replica.db"
    invoke("sync", pg_url, replica)
    files = "SELECT test_id, test_file FROM tests ORDER BY 1"
    assert sqlite_connect(replica).execute(files).fetchall() == expected
