"""The quarantine lifecycle: synthetic timelines through every transition and back."""

from __future__ import annotations

import gc
import json
import shutil
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
import sqlite_utils
from hypothesis import example, given, settings
from hypothesis import strategies as st

from flaketui.core.config import Config
from flaketui.core.quarantine.actions import quarantine, release
from flaketui.core.quarantine.apply import (
    GATE_EXPIRED,
    GATE_NEW_REGRESSIONS,
    GATE_UNMATCHED,
    REGRESSION_NOTED,
    Applied,
    apply_plan,
    gate_findings,
)
from flaketui.core.quarantine.lifecycle import (
    LIFECYCLE,
    QUARANTINED,
    STATES,
    Event,
    Plan,
    Transition,
    Walker,
    derive,
    replay,
    run_moments,
)
from flaketui.core.quarantine.skipfile import read_skip_file
from flaketui.core.timeutil import to_iso
from tests.connections import open_history
from tests.core.history_builder import PATTERN_ATTEMPTS, HistoryBuilder, utc

T0 = utc(2026, 1, 1)
DAY = timedelta(days=1)
FLAKY = "tests/test_a.py::test_a"
BACK = "tests/test_b.py::test_b"
BROKEN = "tests/test_r.py::test_r"
NEW = "tests/test_n.py::test_n"
WHO = "nightly <ci@example.org>"


def at(day: int, hour: int = 23) -> datetime:
    """Day `day` of the timeline (day 0 is T0), at `hour` UTC."""
    return T0 + day * DAY + timedelta(hours=hour)


def on(day: int) -> date:
    return (T0 + day * DAY).date()


@pytest.fixture
def db(tmp_path: Path) -> sqlite_utils.Database:
    return open_history(tmp_path / "history.db")


@pytest.fixture
def skip_path(tmp_path: Path) -> Path:
    return tmp_path / ".quarantine.json"


def runs(hb: HistoryBuilder, test_id: str, day: int, pattern: str, **kwargs: str) -> None:
    """One run per letter on `day`, an hour apart from 06:00."""
    for index, letter in enumerate(pattern):
        run = hb.run(ts=at(day, 6 + index), **kwargs)
        run.result(test_id, PATTERN_ATTEMPTS[letter])


def flaky_timeline(hb: HistoryBuilder, test_id: str = FLAKY, last_day: int = 35) -> None:
    """20 clean days, then two flaky runs of three on main every day up to last_day.

    End-of-day recency scores: day 21 0.13, day 22 0.18 (>= 0.15), day 25 0.296,
    day 26 0.325 (>= 0.30), then rising: watching on 22, warning on 28, quarantine on 35.
    """
    for day in range(last_day + 1):
        runs(hb, test_id, day, "PP" if day < 20 else "RRP")


def run_lifecycle(
    db: sqlite_utils.Database, now: datetime, skip_path: Path, config: Config | None = None
) -> tuple[Plan, Applied]:
    """What `flaketui lifecycle --apply` does."""
    config = config or Config()
    skip = read_skip_file(skip_path, explicit=True)
    plan = derive(db, now=now, config=config, skip=skip)
    gate = gate_findings(db, plan, skip, config=config)
    return plan, apply_plan(db, plan, gate, skip_path=skip_path, config=config, who=WHO)


