"""Gate findings of the lifecycle and `--apply`: audit rows and skip-file effects of a Plan.

Gate bits (combined by OR into the exit status of `flaketui lifecycle`):
- 4 `new regressions`: a test whose verdict as of now is `regression` and that no
  `regression-noted` audit row acknowledges (one dated at or after the first run of its first
  bad commit; without a known change point, any within the window). `--apply` writes those
  rows, so a nightly `--apply` reports each regression once while a gating job that only
  reads keeps failing until it is applied.
- 8 `expired entries`: skip-file entries whose expiry date has passed.
- 16 `unmatched entries`: skip-file entries naming no test (nor family parent) that ran in
  the window: a renamed or deleted test.

Applying writes, oldest first, each pending transition as an audit row (action
`lifecycle:<from>-><to>`, dated the transition, written_at the apply's now, source
`lifecycle`), after its skip-file effect: an auto quarantine adds a `skip` entry through
quarantine.actions (its quarantined_at and its audit row's ts are the transition, its
written_at the apply's now, its expiry skip_expiry_days after the apply, so a caught-up entry
is not born expired), unless a person decided since it was due (the skip file lists the test:
their entry stays; a recorded release follows it: the test stays out); an auto release removes
the entry only when the lifecycle added it (a person's or a hand-written entry is kept and
reported), its row dated likewise. Re-applying with the same now writes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from flaketui.core.config import Config
from flaketui.core.history.dbhandle import Connected
from flaketui.core.history.store import transaction
from flaketui.core.owners import OwnerResolver, find_repo_root
from flaketui.core.quarantine.actions import quarantine, release
from flaketui.core.quarantine.lifecycle import LIFECYCLE, Plan, Transition
from flaketui.core.quarantine.machine import QUARANTINED
from flaketui.core.quarantine.skipfile import (
    SkipEntry,
    SkipFile,
    read_skip_file,
    refuse_read_only,
)
from flaketui.core.scoring.results import TestVerdict, Verdict
from flaketui.core.timeutil import parse_iso, to_iso

GATE_NEW_REGRESSIONS = 4
GATE_EXPIRED = 8
GATE_UNMATCHED = 16
REGRESSION_NOTED = "regression-noted"


@dataclass(slots=True)
class Gate:
    """What CI can gate on, as of now."""

    new_regressions: list[TestVerdict] = field(default_factory=list)
    expired: list[SkipEntry] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)

    @property
    def code(self) -> int:
        """The exit status bits of these findings (0 when there are none)."""
        code = GATE_NEW_REGRESSIONS if self.new_regressions else 0
        code |= GATE_EXPIRED if self.expired else 0
        return code | (GATE_UNMATCHED if self.unmatched else 0)


@dataclass(slots=True)
class Applied:
    """What one `--apply` wrote."""

    transitions: list[Transition] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # auto releases whose entry a person owns
    noted: list[str] = field(default_factory=list)  # regressions acknowledged


_NOTED = """
SELECT ts FROM audit_log WHERE action = ? AND test_id = ? AND ts > ? AND ts <= ?
ORDER BY ts DESC LIMIT 1
"""

_FIRST_RUN_OF_COMMIT = "SELECT min(ts) FROM runs WHERE commit_sha = ?"


def _acknowledged(db: Connected, verdict: TestVerdict, now: datetime, window: int) -> bool:
    """Whether a regression-noted row covers this regression."""
    since = to_iso(now - timedelta(days=window))
    if verdict.first_bad_commit is not None:
        row = db.conn.execute(_FIRST_RUN_OF_COMMIT, (verdict.first_bad_commit,)).fetchone()
        if row is not None and row[0] is not None:
            # A note written before the regression began is about an earlier one.
            since = to_iso(parse_iso(str(row[0])) - timedelta(seconds=1))
    found = db.conn.execute(
        _NOTED, (REGRESSION_NOTED, verdict.test_id, since, to_iso(now))
    ).fetchone()
    return found is not None


_RAN_IN_WINDOW = """
SELECT DISTINCT t.test_id, t.parent FROM test_runs tr JOIN tests t ON t.id = tr.test
WHERE tr.ts > ? AND tr.ts <= ?
"""


def gate_findings(db: Connected, plan: Plan, skip: SkipFile | None, *, config: Config) -> Gate:
    """New regressions, expired skip-file entries and entries matching no test."""
    now = plan.now
    gate = Gate()
    gate.new_regressions = [
        v
        for v in plan.report.tests
        if v.verdict == Verdict.REGRESSION and not _acknowledged(db, v, now, config.window_days)
    ]
    if skip is None:
        return gate
    gate.expired = skip.expired(now)
    seen: set[str] = set()
    start = to_iso(now - timedelta(days=config.window_days))
    for test_id, parent in db.conn.execute(_RAN_IN_WINDOW, (start, to_iso(now))):
        seen.update((str(test_id), str(parent)))
    gate.unmatched = sorted(t for t in skip.entries if t not in seen)
    return gate


_INSERT = """
INSERT INTO audit_log (ts, who, action, test_id, mode, reason, ticket, scores, source,
    written_at)
