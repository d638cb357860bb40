"""The columns cause analysis reads: migration, writer, JUnit run facts, merge."""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from flaketui.core.config import config_from_mapping
from flaketui.core.errors import ConfigError, HistoryError
from flaketui.core.history import store
from flaketui.core.history.merge import merge_histories
from flaketui.core.ingest.junit import report_run_info
from flaketui.core.ingest.writer import RunRecorder
from flaketui.core.models import Attempt, CaseResult, RunMeta
from tests.connections import open_history, sqlite_connect

TS = datetime(2026, 11, 2, 9, tzinfo=UTC)


def _v1_history(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    store.MIGRATIONS[0](conn)
    conn.execute("PRAGMA user_version = 1")
    conn.execute(
        "INSERT INTO runs (run_id, ts, source, worker_count) VALUES ('old', ?, 'junit', 2)",
        ("2026-11-01T00:00:00Z",),
    )
    conn.close()


def test_a_history_from_before_the_migration_is_upgraded_when_read(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _v1_history(path)
    db = open_history(path, create=False, readonly=True)
    assert store.schema_version(db.conn) == store.SCHEMA_VERSION
    assert db.conn.execute("SELECT run_id, os, order_seed FROM runs").fetchall() == [
        ("old", None, None)
    ]
    columns = {row[1] for row in db.conn.execute("PRAGMA table_info(results)")}
    assert {"predecessor", "position", "timeout_ms"} <= columns


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write a read-only file")
def test_an_old_history_that_cannot_be_written_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _v1_history(path)
    path.chmod(0o444)
    try:
        with pytest.raises(HistoryError, match="older flaketui needs an upgrade"):
            open_history(path, create=False, readonly=True)
    finally:
        path.chmod(0o644)


def _record(path: Path, run_id: str, cases: list[CaseResult], **meta: object) -> None:
    db = open_history(path)
    recorder = RunRecorder(db, RunMeta(run_id=run_id, ts=TS, **meta))  # type: ignore[arg-type]
    recorder.add(cases)
    recorder.finish()
    db.conn.close()


ORDERED = [
    CaseResult("t.py::a", "t.py", [Attempt("pass", 5, None, "gw0", None, 1, None)]),
    CaseResult(
        "t.py::b",
        "t.py",
        [
            Attempt("fail", 7, "AssertionError: x", "gw0", "t.py::a", 2, 30_000),
            Attempt("pass", 6, None, "gw0", "t.py::b", 3, 30_000),
        ],
    ),
    # Its predecessor ran in the run but is written in a later batch.
    CaseResult("t.py::c", "t.py", [Attempt("pass", 9, None, "gw1", "t.py::z", 2, None)]),
]

RESULTS_SQL = (
    "SELECT t.test_id, r.attempt, r.duration_ms, p.test_id, r.position, r.timeout_ms"
    " FROM results r JOIN tests t ON t.id = r.test LEFT JOIN tests p ON p.id = r.predecessor"
    " ORDER BY t.test_id, r.attempt"
)
EXPECTED = [
    ("t.py::a", 1, 5, None, 1, None),
    ("t.py::b", 1, 7, "t.py::a", 2, 30_000),
    ("t.py::b", 2, 6, "t.py::b", 3, 30_000),
    ("t.py::c", 1, 9, "t.py::z", 2, None),
]


def test_the_writer_stores_order_timeout_and_environment(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    _record(path, "r1", ORDERED, os="Linux", python="3.12.4", order_seed="randomly:7")
    db = open_history(path, create=False, readonly=True)
    assert db.conn.execute(RESULTS_SQL).fetchall() == EXPECTED
    assert db.conn.execute("SELECT os, python, order_seed FROM runs").fetchall() == [
        ("Linux", "3.12.4", "randomly:7")
    ]


def test_merge_carries_the_new_columns_and_remaps_predecessors(tmp_path: Path) -> None:
    src, dest = tmp_path / "src.db", tmp_path / "dest.db"
    # DEST knows other tests first, so the source's row ids differ from DEST's.
    _record(dest, "other", [CaseResult("u.py::x", "u.py", [Attempt("pass")])])
    _record(src, "r1", ORDERED, os="Darwin", platform="darwin-arm64")
    merge_histories(open_history(dest), [src])
    db = open_history(dest, create=False, readonly=True)
    assert db.conn.execute(RESULTS_SQL).fetchall() == [
        *EXPECTED,
        ("u.py::x", 1, None, None, None, None),
    ]
    assert db.conn.execute("SELECT os, platform FROM runs WHERE run_id = 'r1'").fetchall() == [
        ("Darwin", "darwin-arm64")
    ]


REPORT = """<?xml version="1.0"?>
<testsuites>
  <testsuite name="pytest" hostname="ci-runner-11" timestamp="2026-11-02T09:00:00">
    <properties>
      <property name="python_version" value="3.11.9"/>
      <property name="agent_os" value="Linux"/>
      <property name="unrelated" value="x"/>
    </properties>
    <testcase classname="t" name="test_a" time="0.5"/>
    <properties><property name="platform" value="late"/></properties>
  </testsuite>
</testsuites>
"""


def test_junit_hostname_and_mapped_properties_give_run_facts(tmp_path: Path) -> None:
    report = tmp_path / "r.xml"
    report.write_text(REPORT)
    assert report_run_info(report, {"agent_os": "os"}) == {
        "runner_host": "ci-runner-11",
        "python": "3.11.9",
        "os": "Linux",
    }
    assert "os" not in report_run_info(report)  # agent_os is not a default name


def test_ingest_stores_the_report_facts(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from flaketui.cli.group import cli

    report = tmp_path / "r.xml"
    report.write_text(REPORT)
    db = tmp_path / "h.db"
    result = CliRunner().invoke(cli, ["ingest", str(db), str(report), "--no-detect"])
    assert result.exit_code == 0, result.output
    row = sqlite_connect(db).execute("SELECT runner_host, python FROM runs").fetchone()
    assert row == ("ci-runner-11", "3.11.9")


def test_a_property_map_to_an_unknown_dimension_is_refused() -> None:
    with pytest.raises(ConfigError, match="not one of runner_host"):
        config_from_mapping({"junit_properties": {"x": "colour"}})


def test_scoring_ignores_diagnose_experiment_runs(tmp_path: Path) -> None:
    from flaketui.core.config import Config
    from flaketui.core.output.formats import render_json
    from flaketui.core.scoring.causes import analyse
    from flaketui.core.scoring.detail import outcome_sequence
    from flaketui.core.scoring.report import build_report, effective_now

    path = tmp_path / "h.db"
    for day in range(1, 13):
        outcome = "fail" if day % 4 == 0 else "pass"
        _record_at(path, f"ci-{day}", datetime(2026, 11, day, tzinfo=UTC), outcome, "pytest")
    db = open_history(path)
    now = datetime(2026, 11, 20, tzinfo=UTC)
    before = render_json(build_report(db, now=now))
    # A window the history is older than: the clock is its newest run, not the wall clock.
    short = Config(window_days=7)
    clock = effective_now(db, None, short)
    assert clock == (datetime(2026, 11, 12, tzinfo=UTC), True)
    # Experiments: many failures, later than every CI run.
    for number in range(6):
        _record_at(path, f"diag-{number}", datetime(2026, 11, 19, number, tzinfo=UTC), "fail",
                   "diagnose")  # fmt: skip
    db = open_history(path)
    assert render_json(build_report(db, now=now)) == before
    assert effective_now(db, None, short) == clock
    assert analyse(db, "t.py::a", now=now, config=Config()).runs == 12
    assert len(outcome_sequence(db, "t.py::a", now=now, config=Config())) == 12


def _record_at(path: Path, run_id: str, ts: datetime, outcome: str, source: str) -> None:
    db = open_history(path)
    recorder = RunRecorder(db, RunMeta(run_id=run_id, ts=ts, branch_kind="main"), source=source)
    recorder.add([CaseResult("t.py::a", "t.py", [Attempt(outcome, 5, "AssertionError: x")])])
    recorder.finish()
    db.conn.close()