def audit_rows(db: sqlite_utils.Database, after_id: int = 0) -> list[dict[str, object]]:
    cursor = db.conn.execute(
        "SELECT id, ts, who, action, test_id, mode, reason, scores, source FROM audit_log "
        "WHERE id > ? ORDER BY id",
        (after_id,),
    )
    names = [col[0] for col in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def state_of(plan: Plan, test_id: str) -> str:
    found = plan.states.get(test_id)
    return found.state if found is not None else "none"


# --- the synthetic timeline --------------------------------------------------------------------


def test_walk_through_every_state_with_its_audit_rows(
    db: sqlite_utils.Database, skip_path: Path
) -> None:
    flaky_timeline(HistoryBuilder(db))
    # (night, state after it, the lifecycle action that night writes, or None)
    nights = [
        (21, "none", None),
        (22, "watching", "lifecycle:none->watching"),
        (27, "watching", None),
        (28, "warning", "lifecycle:watching->warning"),
        (34, "warning", None),
        (35, "quarantined", "lifecycle:warning->quarantined"),
        (64, "quarantined", None),
        (65, "fix_or_delete", "lifecycle:quarantined->fix_or_delete"),
        (94, "fix_or_delete", None),
        (95, "removal_recommended", "lifecycle:fix_or_delete->removal_recommended"),
    ]
    last_id = 0
    for night, state, action in nights:
        plan, applied = run_lifecycle(db, at(night), skip_path)
        assert state_of(plan, FLAKY) == state, night
        rows = audit_rows(db, last_id)
        lifecycle_rows = [r for r in rows if str(r["action"]).startswith("lifecycle:")]
        if action is None:
            assert rows == [], night
            continue
        assert [r["action"] for r in lifecycle_rows] == [action]
        row = lifecycle_rows[0]
        assert row["test_id"] == FLAKY
        assert row["source"] == "lifecycle"
        assert row["who"] == WHO
        assert row["ts"] == to_iso(at(night))  # tonight's transition is dated now
        scores = json.loads(str(row["scores"]))
        assert 0.0 < scores["recency_score"] < 1.0
        if action.endswith("->quarantined"):
            assert row["mode"] == "skip"
            assert row["reason"] == "7 days in warning"
            # quarantine() audits the skip-file write itself, just before.
            entry_rows = [r for r in rows if r["action"] == "quarantine"]
            assert len(entry_rows) == 1 and entry_rows[0]["source"] == "lifecycle"
            assert applied.quarantined == [FLAKY]
        else:
            assert len(rows) == 1
        last_id = int(rows[-1]["id"])  # type: ignore[call-overload]
    skip = read_skip_file(skip_path, explicit=True)
    assert skip is not None
    entry = skip.entries[FLAKY]
    assert entry.mode == "skip" and not entry.hand_added
    assert entry.quarantined_at == at(35)
    assert entry.expires == at(35) + 30 * DAY
    assert entry.reason == "lifecycle: 7 days in warning"


def test_warning_falls_back_to_watching_then_none_with_hysteresis(
    db: sqlite_utils.Database, skip_path: Path
) -> None:
    hb = HistoryBuilder(db)
    for day in range(46):
        if day < 30:
            pattern = "PP" if day < 20 else "RRP"
        else:  # many passes, one flaky run every third day keeps the verdict flaky
            pattern = "PPPPPPPPPR" if day % 3 == 0 else "P" * 14
        runs(hb, BACK, day, pattern)
    plan, _ = run_lifecycle(db, at(45), skip_path)
    steps = [(t.before, t.after, (t.day - on(0)).days) for t in plan.transitions]
    # Scores: day 35 0.139 (< 0.15: leave warning); days 36-39 0.135..0.104 stay watching
    # (above the 0.10 leave threshold although below the 0.15 enter one); day 40 0.093.
    assert steps == [
        ("none", "watching", 22),
        ("watching", "warning", 28),
        ("warning", "watching", 35),
        ("watching", "none", 40),
    ]
    assert state_of(plan, BACK) == "none"
    assert all(t.pending and t.by == LIFECYCLE for t in plan.transitions)
    # Past days' transitions are dated the end of their day.
    assert [(r["action"], r["ts"], r["source"]) for r in audit_rows(db)] == [
        ("lifecycle:none->watching", "2026-01-23T23:59:59Z", "lifecycle"),
        ("lifecycle:watching->warning", "2026-01-29T23:59:59Z", "lifecycle"),
        ("lifecycle:warning->watching", "2026-02-05T23:59:59Z", "lifecycle"),
        ("lifecycle:watching->none", "2026-02-10T23:59:59Z", "lifecycle"),
    ]
    assert not skip_path.exists()


def test_release_after_ten_clean_runs_removes_the_lifecycle_entry(
    db: sqlite_utils.Database, skip_path: Path
) -> None:
    hb = HistoryBuilder(db)
    flaky_timeline(hb)
    run_lifecycle(db, at(35), skip_path)
    # The nightly --flaketui-quarantined-only job: nine clean runs, a flaky one, then ten.
    for day in range(36, 56):
        runs(hb, FLAKY, day, "R" if day == 45 else "P", suite="nightly")
    plan, _ = run_lifecycle(db, at(54), skip_path)
    assert state_of(plan, FLAKY) == "quarantined"
    assert plan.states[FLAKY].clean_runs == 9
    last_id = max(int(r["id"]) for r in audit_rows(db))  # type: ignore[call-overload]
    plan, applied = run_lifecycle(db, at(55), skip_path)
    released = [t for t in plan.transitions if t.after == "none"]
    assert [(t.before, t.day, t.reason) for t in released] == [
        ("quarantined", on(55), "10 consecutive clean runs while quarantined")
    ]
    assert released[0].ts == at(55, 6)  # the tenth clean run
    assert applied.released == [FLAKY]
    skip = read_skip_file(skip_path, explicit=True)
    assert skip is not None and FLAKY not in skip.entries
    rows = audit_rows(db, last_id)
    assert [(r["action"], r["source"], r["ts"]) for r in rows[:2]] == [
        ("release", "lifecycle", "2026-02-25T06:00:00Z"),
        ("lifecycle:quarantined->none", "lifecycle", "2026-02-25T06:00:00Z"),
    ]
    # Ten clean runs since its last failure: resolved, it leaves the lifecycle.
    assert state_of(plan, FLAKY) in ("none", "watching")


def test_release_by_a_person(db: sqlite_utils.Database, skip_path: Path) -> None:
    hb = HistoryBuilder(db)
    flaky_timeline(hb)
    run_lifecycle(db, at(35), skip_path)
    release(
        db, skip_path, FLAKY, reason="fixed the fixture", now=at(40, 10), who="alice", source="cli"
    )
    last_id = max(int(r["id"]) for r in audit_rows(db))  # type: ignore[call-overload]
    plan, applied = run_lifecycle(db, at(41), skip_path)
    released = [t for t in plan.transitions if t.before in QUARANTINED and t.after == "none"]
    assert len(released) == 1
    assert released[0].by == "alice" and released[0].recorded
    assert released[0].ts == at(40, 10)
    assert state_of(plan, FLAKY) != "quarantined"
    # The person's release is already audited: the lifecycle writes no release of its own.
    written = [r["action"] for r in audit_rows(db, last_id)]
    assert "release" not in written and "lifecycle:quarantined->none" not in written
    assert applied.released == []


def quarantined_by_bob_then_clean(db: sqlite_utils.Database, skip_path: Path) -> None:
    """FLAKY's flaky timeline to day 30, quarantined by bob then, one clean run a day to 40."""
    hb = HistoryBuilder(db)
    flaky_timeline(hb, last_day=30)
    quarantine(
        db, skip_path, FLAKY, reason="mine", now=at(30), who="bob", source="cli", config=Config()
    )
    for day in range(31, 41):
        runs(hb, FLAKY, day, "P", suite="nightly")


def test_clean_runs_keep_an_entry_a_person_added(
    db: sqlite_utils.Database, skip_path: Path
) -> None:
    quarantined_by_bob_then_clean(db, skip_path)
    plan, applied = run_lifecycle(db, at(40), skip_path)
    released = [t for t in plan.transitions if t.before == "quarantined" and t.after == "none"]
    assert [t.effect for t in released] == ["keep"]
    assert applied.kept == [FLAKY] and applied.released == []
    skip = read_skip_file(skip_path, explicit=True)
    assert skip is not None and FLAKY in skip.entries


def test_clean_runs_count_for_a_test_released_by_a_person_since(
    db: sqlite_utils.Database, skip_path: Path
) -> None:
    """The replay reads the runs of every test it quarantines, also one no longer quarantined
    at the end: ten clean runs released it before the person did."""
    quarantined_by_bob_then_clean(db, skip_path)
    release(db, skip_path, FLAKY, reason="fixed", now=at(42, 10), who="alice", source="cli")
    plan = derive(db, now=at(43), config=Config(), skip=read_skip_file(skip_path, explicit=True))
    released = [t for t in plan.transitions if t.before in QUARANTINED and t.after == "none"]
    assert [(t.ts, t.reason, t.effect) for t in released] == [
        (at(40, 6), "10 consecutive clean runs while quarantined", "keep")
    ]


def test_a_quarantine_by_a_person_starts_the_clock(
    db: sqlite_utils.Database, skip_path: Path
) -> None:
    flaky_timeline(HistoryBuilder(db), last_day=23)
    quarantine(
        db, skip_path, FLAKY, reason="mine", now=at(23, 9), who="bob", source="app", config=Config()
    )
    plan = derive(db, now=at(53), config=Config(), skip=read_skip_file(skip_path, explicit=True))
    steps = [(t.before, t.after, t.day, t.by) for t in plan.transitions]
    assert steps == [
        ("none", "watching", on(22), LIFECYCLE),
        ("watching", "quarantined", on(23), "bob"),
        ("quarantined", "fix_or_delete", on(53), LIFECYCLE),
    ]


def test_a_hand_written_entry_counts_as_quarantined(
    db: sqlite_utils.Database, skip_path: Path
) -> None:
    flaky_timeline(HistoryBuilder(db), last_day=23)
    skip_path.write_text(
        json.dumps(
            {
                "format": "flaketui-skip-file",
                "version": 1,
                "tests": {FLAKY: {"quarantined_at": "2026-01-24T08:00:00Z"}},
            }
        )
    )
    plan = derive(db, now=at(60), config=Config(), skip=read_skip_file(skip_path, explicit=True))
    assert state_of(plan, FLAKY) == "fix_or_delete"
    assert plan.states[FLAKY].quarantined_by == "hand"


def test_an_entry_written_after_now_is_not_replayed(
    db: sqlite_utils.Database, skip_path: Path
) -> None:
    """With an earlier --now, an entry quarantined later did not exist yet: no state, no release."""
    flaky_timeline(HistoryBuilder(db), last_day=23)
    skip_path.write_text(
        json.dumps(
            {
                "format": "flaketui-skip-file",
                "version": 1,
                "tests": {FLAKY: {"quarantined_at": at(70).strftime("%Y-%m-%dT%H:%M:%SZ")}},
            }
        )
    )
    plan = derive(db, now=at(60), config=Config(), skip=read_skip_file(skip_path, explicit=True))
    assert plan.states[FLAKY].quarantined_by != "hand"
    assert not [t for t in plan.transitions if t.by == "hand"]


# --- who enters --------------------------------------------------------------------------------


def test_a_regression_never_enters(db: sqlite_utils.Database, skip_path: Path) -> None:
    hb = HistoryBuilder(db)
    for day in range(40):
        runs(hb, BROKEN, day, "PP" if day < 20 else "XX")
    plan, applied = run_lifecycle(db, at(39), skip_path)
    verdicts = {t.test_id: t.verdict for t in plan.report.tests}
    assert verdicts[BROKEN] == "regression"
    assert plan.states[BROKEN].score > 0.5 if BROKEN in plan.states else True
    assert [t for t in plan.transitions if t.test_id == BROKEN] == []
    assert state_of(plan, BROKEN) == "none"
    assert not skip_path.exists()
    assert [r["action"] for r in audit_rows(db)] == [REGRESSION_NOTED]
    assert applied.noted == [BROKEN]


def test_a_new_test_waits_out_its_grace_days(db: sqlite_utils.Database, skip_path: Path) -> None:
    # Warning after one day and quarantine one day later, were it not for the grace days.
    quick = Config(warning_days=1, auto_quarantine_days=1)
    hb = HistoryBuilder(db)
    for day in range(9):
        runs(hb, NEW, day, "RRPP")
    first_seen = at(0, 6)
    for night in range(3, 7):  # from the night it has N_min runs and a flaky verdict
        plan = derive(db, now=at(night), config=quick)
        assert state_of(plan, NEW) == "warning", night
        assert plan.states[NEW].note == "in grace until 2026-01-08T06:00:00Z"
    plan = derive(db, now=at(7), config=quick)
    auto = [t for t in plan.transitions if t.after == "quarantined"]
    assert [(t.day, t.by) for t in auto] == [(on(7), LIFECYCLE)]
    assert auto[0].ts >= first_seen + 7 * DAY
    # With the default clocks a test in its first week cannot even reach the end of warning.
    assert state_of(derive(db, now=at(6), config=Config()), NEW) == "warning"
    # A person still can quarantine it.
    quarantine(
        db, skip_path, NEW, reason="noisy", now=at(2), who="carol", source="cli", config=quick
    )
    plan = derive(db, now=at(3), config=quick, skip=read_skip_file(skip_path, explicit=True))
    assert state_of(plan, NEW) == "quarantined"
    assert plan.states[NEW].quarantined_by == "carol"


def test_lifecycle_states_lists_tracked_tests_only(db: sqlite_utils.Database) -> None:
    hb = HistoryBuilder(db)
    flaky_timeline(hb, last_day=30)
    for day in range(31):
        runs(hb, "tests/test_ok.py::test_ok", day, "P")
    states = derive(db, now=at(30), config=Config()).tracked()
    assert {t: s.state for t, s in states.items()} == {FLAKY: "warning"}


# --- applying ---------------------------------------------------------------------------------


def test_missed_nights_are_caught_up(
    db: sqlite_utils.Database, skip_path: Path, tmp_path: Path
) -> None:
    flaky_timeline(HistoryBuilder(db), last_day=40)
    copy_dir = tmp_path / "copy"
    copy_dir.mkdir()
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copy(tmp_path / "history.db", copy_dir / "history.db")
    nightly = open_history(copy_dir / "history.db")
    for night in range(20, 41):
        run_lifecycle(nightly, at(night), copy_dir / ".quarantine.json")
    # The same history applied once, three weeks late.
    _, applied = run_lifecycle(db, at(40), skip_path)

    def actions(history: sqlite_utils.Database) -> list[tuple[object, str]]:
        return [(r["action"], str(r["ts"])[:10]) for r in audit_rows(history)]

    assert actions(db) == actions(nightly)
    assert [t.action for t in applied.transitions] == [
        "lifecycle:none->watching",
        "lifecycle:watching->warning",
        "lifecycle:warning->quarantined",
    ]
    # A quarantine caught up late still gets its full expiry, skip_expiry_days after the
    # apply, to the second: whole days counted from the transition fell up to a day short.
    entry = read_skip_file(skip_path, explicit=True).entries[FLAKY]  # type: ignore[union-attr]
    assert entry.quarantined_at == T0 + 35 * DAY + timedelta(hours=23, minutes=59, seconds=59)
    assert entry.expires == at(40) + 30 * DAY


def test_apply_is_idempotent(db: sqlite_utils.Database, skip_path: Path) -> None:
    hb = HistoryBuilder(db)
    flaky_timeline(hb, last_day=40)
    for day in range(40):
        runs(hb, BROKEN, day, "PP" if day < 20 else "XX")
    _, first = run_lifecycle(db, at(40), skip_path)
    assert first.transitions and first.noted == [BROKEN]
    rows, text = audit_rows(db), skip_path.read_bytes()
    plan, second = run_lifecycle(db, at(40), skip_path)
    assert second.transitions == [] and second.noted == [] and second.quarantined == []
    assert plan.pending == []
    assert all(t.recorded for t in plan.transitions)
    assert audit_rows(db) == rows
    assert skip_path.read_bytes() == text


def test_a_long_watch_is_not_rewritten_as_the_window_slides(
    db: sqlite_utils.Database, skip_path: Path
) -> None:
    hb = HistoryBuilder(db)
    for day in range(102):
        runs(hb, FLAKY, day, "RPPPP")  # a steady ~0.2 score: watched for ever, never warned
    plan, first = run_lifecycle(db, at(100), skip_path)
    # The replay starts window_days (90) back: the watch is dated that first day.
    assert [(t.action, t.day) for t in first.transitions] == [
        ("lifecycle:none->watching", on(100 - 89))
    ]
    for night in (101, 101, 102):
        plan, later = run_lifecycle(db, at(night), skip_path)
        assert later.transitions == []
        assert state_of(plan, FLAKY) == "watching"
        assert plan.states[FLAKY].since == on(11)


def test_a_warned_test_that_is_no_longer_flaky_falls_back_today(
    db: sqlite_utils.Database, skip_path: Path
) -> None:
    hb = HistoryBuilder(db)
    flaky_timeline(hb, last_day=30)
    run_lifecycle(db, at(30), skip_path)
    for day in range(31, 34):
        runs(hb, FLAKY, day, "PPPPP")  # ten clean runs since the last failure: resolved
    plan, applied = run_lifecycle(db, at(33), skip_path)
    assert {t.test_id: t.verdict for t in plan.report.tests}[FLAKY] == "healthy"
    assert [(t.action, t.day, t.reason) for t in applied.transitions] == [
        ("lifecycle:warning->none", on(33), "verdict healthy as of now, not flaky")
    ]
    # The recorded warning is followed, not re-derived: nothing else is written.
    assert run_lifecycle(db, at(33), skip_path)[1].transitions == []


def test_a_recorded_quarantine_outlives_a_verdict_change(
    db: sqlite_utils.Database, skip_path: Path
) -> None:
    hb = HistoryBuilder(db)
    flaky_timeline(hb)
    run_lifecycle(db, at(35), skip_path)
    # The test broke for good while quarantined (mode run keeps it running).
    for day in range(36, 45):
        runs(hb, FLAKY, day, "XX")
    plan, applied = run_lifecycle(db, at(44), skip_path)
    assert {t.test_id: t.verdict for t in plan.report.tests}[FLAKY] == "regression"
    assert state_of(plan, FLAKY) == "quarantined"
    assert applied.transitions == [] and applied.quarantined == []
    assert applied.noted == [FLAKY]  # the gate reports the hidden regression once


def test_an_undated_hand_entry_has_no_clock(db: sqlite_utils.Database, skip_path: Path) -> None:
    hb = HistoryBuilder(db)
    for day in range(60):
        runs(hb, BACK, day, "P")
    skip_path.write_text(
        json.dumps({"format": "flaketui-skip-file", "version": 1, "tests": {BACK: {}}})
    )
    skip = read_skip_file(skip_path, explicit=True)
    for night in (40, 59):
        plan = derive(db, now=at(night), config=Config(), skip=skip)
        assert state_of(plan, BACK) == "quarantined"
        assert plan.pending == []
        assert plan.states[BACK].quarantined_by == "hand"


# --- gate ------------------------------------------------------------------------------------


def test_gate_bits(db: sqlite_utils.Database, skip_path: Path) -> None:
    hb = HistoryBuilder(db)
    for day in range(40):
        runs(hb, BROKEN, day, "PP" if day < 20 else "XX")
        runs(hb, BACK, day, "P")
    config = Config()

    def gate_code() -> int:
        skip = read_skip_file(skip_path, explicit=True)
        plan = derive(db, now=at(39), config=config, skip=skip)
        return gate_findings(db, plan, skip, config=config).code

    assert gate_code() == GATE_NEW_REGRESSIONS
    run_lifecycle(db, at(39), skip_path)
    assert gate_code() == 0  # acknowledged by the regression-noted row
    skip_path.write_text(
        json.dumps(
            {
                "format": "flaketui-skip-file",
                "version": 1,
                "tests": {
                    BACK: {"expires": "2026-02-01T00:00:00Z"},
                    "tests/test_gone.py::test_gone": {},
                },
            }
        )
    )
    assert gate_code() == GATE_EXPIRED | GATE_UNMATCHED


def test_a_later_regression_is_new_again(db: sqlite_utils.Database, skip_path: Path) -> None:
    hb = HistoryBuilder(db)
    for day in range(30):
        runs(hb, BROKEN, day, "PP" if day < 20 else "XX")
    run_lifecycle(db, at(29), skip_path)
    for day in range(30, 45):
        runs(hb, BROKEN, day, "PP" if day < 40 else "XX")
    skip = read_skip_file(skip_path, explicit=True)
    plan = derive(db, now=at(44), config=Config(), skip=skip)
    assert [v.test_id for v in gate_findings(db, plan, skip, config=Config()).new_regressions] == [
        BROKEN
    ]


# --- the replay as a pure function -------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    scores=st.lists(st.floats(min_value=0.0, max_value=0.99), min_size=1, max_size=60),
    runs_=st.lists(st.tuples(st.integers(0, 59), st.booleans()), max_size=40),
    people=st.lists(
        st.tuples(st.integers(0, 59), st.sampled_from(["quarantine", "release"])), max_size=4
    ),
    enters=st.booleans(),
    seen_day=st.integers(-10, 59),
)
def test_replay_invariants(
    scores: list[float],
    runs_: list[tuple[int, bool]],
    people: list[tuple[int, str]],
    enters: bool,
    seen_day: int,
) -> None:
    config = Config(
        warning_days=2,
        auto_quarantine_days=3,
        fix_or_delete_days=9,
        removal_days=15,
        release_clean_runs=4,
    )
    start = datetime(2026, 3, 1, tzinfo=UTC)
    days = [(start + n * DAY).date() for n in range(len(scores))]
    now = start + (len(scores) - 1) * DAY + timedelta(hours=23)
    first_seen = start + seen_day * DAY
    walker = Walker(
        test_id="t",
        config=config,
        threshold=0.3,
        enters=enters,
        first_seen=first_seen,
        now=now,
        recorded=frozenset(),
    )
    events = [Event(start + d * DAY + timedelta(hours=12), "run", clean=c) for d, c in runs_]
    events += [Event(start + d * DAY + timedelta(hours=9), k, by="dave") for d, k in people]
    replay(walker, days, scores, [e for e in events if e.ts <= now])
    previous = "none"
    for step in walker.transitions:
        assert step.before == previous and step.after in STATES and step.after != step.before
        previous = step.after
        if step.by == LIFECYCLE and step.after in ("watching", "warning"):
            assert enters  # only a flaky test enters
        if step.by == LIFECYCLE and step.after == "quarantined":
            assert enters
            assert step.ts >= first_seen + config.grace_days * DAY
        assert step.ts <= now
    assert walker.state == previous


