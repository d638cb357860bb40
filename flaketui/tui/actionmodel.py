"""Pure helpers of the detail screen and the actions: repro command, pooling, names, cycles."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from flaketui.core.scoring.results import GroupVerdict, TestVerdict
from flaketui.core.testids import parent_of


def repro_command(
    test_id: str,
    verdict: str,
    *,
    first_bad: str | None = None,
    last_good: str | None = None,
    worst_worker_count: int | None = None,
    repeat: int = 50,
    seed_replay: Sequence[str] | None = None,
) -> str:
    """A copyable command that reproduces the problem: a git bisect for a regression, else
    the replay of the latest bad run's random order when its seed was recorded (seed_replay,
    flaketui.core.scoring.order.SeedReplay.command), else a repeat run."""
    quoted = shlex.quote(test_id)
    if verdict == "regression" and first_bad and last_good:
        return f"git bisect start {first_bad} {last_good} && git bisect run pytest {quoted}"
    if seed_replay:
        return shlex.join(seed_replay)
    workers = f" -n {worst_worker_count}" if worst_worker_count and worst_worker_count > 1 else ""
    return f"pytest {quoted} --count={repeat}{workers} -p no:randomly"


def worker_count_of(row: Any) -> int:
    """The worker count of a pivot row (its key is the count as text)."""
    key = str(getattr(row, "key", ""))
    return int(key) if key.isdigit() else 0


def worst_worker_count(rows: Sequence[Any]) -> int | None:
    """The worker count whose runs fail most often (ties: the larger count)."""
    candidates = [r for r in rows if getattr(r, "runs", 0) > 0]
    if not candidates:
        return None
    best = max(candidates, key=lambda r: (r.fail_rate, r.wilson_low, worker_count_of(r)))
    return worker_count_of(best)


BRANCH_KIND_CYCLE: tuple[str | None, ...] = (None, "main", "pr", "release")


def next_in_cycle(options: Sequence[Any], current: Any) -> Any:
    """The option after `current`, wrapping around (the first when current is unknown)."""
    if current not in options:
        return options[0] if options else None
    return options[(list(options).index(current) + 1) % len(options)]


def quarantine_reason(item: TestVerdict | GroupVerdict) -> str:
    """The prefilled quarantine reason: the verdict's own reason and the headline scores."""
    scores = item.scores
    return (
        f"{item.verdict}: {item.reason}; damage {scores.damage:.2f}/wk, "
        f"recency {scores.recency_score:.2f}"
    )


EXPORT_EXTENSIONS = {
    "json": "json",
    "csv": "csv",
    "markdown": "md",
    "deselect": "txt",
    "list": "txt",
}


def default_export_name(view: str, fmt: str) -> str:
    """A file name for an export of one view."""
    return f"flaketui-{view}.{EXPORT_EXTENSIONS.get(fmt, 'txt')}"


_SEVERITY = {"fail": 3, "flaky": 2, "pass": 1, "skipped": 0}


def pool_by_run(outcomes: Sequence[Any]) -> list[Any]:
    """A family's outcomes pooled per run, as the scorer pools them: the worst param wins.

    The pooled row keeps the worst param's fields; its test_id names that param and how many
    other params of the run were bad, or, when none was, the family and how many params ran
    ("... (all 84)"): any one param would name a test the run has nothing against.
    """
    pooled: list[Any] = []
    by_run: dict[str, list[Any]] = {}
    order: list[str] = []
    for outcome in outcomes:
        if outcome.run_id not in by_run:
            by_run[outcome.run_id] = []
            order.append(outcome.run_id)
        by_run[outcome.run_id].append(outcome)
    for run_id in order:
        members = by_run[run_id]
        worst = max(members, key=lambda o: _SEVERITY.get(o.outcome, 0))
        bad = sum(1 for o in members if o.outcome in ("fail", "flaky"))
        if not bad and len(members) > 1:
            label = f"{parent_of(worst.test_id)} (all {len(members)})"
        else:
            label = worst.test_id + (f" (+{bad - 1} more)" if bad > 1 else "")
        pooled.append(replace(worst, test_id=label))
    return pooled
