"""Test ids and run ids of any length reach the server, as they reach a history file: the
plugin, ingest, merge, a replica and the audit log; an error a retry cannot fix never says to
retry."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli import cli
from tests.connections import sqlite_connect

PLUGIN_ARGS = ("-p", "flaketui.pytest_plugin")
# A parameter far past what a btree index row holds (2704 bytes), and that does not compress.
LONG = "".join(hashlib.sha256(str(n).encode()).hexdigest() for n in range(50))[:3200]
SUITE = f"""
import pytest

@pytest.mark.parametrize("value", [{LONG!r}, "short"])
def test_param(value):
    assert value
"""


def invoke(*args: object, code: int = 0) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result.output


@pytest.fixture
def plain_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("GITHUB_", "GITLAB_", "CI_", "BUILDKITE", "CIRCLE", "JENKINS")):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)


def test_a_long_parametrized_id_is_recorded_on_the_server(
    pytester: pytest.Pytester, pg_url: str, plain_env: None, tmp_path: Path
) -> None:
    pytester.makepyfile(test_long=SUITE)
    for _ in range(2):  # the second run finds the tests the first one recorded
        result = pytester.runpytest(*PLUGIN_ARGS, "--flaketui-db", pg_url)
        result.assert_outcomes(passed=2)
        assert "flaketui:" not in result.stdout.str(), result.stdout.str()
    # A report of the same run ingested into the server lands beside it too.
    report = tmp_path / "long.xml"
    report.write_text(
        '<testsuite name="s" tests="1"><testcase classname="test_long"'
        f' name="test_param[{LONG}y]" time="0.1"/></testsuite>'
    )
    invoke("ingest", pg_url, report, "--run-id", "r-xml", "--no-detect")
    replica = tmp_path / "replica.db"
    invoke("sync", pg_url, replica)
    conn = sqlite3.connect(replica)
    lengths = sorted(length for (length,) in conn.execute("SELECT length(test_id) FROM tests"))
    runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    results = conn.execute("SELECT count(*) FROM results").fetchone()[0]
    conn.close()
    assert lengths[0] < 100 and len(lengths) == 3 and lengths[1] > 3200
    assert (runs, results) == (3, 5)
    # Quarantining such a test writes an audit row the server takes as well.
    (long_id,) = (
        sqlite_connect(replica)
        .execute("SELECT test_id FROM tests ORDER BY length(test_id) DESC LIMIT 1")
        .fetchone()
    )
    os.environ["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    try:
        skip = tmp_path / "skip.json"
        invoke("quarantine", pg_url, long_id, "--reason", "too long", "--skip-file", skip)
    finally:
        del os.environ["XDG_CACHE_HOME"]
    import psycopg

    with psycopg.connect(pg_url) as pg:
        assert pg.execute("SELECT length(test_id) FROM audit_log").fetchall() == [(len(long_id),)]


REPORT = Path(__file__).resolve().parents[2] / "sample_data" / "reports" / "main-unit.xml"


def refuse_results(url: str, sqlstate: str) -> None:
    """Make the server refuse every result row with an error of the given SQLSTATE."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            f" RAISE EXCEPTION 'refused' USING ERRCODE = '{sqlstate}'; END $$"
        )
        pg.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON results FOR EACH ROW EXECUTE FUNCTION refuse()"
        )


@pytest.mark.parametrize(
    ("sqlstate", "said"),
    [
        ("P0001", "(nothing was recorded) failed (refused)"),  # the same on every retry
        ("40001", "(nothing was recorded; retry) failed (refused)"),  # a conflict: may pass
    ],
)
def test_retry_is_said_only_where_a_retry_may_succeed(
    pg_url: str, sqlstate: str, said: str
) -> None:
    invoke("ingest", pg_url, REPORT, "--run-id", "r0", "--no-detect")  # the schema is there
    refuse_results(pg_url, sqlstate)
    out = invoke("ingest", pg_url, REPORT, "--run-id", "r1", "--no-detect", code=1)
    assert len(out.strip().splitlines()) == 1 and said in out, out


def test_the_plugin_offers_no_merge_the_server_would_refuse_again(
    pytester: pytest.Pytester, pg_url: str, plain_env: None
) -> None:
    invoke("ingest", pg_url, REPORT, "--run-id", "r0", "--no-detect")
    refuse_results(pg_url, "P0001")
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = pytester.runpytest(*PLUGIN_ARGS, "--flaketui-db", pg_url)
    result.assert_outcomes(passed=1)
    line = next(line for line in result.stdout.lines if line.startswith("flaketui:"))
    assert "writing the run failed (refused); the run is kept in " in line, line
    assert "flaketui merge" not in line
    kept = Path(line.rsplit(" ", 1)[1])
    kept.unlink()
    kept.parent.rmdir()