REPLAY_START = datetime(2026, 3, 1, tzinfo=UTC)


def _replayed(
    config: Config,
    scores: list[float],
    runs_: list[tuple[int, int, bool]],
    people: list[tuple[int, str]],
    enters: bool = True,
) -> tuple[Walker, Walker, list[date], list[tuple[datetime, bool]], list[Event]]:
    """Two fresh walkers of one test over len(scores) days from REPLAY_START, its runs
    (day, hour, clean) up to now as (moment, clean), and the people's decisions at 09:00."""
    start = REPLAY_START
    days = [(start + n * DAY).date() for n in range(len(scores))]
    now = start + (len(scores) - 1) * DAY + timedelta(hours=23)
    runs = [(start + d * DAY + timedelta(hours=h), c) for d, h, c in runs_]
    decisions = [Event(start + d * DAY + timedelta(hours=9), k, by="dave") for d, k in people]
    first, second = (
        Walker(
            test_id="t",
            config=config,
            threshold=0.3,
            enters=enters,
            first_seen=start - 30 * DAY,
            now=now,
            recorded=frozenset(),
        )
        for _ in range(2)
    )
    return (
        first,
        second,
        days,
        [(ts, clean) for ts, clean in runs if ts <= now],
        [ev for ev in decisions if ev.ts <= now],
    )


