"""The lifecycle state machine of one test, as a pure replay (see quarantine.lifecycle)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum

from flaketui.core.config import Config
from flaketui.core.scoring.results import Verdict
from flaketui.core.timeutil import to_iso
from flaketui.core.words import plural


class LifecycleState(StrEnum):
    """Where a test stands in the quarantine lifecycle; compares and prints as its value."""

    NONE = "none"
    WATCHING = "watching"
    WARNING = "warning"
    QUARANTINED = "quarantined"
    FIX_OR_DELETE = "fix_or_delete"
    REMOVAL_RECOMMENDED = "removal_recommended"


STATES = tuple(LifecycleState)
QUARANTINED = frozenset(
    {
        LifecycleState.QUARANTINED,
        LifecycleState.FIX_OR_DELETE,
        LifecycleState.REMOVAL_RECOMMENDED,
    }
)
LIFECYCLE = "lifecycle"  # Transition.by for transitions the lifecycle itself makes
PERSON_SOURCES = ("cli", "app")


@dataclass(slots=True, frozen=True)
class Transition:
    """One change of lifecycle state of one test."""

    test_id: str
    before: LifecycleState
    after: LifecycleState
    day: date
    ts: datetime
    reason: str
    by: str = LIFECYCLE  # LIFECYCLE, or the person whose audit row (or hand entry) made it
    recorded: bool = False  # already in the audit log
    effect: str | None = None  # skip-file effect: "quarantine" | "release" | "keep" | None
    score: float | None = None  # the recency score of its day (the day before, for events)

    @property
    def action(self) -> str:
        """The audit-log action of this transition."""
        return f"lifecycle:{self.before}->{self.after}"

    @property
    def pending(self) -> bool:
        """Whether `--apply` would write it: the lifecycle's own and not yet recorded."""
        return self.by == LIFECYCLE and not self.recorded


@dataclass(slots=True)
class TestState:
    """Where one tracked test stands as of `now`."""

    test_id: str
    state: LifecycleState = LifecycleState.NONE
    since: date | None = None  # the day the current state began
    score: float = 0.0  # recency score as of now
    threshold: float = 0.0  # its suite's quarantine threshold
    verdict: Verdict | None = None  # verdict as of now; None when the report does not list it
    quarantined_since: date | None = None
    quarantined_by: str | None = None
    clean_runs: int = 0  # consecutive clean runs since the quarantine began
    note: str = ""


@dataclass(slots=True, frozen=True)
class Event:
    """Something that happened at a moment: a run of the test or a quarantine decision."""

    ts: datetime
    kind: str  # "run" | "quarantine" | "release" (a person's) | "state" (a lifecycle row)
    by: str = LIFECYCLE  # who decided: a person, "hand" (a skip-file entry) or the lifecycle
    clean: bool = False  # runs: every attempt passed
    clock: bool = True  # quarantines: whether ts starts the quarantine clock
    before: LifecycleState = LifecycleState.NONE  # state events: the recorded transition
    after: LifecycleState = LifecycleState.NONE
    reason: str = ""


def day_end(day: date, now: datetime) -> datetime:
    """The moment a day's score-driven transitions are dated: 23:59:59 UTC, or now for today."""
    end = datetime.combine(day, time(23, 59, 59), tzinfo=UTC)
    return min(end, now)


