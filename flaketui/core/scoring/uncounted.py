"""Why a report lists no test: a filter that no run has, or the runs in its window that the
counting rule set aside.

A `--suite` or `--branch-kind` that no run of the history has selects nothing; naming the
suites or kinds there are turns a typo into something a user can see. A history whose every
run in the window is set aside (each commit edited the tests it ran, as in a repository's first
commit; every run tagged as an incident; only `flaketui diagnose` experiments; only skips)
scores nothing. Saying which rule set the runs aside turns an empty list into something a user
can act on. The rule itself is flaketui.core.rollups.evidence's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from flaketui.core.config import Config
from flaketui.core.history.dbhandle import Connected
from flaketui.core.timeutil import to_iso
from flaketui.core.words import plural


@dataclass(frozen=True, slots=True)
class SetAside:
    """Test-runs in the window, and how many of them each rule set aside (a test-run set
    aside by several rules is counted under the first: incident, experiment, skip, edit)."""

    test_runs: int
    incident: int
    experiment: int
    skipped: int
    edited: int


def set_aside(
    db: Connected,
    now: datetime,
    config: Config,
    suite: str | None = None,
    branch_kind: str | None = None,
) -> SetAside:
    """Count the window's test-runs by the rule that keeps each out of scoring."""
    start = to_iso(now - timedelta(days=config.window_days))
    filters, params = "", {"start": start, "end": to_iso(now)}
    if suite is not None:
        filters += " AND r.suite = :suite"
        params["suite"] = suite
    if branch_kind is not None:
        filters += " AND r.branch_kind = :branch_kind"
        params["branch_kind"] = branch_kind
    row = db.conn.execute(
        f"""
        SELECT count(*),
            total(r.incident IS NOT NULL),
            total(r.incident IS NULL AND r.source = 'diagnose'),
            total(r.incident IS NULL AND r.source <> 'diagnose' AND tr.outcome = 'skipped'),
            total(r.incident IS NULL AND r.source <> 'diagnose' AND tr.outcome <> 'skipped'
                AND tr.edited <> 0)
        FROM runs r JOIN test_runs tr ON tr.run = r.id
        WHERE r.ts > :start AND r.ts <= :end AND tr.ts > :start AND tr.ts <= :end{filters}
        """,
        params,
    ).fetchone()
    return SetAside(*(int(value) for value in row))


def set_aside_reason(counts: SetAside) -> str | None:
    """Why the window's test-runs all stay out of scoring, one sentence without a full stop;
    None when there are none or no rule set them aside."""
    if counts.test_runs == 0:
        return None
    reasons = [
        (counts.edited, "ran on a commit that edited the test's file"),
        (counts.incident, "belong to runs tagged as an incident"),
        (counts.experiment, "are `flaketui diagnose` experiments"),
        (counts.skipped, "were skipped"),
    ]
    said = [f"{count} {text}" for count, text in reasons if count]
    if not said:
        return None
    reason = f"none of the window's {plural(counts.test_runs, 'test-run')} counts: "
    reason += "; ".join(said)
    if counts.edited:
        reason += " (runs on later commits that leave the file as it is will count)"
    return reason


def empty_report_note(counts: SetAside) -> str | None:
    """One line for a report that lists no test although its window holds test-runs, or None."""
    reason = set_aside_reason(counts)
    return None if reason is None else f"flaketui: {reason}"


def unmatched_filter_note(
    db: Connected, suite: str | None = None, branch_kind: str | None = None
) -> str | None:
    """One line when `suite`, or `branch_kind` (among the suite's runs), names no run of the
    history at all, with the values its runs have; None when each names some run."""
    if suite is not None:
        suites = _distinct(db, "suite")
        if suite not in suites:
            return (
                f"flaketui: no run of suite {suite!r} in the history; {_listed(suites, 'suites')}"
            )
    if branch_kind is not None:
        kinds = _distinct(db, "branch_kind", suite)
        if branch_kind not in kinds:
            of = f"suite {suite!r}" if suite is not None else "the history"
            return f"flaketui: no {branch_kind!r} run in {of}; {_listed(kinds, 'branch kinds')}"
    return None


def _distinct(db: Connected, column: str, suite: str | None = None) -> list[str]:
    """The values of a column of runs (of one suite), sorted."""
    where, params = ("WHERE suite = ?", (suite,)) if suite is not None else ("", ())
    rows = db.conn.execute(f"SELECT DISTINCT {column} FROM runs {where} ORDER BY 1", params)
    return [str(value) for (value,) in rows]


def _listed(values: list[str], what: str) -> str:
    """`its suites: 'a', 'b'`, or that there is no run at all."""
    if not values:
        return "it holds no run"
    return f"its {what}: {', '.join(repr(value) for value in values)}"