@settings(max_examples=150, deadline=None)
@example(  # the quarantine goes before a run of its moment, which counts towards a release
    scores=[0.0] * 4, runs_=[(1, 9, True), (2, 12, True), (3, 12, True)], people=[(1, "quarantine")]
)
@example(  # runs of one moment in the order given: the failing last one breaks the streak
    scores=[0.0] * 4,
    runs_=[(1, 9, True), (1, 9, True), (1, 9, False), (2, 12, True), (2, 12, True)],
    people=[(1, "quarantine")],
)
@given(
    scores=st.lists(st.floats(min_value=0.0, max_value=0.99), min_size=1, max_size=40),
    runs_=st.lists(st.tuples(st.integers(0, 39), st.sampled_from([9, 12]), st.booleans())),
    people=st.lists(
        st.tuples(st.integers(0, 39), st.sampled_from(["quarantine", "release"])), max_size=4
    ),
)
def test_runs_given_apart_replay_as_run_events(
    scores: list[float],
    runs_: list[tuple[int, int, bool]],
    people: list[tuple[int, str]],
) -> None:
    """Runs handed to the replay as (moment, clean) tuples are walked as the same runs given
    as events: in time order, after the decisions of their moment, in the order given."""
    config = Config(auto_quarantine_days=3, release_clean_runs=3)
    as_events, apart, days, runs, decisions = _replayed(config, scores, runs_, people)
    replay(as_events, days, scores, [*decisions, *(Event(ts, "run", clean=c) for ts, c in runs)])
    replay(apart, days, scores, decisions, runs)
    assert apart.transitions == as_events.transitions
    assert (apart.state, apart.clean_runs) == (as_events.state, as_events.clean_runs)


