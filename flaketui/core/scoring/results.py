"""Result types of scoring: what `flaketui report`, the app and the lifecycle consume."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


@dataclass(slots=True)
class Suspect:
    """A dimension value under which the target fails more than in the rest of its runs."""

    dimension: str
    value: str
    bad: int
    runs: int
    rate: float
    rest_bad: int
    rest_runs: int
    rest_rate: float
    p_value: float  # Benjamini-Hochberg adjusted
    p_raw: float
    label: str  # a short "likely cause" text


class Verdict(StrEnum):
    """What the verdict rules decide for one test or group; compares and prints as its value."""

    INSUFFICIENT = "insufficient"
    HEALTHY = "healthy"
    FLAKY = "flaky"
    REGRESSION = "regression"


@dataclass(slots=True)
class Scores:
    """Every score of one test or one pooled group (family or signature).

    A slotted object rather than a named tuple: the garbage collector stops walking exact
    tuples of plain values only, never a subclass of tuple, so a named tuple would save nothing.
    """

    runs: int = 0  # counted runs in the window (skipped, incident and edited runs excluded)
    flaky_runs: int = 0  # runs where a failed attempt was followed by a passing one
    failed_runs: int = 0  # bad runs: the first attempt failed or errored
    fail_rate: float = 0.0  # failed_runs / runs
    wilson_low: float = 0.0  # Wilson interval of fail_rate
    wilson_high: float = 0.0
    flip_rate: float = 0.0
    flip_rate_low: float = 0.0
    flake_rate_low: float = 0.0  # Wilson low of bad runs / runs in the current regime (damage)
    current_runs: int = 0  # runs since the latest change in the daily bad-run rate (or all)
    current_bad_runs: int = 0
    runs_per_week: float = 0.0
    blast_radius: float = 0.0
    damage: float = 0.0  # expected blocked merges per week
    recency_score: float = 0.0  # in [0, 1)
    last_failure_at: datetime | None = None


@dataclass(slots=True)
class TestVerdict:
    """One test's scores, verdict and explanation."""

    test_id: str
    parent: str
    suite: str
    test_file: str | None
    scores: Scores
    verdict: Verdict
    reason: str
    # Flags and suspects are tuples: an empty one is shared and a tuple of strings is soon
    # untracked, where two lists per test lengthened every full garbage collection.
    flags: tuple[str, ...] = ()
    rank: int | None = None  # position in the flaky triage list
    regression_rank: int | None = None
    signature: str | None = None  # hash of the most frequent signature in the window
    signature_text: str | None = None
    owner: str | None = None
    first_bad_commit: str | None = None
    last_good_commit: str | None = None
    # Recency score per day, oldest first: a tuple of floats, which the garbage collector does
    # not track (a list per test at 10 000 tests lengthened every full collection).
    daily_scores: tuple[float, ...] = ()
    onset: str | None = None  # 'YYYY-MM-DD' the current flaking began (flaky verdicts only)
    causes: tuple[Suspect, ...] = ()  # flaky only, see scoring.causes


@dataclass(slots=True)
class GroupVerdict:
    """A pooled group: a parametrized family, the tests sharing a failure signature, or flaky
    tests failing in the same runs (a co-failure group)."""

    key: str  # family parent id, signature hash, or co-failure key
    label: str  # parent id, signature text, or the co-failure group's name
    members: list[str]  # test ids
    scores: Scores
    verdict: Verdict
    reason: str
    rank: int | None = None
    owner: str | None = None
    flags: tuple[str, ...] = ()  # tuples, as a test's
    regression_rank: int | None = None
    daily_scores: tuple[float, ...] = ()  # pooled recency per day, oldest first (untracked)
    onset: str | None = None  # 'YYYY-MM-DD' the current flaking began (flaky verdicts only)
    causes: tuple[Suspect, ...] = ()  # flaky families, co-failure groups


@dataclass(slots=True)
class Report:
    """The ranked, explained triage list for one history as of `now`."""

    now: datetime
    window_days: int
    config: dict[str, Any]
    tests: list[TestVerdict]
    families: list[GroupVerdict]
    signatures: list[GroupVerdict]
    now_was_clamped: bool = False  # history older than the window: shown as of its newest run
    # Flaky tests failing in the same runs, grouped (flaketui.core.scoring.cofailure)
    cofailures: list[GroupVerdict] = field(default_factory=list)
    # Suspected outages excluded from scoring while awaiting review (flaketui.core.history.outages)
    proposed_incidents: list[dict[str, Any]] = field(default_factory=list)
    # Runs in the window that never finished (a killed recording): scored for the tests they
    # recorded, every stored attempt having really happened
    interrupted_runs: int = 0
    # The window has runs, none of them on the default branch (whatever suite or branch kind
    # the report shows): bad runs between good ones are flake evidence only there, so a test
    # failing on and off without retries is judged healthy. Said wherever a ranking is read.
    no_default_branch_runs: bool = False