@dataclass(slots=True)
class Walker:
    """The replay of one test: its state, streaks and clocks, and the transitions so far."""

    test_id: str
    config: Config
    threshold: float
    enters: bool  # verdict flaky as of now: score-driven transitions allowed
    first_seen: datetime | None
    now: datetime
    recorded: frozenset[tuple[str, str, str]]
    verdict: Verdict | None = None  # as of now, for the reason of a fall back to none
    state: LifecycleState = LifecycleState.NONE
    since: date | None = None
    high_days: int = 0  # consecutive days at or above the suite threshold
    warning_day: date | None = None
    q_start: datetime | None = None  # when the quarantine began (None: unknown, no clocks)
    q_by: str | None = None
    clean_runs: int = 0
    note: str = ""
    score: float | None = None  # the latest end-of-day score
    transitions: list[Transition] = field(default_factory=list)

    def move(
        self,
        after: LifecycleState,
        ts: datetime,
        reason: str,
        *,
        by: str = LIFECYCLE,
        effect: str | None = None,
        recorded: bool = False,
    ) -> None:
        """Record a transition; `recorded` marks one read from the audit log or skip file."""
        day = ts.date()
        key = (self.test_id, f"lifecycle:{self.state}->{after}", day.isoformat())
        self.transitions.append(
            Transition(
                test_id=self.test_id,
                before=self.state,
                after=after,
                day=day,
                ts=ts,
                reason=reason,
                by=by,
                recorded=recorded or by != LIFECYCLE or key in self.recorded,
                effect=effect,
                score=self.score,
            )
        )
        self.state, self.since = after, day

    def event(self, ev: Event) -> None:
        """Apply a run, a person's decision or a recorded lifecycle transition."""
        quarantined = self.state in QUARANTINED
        if ev.kind == "state":
            self._recorded(ev)
        elif ev.kind == "quarantine":
            if not quarantined:
                self.move(
                    LifecycleState.QUARANTINED,
                    ev.ts,
                    f"quarantined by {ev.by}",
                    by=ev.by,
                    recorded=True,
                )
                self.q_start = ev.ts if ev.clock else None
                self.clean_runs = 0
            self.q_by = ev.by  # a person re-quarantining takes the entry over
        elif ev.kind == "release" and quarantined:
            self._release(ev.ts, f"released by {ev.by}", by=ev.by, recorded=True)
        elif ev.kind == "run":
            self.run(ev.ts, ev.clean)

    def run(self, ts: datetime, clean: bool) -> None:
        """Apply a run of the test (`clean`: every attempt passed): while it is quarantined
        with a clock, consecutive clean runs release it. At any other time a run changes
        nothing (lifecycle.derive reads the runs of the tests its replay quarantines only)."""
        if self.q_start is None or self.state not in QUARANTINED:
            return
        self.clean_runs = self.clean_runs + 1 if clean else 0
        if self.clean_runs >= self.config.release_clean_runs:
            effect = "release" if self.q_by == LIFECYCLE else "keep"
            self._release(
                ts,
                f"{plural(self.clean_runs, 'consecutive clean run')} while quarantined",
                effect=effect,
            )

    def _recorded(self, ev: Event) -> None:
        """Follow a transition an earlier run wrote: once applied, it is a fact."""
        if ev.after == self.state:
            return
        day = ev.ts.date()
        self.transitions.append(
            Transition(self.test_id, ev.before, ev.after, day, ev.ts, ev.reason, recorded=True)
        )
        if ev.after in QUARANTINED and self.state not in QUARANTINED:
            # A row past the quarantine itself implies when the quarantine began.
            elapsed = {
                LifecycleState.FIX_OR_DELETE: self.config.fix_or_delete_days,
                LifecycleState.REMOVAL_RECOMMENDED: self.config.removal_days,
            }.get(ev.after, 0)
            self.q_start = ev.ts - timedelta(days=elapsed)
            self.q_by, self.clean_runs = LIFECYCLE, 0
        elif ev.after not in QUARANTINED and self.state in QUARANTINED:
            self.q_start = self.q_by = None
            self.clean_runs = self.high_days = 0
        self.warning_day = day if ev.after == LifecycleState.WARNING else None
        self.state, self.since = ev.after, day

    def _release(
        self,
        ts: datetime,
        reason: str,
        *,
        by: str = LIFECYCLE,
        effect: str | None = None,
        recorded: bool = False,
    ) -> None:
        self.move(LifecycleState.NONE, ts, reason, by=by, effect=effect, recorded=recorded)
        self.q_start = self.q_by = self.warning_day = None
        self.clean_runs = self.high_days = 0

    def end_of_day(self, day: date, score: float) -> None:
        """Judge a day on its end-of-day score and the quarantine clocks."""
        ts = day_end(day, self.now)
        cfg = self.config
        self.score = score
        self.high_days = self.high_days + 1 if score >= self.threshold else 0
        if self.state in QUARANTINED:
            self._clocks(day)
            return
        if not self.enters:
            if (
                self.state in (LifecycleState.WATCHING, LifecycleState.WARNING)
                and day == self.now.date()
            ):
                self.move(
                    LifecycleState.NONE,
                    ts,
                    f"verdict {self.verdict or 'unlisted'} as of now, not flaky",
                )
            return
        if self.state == LifecycleState.NONE and score >= cfg.watch_threshold:
            self.move(LifecycleState.WATCHING, ts, f"score {score:.3f} >= {cfg.watch_threshold:g}")
        if self.state == LifecycleState.WATCHING:
            if self.high_days >= cfg.warning_days:
                self.move(
                    LifecycleState.WARNING,
                    ts,
                    f"score >= {self.threshold:g} for {plural(self.high_days, 'day')}",
                )
                self.warning_day = day
            elif score < cfg.release_threshold:
                reason = f"score {score:.3f} < {cfg.release_threshold:g}"
                self.move(LifecycleState.NONE, ts, reason)
        if self.state == LifecycleState.WARNING:
            warned = self.warning_day or day
            if score < cfg.watch_threshold:
                self.move(
                    LifecycleState.WATCHING, ts, f"score {score:.3f} < {cfg.watch_threshold:g}"
                )
                self.warning_day = None
            elif (day - warned).days >= cfg.auto_quarantine_days:
                grace_end = self._grace_end()
                if grace_end is not None and ts < grace_end:
                    self.note = f"in grace until {to_iso(grace_end)}"
                    return
                self.note = ""
                days = (day - warned).days
                self.move(
                    LifecycleState.QUARANTINED,
                    ts,
                    f"{plural(days, 'day')} in warning",
                    effect="quarantine",
                )
                self.q_start, self.q_by, self.clean_runs = ts, LIFECYCLE, 0

    def _grace_end(self) -> datetime | None:
        if self.first_seen is None:
            return None
        return self.first_seen + timedelta(days=self.config.grace_days)

    def _clocks(self, day: date) -> None:
        """fix_or_delete and removal_recommended, dated the day their clock ran out."""
        if self.q_start is None:
            return
        start = self.q_start.date()
        for before, after, days in (
            (
                LifecycleState.QUARANTINED,
                LifecycleState.FIX_OR_DELETE,
                self.config.fix_or_delete_days,
            ),
            (
                LifecycleState.FIX_OR_DELETE,
                LifecycleState.REMOVAL_RECOMMENDED,
                self.config.removal_days,
            ),
        ):
            due = start + timedelta(days=days)
            if self.state == before and day >= due:
                # A clock that ran out before the replay's first day is dated when it ran out.
                self.move(after, day_end(due, self.now), f"{plural(days, 'day')} quarantined")


