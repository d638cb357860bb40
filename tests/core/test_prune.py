"""`flaketui prune`: old runs go, rollups still agree with the raw rows, the audit log stays."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import pytest
import sqlite_utils
from click.testing import CliRunner

from flaketui.cli.commands import cli
from flaketui.core.config import Config
from flaketui.core.history.incidents import add_incident, apply_incidents, list_incidents
from flaketui.core.history.prune import PruneError, prune_history
from flaketui.core.history.store import transaction
from flaketui.core.rollups import build as rollups
from flaketui.core.timeutil import to_iso
from tests.connections import open_history
from tests.core.history_builder import HistoryBuilder
from tests.core.test_rollups import ROOT, _newest, assert_agrees


@pytest.fixture
def history(tmp_path: Path) -> sqlite_utils.Database:
    """A generated 90-day history with rollups, one old-only test named in the audit log."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from generate import generate
    finally:
        sys.path.remove(str(ROOT / "bench"))
    path = tmp_path / "h.db"
    generate(path, 3000, seed=4, tests_count=30)
    db = open_history(path)
    newest = _newest(db)
    hb = HistoryBuilder(db)
    old = newest - timedelta(days=80)
    hb.run(ts=old, branch_kind="main").result("tests/test_gone.py::test_audited", ["fail"])
    hb.run(ts=old, branch_kind="main").result(
        "tests/test_gone.py::test_forgotten", ["fail"], message="ValueError: only here"
    )
    with transaction(db.conn):
        db.conn.execute(
            "INSERT INTO audit_log (ts, who, action, test_id, written_at)"
            " VALUES (:ts, 'me', 'quarantine', :test_id, :ts)",
            {"ts": to_iso(old), "test_id": "tests/test_gone.py::test_audited"},
        )
        rollups.rebuild(db.conn)
    return db


def test_prune_removes_old_runs_and_keeps_rollups_exact(history: sqlite_utils.Database) -> None:
    conn = history.conn
    now = _newest(history)
    (runs_before,) = conn.execute("SELECT count(*) FROM runs").fetchone()
    result = prune_history(history, 40, now=now)
    cutoff = to_iso(now - timedelta(days=40))
    assert result.runs > 0 and result.results > 0
    assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == runs_before - result.runs
    assert conn.execute("SELECT count(*) FROM runs WHERE ts < ?", (cutoff,)).fetchone()[0] == 0
    orphans = conn.execute(
        "SELECT count(*) FROM results WHERE run NOT IN (SELECT id FROM runs)"
    ).fetchone()[0]
    assert orphans == 0
    assert conn.execute("SELECT min(day) FROM test_day_rollups").fetchone()[0] >= cutoff[:10]
    # The cutoff's own day was recomputed: every window still agrees with the raw rows.
    for back_days in (0, 10, 45, 60):
        assert_agrees(history, now - timedelta(days=back_days, hours=3), Config())
    assert_agrees(history, now, Config(window_days=45))


def test_prune_keeps_the_audit_log_and_what_it_names(history: sqlite_utils.Database) -> None:
    conn = history.conn
    prune_history(history, 40, now=_newest(history))
    tests = {t for (t,) in conn.execute("SELECT test_id FROM tests")}
    assert "tests/test_gone.py::test_audited" in tests
    assert "tests/test_gone.py::test_forgotten" not in tests
    assert conn.execute("SELECT count(*) FROM audit_log").fetchone()[0] == 1
    texts = [t for (t,) in conn.execute("SELECT text FROM signatures")]
    assert not any("only here" in t for t in texts)


def test_prune_deletes_signatures_only_an_incident_names(history: sqlite_utils.Database) -> None:
    conn = history.conn
    (sig,) = conn.execute("SELECT hash FROM signatures WHERE text LIKE '%only here%'").fetchone()
    add_incident(history, "forgotten", signature=sig)
    prune_history(history, 40, now=_newest(history))
    # Every signature left is one a remaining result carries, as `resign` would leave them.
    unused = conn.execute(
        "SELECT count(*) FROM signatures WHERE id NOT IN"
        " (SELECT signature FROM results WHERE signature IS NOT NULL)"
    ).fetchone()[0]
    assert unused == 0
    assert conn.execute("SELECT count(*) FROM signatures WHERE hash = ?", (sig,)).fetchone() == (0,)
    # The rule stays: listed by its hash, and a late run failing that way is tagged again.
    listed = [(i.kind, i.signature) for i in list_incidents(history) if i.tag == "forgotten"]
    assert listed == [("signature", sig)]
    late = _newest(history) - timedelta(days=1)
    HistoryBuilder(history).run(ts=late).result(
        "tests/test_gone.py::test_forgotten", ["fail"], message="ValueError: only here"
    )
    assert apply_incidents(history) == 1


def test_prune_with_nothing_old_changes_nothing(history: sqlite_utils.Database) -> None:
    result = prune_history(history, 400, now=_newest(history))
    assert (result.runs, result.results, result.tests) == (0, 0, 0)


@pytest.mark.parametrize("days", [0, -3])
def test_prune_refuses_non_positive_days(history: sqlite_utils.Database, days: float) -> None:
    with pytest.raises(PruneError):
        prune_history(history, days)


def test_prune_command_with_vacuum(history: sqlite_utils.Database, tmp_path: Path) -> None:
    path = Path(history.conn.execute("PRAGMA database_list").fetchone()[2])
    history.conn.close()
    # The generated history ends 2026-11-30; the command prunes relative to the real clock.
    result = CliRunner().invoke(cli, ["prune", str(path), "--older-than", "30", "--vacuum"])
    assert result.exit_code == 0, result.output
    assert "pruned" in result.output and "vacuumed:" in result.output
    again = CliRunner().invoke(cli, ["prune", str(path), "--older-than", "30"])
    assert again.exit_code == 0 and again.output.startswith("pruned 0 runs")


def test_prune_command_refuses_bad_input(tmp_path: Path) -> None:
    missing = CliRunner().invoke(cli, ["prune", str(tmp_path / "no.db"), "--older-than", "9"])
    assert missing.exit_code == 1 and missing.output.startswith("Error:")
    path = tmp_path / "h.db"
    open_history(path).conn.close()
    zero = CliRunner().invoke(cli, ["prune", str(path), "--older-than", "0"])
    assert zero.exit_code == 1
    assert (
        zero.output.strip()
        == "Error: --older-than must be a number of days above 0 and at most 36500, got 0"
    )
