"""Every writer against a real server: the plugin, incidents, prune, quarantine's audit rows,
lifecycle --apply; each change reaches a replica through sync."""

from __future__ import annotations

import json
import os
import platform
import shlex
import sqlite3
import sysconfig
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli import cli
from tests.pgcluster import Cluster

REPORTS = Path(__file__).resolve().parents[2] / "sample_data" / "reports"
PLUGIN_ARGS = ("-p", "xdist.plugin", "-p", "pytest_rerunfailures", "-p", "flaketui.pytest_plugin")
SUITE = """
import pytest

def test_pass():
    pass

def test_fail():
    assert False, "token=abc123secret boom"

@pytest.mark.flaky(reruns=1)
def test_flaky(request):
    import os
    if not os.path.exists("marker"):
        open("marker", "w").close()
        assert False
"""


def invoke(*args: object, code: int = 0) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == code, result.output
    if code:
        assert len(result.output.strip().splitlines()) == 1, result.output
    return result.output


def rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db)
    try:
        return [tuple(r) for r in conn.execute(sql)]
    finally:
        conn.close()


@pytest.fixture
def plain_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("GITHUB_", "GITLAB_", "CI_", "BUILDKITE", "CIRCLE", "JENKINS")):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)


def test_plugin_records_a_session_into_the_server(
    pytester: pytest.Pytester, pg_url: str, plain_env: None, tmp_path: Path
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini("[pytest]\ntimeout = 5\n")
    result = pytester.runpytest(*PLUGIN_ARGS, "-p", "pytest_timeout", "--flaketui-db", pg_url)
    result.assert_outcomes(passed=2, failed=1)
    replica = tmp_path / "replica.db"
    invoke("sync", pg_url, replica)
    # What cause analysis reads crosses the server: order, predecessors, timeout, environment.
    order = rows(
        replica,
        "SELECT t.test_id, x.attempt, x.position, p.test_id, x.timeout_ms FROM results x"
        " JOIN tests t ON t.id = x.test LEFT JOIN tests p ON p.id = x.predecessor ORDER BY 3",
    )
    assert order == [
        ("test_suite.py::test_pass", 1, 1, None, 5000),
        ("test_suite.py::test_fail", 1, 2, "test_suite.py::test_pass", 5000),
        ("test_suite.py::test_flaky", 1, 3, "test_suite.py::test_fail", 5000),
        ("test_suite.py::test_flaky", 2, 4, "test_suite.py::test_flaky", 5000),
    ]
    (environment,) = rows(replica, "SELECT os, python, platform FROM runs")
    assert environment == (platform.system(), platform.python_version(), sysconfig.get_platform())
    got = rows(
        replica,
        "SELECT t.test_id, x.attempt, x.outcome, x.message IS NOT NULL, r.finished"
        " FROM results x JOIN tests t ON t.id = x.test JOIN runs r ON r.id = x.run ORDER BY 1, 2",
    )
    assert got == [
        ("test_suite.py::test_fail", 1, "fail", 1, 1),
        ("test_suite.py::test_flaky", 1, "fail", 1, 1),
        ("test_suite.py::test_flaky", 2, "pass", 0, 1),
        ("test_suite.py::test_pass", 1, "pass", 0, 1),
    ]
    (message,) = rows(replica, "SELECT message FROM results WHERE outcome = 'fail' LIMIT 1")[0]
    assert "abc123secret" not in str(message)  # redacted by the ordinary writer
    assert pg_url.split("@")[0].split(":")[-1] not in result.stdout.str()


def test_a_run_recorded_during_an_outage_reaches_the_server_tagged(
    pytester: pytest.Pytester, pg_url: str, plain_env: None, tmp_path: Path
) -> None:
    pytester.makepyfile(test_suite="def test_down():\n    assert False\n")
    result = pytester.runpytest(*PLUGIN_ARGS, "--flaketui-db", pg_url, "--flaketui-incident", "dns")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["flaketui: recorded this run as part of incident dns, *"])
    replica = tmp_path / "replica.db"
    invoke("sync", pg_url, replica)
    assert rows(replica, "SELECT incident FROM runs") == [("dns",)]
    assert rows(replica, "SELECT tag FROM incidents") == [("dns",)]


