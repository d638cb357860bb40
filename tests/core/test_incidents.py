"""Incidents: window and signature tagging, removal, overlap, and automatic proposals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlite_utils
from history_builder import HistoryBuilder

from flaketui.core.config import Config
from flaketui.core.history.incidents import (
    IncidentError,
    add_incident,
    list_incidents,
    propose_incidents,
    remove_incident,
)
from flaketui.core.ingest.signatures import sign
from flaketui.core.scoring.report import build_report
from tests.connections import open_history

T0 = datetime(2026, 11, 1, 0, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
OUTAGE = "ConnectionError: provider unreachable after 30 s"


@pytest.fixture
def db(tmp_path: Path) -> sqlite_utils.Database:
    return open_history(tmp_path / "history.db")


def incident_of(db: sqlite_utils.Database, run_id: str) -> str | None:
    row = db.conn.execute("SELECT incident FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return row[0]


def flaky_only_in_outage(db: sqlite_utils.Database) -> None:
    """30 clean main runs, an outage alternating F P F P F P (hours 30-35), 4 clean runs."""
    HistoryBuilder(db).sequence(
        "tests/test_a.py::test_a", "P" * 30 + "FPFPFP" + "PPPP", start=T0, step=HOUR
    )


def verdict_of(db: sqlite_utils.Database, test_id: str, now: datetime) -> str:
    report = build_report(db, now=now, config=Config())
    return next(t.verdict for t in report.tests if t.test_id == test_id)


def test_window_incident_excludes_its_runs_from_scoring(db: sqlite_utils.Database) -> None:
    flaky_only_in_outage(db)
    now = T0 + 40 * HOUR
    assert verdict_of(db, "tests/test_a.py::test_a", now) == "flaky"
    change = add_incident(
        db, "outage-1", start=T0 + 30 * HOUR, end=T0 + 35 * HOUR, note="provider down"
    )
    # Window bounds are inclusive: runs at hours 30..35 are the 31st..36th runs.
    assert (change.kind, change.runs_tagged, change.runs_already_tagged) == ("window", 6, 0)
    assert incident_of(db, "run-00030") is None
    assert [incident_of(db, f"run-{n:05d}") for n in range(31, 37)] == ["outage-1"] * 6
    assert incident_of(db, "run-00037") is None
    report = build_report(db, now=now, config=Config())
    test = next(t for t in report.tests if t.test_id == "tests/test_a.py::test_a")
    assert (test.verdict, test.scores.runs, test.scores.failed_runs) == ("healthy", 34, 0)


def test_removal_restores_the_runs(db: sqlite_utils.Database) -> None:
    flaky_only_in_outage(db)
    now = T0 + 40 * HOUR
    add_incident(db, "outage-1", start=T0 + 30 * HOUR, end=T0 + 35 * HOUR)
    assert verdict_of(db, "tests/test_a.py::test_a", now) == "healthy"
    assert remove_incident(db, "outage-1") == 6
    assert (
        db.conn.execute("SELECT count(*) FROM runs WHERE incident IS NOT NULL").fetchone()[0] == 0
    )
    assert db.conn.execute("SELECT count(*) FROM incidents").fetchone()[0] == 0
    assert verdict_of(db, "tests/test_a.py::test_a", now) == "flaky"
    with pytest.raises(IncidentError, match="no incident tagged 'outage-1'"):
        remove_incident(db, "outage-1")


def test_signature_incident_tags_runs_with_that_signature(db: sqlite_utils.Database) -> None:
    hb = HistoryBuilder(db)
    hb.run(ts=T0).result("tests/test_a.py::test_a", ["fail", "pass"], message=OUTAGE)
    hb.run(ts=T0 + HOUR).result("tests/test_a.py::test_a", ["fail"], message="AssertionError: 1")
    hb.run(ts=T0 + 2 * HOUR).result("tests/test_b.py::test_b", ["pass"]).result(
        "tests/test_c.py::test_c", ["error"], message=OUTAGE.replace("30", "45")
    )
    hb.run(ts=T0 + 3 * HOUR).result("tests/test_b.py::test_b", ["pass"])
    outage_hash = sign(OUTAGE)
    assert outage_hash is not None
    # Numbers are masked, so both outage messages share one signature; a prefix is enough.
    change = add_incident(db, "provider", signature=outage_hash.hash[:10])
    assert (change.kind, change.signature, change.runs_tagged) == ("signature", outage_hash.hash, 2)
    assert [incident_of(db, f"run-{n:05d}") for n in range(1, 5)] == [
        "provider",
        None,
        "provider",
        None,
    ]
    listed = list_incidents(db)
    assert [(i.tag, i.kind, i.runs, i.signature_text) for i in listed] == [
        ("provider", "signature", 2, outage_hash.text)
    ]


def test_signature_prefix_must_exist_and_be_unique(db: sqlite_utils.Database) -> None:
    for digest in ("abc123", "abc456"):
        db.conn.execute(
            "INSERT INTO signatures (hash, text, example) VALUES (?, 'x', 'x')", (digest,)
        )
    with pytest.raises(IncidentError, match="ambiguous"):
        add_incident(db, "t", signature="abc")
    with pytest.raises(IncidentError, match="no failure signature starting with 'fff'"):
        add_incident(db, "t", signature="fff")
    assert db.conn.execute("SELECT count(*) FROM incidents").fetchone()[0] == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "either a window"),
        ({"start": T0}, "needs both"),
        ({"start": T0, "end": T0, "signature": "ab"}, "either a window"),
        ({"start": T0 + HOUR, "end": T0}, "window ends .* before it starts"),
    ],
)
def test_bad_requests_are_refused(
    db: sqlite_utils.Database, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(IncidentError, match=message):
        add_incident(db, "t", **kwargs)  # type: ignore[arg-type]


def test_overlapping_incidents_keep_the_first_tag(db: sqlite_utils.Database) -> None:
    flaky_only_in_outage(db)
    add_incident(db, "a", start=T0 + 30 * HOUR, end=T0 + 32 * HOUR)
    change = add_incident(db, "b", start=T0 + 31 * HOUR, end=T0 + 35 * HOUR)
    assert (change.runs_tagged, change.runs_already_tagged) == (3, 2)
    # Removing `a` frees hours 30..32; `b`'s rule takes back 31 and 32.
    assert remove_incident(db, "a") == 1
    assert incident_of(db, "run-00031") is None
    assert [incident_of(db, f"run-{n:05d}") for n in range(32, 37)] == ["b"] * 5
    assert [(i.tag, i.runs) for i in list_incidents(db)] == [("b", 5)]


def test_ingest_tags_are_listed_and_removable(db: sqlite_utils.Database) -> None:
    hb = HistoryBuilder(db)
    hb.run(ts=T0, incident="flood").result("tests/test_a.py::test_a", ["fail"])
    hb.run(ts=T0 + HOUR, incident="flood").result("tests/test_a.py::test_a", ["fail"])
    listed = list_incidents(db)
    assert [(i.tag, i.kind, i.runs, i.start, i.end) for i in listed] == [
        ("flood", "ingest", 2, T0, T0 + HOUR)
    ]
    assert remove_incident(db, "flood") == 2
    assert list_incidents(db) == []


def test_rule_less_rows_from_ingest_are_listed_not_applied(db: sqlite_utils.Database) -> None:
    hb = HistoryBuilder(db)
    hb.run(ts=T0, incident="flood").result("tests/test_a.py::test_a", ["fail"])
    hb.run(ts=T0 + HOUR).result("tests/test_a.py::test_a", ["fail"])
    # What `flaketui ingest --incident flood` records: a row without a window or signature.
    db.conn.execute(
        "INSERT INTO incidents (tag, created_at, note) VALUES ('flood', ?, 'tagged at ingest')",
        ("2026-11-02T00:00:00Z",),
    )
    add_incident(db, "later", start=T0 + HOUR, end=T0 + HOUR)
    assert [(i.tag, i.kind, i.runs, i.start) for i in list_incidents(db)] == [
        ("flood", "ingest", 1, T0),
        ("later", "window", 1, T0 + HOUR),
    ]
    # Removing `later` re-applies the remaining rules: the rule-less row tags nothing.
    assert remove_incident(db, "later") == 1
    assert incident_of(db, "run-00002") is None
    assert remove_incident(db, "flood") == 1
    assert list_incidents(db) == []


def suite_run(hb: HistoryBuilder, ts: datetime, tests: int, failing: int) -> None:
    run = hb.run(ts=ts, worker_count=4)
    for index in range(tests):
        outcome = ["fail"] if index < failing else ["pass"]
        run.result(f"tests/test_m.py::test_{index:02d}", outcome, message=OUTAGE)


def test_proposals_find_runs_where_most_tests_failed(db: sqlite_utils.Database) -> None:
    hb = HistoryBuilder(db)
    for hour in range(10):  # ordinary runs: at most one failure in 12
        suite_run(hb, T0 + hour * HOUR, 12, 1 if hour == 3 else 0)
    suite_run(hb, T0 + 10 * HOUR, 12, 8)  # run-00011: 8/12
    suite_run(hb, T0 + 11 * HOUR, 12, 12)  # run-00012: 12/12, an hour later: same proposal
    suite_run(hb, T0 + 12 * HOUR, 12, 5)  # 5/12: less than half, ordinary
    suite_run(hb, T0 + 20 * HOUR, 12, 6)  # run-00014: exactly half, 9 hours later: its own
    suite_run(hb, T0 + 21 * HOUR + 30 * timedelta(minutes=1), 9, 9)  # 9 tests: too small a run
    now = T0 + 24 * HOUR
    proposals = propose_incidents(db, now=now, config=Config())
    assert [[r.run_id for r in p.runs] for p in proposals] == [
        ["run-00011", "run-00012"],
        ["run-00014"],
    ]
    first = proposals[0]
    assert (first.start, first.end, first.runs_in_window) == (T0 + 10 * HOUR, T0 + 11 * HOUR, 2)
    assert [(r.failed_tests, r.tests) for r in first.runs] == [(8, 12), (12, 12)]
    assert first.runs[0].failed_share == pytest.approx(8 / 12)
    assert first.top_signature == sign(OUTAGE).hash  # type: ignore[union-attr]
    assert first.tag == "auto-20261101-1000"
    assert first.accept_command("h.db") == (
        "flaketui incident add h.db auto-20261101-1000 "
        "--from 2026-11-01T10:00:00Z --to 2026-11-01T11:00:00Z"
    )
    # Accepting the first proposal leaves only the second.
    add_incident(db, first.tag, start=first.start, end=first.end)
    remaining = propose_incidents(db, now=now, config=Config())
    assert [[r.run_id for r in p.runs] for p in remaining] == [["run-00014"]]
    # A `now` before the bad runs proposes nothing.
    assert propose_incidents(db, now=T0 + 9 * HOUR, config=Config()) == []