@settings(max_examples=150, deadline=None)
@given(
    scores=st.lists(st.floats(min_value=0.0, max_value=0.99), min_size=1, max_size=40),
    runs_=st.lists(st.tuples(st.integers(-5, 39), st.sampled_from([9, 12]), st.booleans())),
    people=st.lists(
        st.tuples(st.integers(-5, 39), st.sampled_from(["quarantine", "release"])), max_size=3
    ),
    enters=st.booleans(),
)
def test_a_test_never_quarantined_without_its_runs_walks_the_same_with_them(
    scores: list[float],
    runs_: list[tuple[int, int, bool]],
    people: list[tuple[int, str]],
    enters: bool,
) -> None:
    """What lets derive read only the runs of the tests its replay quarantines: runs move a
    test only while it is quarantined, so a replay without them that never quarantines the
    test is the replay with them."""
    config = Config(warning_days=2, auto_quarantine_days=3, release_clean_runs=2)
    without, with_runs, days, runs, decisions = _replayed(config, scores, runs_, people, enters)
    replay(without, days, scores, decisions)
    replay(with_runs, days, scores, decisions, runs)
    if not any(move.after in QUARANTINED for move in without.transitions):
        assert with_runs.transitions == without.transitions
        assert (with_runs.state, with_runs.clean_runs) == (without.state, 0)