VALUES (?, ?, ?, ?, ?, ?, NULL, ?, 'lifecycle', ?)
"""


def _write_row(
    db: Connected,
    ts: datetime,
    written_at: datetime,
    who: str,
    action: str,
    test_id: str,
    reason: str,
    *,
    mode: str | None = None,
    score: float | None = None,
) -> None:
    scores = None if score is None else json.dumps({"recency_score": round(score, 6)})
    with transaction(db.conn):
        db.conn.execute(
            _INSERT,
            (to_iso(ts), who, action, test_id, mode, reason, scores, to_iso(written_at)),
        )


def _decided_since(plan: Plan, step: Transition, skip_path: Path) -> bool:
    """Whether a person decided on a caught-up quarantine's test since it was due: the skip
    file already lists it (their entry, mode, reason and ticket stay), or a recorded
    transition after it (their release) took it out of quarantine."""
    skip = read_skip_file(skip_path, explicit=True)
    if skip is not None and step.test_id in skip.entries:
        return True
    later = plan.transitions[plan.transitions.index(step) + 1 :]
    return any(
        t.test_id == step.test_id
        and not t.pending
        and t.before in QUARANTINED
        and t.after not in QUARANTINED
        for t in later
    )


def apply_plan(
    db: Connected,
    plan: Plan,
    gate: Gate,
    *,
    skip_path: Path,
    config: Config,
    who: str,
    owners_from: Path | None = None,
) -> Applied:
    """Write the pending transitions, their skip-file effects and the regression notes.

    A quarantine's owner comes from owners_from (a CODEOWNERS file, or a folder to search),
    by default the repository holding the skip file."""
    applied = Applied()
    if any(step.effect in ("quarantine", "release") for step in plan.pending):
        # Before any row is written: a read-only skip file refused halfway would leave the
        # transitions before it applied and the rest not.
        refuse_read_only(skip_path.absolute())
    if any(step.effect == "quarantine" for step in plan.pending):
        # A CODEOWNERS that is not UTF-8 is refused (CodeownersError) before any row too.
        root = (
            owners_from if owners_from is not None else find_repo_root(skip_path.absolute().parent)
        )
        OwnerResolver(root, config)
    for step in plan.pending:
        if step.effect == "quarantine" and not _decided_since(plan, step, skip_path):
            # Expiry runs from the apply, so a quarantine caught up days late is not stale.
            quarantine(
                db,
                skip_path,
                step.test_id,
                reason=f"lifecycle: {step.reason}",
                mode="skip",
                expires_days=config.skip_expiry_days,
                expires_from=plan.now,
                repo_root=owners_from,
                now=step.ts,
                scored_at=step.ts,
                written_at=plan.now,
                who=who,
                source=LIFECYCLE,
                config=config,
                replace=True,  # only an entry written since _decided_since read the file
            )
            applied.quarantined.append(step.test_id)
        elif step.effect in ("release", "keep"):
            skip = read_skip_file(skip_path, explicit=True)
            entry = skip.entries.get(step.test_id) if skip is not None else None
            if entry is not None and step.effect == "release" and not entry.hand_added:
                release(
                    db,
                    skip_path,
                    step.test_id,
                    reason=f"lifecycle: {step.reason}",
                    now=step.ts,
                    written_at=plan.now,
                    who=who,
                    source=LIFECYCLE,
                )
                applied.released.append(step.test_id)
            elif entry is not None:
                applied.kept.append(step.test_id)
        mode = "skip" if step.effect == "quarantine" else None
        _write_row(
            db,
            step.ts,
            plan.now,
            who,
            step.action,
            step.test_id,
            step.reason,
            mode=mode,
            score=step.score,
        )
        applied.transitions.append(step)
    for verdict in gate.new_regressions:
        _write_row(db, plan.now, plan.now, who, REGRESSION_NOTED, verdict.test_id, verdict.reason)
        applied.noted.append(verdict.test_id)
    return applied
