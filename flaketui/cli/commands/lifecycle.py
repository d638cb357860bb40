"""`flaketui lifecycle`: derive the quarantine lifecycle, apply it, gate CI on it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from flaketui.cli import cli
from flaketui.cli.commands.quarantine import SKIP_FILE_OPTION, read_skip_for
from flaketui.cli.echo import echo_text
from flaketui.cli.history_address import HISTORY_ADDRESS, local_history
from flaketui.core.history.store import history_file
from flaketui.core.output.text import visible
from flaketui.core.owners import locate_codeowners
from flaketui.core.quarantine.machine import LifecycleState
from flaketui.core.timeutil import parse_iso, to_iso
from flaketui.core.words import plural

EXIT_CODES = """\b
Exit status (bits, combined by OR; --no-gate always exits 0 unless an error occurs):
  0   nothing to report
  1   error (bad input, unreadable history or skip file); 2: usage error
  4   new regressions: regression verdicts no regression-noted audit row acknowledges
      (--apply writes those rows, so each is reported once by a nightly --apply)
  8   expired skip-file entries
  16  skip-file entries matching no test that ran in the window
"""


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Left-aligned columns separated by two spaces, the last (the test) unpadded: as in
    report's table, a long test id runs on past the others instead of widening them all."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers[:-1])]
    return [
        "  ".join([*(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)), row[-1]])
        for row in [headers, *rows]
    ]


def _as_json(plan: Any, shown: list[Any], gate: Any, applied: Any, code: int) -> str:
    doc = {
        "now": to_iso(plan.now),
        "applied": applied is not None,
        "transitions": [
            {
                "test_id": t.test_id,
                "from": t.before,
                "to": t.after,
                "day": t.day.isoformat(),
                "ts": to_iso(t.ts),
                "reason": t.reason,
                "by": t.by,
                "recorded": t.recorded,
                "effect": t.effect,
                "score": None if t.score is None else round(t.score, 6),
            }
            for t in shown
        ],
        "states": [
            {
                "test_id": s.test_id,
                "state": s.state,
                "since": s.since.isoformat() if s.since else None,
                "score": round(s.score, 6),
                "threshold": s.threshold,
                "verdict": s.verdict,
                "quarantined_since": s.quarantined_since.isoformat()
                if s.quarantined_since
                else None,
                "quarantined_by": s.quarantined_by,
                "clean_runs": s.clean_runs,
                "note": s.note,
            }
            for s in sorted(plan.states.values(), key=lambda s: s.test_id)
            if s.state != LifecycleState.NONE
        ],
        "gate": {
            "new_regressions": [
                {"test_id": v.test_id, "reason": v.reason, "first_bad_commit": v.first_bad_commit}
                for v in gate.new_regressions
            ],
            "expired": [
                {"test_id": e.test_id, "expires": to_iso(e.expires) if e.expires else None}
                for e in gate.expired
            ],
            "unmatched": gate.unmatched,
            "exit_code": code,
        },
    }
    if applied is not None:
        doc["effects"] = {
            "quarantined": applied.quarantined,
            "released": applied.released,
            "kept": applied.kept,
            "regressions_noted": applied.noted,
        }
    return json.dumps(doc, indent=2, sort_keys=True)


def _as_text(plan: Any, shown: list[Any], gate: Any, applied: Any, show_all: bool) -> str:
    lines: list[str] = []
    as_of = to_iso(plan.now)
    if show_all:
        lines.append(f"Transitions as of {as_of}: {len(shown)}")
    else:
        title = "Applied" if applied is not None else "Would apply"
        lines.append(f"{title} as of {as_of}: {plural(len(shown), 'transition')}")
    if shown:
        headers = ["from", "to", "day", "reason", *(["by"] if show_all else []), "test"]
        rows = []
        for t in shown:
            # Escaped before the columns are measured, so that they line up as shown.
            row = [t.before, t.after, t.day.isoformat(), visible(t.reason)]
            if show_all:
                row.append(visible(t.by) + ("" if t.recorded else " (pending)"))
            rows.append([*row, visible(t.test_id)])
        lines.extend(_table(headers, rows))
    states = sorted(
        (s for s in plan.states.values() if s.state != LifecycleState.NONE), key=lambda s: s.test_id
    )
    lines.append("")
    lines.append(f"States: {plural(len(states), 'test')} in a lifecycle state")
    if states:
        rows = [
            [
                s.state,
                s.since.isoformat() if s.since else "-",
                f"{s.score:.3f}",
                s.note or "-",
                visible(s.test_id),
            ]
            for s in states
        ]
        lines.extend(_table(["state", "since", "score", "note", "test"], rows))
    if applied is not None and applied.kept:
        lines.append("")
        lines.append(
            "Kept (released by clean runs, entry owned by a person; use flaketui release):"
        )
        lines.extend(f"  {visible(test_id)}" for test_id in applied.kept)
    lines.append("")
    lines.append("Gate:")
    findings = [
        *(f"  new regression: {v.test_id} ({v.reason})" for v in gate.new_regressions),
        *(
            f"  expired entry: {e.test_id} (expired {to_iso(e.expires) if e.expires else '?'})"
            for e in gate.expired
        ),
        *(f"  entry matching no test: {test_id}" for test_id in gate.unmatched),
    ]
    # Each finding one line, whatever its test id holds.
    lines.extend([visible(finding) for finding in findings] or ["  ok"])
    return "\n".join(lines)


@cli.command("lifecycle", epilog=EXIT_CODES)
@click.argument("db", type=HISTORY_ADDRESS)
@click.option("--now", metavar="ISO", help="Derive the lifecycle as of this time (default: now).")
@click.option("--apply", "apply", is_flag=True, help="Write the skip file and the audit log.")
@click.option("--all", "show_all", is_flag=True, help="List recorded transitions too.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@click.option("--no-gate", is_flag=True, help="Exit 0 whatever the gate finds.")
@SKIP_FILE_OPTION
def lifecycle_command(
    db: Path | str,
    now: str | None,
    apply: bool,
    show_all: bool,
    fmt: str,
    no_gate: bool,
    skip_file: str | None,
) -> None:
    """Derive the quarantine lifecycle of history DB; print (or --apply) its transitions.

    States: watching (recency score >= watch_threshold), warning (>= the suite threshold on
    warning_days days running), quarantined (after auto_quarantine_days in warning, never in a
    test's first grace_days, or by a person), fix_or_delete (30 days quarantined),
    removal_recommended (60 days); released after release_clean_runs clean runs or by a
    person. Only flaky tests enter; regressions never do. See docs/lifecycle.md.
    """
    from flaketui.core.quarantine.actions import current_user
    from flaketui.core.quarantine.apply import apply_plan, gate_findings
    from flaketui.core.quarantine.lifecycle import derive
    from flaketui.core.scoring.report import effective_now

    # --apply creates a skip file that is named but not there yet.
    path, skip, config = read_skip_for(skip_file, creating=apply)
    history_path = local_history(db)
    with history_file(history_path, create=False, readonly=not apply) as history:
        moment, _clamped = effective_now(history, parse_iso(now) if now else None, config)
        plan = derive(history, now=moment, config=config, skip=skip)
        gate = gate_findings(history, plan, skip, config=config)
        applied = None
        if apply:
            applied = apply_plan(
                history,
                plan,
                gate,
                skip_path=path,
                config=config,
                who=current_user(),
                owners_from=locate_codeowners(history_path),
            )
    shown = plan.transitions if show_all else plan.pending
    code = 0 if no_gate else gate.code
    if fmt == "json":
        click.echo(_as_json(plan, shown, gate, applied, code))
    else:
        echo_text(_as_text(plan, shown, gate, applied, show_all))
    if code:
        click.get_current_context().exit(code)