NOW_PLAN = datetime(2026, 11, 2, tzinfo=UTC)


def _planned_move(
    test_id: str, after: str, *, by: str = LIFECYCLE, recorded: bool = False
) -> Transition:
    moment = datetime(2026, 11, 1, 23, 59, 59)
    return Transition(test_id, "watching", after, date(2026, 11, 1), moment, "r", by, recorded)


def test_only_a_state_reached_by_an_unwritten_lifecycle_move_awaits_apply() -> None:
    states = {
        name: SimpleNamespace(state=state)
        for name, state in [
            ("pending", "quarantined"),
            ("written", "quarantined"),
            ("by_hand", "quarantined"),
            ("moved_on", "fix_or_delete"),
            ("untracked", "none"),
        ]
    }
    transitions = [
        _planned_move("pending", "quarantined"),
        _planned_move("written", "quarantined", recorded=True),
        _planned_move("by_hand", "quarantined", by="alice"),
        _planned_move("moved_on", "quarantined"),
        _planned_move("moved_on", "fix_or_delete", recorded=True),
    ]
    plan = Plan(now=NOW_PLAN, transitions=transitions, states=states, report=None)  # type: ignore[arg-type]
    assert plan.awaiting_apply() == {"pending"}
    assert set(plan.tracked()) == {"pending", "written", "by_hand", "moved_on"}


def test_the_replayed_runs_are_held_as_untracked_tuples(db: sqlite_utils.Database) -> None:
    """Runs wait for their replay as tuples of atoms, which a full collection skips: as objects,
    hundreds of thousands of them lengthened every full collection (a pause of the whole app)."""
    flaky_timeline(HistoryBuilder(db))
    moments = run_moments(db, [FLAKY], at(35), 90, Config())
    gc.collect()
    assert len(moments[FLAKY]) == 20 * 2 + 16 * 3
    assert moments[FLAKY][-1] == (at(35, 8), True)
    assert not any(gc.is_tracked(moment) for moment in moments[FLAKY])
