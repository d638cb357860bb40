"""`flaketui ingest DB REPORT...` dates its run as a manifest backfill does: --timestamp, else the
reports' own plausible suite timestamp, else now."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli.commands import cli


@pytest.fixture(autouse=True)
def _here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def report(path: Path, timestamp: str | None, name: str = "t") -> Path:
    attr = "" if timestamp is None else f' timestamp="{timestamp}"'
    path.write_text(
        f'<testsuites><testsuite name="s"{attr}><testcase classname="m.C" name="{name}"/>'
        "</testsuite></testsuites>\n"
    )
    return path


def ingest(db: str, *args: str | Path) -> str:
    """The ts of the run that one `flaketui ingest` stored."""
    result = CliRunner().invoke(cli, ["ingest", db, *map(str, args), "--no-detect"])
    assert result.exit_code == 0, result.output
    conn = sqlite3.connect(db)
    try:
        (ts,) = conn.execute("SELECT ts FROM runs").fetchone()
    finally:
        conn.close()
    return str(ts)


def test_a_report_with_a_plausible_timestamp_dates_its_run(tmp_path: Path) -> None:
    xml = report(tmp_path / "r.xml", "2026-10-01T08:30:00")
    assert ingest("h.db", xml) == "2026-10-01T08:30:00Z"


def test_an_explicit_timestamp_wins_over_the_reports(tmp_path: Path) -> None:
    xml = report(tmp_path / "r.xml", "2026-10-01T08:30:00")
    assert ingest("h.db", xml, "--timestamp", "2026-11-29T10:00:00Z") == "2026-11-29T10:00:00Z"


@pytest.mark.parametrize("timestamp", [None, "1970-01-01T00:00:00", "2999-01-01T00:00:00", "soon"])
def test_without_a_plausible_report_timestamp_the_run_is_dated_now(
    tmp_path: Path, timestamp: str | None
) -> None:
    xml = report(tmp_path / "r.xml", timestamp)
    before = datetime.now(UTC).replace(microsecond=0)
    ts = datetime.fromisoformat(ingest("h.db", xml))
    assert before <= ts <= datetime.now(UTC)


def test_shards_take_the_first_plausible_timestamp_in_the_order_given(tmp_path: Path) -> None:
    bare = report(tmp_path / "a.xml", None, "t1")
    later = report(tmp_path / "b.xml", "2026-10-02T00:00:00Z", "t2")
    earlier = report(tmp_path / "c.xml", "2026-10-01T00:00:00Z", "t3")
    assert ingest("one.db", bare, later, earlier) == "2026-10-02T00:00:00Z"
    assert ingest("two.db", earlier, later) == "2026-10-01T00:00:00Z"


def test_a_single_ingest_and_a_manifest_line_date_a_report_alike(tmp_path: Path) -> None:
    xml = report(tmp_path / "r.xml", "Sat, 03 Oct 2026 23:10:07 GMT")
    (tmp_path / "runs.jsonl").write_text(json.dumps({"file": "r.xml"}) + "\n")
    from_manifest = ingest("manifest.db", "--manifest", "runs.jsonl")
    assert from_manifest == "2026-10-03T23:10:07Z"
    assert ingest("single.db", xml) == from_manifest
