"""The quarantine lifecycle, derived for one `now` from the history and the audit log.

States: `none` → `watching` → `warning` → `quarantined` → `fix_or_delete` →
`removal_recommended`, and back to `none` on release. Derivation is a replay, deterministic for
a given `now`, database and skip file, so a missed night is caught up by the next run:

- Span: the last `window_days` days up to today; audit rows and skip-file entries from before
  it set the state it starts from. Day D is judged on its end-of-day recency score
  (flaketui.core.scoring.series; today: the score as of `now`). A transition derived from a score or
  a clock is dated the end of its day (23:59:59 UTC; today: `now`), a clock that ran out
  before the span the day it ran out, a release by clean runs the tenth clean run.
- Who enters: only tests whose verdict as of `now` is `flaky` get score-driven transitions
  (watching, warning, auto quarantine); a regression never enters, and is never quarantined
  by the lifecycle. Tests with lifecycle or quarantine rows in the audit log, or a skip-file
  entry, stay tracked whatever their verdict: quarantined ones for the clocks and the release
  by clean runs; a watched or warned one that is no longer flaky falls back to `none` today
  (reason: its verdict).
- Enter and leave thresholds differ (hysteresis): none → watching at score ≥ watch_threshold;
  watching → warning on warning_days consecutive days at ≥ the suite threshold; warning →
  watching only below watch_threshold; watching → none only below release_threshold.
- warning → quarantined after auto_quarantine_days in warning, never before grace_days after
  the test's first_seen (it waits in warning; a person can still quarantine it).
- quarantined → fix_or_delete at fix_or_delete_days and → removal_recommended at removal_days,
  both counted from the day the quarantine began (re-quarantining keeps that day).
- Release to `none` after release_clean_runs consecutive clean counted runs (all attempts
  passed) after the quarantine began, or when a person releases it. A released test restarts
  from `none` with its streaks reset, so it needs warning_days + auto_quarantine_days of high
  scores again before the lifecycle quarantines it anew.
- Audit-log inputs: a person's `quarantine` and `release` rows (source cli or app), and every
  `lifecycle:<from>-><to>` row an earlier `--apply` wrote: once applied a transition is a
  fact the replay follows (so a later history amendment, or a verdict that changed since,
  cannot undo a quarantine behind the skip file's back), and new transitions are derived from
  there. Hence re-applying with the same now writes nothing, and nightly runs and one late
  catch-up run write the same transitions (dated alike, to the day).
- Skip-file input: an entry no audit row explains (written by hand) counts as a quarantine by
  a person from its quarantined_at; without one it is quarantined with no clock and no
  release by clean runs (when it began is unknown). Entries a person owns (hand-written, or
  added with `flaketui quarantine` or the app) are never removed by an auto release: the
  release is recorded and the entry kept for the person to drop.
Only single tests are tracked; quarantining a whole family stays a person's decision.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from flaketui.core.config import Config
from flaketui.core.history.dbhandle import Connected
from flaketui.core.quarantine.machine import (
    LIFECYCLE,
    PERSON_SOURCES,
    QUARANTINED,
    STATES,
    Event,
    LifecycleState,
    TestState,
    Transition,
    Walker,
    day_end,
    replay,
)
from flaketui.core.quarantine.skipfile import SkipFile
from flaketui.core.rollups.evidence import counted_runs_cte
from flaketui.core.scoring.report import build_report
from flaketui.core.scoring.results import Report, TestVerdict, Verdict
from flaketui.core.scoring.series import daily_recency_scores
from flaketui.core.timeutil import parse_iso, to_iso

__all__ = [
    "LIFECYCLE",
    "QUARANTINED",
    "STATES",
    "Event",
    "LifecycleState",
    "Plan",
    "TestState",
    "Transition",
    "Walker",
    "day_end",
    "derive",
    "replay",
]


@dataclass(slots=True)
class Plan:
    """Every derived transition (oldest first) and each tracked test's state as of `now`."""

    now: datetime
    transitions: list[Transition]
    states: dict[str, TestState]
    report: Report

    @property
    def pending(self) -> list[Transition]:
        """The transitions `--apply` would write."""
        return [t for t in self.transitions if t.pending]

    def tracked(self) -> dict[str, TestState]:
        """The tests in a lifecycle state other than `none` (what the app's State column shows)."""
        return {t: s for t, s in self.states.items() if s.state != LifecycleState.NONE}

    def awaiting_apply(self) -> set[str]:
        """Tests whose current state comes from a transition `--apply` has not written yet."""
        last = {t.test_id: t for t in self.transitions}  # oldest first: the last one wins
        return {
            test_id
            for test_id, state in self.states.items()
            if test_id in last and last[test_id].pending and last[test_id].after == state.state
        }


# --- inputs -----------------------------------------------------------------------------------

_AUDIT = """
SELECT ts, who, action, test_id, source, reason FROM audit_log WHERE ts <= ? ORDER BY ts, id
"""


def _audit_inputs(
    db: Connected, now: datetime
) -> tuple[dict[str, list[Event]], frozenset[tuple[str, str, str]]]:
    """Decisions and recorded transitions per test, and the (test, action, day) of the latter."""
    events: dict[str, list[Event]] = defaultdict(list)
    keys: set[tuple[str, str, str]] = set()
    for ts_text, who, action, test_id, source, reason_text in db.conn.execute(
        _AUDIT, (to_iso(now),)
    ):
        ts = parse_iso(str(ts_text))
        if source in PERSON_SOURCES and action in ("quarantine", "release"):
            events[test_id].append(Event(ts, action, by=str(who)))
        elif source == LIFECYCLE and str(action).startswith("lifecycle:"):
            keys.add((test_id, str(action), ts.date().isoformat()))
            before, _, after = str(action).removeprefix("lifecycle:").partition("->")
            if before in STATES and after in STATES:
                reason = str(reason_text or "")
                events[test_id].append(
                    Event(
                        ts,
                        "state",
                        before=LifecycleState(before),
                        after=LifecycleState(after),
                        reason=reason,
                    )
                )
    return events, frozenset(keys)