REPORTS = REPORT.parent
# A run id past what a btree index row holds: a CI job name of any length makes one.
LONG_RUN = "github-7-1-" + LONG


def server_runs(url: str) -> list[tuple[int, int]]:
    """(length of the run id, results) of each server run, longest id first."""
    import psycopg

    with psycopg.connect(url) as pg:
        return pg.execute(
            "SELECT length(r.run_id), count(x.run) FROM runs AS r"
            " LEFT JOIN results AS x ON x.run = r.id GROUP BY r.id ORDER BY 1 DESC"
        ).fetchall()


def test_a_long_run_id_is_recorded_on_the_server(pg_url: str, tmp_path: Path) -> None:
    local = tmp_path / "local.db"
    invoke("ingest", local, REPORT, "--run-id", LONG_RUN, "--no-detect")
    assert "1 run added" in invoke("merge", pg_url, local)
    assert "0 runs added, 0 extended, 1 already present" in invoke("merge", pg_url, local)
    # Another report of the run joins it; the same report again adds nothing.
    args = ("--run-id", LONG_RUN, "--no-detect")
    assert "(existing run): 1 file ingested" in invoke(
        "ingest", pg_url, REPORTS / "outage-unit.xml", *args
    )
    assert "0 files ingested, 1 already ingested" in invoke("ingest", pg_url, REPORT, *args)
    # A manifest names it too: its report files are all there already.
    manifest = tmp_path / "runs.jsonl"
    manifest.write_text(json.dumps({"run_id": LONG_RUN, "file": str(REPORT)}) + "\n")
    invoke("ingest", pg_url, "--manifest", manifest)
    ((length, results),) = server_runs(pg_url)
    assert length == len(LONG_RUN) and results > 121
    replica = tmp_path / "replica.db"
    invoke("sync", pg_url, replica)
    assert replica_runs(replica) == [(LONG_RUN, results)]
    # Pruned, then ingested again under its id: the replica keeps it.
    assert "pruned 1 run" in invoke("prune", pg_url, "--older-than", 1)
    invoke("ingest", pg_url, REPORT, *args)
    invoke("sync", pg_url, replica)
    assert replica_runs(replica) == [(LONG_RUN, results)]


def replica_runs(replica: Path) -> list[tuple[str, int]]:
    conn = sqlite3.connect(replica)
    try:
        return conn.execute(
            "SELECT r.run_id, count(*) FROM runs AS r JOIN results AS x ON x.run = r.id"
            " GROUP BY r.id"
        ).fetchall()
    finally:
        conn.close()


def test_the_plugin_records_a_run_with_a_long_id(
    pytester: pytest.Pytester, pg_url: str, plain_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_RUN_ID", "7")
    monkeypatch.setenv("GITHUB_JOB", LONG)
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    for _ in range(2):  # the second session's attempt joins the first one's run
        result = pytester.runpytest(*PLUGIN_ARGS, "--flaketui-db", pg_url)
        result.assert_outcomes(passed=1)
        assert "flaketui:" not in result.stdout.str(), result.stdout.str()
    assert server_runs(pg_url) == [(len(LONG_RUN), 2)]


def test_a_version_7_server_keeps_its_runs_unique_by_run_id(pg_url: str, tmp_path: Path) -> None:
    from flaketui.core.history.pg import schema
    from flaketui.core.history.pg.connect import connect

    local = tmp_path / "local.db"
    invoke("ingest", local, REPORT, "--run-id", "r-short", "--no-detect")
    old = connect(pg_url, migrate=False)
    try:
        with old.transaction():
            for migration in schema.MIGRATIONS[:7]:
                old.execute(migration)
            old.execute("INSERT INTO flaketui_meta (key, value) VALUES ('schema_version', '7')")
            old.execute(
                "INSERT INTO runs (run_id, ts, source) VALUES ('r-short', '2026-11-25T11:19:00Z',"
                " 'junit')"
            )
    finally:
        old.close()
    invoke("ingest", local, REPORTS / "outage-unit.xml", "--run-id", LONG_RUN, "--no-detect")
    # The upgraded server finds its run by id (the merge extends it) and takes the long one.
    assert "1 run added, 1 extended, 0 already present" in invoke("merge", pg_url, local)
    assert "0 runs added, 0 extended, 2 already present" in invoke("merge", pg_url, local)
    assert [length for length, _ in server_runs(pg_url)] == [len(LONG_RUN), len("r-short")]