def test_plugin_with_a_bad_server_is_a_usage_error_with_the_password_masked(
    pytester: pytest.Pytester, pg_cluster: Cluster, plain_env: None
) -> None:
    pytester.makepyfile(test_suite="def test_a():\n    pass\n")
    url = pg_cluster.url().replace(pg_cluster.password, "wrong-pass-77")
    result = pytester.runpytest(*PLUGIN_ARGS, "--flaketui-db", url)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "wrong-pass-77" not in result.stderr.str() + result.stdout.str()
    assert "password authentication failed" in result.stderr.str()


def test_incidents_on_the_server_reach_the_replica(pg_url: str, tmp_path: Path) -> None:
    for name, run_id, ts in (
        ("main-unit.xml", "r1", "2026-11-20T10:00:00Z"),
        ("outage-unit.xml", "r2", "2026-11-22T10:00:00Z"),
    ):
        invoke(
            "ingest", pg_url, REPORTS / name, "--run-id", run_id, "--timestamp", ts, "--no-detect"
        )
    replica, direct = tmp_path / "replica.db", tmp_path / "direct.db"
    invoke("merge", direct, pg_url)
    invoke("sync", pg_url, replica)
    out = invoke(
        "incident",
        "add",
        pg_url,
        "outage",
        "--from",
        "2026-11-22T00:00:00Z",
        "--to",
        "2026-11-22T23:00:00Z",
    )
    assert "tagged 1 run" in out
    invoke(
        "incident",
        "add",
        direct,
        "outage",
        "--from",
        "2026-11-22T00:00:00Z",
        "--to",
        "2026-11-22T23:00:00Z",
    )
    assert "1 run updated" in invoke("sync", pg_url, replica)
    assert rows(replica, "SELECT run_id, incident FROM runs ORDER BY 1") == [
        ("r1", None),
        ("r2", "outage"),
    ]

    def report(db: Path) -> object:
        return json.loads(invoke("report", db, "--now", "2026-11-30T00:00:00Z", "--format", "json"))

    assert report(replica) == report(direct)
    assert "1 run counts again" in invoke("incident", "remove", pg_url, "outage")
    invoke("incident", "remove", direct, "outage")
    invoke("sync", pg_url, replica)
    assert report(replica) == report(direct)
    invoke("incident", "remove", pg_url, "nope", code=1)


def test_prune_on_the_server_reaches_the_replica(pg_url: str, tmp_path: Path) -> None:
    invoke(
        "ingest",
        pg_url,
        REPORTS / "main-unit.xml",
        "--run-id",
        "old",
        "--timestamp",
        "2020-01-01T00:00:00Z",
        "--no-detect",
    )
    invoke("ingest", pg_url, REPORTS / "outage-unit.xml", "--run-id", "new", "--no-detect")
    replica = tmp_path / "replica.db"
    invoke("sync", pg_url, replica)
    assert "pruned 1 run" in invoke("prune", pg_url, "--older-than", "365")
    assert "1 pruned" in invoke("sync", pg_url, replica)
    assert rows(replica, "SELECT run_id FROM runs") == [("new",)]
    invoke("prune", pg_url, "--older-than", "365", "--vacuum", code=1)


