"""The CI gate: what changed since a point in the history, and whether a job should fail on it.

The point is a run id (the state as of that run, that run included) or a duration back from
`now` (`30m`, `12h`, `7d`, `2w`); by default it is the moment just before the newest run at or
before `now`, which is what a job that has just ingested its own run wants to hear about.

Reasons, each enabled by `fail_on` (all but `confirmed-regression` by default):
- `new-flaky`: a test flaky as of now that was not flaky as of the point;
- `regression`: any open regression as of now (new or not: it blocks merges until fixed);
- `confirmed-regression`: the same, leaving out the suspected ones (a bad streak on the default
  branch still too short to be sure of, often one bad run): for a gate that should not fail on
  the first bad main run of a test (`regression` includes these; naming both is `regression`);
- `quarantine-expired`: a skip-file entry whose expiry date has passed;
- `damage` (only with a ceiling): the flaky tests' damage, summed, above the ceiling.

The Markdown summary lists the new flaky tests, the new regressions with their first bad commit,
and the quarantines added, released (audit log) or expired since the point (entries that expired
before it are named once more, since they are still in the skip file). Added and released are
the audit rows written since the point, each shown with the date of its decision: the
lifecycle's `--apply` dates a quarantine the day its clock ran out, which may be days before
the apply that wrote it. Under its status it gives the notices of the ranking as of now
(`report_notices`: no run on the default branch, suspected outages awaiting review with the
command that lists them, interrupted runs), which the command prints too and which never fail
the gate. Everything that came from CI (test ids, reasons, owners, commits) is escaped twice:
HTML-escaped, since GitHub and GitLab render HTML in Markdown, and backslash-escaped, so it
cannot open a link, a table cell or emphasis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from flaketui.core.config import Config
from flaketui.core.errors import FlaketuiError
from flaketui.core.history.dbhandle import Connected
from flaketui.core.output.notices import report_notices
from flaketui.core.output.text import md_text, one_line
from flaketui.core.quarantine.skipfile import SkipEntry, SkipFile
from flaketui.core.scoring.report import VERDICT_ORDER, build_report, effective_now
from flaketui.core.scoring.results import Report, TestVerdict, Verdict
from flaketui.core.timeutil import MAX_DAYS, parse_iso, to_iso
from flaketui.core.words import plural

REASONS = ("new-flaky", "regression", "confirmed-regression", "quarantine-expired")
DEFAULT_REASONS = ("new-flaky", "regression", "quarantine-expired")
SUSPECTED_FLAG = "suspected"  # the verdict flag of a regression from a short main streak
DAMAGE_REASON = "damage"
SUMMARY_TEXT_CHARS = 120
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")


class SinceError(FlaketuiError):
    """A `since` that is neither a run of the history nor a duration."""


@dataclass(slots=True, frozen=True)
class Quarantine:
    """One quarantine decision written to the audit log since the point."""

    ts: datetime  # the date of the decision (the row's ts), not when it was written
    test_id: str
    who: str
    reason: str


@dataclass(slots=True)
class CheckResult:
    """What changed between the point and now, and the reasons a gate fails."""

    now: datetime
    since: datetime
    since_label: str  # how the point was given, for people ("run 1234", "7d", ...)
    window_days: int
    counts: dict[Verdict, int]  # tests per verdict as of now
    new_flaky: list[TestVerdict] = field(default_factory=list)
    regressions: list[TestVerdict] = field(default_factory=list)  # every open regression
    new_regressions: list[TestVerdict] = field(default_factory=list)
    added: list[Quarantine] = field(default_factory=list)
    released: list[Quarantine] = field(default_factory=list)
    expired: list[SkipEntry] = field(default_factory=list)
    total_damage: float = 0.0
    max_damage: float | None = None
    fail_on: tuple[str, ...] = DEFAULT_REASONS
    failures: list[tuple[str, str]] = field(default_factory=list)  # (reason, one line)
    # What the ranking as of now leaves out or counts in part (report_notices): said, never
    # a reason to fail
    notices: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """Whether the gate fails."""
        return bool(self.failures)


def parse_fail_on(text: str) -> tuple[str, ...]:
    """The reasons named in a comma-separated list (an empty list disables them all)."""
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [name for name in names if name not in REASONS]
    if unknown:
        raise FlaketuiError(
            f"unknown reason {unknown[0]!r} (choose from {', '.join(REASONS)}, comma-separated)"
        )
    return names


def parse_duration(text: str) -> timedelta | None:
    """`12h`, `7d`, `2w`... as a timedelta; None when the text is not a duration. SinceError
    when it is one longer than MAX_DAYS."""
    found = _DURATION.match(text)
    if found is None:
        return None
    digits = found.group(1).lstrip("0") or "0"
    longest = MAX_DAYS * DURATION_UNITS["d"]
    # More digits than the longest has is too long, whatever the unit (and int() never sees them).
    seconds = longest + 1 if len(digits) > len(str(longest)) else int(digits)
    seconds *= DURATION_UNITS[found.group(2)]
    if seconds > longest:
        raise SinceError(f"--since {text!r}: longer than {MAX_DAYS} days")
    return timedelta(seconds=seconds)


def resolve_since(db: Connected, now: datetime, since: str | None) -> tuple[datetime, str]:
    """The point to compare with, and how to name it."""
    if since is None:
        row = db.conn.execute(
            "SELECT run_id, ts FROM runs WHERE ts <= ? ORDER BY ts DESC, id DESC LIMIT 1",
            (to_iso(now),),
        ).fetchone()
        if row is None:
            return now, "now (no runs yet)"
        return parse_iso(str(row[1])) - timedelta(seconds=1), f"before run {row[0]}"
    duration = parse_duration(since)
    if duration is not None:
        return now - duration, since.strip()
    row = db.conn.execute("SELECT ts FROM runs WHERE run_id = ?", (since,)).fetchone()
    if row is None:
        raise SinceError(
            f"--since {since!r}: no run with that id in the history, and not a duration "
            "such as 12h, 7d or 2w"
        )
    point = parse_iso(str(row[0]))
    if point > now:
        raise SinceError(
            f"--since {since!r}: that run is at {to_iso(point)}, after the time checked "
            f"({to_iso(now)})"
        )
    return point, f"run {since}"


_AUDIT_SINCE = """
SELECT ts, who, action, test_id, coalesce(reason, '') FROM audit_log
WHERE action IN ('quarantine', 'release') AND written_at > ? AND written_at <= ?
ORDER BY written_at, id
"""


def check(
    db: Connected,
    *,
    now: datetime | None = None,
    since: str | None = None,
    config: Config | None = None,
    skip: SkipFile | None = None,
    fail_on: tuple[str, ...] = DEFAULT_REASONS,
    max_damage: float | None = None,
    repo_root: Path | None = None,
    history: str | None = None,
) -> CheckResult:
    """Compare the history as of now with the history as of the point, and judge the gate.
    history: the history as the user named it, for the command the outage notice ends with."""
    config = config or Config()
    moment, _clamped = effective_now(db, now, config)
    point, label = resolve_since(db, moment, since)
    # The gate reads tests only: no groups, no daily series; and of the point before, only
    # the verdicts of the tests flaky or in regression now (new or not).
    current = build_report(db, now=moment, config=config, repo_root=repo_root, groups=False)
    judged = {t.test_id for t in current.tests if t.verdict in ("flaky", "regression")}
    before = build_report(
        db, now=point, config=config, repo_root=repo_root, groups=False, only=judged
    )
    verdict_then = {t.test_id: t.verdict for t in before.tests}
    result = CheckResult(
        now=moment,
        since=point,
        since_label=label,
        window_days=current.window_days,
        counts=_counts(current),
        max_damage=max_damage,
        fail_on=fail_on,
        notices=report_notices(current, history, None if now is None else to_iso(now)),
    )
    result.new_flaky = [
        t for t in current.tests if t.verdict == "flaky" and verdict_then.get(t.test_id) != "flaky"
    ]
    result.regressions = [t for t in current.tests if t.verdict == "regression"]
    result.new_regressions = [
        t for t in result.regressions if verdict_then.get(t.test_id) != "regression"
    ]
    for ts, who, action, test_id, reason in db.conn.execute(
        _AUDIT_SINCE, (to_iso(point), to_iso(moment))
    ):
        entry = Quarantine(parse_iso(str(ts)), str(test_id), str(who), str(reason))
        (result.added if action == "quarantine" else result.released).append(entry)
    result.expired = skip.expired(moment) if skip is not None else []
    result.total_damage = sum(t.scores.damage for t in current.tests if t.verdict == "flaky")
    result.failures = _failures(result)
    return result


def _counts(report: Report) -> dict[Verdict, int]:
    """Tests per verdict, in the order a triage reads them."""
    counts = dict.fromkeys(VERDICT_ORDER, 0)
    for test in report.tests:
        counts[test.verdict] += 1
    return counts


def _failures(result: CheckResult) -> list[tuple[str, str]]:
    lines: list[tuple[str, str]] = []
    if "new-flaky" in result.fail_on:
        for test in result.new_flaky:
            lines.append(
                (
                    "new-flaky",
                    f"new-flaky: {one_line(test.test_id)} (damage {test.scores.damage:.2f}): "
                    f"{one_line(test.reason)}",
                )
            )
    if "regression" in result.fail_on or "confirmed-regression" in result.fail_on:
        confirmed_only = "regression" not in result.fail_on
        for test in result.regressions:
            if confirmed_only and SUSPECTED_FLAG in test.flags:
                continue
            commit, reason = "", test.reason
            if test.first_bad_commit:
                commit = f" since {one_line(test.first_bad_commit)}"
                # The line names the commit once: a reason's own "since commit X" goes.
                reason = reason.replace(f" since commit {test.first_bad_commit}", "", 1)
            lines.append(
                ("regression", f"regression: {one_line(test.test_id)}{commit}: {one_line(reason)}")
            )
    if "quarantine-expired" in result.fail_on:
        for entry in result.expired:
            expires = to_iso(entry.expires) if entry.expires is not None else "?"
            lines.append(
                (
                    "quarantine-expired",
                    f"quarantine-expired: {one_line(entry.test_id)} expired {expires}",
                )
            )
    if result.max_damage is not None and result.total_damage > result.max_damage:
        lines.append(
            (
                DAMAGE_REASON,
                f"damage: the flaky tests block {result.total_damage:.2f} merges a week, "
                f"above the ceiling of {result.max_damage:g}",
            )
        )
    return lines


# --- Markdown summary ---------------------------------------------------------------------


def _shorten(text: str | None) -> str | None:
    """A failure signature cut to SUMMARY_TEXT_CHARS characters."""
    if text is None or len(text) <= SUMMARY_TEXT_CHARS:
        return text
    return text[: SUMMARY_TEXT_CHARS - 1] + "…"


def _table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def render_summary(result: CheckResult) -> str:
    """The Markdown summary: fit for `$GITHUB_STEP_SUMMARY` or a merge-request note."""
    status = (
        f"fails: {len(result.failures)} problem{'' if len(result.failures) == 1 else 's'}"
        if result.failed
        else "passes"
    )
    counts = ", ".join(
        plural(count, verdict) if verdict == Verdict.REGRESSION else f"{count} {verdict}"
        for verdict, count in result.counts.items()
    )
    out = [
        f"### flaketui check {status}",
        "",
        f"As of {to_iso(result.now)}, changes since {to_iso(result.since)} "
        f"({md_text(result.since_label)}); window {plural(result.window_days, 'day')}: {counts}.",
    ]
    for notice in result.notices:
        out += ["", f"⚠ {md_text(notice)}"]
    if result.max_damage is not None:
        out += [
            "",
            f"Damage of the flaky tests: {result.total_damage:.2f} blocked merges a week "
            f"(ceiling {result.max_damage:g}).",
        ]
    if result.failures:
        out += ["", "Failing reasons:", ""]
        out += [f"- {md_text(line)}" for _reason, line in result.failures]
    out += ["", f"#### New flaky tests ({len(result.new_flaky)})", ""]
    if result.new_flaky:
        out += _table(
            ("Test", "Damage", "Owner", "Reason", "Failure"),
            [
                (
                    md_text(t.test_id),
                    f"{t.scores.damage:.2f}",
                    md_text(t.owner),
                    md_text(t.reason),
                    md_text(_shorten(t.signature_text)),
                )
                for t in result.new_flaky
            ],
        )
    else:
        out.append("None.")
    out += ["", f"#### New regressions ({len(result.new_regressions)})", ""]
    if result.new_regressions:
        out += _table(
            ("Test", "First bad commit", "Owner", "Reason"),
            [
                (
                    md_text(t.test_id),
                    md_text(t.first_bad_commit),
                    md_text(t.owner),
                    md_text(t.reason),
                )
                for t in result.new_regressions
            ],
        )
    else:
        out.append("None.")
    older = len(result.regressions) - len(result.new_regressions)
    if older:
        out += ["", f"{older} older regression{'' if older == 1 else 's'} still open."]
    out += ["", "#### Quarantines", ""]
    out += _quarantine_lines("Added", result.added)
    out += _quarantine_lines("Released", result.released)
    recent = [e for e in result.expired if e.expires is not None and e.expires > result.since]
    if recent:
        out.append(f"- Expired ({len(recent)}):")
        for entry in recent:
            expires = to_iso(entry.expires) if entry.expires is not None else "-"
            out.append(
                f"  - {md_text(entry.test_id)}, expired {expires}, owner {md_text(entry.owner)}"
            )
    else:
        out.append("- Expired: none.")
    older = len(result.expired) - len(recent)
    if older:
        out.append(
            f"- {older} more expired before, still in the skip file: "
            + ", ".join(
                f"{md_text(e.test_id)} (owner {md_text(e.owner)})"
                for e in result.expired
                if e not in recent
            )
            + "."
        )
    return "\n".join(out) + "\n"


def _quarantine_lines(title: str, entries: list[Quarantine]) -> list[str]:
    if not entries:
        return [f"- {title}: none."]
    lines = [f"- {title} ({len(entries)}):"]
    for entry in entries:
        lines.append(
            f"  - {md_text(entry.test_id)} by {md_text(entry.who)} on {to_iso(entry.ts)}: "
            f"{md_text(entry.reason)}"
        )
    return lines
