"""Per-test detail: the outcome sequence with excluded runs marked, signatures, families."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlite_utils
from history_builder import HistoryBuilder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flaketui.core.config import Config
from flaketui.core.history.incidents import add_incident
from flaketui.core.ingest.signatures import sign
from flaketui.core.scoring.detail import (
    UnknownTestError,
    did_you_mean,
    did_you_mean_among,
    family_members,
    outcome_sequence,
    signatures_of,
)
from tests.connections import open_history

T0 = datetime(2026, 11, 1, 0, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
TEST = "tests/test_a.py::test_a"


@pytest.fixture
def db(tmp_path: Path) -> sqlite_utils.Database:
    return open_history(tmp_path / "history.db")


def test_sequence_is_ordered_and_keeps_excluded_runs(db: sqlite_utils.Database) -> None:
    hb = HistoryBuilder(db)
    # Inserted out of time order on purpose.
    hb.run(ts=T0 + 3 * HOUR, worker_count=4, commit="c3").result(
        TEST, ["fail", "pass"], message="AssertionError: got 7", worker_id="gw2"
    )
    hb.run(ts=T0 + HOUR, commit="c1", branch_kind="pr").result(TEST, ["pass"])
    hb.run(ts=T0 + 2 * HOUR, changed_files=["tests/test_a.py"]).result(
        TEST, ["fail"], message="AssertionError: edited"
    )
    hb.run(ts=T0 + 4 * HOUR).result(TEST, ["skipped"])
    hb.run(ts=T0 + 5 * HOUR).result(TEST, ["error", "error"], message="TimeoutError: 30 s")
    hb.run(ts=T0 - 100 * 24 * HOUR).result(TEST, ["fail"])  # outside the 90-day window
    add_incident(db, "outage", start=T0 + 5 * HOUR, end=T0 + 5 * HOUR)

    seq = outcome_sequence(db, TEST, now=T0 + 6 * HOUR, config=Config())
    assert [(o.ts, o.run_id, o.outcome) for o in seq] == [
        (T0 + HOUR, "run-00002", "pass"),
        (T0 + 2 * HOUR, "run-00003", "fail"),
        (T0 + 3 * HOUR, "run-00001", "flaky"),
        (T0 + 4 * HOUR, "run-00004", "skipped"),
        (T0 + 5 * HOUR, "run-00005", "fail"),
    ]
    assert [(o.incident, o.edited, o.counted) for o in seq] == [
        (None, False, True),
        (None, True, False),
        (None, False, True),
        (None, False, False),
        ("outage", False, False),
    ]
    flaky = seq[2]
    assert (flaky.commit, flaky.worker_count, flaky.worker_id, flaky.attempts, flaky.bad) == (
        "c3",
        4,
        "gw2",
        2,
        True,
    )
    assert flaky.message == "AssertionError: got 7"
    assert flaky.signature == sign("AssertionError: got 7").hash  # type: ignore[union-attr]
    assert (seq[0].branch_kind, seq[0].branch, seq[0].message) == ("pr", "feature", None)
    assert seq[4].message == "TimeoutError: 30 s"


def test_signatures_count_attempts_and_runs(db: sqlite_utils.Database) -> None:
    hb = HistoryBuilder(db)
    hb.run(ts=T0).result(TEST, ["fail", "fail"], message="TimeoutError: 30 s")
    hb.run(ts=T0 + HOUR).result(TEST, ["fail", "pass"], message="TimeoutError: 31 s")
    hb.run(ts=T0 + 2 * HOUR).result(TEST, ["fail", "pass"], message="KeyError: 'x'")
    sigs = signatures_of(db, TEST, now=T0 + 3 * HOUR, config=Config())
    assert [(s.text, s.count, s.runs) for s in sigs] == [
        ("TimeoutError: <NUM> s", 3, 2),
        ("KeyError: 'x'", 1, 1),
    ]
    assert sigs[0].example == "TimeoutError: 30 s"


def test_signatures_seen_only_in_incidents_come_after_scored_ones(
    db: sqlite_utils.Database,
) -> None:
    hb = HistoryBuilder(db)
    for hour in range(3):  # an outage: three runs, all tagged
        hb.run(ts=T0 + hour * HOUR, incident="outage").result(
            TEST, ["fail"], message="HTTPError: 503"
        )
    hb.run(ts=T0 + 3 * HOUR).result(TEST, ["fail", "pass"], message="KeyError: 'x'")
    sigs = signatures_of(db, TEST, now=T0 + 4 * HOUR, config=Config())
    assert [(s.text, s.runs, s.incident_runs) for s in sigs] == [
        ("KeyError: 'x'", 1, 0),
        ("HTTPError: <NUM>", 3, 3),
    ]


def test_family_sequence_and_members(db: sqlite_utils.Database) -> None:
    hb = HistoryBuilder(db)
    hb.run(ts=T0).result("t.py::test_x[b]", ["pass"]).result("t.py::test_x[a]", ["fail"])
    hb.run(ts=T0 + HOUR).result("t.py::test_x[a]", ["pass"])
    hb.run(ts=T0).result("t.py::test_xy", ["pass"])
    assert family_members(db, "t.py::test_x") == ["t.py::test_x[a]", "t.py::test_x[b]"]
    seq = outcome_sequence(db, "t.py::test_x", now=T0 + 2 * HOUR, config=Config())
    assert [(o.run_id, o.test_id, o.outcome) for o in seq] == [
        ("run-00001", "t.py::test_x[a]", "fail"),
        ("run-00001", "t.py::test_x[b]", "pass"),
        ("run-00002", "t.py::test_x[a]", "pass"),
    ]
    with pytest.raises(UnknownTestError, match=re.escape("no test or family named 't.py::nope'")):
        outcome_sequence(db, "t.py::nope", now=T0, config=Config())


def test_did_you_mean_finds_a_name_spelled_close_to_the_typed_one(
    db: sqlite_utils.Database,
) -> None:
    hb = HistoryBuilder(db)
    run = hb.run(ts=T0)
    for test_id in (
        "tests/test_net.py::test_netwrk_call",
        "tests/test_net.py::test_network_cache",
        "tests/test_net.py::test_dns_lookup",
        "tests/test_other.py::test_netwrk_call",
        TEST,
    ):
        run.result(test_id, ["pass"])
    # A dropped letter: nothing contains the typed name, the close ones are offered, the same
    # file first, then the closest.
    assert did_you_mean(db, "tests/test_net.py::test_network_call") == (
        "; did you mean 'tests/test_net.py::test_netwrk_call', "
        "'tests/test_net.py::test_network_cache', 'tests/test_other.py::test_netwrk_call'?"
    )
    assert did_you_mean(db, "test_network_call[usd]").startswith(
        "; did you mean 'tests/test_net.py::test_netwrk_call'"
    )
    # What contains the typed text still comes first; a name unlike any gets no suggestion.
    assert did_you_mean(db, "dns_look") == "; did you mean 'tests/test_net.py::test_dns_lookup'?"
    assert did_you_mean(db, "tests/test_net.py::test_upload_file") == ""


NAMES = [
    "tests/test_net.py::test_netwrk_call",
    "tests/test_net.py::test_network_cache[usd]",
    "tests/test_net.py::test_network_cache[eur]",
    "tests/test_net.py::test_dns_lookup",
    "tests/test_other.py::test_netwrk_call",
    "tests/test_other.py::test_dns",
    TEST,
]
TYPED = st.one_of(
    st.sampled_from(NAMES),
    st.text(alphabet="abdknstwoeurlp_:[]./ ", max_size=40),
    st.builds(lambda n, cut: n[cut:] + n[:cut][1:], st.sampled_from(NAMES), st.integers(0, 40)),
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(typed=TYPED, limit=st.integers(1, 4))
def test_did_you_mean_among_names_offers_what_a_history_of_them_would(
    db: sqlite_utils.Database, typed: str, limit: int
) -> None:
    if not db["tests"].count:
        run = HistoryBuilder(db).run(ts=T0)
        for test_id in NAMES:
            run.result(test_id, ["pass"])
    # A skip file's entries stand for the history's tests: the same names come out, in order.
    assert did_you_mean_among(NAMES, typed, limit) == did_you_mean(db, typed, limit)