def replay(
    walker: Walker,
    days: list[date],
    scores: list[float],
    events: Iterable[Event],
    runs: Iterable[tuple[datetime, bool]] = (),
) -> None:
    """Walk a test through the days: events and runs in time order, then each day's end.

    `runs`: the test's runs as (moment, every attempt passed), beside any in `events`. A replay
    of many tests walks hundreds of thousands of runs, and one matters only while its test is
    quarantined: as plain tuples they cost a fraction of an Event each.
    """
    # In time order; at equal times decisions go first (a quarantine precedes the runs of its
    # moment), then runs, each kind in the order given.
    listed = list(events)
    pending: list[tuple[datetime, bool, int, Event | bool]] = sorted(
        [
            *((ev.ts, ev.kind == "run", index, ev) for index, ev in enumerate(listed)),
            *((ts, True, index, clean) for index, (ts, clean) in enumerate(runs, len(listed))),
        ]
    )
    at = 0
    first = days[0] if days else walker.now.date()
    while at < len(pending) and pending[at][0].date() < first:
        _apply(walker, pending[at])
        at += 1
    for day, score in zip(days, scores, strict=True):
        while at < len(pending) and pending[at][0].date() <= day:
            _apply(walker, pending[at])
            at += 1
        walker.end_of_day(day, score)


def _apply(walker: Walker, item: tuple[datetime, bool, int, Event | bool]) -> None:
    what = item[3]
    if isinstance(what, Event):
        walker.event(what)
    else:
        walker.run(item[0], what)