def _enters_quarantine(ev: Event) -> bool:
    return ev.kind == "quarantine" or (ev.kind == "state" and ev.after in QUARANTINED)


def _first_seen(db: Connected) -> dict[str, datetime]:
    rows = db.conn.execute("SELECT test_id, first_seen FROM tests")
    return {str(test_id): parse_iso(str(seen)) for test_id, seen in rows}


def run_moments(
    db: Connected, test_ids: list[str], now: datetime, days: int, config: Config
) -> dict[str, list[tuple[datetime, bool]]]:
    """Each test's counted runs over the replay span: (moment, every attempt passed).

    Plain tuples of atoms, which the garbage collector stops tracking: a replay of many tests
    holds hundreds of thousands of runs, and as objects each one would lengthen every full
    collection, a pause of the whole process (the app's screen with it). replay walks them
    as they are.
    """
    wide = dataclasses.replace(config, window_days=days + 1)
    cte, params = counted_runs_cte(now, wide, test_ids=test_ids)
    sql = (
        f"WITH {cte} SELECT t.test_id, c.ts, c.outcome FROM counted c JOIN tests t ON t.id = c.test"
    )
    out: dict[str, list[tuple[datetime, bool]]] = defaultdict(list)
    # The tests of a run share its time: each distinct timestamp is parsed once.
    moments: dict[str, datetime] = {}
    for test_id, ts, outcome in db.conn.execute(sql, params):
        moment = moments.get(ts)
        if moment is None:
            moment = moments[ts] = parse_iso(str(ts))
        out[str(test_id)].append((moment, outcome == "pass"))
    return out


def derive(
    db: Connected,
    *,
    now: datetime,
    config: Config,
    skip: SkipFile | None = None,
    report: Report | None = None,
) -> Plan:
    """Replay the lifecycle of every flaky or quarantined test up to `now` (see the docstring)."""
    if report is None:
        report = build_report(db, now=now, config=config, groups=False)
    verdicts: Mapping[str, TestVerdict] = {t.test_id: t for t in report.tests}
    audit_events, recorded = _audit_inputs(db, now)
    first_seen = _first_seen(db)
    hand = {
        test_id: entry
        for test_id, entry in (skip.entries.items() if skip is not None else ())
        if test_id in first_seen
        # Replaying an earlier `now` (--now): an entry written after it did not exist yet.
        and (entry.quarantined_at is None or entry.quarantined_at <= now)
        and (entry.hand_added or not any(_enters_quarantine(ev) for ev in audit_events[test_id]))
    }
    tracked = {t for t, v in verdicts.items() if v.verdict == Verdict.FLAKY}
    tracked |= {t for t in audit_events if t in first_seen} | set(hand)
    today = now.date()
    span = config.window_days
    days = [today - timedelta(days=back) for back in range(span - 1, -1, -1)]
    ordered = sorted(tracked)
    series = daily_recency_scores(db, ordered, now=now, days=span, config=config)

    def walk(test_id: str, runs: Iterable[tuple[datetime, bool]] = ()) -> Walker:
        verdict = verdicts.get(test_id)
        walker = Walker(
            test_id=test_id,
            config=config,
            threshold=config.threshold_for(verdict.suite if verdict else ""),
            enters=verdict is not None and verdict.verdict == Verdict.FLAKY,
            verdict=verdict.verdict if verdict else None,
            first_seen=first_seen.get(test_id),
            now=now,
            recorded=recorded,
        )
        events = list(audit_events.get(test_id, ()))
        entry = hand.get(test_id)
        if entry is not None:
            moment = entry.quarantined_at
            start = moment if moment is not None and moment <= now else now - timedelta(days=span)
            events.append(Event(start, "quarantine", by="hand", clock=moment is not None))
        replay(walker, days, series.get(test_id, [0.0] * span), events, runs)
        return walker

    # A run moves a test only while it is quarantined (Walker.run): a test its replay without
    # runs never quarantines is never quarantined with them, and walks the same. Only the
    # others' runs are read, and those tests walked again with them.
    walkers = {test_id: walk(test_id) for test_id in ordered}
    quarantined = [
        test_id
        for test_id, walker in walkers.items()
        if any(move.after in QUARANTINED for move in walker.transitions)
    ]
    runs = run_moments(db, quarantined, now, span, config) if quarantined else {}
    for test_id in quarantined:
        walkers[test_id] = walk(test_id, runs.pop(test_id, ()))
    transitions: list[Transition] = []
    states: dict[str, TestState] = {}
    for test_id, walker in walkers.items():
        verdict = verdicts.get(test_id)
        scores = series.get(test_id, [0.0] * span)
        transitions.extend(walker.transitions)
        states[test_id] = TestState(
            test_id=test_id,
            state=walker.state,
            since=walker.since,
            score=scores[-1] if scores else 0.0,
            threshold=walker.threshold,
            verdict=verdict.verdict if verdict else None,
            quarantined_since=walker.q_start.date() if walker.q_start else None,
            quarantined_by=walker.q_by,
            clean_runs=walker.clean_runs,
            note=walker.note,
        )
    transitions.sort(key=lambda t: (t.ts, t.test_id))
    return Plan(now=now, transitions=transitions, states=states, report=report)