def test_a_prune_on_the_server_recounts_only_the_replicas_pruned_days(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The days and commits of the runs a server pruned are recounted in the replica from the
    rows that stay, not every rollup rebuilt: its rollups then equal a rebuild, and its report
    a file's that pruned the same runs."""
    from flaketui.core.rollups import build as rollups
    from tests.connections import open_history
    from tests.core.test_rollup_scoring import assert_maintained
    from tests.team.test_pg_history import report

    direct, replica = tmp_path / "direct.db", tmp_path / "replica.db"
    plan = [
        ("main-unit.xml", "old", "2020-01-01T09:00:00Z", "c1"),
        ("outage-unit.xml", "old-too", "2020-01-01T11:00:00Z", "c2"),
        ("pr-unit-retries.xml", "kept", "2020-01-03T10:00:00Z", "c2"),
        ("outage-unit.xml", "new", "2026-11-29T10:00:00Z", "c3"),
    ]
    for report_name, run_id, ts, commit in plan:
        for target in (pg_url, direct):
            invoke("ingest", target, REPORTS / report_name, "--run-id", run_id,
                   "--timestamp", ts, "--commit", commit, "--no-detect")  # fmt: skip
    invoke("sync", pg_url, replica)
    days = (datetime.now(UTC) - datetime(2020, 1, 2, tzinfo=UTC)).days
    assert "pruned 2 runs" in invoke("prune", pg_url, "--older-than", str(days))
    assert "pruned 2 runs" in invoke("prune", direct, "--older-than", str(days))
    rebuilt: list[object] = []
    monkeypatch.setattr(rollups, "rebuild", lambda *args: rebuilt.append(args))
    assert "2 pruned" in invoke("sync", pg_url, replica)
    assert rebuilt == []
    monkeypatch.undo()
    assert rows(replica, "SELECT run_id FROM runs ORDER BY 1") == [("kept",), ("new",)]
    db = open_history(replica)
    assert_maintained(db)
    db.conn.close()
    assert report(replica) == report(direct)


def test_quarantine_and_release_audit_rows_land_on_the_server(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    invoke("ingest", pg_url, REPORTS / "outage-unit.xml", "--run-id", "r", "--no-detect")
    replica = tmp_path / "replica.db"
    invoke("sync", pg_url, replica)
    (test_id,) = rows(replica, "SELECT test_id FROM tests ORDER BY test_id LIMIT 1")[0]
    skip = tmp_path / "skip.json"
    invoke("quarantine", pg_url, test_id, "--reason", "flaky on CI", "--skip-file", skip)
    invoke("release", pg_url, test_id, "--reason", "fixed", "--skip-file", skip)
    invoke("lifecycle", pg_url, "--apply", "--skip-file", skip, "--no-gate")
    invoke("sync", pg_url, replica)
    assert rows(replica, "SELECT action, test_id, who != '' FROM audit_log ORDER BY id") == [
        ("quarantine", test_id, 1),
        ("release", test_id, 1),
    ]
    # Sent once: the next command finds nothing new to send.
    invoke("lifecycle", pg_url, "--skip-file", skip, "--no-gate")
    import psycopg

    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM audit_log").fetchone()[0] == 2


def test_a_failed_push_keeps_the_run_and_says_how_to_send_it(
    pytester: pytest.Pytester,
    pg_cluster: Cluster,
    plain_env: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = pg_cluster.create_database()
    name = url.rsplit("/", 1)[1]
    pytester.makepyfile(
        test_drop=f"""
import psycopg

def test_the_server_loses_the_database():
    with psycopg.connect({pg_cluster.url()!r}, autocommit=True) as conn:
        conn.execute('DROP DATABASE "{name}"')
"""
    )
    result = pytester.runpytest(*PLUGIN_ARGS, "--flaketui-db", url)
    result.assert_outcomes(passed=1)
    output = result.stdout.str()
    assert pg_cluster.password not in output
    line = next(line for line in output.splitlines() if line.startswith("flaketui:"))
    assert "does not exist" in line
    assert line.endswith("(the URL leaves its password out: give it in ~/.pgpass or PGPASSWORD)")
    command = shlex.split(line.split("`")[1])
    assert command[:3] == ["flaketui", "merge", pg_cluster.url(name, password=False)]
    kept = Path(command[3])
    assert rows(kept, "SELECT count(*) FROM results") == [(1,)]
    # Pasted with the password in PGPASSWORD, the command sends the run.
    import psycopg

    with psycopg.connect(pg_cluster.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    monkeypatch.setenv("PGPASSWORD", pg_cluster.password)
    invoke(*command[1:])
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM results").fetchone() == (1,)
    kept.unlink()
    kept.parent.rmdir()


def test_a_server_incident_by_signature_prefix(pg_url: str) -> None:
    """A hash prefix names one signature on the server; an unknown one is refused in a line."""
    invoke(
        "ingest",
        pg_url,
        REPORTS / "outage-unit.xml",
        "--run-id",
        "r-out",
        "--timestamp",
        "2026-11-22T10:00:00Z",
        "--no-detect",
    )
    import psycopg

    with psycopg.connect(pg_url) as conn:
        hashes = [h for (h,) in conn.execute("SELECT hash FROM signatures ORDER BY hash")]
    assert hashes
    out = invoke("incident", "add", pg_url, "by-sig", "--signature", hashes[0][:12])
    assert "by-sig" in out
    with psycopg.connect(pg_url) as conn:
        (stored,) = conn.execute("SELECT signature FROM incidents WHERE tag = 'by-sig'").fetchone()
    assert stored == hashes[0]
    unknown = invoke("incident", "add", pg_url, "none", "--signature", "zzzz", code=1)
    assert "no failure signature starting with 'zzzz'" in unknown
    # A tag in use is refused, as in a history file: the server keeps one rule for it.
    again = invoke("incident", "add", pg_url, "by-sig", "--signature", hashes[-1][:12], code=1)
    assert again == (
        "Error: an incident tagged 'by-sig' already exists (see flaketui incident list): "
        "choose another tag, or remove it first\n"
    )
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM incidents WHERE tag = 'by-sig'").fetchone() == (
            1,
        )


def test_the_plugin_says_which_tests_its_push_left_untidy(
    pytester: pytest.Pytester, pg_url: str, plain_env: None
) -> None:
    """Another writer gives a recorded test another file while the plugin's push lands its
    attempts, and holds the row on: the push leaves it to after its commit, where waiting for
    the holder runs out of the connection's lock_timeout. The run lands all the same, and the
    session's summary says in one line what it left, as merge and ingest say it; a session
    whose push leaves nothing says nothing."""
    import psycopg

    pytester.makepyfile(test_suite="def test_a():\n    pass\n")
    pytester.runpytest(*PLUGIN_ARGS, "--flaketui-db", pg_url).assert_outcomes(passed=1)
    test = "test_suite.py::test_a"
    # The other writer, on a connection of the push's own backend (dblink): it commits the
    # move, then holds the row FOR SHARE until that backend ends, after the push's commit.
    with psycopg.connect(pg_url, autocommit=True) as conn:
        try:
            conn.execute("CREATE EXTENSION dblink")
        except psycopg.Error:
            pytest.skip("the server has no dblink extension")
        conn.execute(
            "CREATE FUNCTION other_writer() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            f" PERFORM dblink_connect('other', '{pg_url}');"
            " PERFORM dblink_exec('other', 'UPDATE tests SET test_file = ''elsewhere.py'''"
            f" || ' WHERE test_id = ''{test}''');"
            " PERFORM dblink_exec('other', 'BEGIN');"
            " PERFORM * FROM dblink('other', 'SELECT 1 FROM tests'"
            f" || ' WHERE test_id = ''{test}'' FOR SHARE') AS held (one int);"
            " RETURN NULL; END $$"
        )
        conn.execute(
            "CREATE TRIGGER other_writer AFTER INSERT ON results"
            " FOR EACH STATEMENT EXECUTE FUNCTION other_writer()"
        )
    url = f"{pg_url}?options=-c%20lock_timeout%3D100ms"
    result = pytester.runpytest(*PLUGIN_ARGS, "--flaketui-db", url)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "flaketui: 1 test another writer held was left untidy (an older file, or no"
            " attempts): a later push of it tidies it"
        ]
    )
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM results").fetchone() == (2,)
        conn.execute("DROP TRIGGER other_writer ON results")
    again = pytester.runpytest(*PLUGIN_ARGS, "--flaketui-db", url)
    again.assert_outcomes(passed=1)
    assert "left untidy" not in again.stdout.str()
