"""Re-signing: a new mask pattern or algorithm version regroups old messages."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli.commands import cli
from flaketui.core.history.store import set_meta
from flaketui.core.ingest.resign import LEGACY_SCHEME, SCHEME_KEY, ensure_current, scheme_of
from tests.connections import open_history, sqlite_connect

NOW = "2026-11-30T18:00:00Z"
CASE = (
    '<testcase classname="tests.test_{n}" name="test_{n}" file="tests/test_{n}.py">'
    '<failure message="ConnectionError: tenant {tenant} unreachable">boom</failure></testcase>'
)


def _report(path: Path, tenant: str, n: str) -> Path:
    path.write_text(
        f'<testsuite name="s" tests="1">{CASE.format(n=n, tenant=tenant)}</testsuite>',
        encoding="utf-8",
    )
    return path


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def _dump(db: Path) -> list[str]:
    """The history's content as SQL statements."""
    conn = sqlite3.connect(db)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def _signatures(db: Path) -> tuple[int, set[object], set[object]]:
    """(signature rows, distinct result signatures, distinct test-run signatures)."""
    conn = sqlite3.connect(db)
    try:
        count = conn.execute("SELECT count(*) FROM signatures").fetchone()[0]
        results = {r[0] for r in conn.execute("SELECT signature FROM results")}
        runs = {r[0] for r in conn.execute("SELECT signature FROM test_runs")}
    finally:
        conn.close()
    return count, results, runs


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two failures differing only in a tenant name, which no built-in mask hides."""
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "history.db"
    for n, tenant in (("a", "alpha"), ("b", "bravo")):
        report = _report(tmp_path / f"{n}.xml", tenant, n)
        code, out = invoke(
            "ingest", str(db), str(report), "--no-detect", "--timestamp", "2026-11-30T10:00:00Z"
        )
        assert code == 0, out
    assert _signatures(db)[0] == 2
    return db


def _configure(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.flaketui]\nmask_patterns = ["tenant \\\\w+"]\n', encoding="utf-8"
    )


def test_a_new_mask_pattern_regroups_old_messages_with_resign(
    history: Path, tmp_path: Path
) -> None:
    _configure(tmp_path)
    code, err = invoke("report", str(history), "--now", NOW, "--format", "json")
    assert code == 0
    assert "flaketui resign" in err  # the stale note (CliRunner mixes stderr into output)
    code, out = invoke("resign", str(history))
    assert code == 0, out
    assert out.startswith("re-signed 2 failure messages")
    assert ": 2 of them changed signature, 2 -> 1 signature\n" in out
    count, results, runs = _signatures(history)
    assert count == 1 and len(results) == 1 and results == runs
    code, out = invoke("report", str(history), "--now", NOW)
    assert "flaketui resign" not in out
    conn = sqlite_connect(history)
    text = conn.execute("SELECT text FROM signatures").fetchone()[0]
    assert text == "ConnectionError: <MASK> unreachable"


def test_ingest_re_signs_by_itself_when_the_scheme_changed(history: Path, tmp_path: Path) -> None:
    _configure(tmp_path)
    report = _report(tmp_path / "c.xml", "charlie", "c")
    code, out = invoke(
        "ingest", str(history), str(report), "--no-detect", "--timestamp", "2026-11-30T11:00:00Z"
    )
    assert code == 0, out
    assert "re-signed 3 stored failure messages" in out
    count, results, _ = _signatures(history)
    assert count == 1 and len(results) == 1
    code, out = invoke("ingest", str(history), str(report), "--no-detect")
    assert "re-signed" not in out  # current now: nothing to do


def test_a_refused_report_does_not_re_sign(history: Path, tmp_path: Path) -> None:
    _configure(tmp_path)
    broken = tmp_path / "broken.xml"
    broken.write_text("<testsuite><testcase", encoding="utf-8")
    before = _dump(history)
    code, _ = invoke("ingest", str(history), str(broken), "--no-detect")
    assert code == 1
    # Content, not bytes: opening may checkpoint the WAL the fixture's ingests left.
    assert _dump(history) == before


def test_signature_incidents_follow_their_messages(history: Path, tmp_path: Path) -> None:
    conn = sqlite3.connect(history)
    old = conn.execute("SELECT hash FROM signatures ORDER BY hash LIMIT 1").fetchone()[0]
    conn.close()
    code, out = invoke("incident", "add", str(history), "outage", "--signature", old)
    assert code == 0, out
    _configure(tmp_path)
    assert invoke("resign", str(history))[0] == 0
    conn = sqlite_connect(history)
    new = conn.execute("SELECT hash FROM signatures").fetchone()[0]
    moved = conn.execute("SELECT signature FROM incidents").fetchall()
    assert new != old and moved == [(new,)]


def test_an_algorithm_version_change_re_signs(history: Path) -> None:
    db = open_history(history)
    # The ingest wrote under the current scheme (legacy v1 histories without the key were
    # re-signed by it once the version moved past 1).
    stored = db.conn.execute("SELECT value FROM meta WHERE key = ?", (SCHEME_KEY,)).fetchone()
    assert stored in (None, (scheme_of(()),))
    assert ensure_current(db, ()) is None
    set_meta(db, SCHEME_KEY, scheme_of((), version=0))
    summary = ensure_current(db, ())
    assert summary is not None and summary.messages == 2 and summary.changed == 0
    assert ensure_current(db, ()) is None
    assert scheme_of(()) == LEGACY_SCHEME or LEGACY_SCHEME.startswith("v1:")


def test_resign_of_a_missing_history_is_one_line(tmp_path: Path) -> None:
    code, out = invoke("resign", str(tmp_path / "nope.db"))
    assert code == 1 and out.count("\n") == 1 and out.startswith("Error:")
