"""`flaketui incident add|list|remove` through click's CliRunner."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli.commands import cli
from flaketui.core.history.incidents import apply_incidents
from tests.connections import open_history

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from history_builder import HistoryBuilder

T0 = datetime(2026, 11, 1, 0, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
NOW = "2026-11-02T00:00:00Z"


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """12 tests over 6 hourly runs; the run at 03:00 fails 10 of them."""
    monkeypatch.chdir(tmp_path)  # default config: no pyproject.toml here
    path = tmp_path / "history.db"
    db = open_history(path)
    hb = HistoryBuilder(db)
    for hour in range(6):
        run = hb.run(ts=T0 + hour * HOUR)
        for index in range(12):
            failed = hour == 3 and index < 10
            run.result(
                f"tests/test_m.py::test_{index:02d}",
                ["fail"] if failed else ["pass"],
                message="ConnectionError: db down",
            )
    db.conn.close()
    return path


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def incidents_in(path: Path) -> list[tuple[str, str | None]]:
    db = open_history(path, create=False, readonly=True)
    rows = db.conn.execute("SELECT run_id, incident FROM runs ORDER BY run_id").fetchall()
    db.conn.close()
    return [(str(r[0]), r[1]) for r in rows]


def test_list_shows_proposal_with_accept_command(history: Path) -> None:
    code, out = invoke("incident", "list", str(history), "--now", NOW)
    assert code == 0, out
    assert "no tagged incidents" in out
    assert "PROPOSED auto-20261101-0300: 1 run" in out
    assert "(worst 10/12 in run-00004)" in out
    accept = (
        f"flaketui incident add {history} auto-20261101-0300 "
        "--from 2026-11-01T03:00:00Z --to 2026-11-01T03:00:00Z"
    )
    assert f"accept: {accept}" in out
    # Running the suggested command (minus the program name) accepts the proposal.
    code, out = invoke(*accept.split()[1:])
    assert code == 0, out
    assert (
        "incident auto-20261101-0300 (2026-11-01T03:00:00Z .. 2026-11-01T03:00:00Z): "
        "tagged 1 run" in out
    )
    code, out = invoke("incident", "list", str(history), "--now", NOW)
    assert "auto-20261101-0300: 1 run, window 2026-11-01T03:00:00Z .. " in out
    assert "no proposed incidents" in out


def test_add_window_and_remove(history: Path) -> None:
    code, out = invoke(
        "incident",
        "add",
        str(history),
        "outage",
        "--from",
        "2026-11-01T02:00:00Z",
        "--to",
        "2026-11-01T03:30:00Z",
        "--note",
        "db failover",
    )
    assert code == 0, out
    assert "tagged 2 runs" in out
    assert [tag for _run, tag in incidents_in(history)] == [
        None,
        None,
        "outage",
        "outage",
        None,
        None,
    ]
    code, out = invoke("incident", "list", str(history), "--now", NOW)
    assert (
        "outage: 2 runs, window 2026-11-01T02:00:00Z .. 2026-11-01T03:30:00Z  (db failover)" in out
    )
    code, out = invoke("incident", "remove", str(history), "outage")
    assert (code, out) == (0, "incident outage removed: 2 runs count again\n")
    assert all(tag is None for _run, tag in incidents_in(history))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["remove", "{db}", "nope"], "Error: no incident tagged 'nope'"),
        (
            ["add", "{db}", "t", "--from", "2026-11-01T05:00:00Z", "--to", "2026-11-01T01:00:00Z"],
            "Error: window ends (2026-11-01T01:00:00Z) before it starts",
        ),
        (
            ["add", "{db}", "t", "--from", "yesterday", "--to", "2026-11-01T01:00:00Z"],
            "Error: not an ISO 8601 timestamp: 'yesterday'",
        ),
        (
            ["add", "{db}", "t", "--from", "2026-11-01T01:00:00Z"],
            "Error: give --from and --to (a window) or --signature HASH",
        ),
        (
            ["add", "{db}", "t", "--signature", "ffff"],
            "Error: no failure signature starting with 'ffff'",
        ),
        (["list", "missing.db"], "Error: missing.db: does not exist"),
    ],
)
def test_bad_input_is_one_line(history: Path, args: list[str], message: str) -> None:
    before = incidents_in(history)
    code, out = invoke("incident", *[a.replace("{db}", str(history)) for a in args])
    assert code == 1
    assert out.startswith(message)
    assert out.count("\n") == 1 and "Traceback" not in out
    assert incidents_in(history) == before


def incident_rows(path: Path) -> list[tuple[object, ...]]:
    db = open_history(path, create=False, readonly=True)
    rows = db.conn.execute("SELECT tag, start_ts, end_ts, signature FROM incidents").fetchall()
    db.conn.close()
    return [tuple(row) for row in rows]


def window(db: Path, tag: str, start: str, end: str) -> tuple[int, str]:
    return invoke("incident", "add", str(db), tag, "--from", start, "--to", end)


def test_add_refuses_a_tag_in_use(history: Path) -> None:
    code, out = window(history, "failover", "2026-11-01T01:00:00Z", "2026-11-01T01:30:00Z")
    assert code == 0, out
    before = (incidents_in(history), incident_rows(history))
    code, out = window(history, "failover", "2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z")
    assert code == 1
    assert out == (
        "Error: an incident tagged 'failover' already exists (see flaketui incident list): "
        "choose another tag, or remove it first\n"
    )
    assert (incidents_in(history), incident_rows(history)) == before
    code, out = invoke("incident", "list", str(history), "--now", NOW)
    assert "failover: 1 run, window 2026-11-01T01:00:00Z .. 2026-11-01T01:30:00Z" in out


def test_list_counts_each_rule_of_a_tag_its_own_runs(history: Path) -> None:
    """A tag holding two windows (as merging two histories can leave it) is listed window by
    window, each with the runs it holds."""
    assert window(history, "failover", "2026-11-01T01:00:00Z", "2026-11-01T01:30:00Z")[0] == 0
    db = open_history(history, create=False)
    db.conn.execute(
        "INSERT INTO incidents (tag, start_ts, end_ts, created_at) VALUES "
        "('failover', '2026-11-01T03:00:00Z', '2026-11-01T05:00:00Z', '2026-11-02T00:00:00Z')"
    )
    db.conn.commit()
    assert apply_incidents(db) == 3
    db.conn.close()
    code, out = invoke("incident", "list", str(history), "--now", NOW)
    assert code == 0, out
    assert out.splitlines()[:2] == [
        "failover: 1 run, window 2026-11-01T01:00:00Z .. 2026-11-01T01:30:00Z",
        "failover: 3 runs, window 2026-11-01T03:00:00Z .. 2026-11-01T05:00:00Z",
    ]
