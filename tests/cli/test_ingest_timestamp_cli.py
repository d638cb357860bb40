"""`flaketui ingest DB REPORT...` dates its run as a manifest backfill does: --timestamp, else the
reports' own plausible suite timestamp, else now."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
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


def _ahead(delta: timedelta, zone: str) -> str:
    """A report time `delta` ahead of the clock, as a report would write it."""
    return (datetime.now(UTC) + delta).strftime("%Y-%m-%dT%H:%M:%S") + zone


@pytest.mark.parametrize(
    ("delta", "zone"),
    [
        (timedelta(hours=5), ""),  # local time of UTC+5 without its zone, read as UTC
        (timedelta(minutes=20), "Z"),
        (timedelta(seconds=40), "Z"),  # a clock set a little ahead
    ],
    ids=["local-time-5h-ahead", "20-min-ahead", "40-s-ahead"],
)
def test_a_report_dated_after_now_dates_its_run_now_and_reports_count_it(
    tmp_path: Path, delta: timedelta, zone: str
) -> None:
    earlier = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    passing = report(tmp_path / "passing.xml", earlier)
    assert CliRunner().invoke(cli, ["ingest", "h.db", str(passing), "--no-detect"]).exit_code == 0
    xml = tmp_path / "r.xml"
    timestamp = _ahead(delta, zone)
    xml.write_text(
        f'<testsuite name="s" timestamp="{timestamp}"><testcase classname="m.C" name="t">'
        '<failure message="boom"/></testcase></testsuite>\n'
    )
    before = datetime.now(UTC).replace(microsecond=0)
    result = CliRunner().invoke(cli, ["ingest", "h.db", str(xml), "--no-detect"])
    assert result.exit_code == 0, result.output
    warned = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    if delta >= timedelta(minutes=15):
        assert len(warned) == 1 and "ahead of this machine's clock" in warned[0], warned
        assert f"r.xml is dated {timestamp.removesuffix('Z')}Z" in warned[0]
    else:  # clock skew, not a zone: dated now without a word
        assert warned == []
    conn = sqlite3.connect("h.db")
    try:
        (ts,) = conn.execute("SELECT max(ts) FROM runs").fetchone()
    finally:
        conn.close()
    assert before <= datetime.fromisoformat(ts) <= datetime.now(UTC)
    # A report right after the ingest counts the run and its failure.
    shown = CliRunner().invoke(cli, ["report", "h.db", "--format", "json"])
    (test,) = json.loads(shown.stdout)["tests"]
    assert (test["test_id"], test["runs"], test["failed_runs"]) == ("m.C::t", 2, 1)


def test_an_explicit_timestamp_after_now_is_kept_with_a_warning(tmp_path: Path) -> None:
    xml = report(tmp_path / "r.xml", None)
    result = CliRunner().invoke(
        cli, ["ingest", "h.db", str(xml), "--no-detect", "--timestamp", "2999-01-01T00:00:00Z"]
    )
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        "warning: --timestamp 2999-01-01T00:00:00Z is after now: reports, check and the app"
        " leave the run out until then (or when given a later --now)\n"
    )
    past = CliRunner().invoke(
        cli, ["ingest", "p.db", str(xml), "--no-detect", "--timestamp", "2026-11-29T10:00:00Z"]
    )
    assert past.exit_code == 0 and past.stderr == ""


def test_a_manifest_line_dates_a_report_dated_after_now_now(tmp_path: Path) -> None:
    report(tmp_path / "r.xml", _ahead(timedelta(hours=3), ""))
    (tmp_path / "runs.jsonl").write_text(json.dumps({"file": "r.xml"}) + "\n")
    before = datetime.now(UTC).replace(microsecond=0)
    ts = datetime.fromisoformat(ingest("manifest.db", "--manifest", "runs.jsonl"))
    assert before <= ts <= datetime.now(UTC)
