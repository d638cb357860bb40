"""Plain data passed between the parsers, the run metadata detector and the store writer."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

OUTCOMES = ("pass", "fail", "error", "skipped")
BRANCH_KINDS = ("main", "pr", "release")


@dataclass(slots=True)
class Attempt:
    """One execution of one test: an outcome and what it left behind."""

    outcome: str  # one of OUTCOMES
    duration_ms: int | None = None
    message: str | None = None  # raw failure text; masked and capped by the writer
    worker_id: str | None = None


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
