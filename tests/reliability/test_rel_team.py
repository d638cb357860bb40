"""The shared history server under load and faults (a real PostgreSQL cluster, 127.0.0.1 only).

- 32 concurrent writers (pytest sessions recording with the plugin, and ingests, two of them
  shards of one run) lose nothing;
- a recording session killed mid-run leaves no run on the server;
- the server restarted during an ingest gives a one-line error, and a retry lands the run;
- a sync killed inside a batch resumes without duplicates.
Every wait polls against a deadline; every loop is bounded.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from flaketui.cli import cli
from tests.connections import sqlite_connect
from tests.pgcluster import Cluster
from tests.reliability.reliability_support import child_env, junit_case, write_report

pytestmark = pytest.mark.slow
PLUGIN_ARGS = ("-p", "xdist.plugin", "-p", "pytest_rerunfailures", "-p", "flaketui.pytest_plugin")
DEADLINE_S = 300
WRITERS = 32
SESSION_TESTS = 30
REPORT_TESTS = 40


def server(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return [tuple(row) for row in conn.execute(sql, params).fetchall()]


def cli_command(*args: object) -> list[str]:
    return [sys.executable, "-c", "from flaketui.cli import main; main()", *map(str, args)]


def plain_env(tmp_path: Path) -> dict[str, str]:
    """A child's environment without CI variables or autoloaded plugins, whose temporary
    files (a killed writer's staging history) stay under tmp_path."""
    temporary = tmp_path / "tmp"
    temporary.mkdir(exist_ok=True)
    env = child_env(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", TMPDIR=str(temporary))
    for name in list(env):
        if name.startswith(("GITHUB_", "GITLAB_", "CI_", "BUILDKITE", "PYTEST_ADDOPTS")):
            del env[name]
    env.pop("CI", None)
    return env


def session_dir(root: Path, index: int, body: str) -> Path:
    """A directory holding one test module and an empty pytest.ini (its own rootdir)."""
    folder = root / f"session{index}"
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / f"test_s{index}.py").write_text(body)
    return folder


def suite_body(index: int) -> str:
    lines = ["import pytest", ""]
    for n in range(SESSION_TESTS):
        check = "assert False, 'shared failure 42'" if n % 10 == 0 else "pass"
        lines += [f"def test_{n}():", f"    {check}", ""]
    return "\n".join(lines)


def session_command(url: str, folder: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        *PLUGIN_ARGS,
        "--flaketui-db",
        url,
        str(folder),
    ]


def wait_all(procs: list[subprocess.Popen[bytes]]) -> list[int]:
    deadline = time.monotonic() + DEADLINE_S
    codes = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            raise
    return codes


def poll(check: Any, what: str, timeout: float = 60.0) -> Any:
    """Call check() until it returns something truthy, within timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_32_concurrent_writers_lose_nothing(pg_url: str, tmp_path: Path) -> None:
    procs: list[subprocess.Popen[bytes]] = []
    expected_results = 0
    env = plain_env(tmp_path)
    for index in range(WRITERS):
        if index % 2 == 0:
            folder = session_dir(tmp_path, index, suite_body(index))
            procs.append(
                subprocess.Popen(
                    session_command(pg_url, folder),
                    cwd=folder,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                )
            )
            expected_results += SESSION_TESTS
            continue
        # Shared test ids across ingests (concurrent test upserts), a shared failure message
        # (concurrent signature upserts), and writers 1 and 3 are two shards of one run.
        cases = [
            junit_case(
                f"pkg.shared.m{n % 5}",
                f"test_{n}_{index if n >= 20 else 0}",
                "fail" if n % 7 == 0 else "pass",
                "shared failure 42",
            )
            for n in range(REPORT_TESTS)
        ]
        if index == 3:  # the second shard of run 'sharded': other tests than writer 1's
            cases = [c.replace("test_", "shard2_test_") for c in cases]
        report = write_report(tmp_path / f"report{index}.xml", cases)
        run_id = "sharded" if index in (1, 3) else f"ingest-{index}"
        procs.append(
            subprocess.Popen(
                cli_command("ingest", pg_url, report, "--run-id", run_id, "--no-detect"),
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        )
        expected_results += REPORT_TESTS
    codes = wait_all(procs)
    # A session's output is on its stdout, an ingest's on its stderr (read to the end, closed).
    outputs = [proc.communicate() for proc in procs]
    errors = [(out if err is None else err).decode() for out, err in outputs]
    # pytest sessions fail (their suites hold failing tests): exit 1, never a usage error.
    wanted = [1 if index % 2 == 0 else 0 for index in range(WRITERS)]
    unexpected = [(c, e[-800:]) for c, w, e in zip(codes, wanted, errors, strict=True) if c != w]
    assert not unexpected, unexpected
    # No recording warning from a session, no error line from an ingest.
    assert not any("flaketui:" in e for e in errors[0::2]), errors
    assert not any(e.strip() for e in errors[1::2]), errors
    assert server(pg_url, "SELECT count(*) FROM runs") == [(WRITERS - 1,)]
    assert server(pg_url, "SELECT count(*) FROM results") == [(expected_results,)]
    assert server(pg_url, "SELECT count(*) FROM runs WHERE run_id = 'sharded'") == [(1,)]
    # One signature for the sessions' failures, one for the reports': 16 writers each.
    assert server(pg_url, "SELECT count(*) FROM signatures") == [(2,)]
    dupes = "SELECT count(*) FROM (SELECT test_id FROM tests GROUP BY 1 HAVING count(*) > 1) d"
    assert server(pg_url, dupes) == [(0,)]
    replica = tmp_path / "replica.db"
    subprocess.run(cli_command("sync", pg_url, replica), env=env, check=True, timeout=DEADLINE_S)
    conn = sqlite_connect(replica)
    assert conn.execute("SELECT count(*) FROM results").fetchone()[0] == expected_results


def test_a_session_killed_mid_run_leaves_no_run(pg_url: str, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    body = textwrap.dedent("""
        import pathlib, select, sys

        def test_{n}():
            pass
    """)
    tests = "\n".join(body.replace("{n}", str(n)) for n in range(1_200))
    tests += textwrap.dedent(f"""

        def test_zz_blocks():
            pathlib.Path({str(marker)!r}).write_text("x")
            select.select([], [], [], 600)  # until killed
    """)
    folder = session_dir(tmp_path, 0, "import pathlib, select\n" + tests)
    proc = subprocess.Popen(
        session_command(pg_url, folder),
        cwd=folder,
        env=plain_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        poll(marker.exists, "the session to reach its blocking test", DEADLINE_S)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    assert server(pg_url, "SELECT count(*) FROM runs") == [(0,)]
    assert server(pg_url, "SELECT count(*) FROM results") == [(0,)]


def test_server_restart_mid_ingest_is_one_line_and_a_retry_lands(
    pg_cluster: Cluster, tmp_path: Path
) -> None:
    url = pg_cluster.create_database()
    cases = [junit_case("pkg.m", f"test_{n}", "fail" if n % 9 == 0 else "pass") for n in range(300)]
    report = write_report(tmp_path / "report.xml", cases)
    command = cli_command("ingest", url, report, "--run-id", "restarted", "--no-detect")
    import psycopg

    # Hold the run's advisory lock: the ingest's push waits on it inside its transaction.
    holder = psycopg.connect(url, autocommit=True)
    try:
        holder.execute("SELECT pg_advisory_lock(hashtextextended('restarted', 0))")
        proc = subprocess.Popen(
            command,
            env=plain_env(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

        def waiting() -> bool:
            rows = server(
                url,
                "SELECT count(*) FROM pg_stat_activity WHERE"
                " application_name = 'flaketui' AND wait_event_type = 'Lock'",
            )
            return bool(rows[0][0])

        poll(waiting, "the ingest to wait inside its transaction", DEADLINE_S)
        pg_cluster.restart()
        out, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        holder.close()
    assert proc.returncode == 1, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    assert "****" in lines[0] and pg_cluster.password not in err and "retry" in lines[0]
    assert server(url, "SELECT count(*) FROM runs") == [(0,)]
    retry = subprocess.run(
        command, env=plain_env(tmp_path), capture_output=True, text=True, timeout=DEADLINE_S
    )
    assert retry.returncode == 0, retry.stderr
    assert server(url, "SELECT count(*) FROM results") == [(300,)]


KILLING_SYNC = """
import os, signal, sys
from flaketui.core.history.pg import sync
from flaketui.core.history.pg.connect import connect
from flaketui.core.history.store import open_connection

calls = [0]
real = sync.refresh_test_runs

def dying(*args, **kwargs):
    real(*args, **kwargs)
    calls[0] += 1
    if calls[0] == int(sys.argv[3]):
        os.kill(os.getpid(), signal.SIGKILL)  # inside a batch's transaction

sync.refresh_test_runs = dying
sync.sync_replica(connect(sys.argv[1]), open_connection(sys.argv[2]), batch_rows=40)
"""


def test_a_sync_killed_mid_batch_resumes_without_duplicates(pg_url: str, tmp_path: Path) -> None:
    env = plain_env(tmp_path)
    direct = tmp_path / "direct.db"
    for index in range(6):
        cases = [
            junit_case(
                f"pkg.m{index % 2}",
                f"test_{n}",
                "fail" if (n + index) % 5 == 0 else "pass",
                f"boom {index}",
            )
            for n in range(50)
        ]
        report = write_report(tmp_path / f"r{index}.xml", cases)
        for target in (pg_url, direct):
            result = CliRunner().invoke(
                cli,
                [
                    "ingest",
                    str(target),
                    str(report),
                    "--run-id",
                    f"run{index}",
                    "--timestamp",
                    f"2026-11-2{index}T10:00:00Z",
                    "--no-detect",
                ],
            )
            assert result.exit_code == 0, result.output
    replica = tmp_path / "replica.db"
    script = tmp_path / "killing_sync.py"
    script.write_text(KILLING_SYNC)
    killed = subprocess.run(
        [sys.executable, str(script), pg_url, str(replica), "3"],
        env=env,
        capture_output=True,
        timeout=DEADLINE_S,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    conn = sqlite3.connect(replica)
    cursor = json.loads(
        conn.execute("SELECT value FROM meta WHERE key = 'replica_cursor'").fetchone()[0]
    )
    partial = conn.execute("SELECT count(*) FROM results").fetchone()[0]
    conn.close()
    assert cursor and 0 < partial < 300  # two batches landed, the third rolled back
    out = subprocess.run(
        cli_command("sync", pg_url, replica),
        env=env,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=True,
    ).stdout
    assert f"{300 - partial} results added" in out
    raw = (
        "SELECT r.run_id, t.test_id, x.attempt, x.outcome FROM results x"
        " JOIN runs r ON r.id = x.run JOIN tests t ON t.id = x.test ORDER BY 1, 2, 3"
    )
    assert sqlite_connect(replica).execute(raw).fetchall() == (
        sqlite_connect(direct).execute(raw).fetchall()
    )

    def report(db: Path) -> str:
        args = ["report", str(db), "--now", "2026-11-30T00:00:00Z", "--format", "json"]
        return CliRunner().invoke(cli, args).output

    assert report(replica) == report(direct)
    assert os.path.getsize(replica) > 0
