"""Plain data passed between the parsers, the run metadata detector and the store writer."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

OUTCOMES = ("pass", "fail", "error", "skipped")
BRANCH_KINDS = ("main", "pr", "release")
# The most workers a run can have: the largest integer a history server's column holds (a
# history file's holds more).
MAX_WORKER_COUNT = 2**31 - 1


@dataclass(slots=True)
class Attempt:
    """One execution of one test: an outcome and what it left behind."""

    outcome: str  # one of OUTCOMES
    duration_ms: int | None = None
    message: str | None = None  # raw failure text; masked and capped by the writer
    worker_id: str | None = None
    predecessor: str | None = None  # test id that ran just before on the same worker
    position: int | None = None  # 1-based order of the attempt on its worker
    timeout_ms: int | None = None  # the per-test timeout in force (pytest-timeout), if any


@dataclass(slots=True)
class CaseResult:
    """All attempts of one test found at one place in a report, in the order they ran."""

    test_id: str  # pytest node id where known, else 'classname::name'
    test_file: str | None
    attempts: list[Attempt]


@dataclass(slots=True)
class RunMeta:
    """What is known about a CI run; None means 'unknown, detect or default it'."""

    run_id: str | None = None
    suite: str | None = None
    branch: str | None = None
    branch_kind: str | None = None  # one of BRANCH_KINDS
    commit_sha: str | None = None
    ts: datetime | None = None  # aware, UTC
    worker_count: int | None = None
    runner_host: str | None = None
    ci_url: str | None = None
    incident: str | None = None
    changed_files: list[str] = field(default_factory=list)
    os: str | None = None  # 'Linux', 'Darwin', 'Windows'
    python: str | None = None  # '3.12.4'
    platform: str | None = None  # 'linux-x86_64'
    order_seed: str | None = None  # 'randomly:42', 'random-order:1234[:bucket]' when shuffled
    # The fields a person gave (flags, a manifest line) rather than a default or a guess: only
    # these can disagree with the run a report is added to (runmeta.metadata_conflicts).
    given: frozenset[str] = frozenset()
