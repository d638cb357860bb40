"""Render a Report as JSON (the stable interface), CSV, Markdown or a plain aligned table.

JSON is byte-stable for the same history and `--now`: keys sorted, floats rounded to 6 digits,
timestamps ISO 8601 UTC, lists in the report's deterministic order. `limit` truncates each
list after ranking; `group_by` ("family" | "signature" | "cofailure") switches what the table,
CSV and Markdown list (JSON always carries every list: tests, families, signatures, co-failures).
Sparklines scale each series to [0, max(series max, quarantine threshold)], so a low, flat
score stays low.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any

from flaketui.core.output.notices import report_notices
from flaketui.core.output.text import code_span, csv_table, md_text, visible
from flaketui.core.scoring.results import GroupVerdict, Report, Scores, Suspect, TestVerdict
from flaketui.core.timeutil import to_iso
from flaketui.core.words import plural

SCHEMA_VERSION = 2
FLOAT_DIGITS = 6
SPARK_BLOCKS = "▁▂▃▄▅▆▇█"


class ReportFormat(StrEnum):
    """The formats a report renders in; compares and prints as its value."""

    TABLE = "table"
    JSON = "json"
    CSV = "csv"
    MARKDOWN = "markdown"


FORMATS = tuple(fmt.value for fmt in ReportFormat)  # plain names, for option choices
GROUP_BYS = ("family", "signature", "cofailure")

TEST_KEYS = (
    "rank",
    "regression_rank",
    "test_id",
    "parent",
    "suite",
    "verdict",
    "reason",
    "flags",
    "damage",
    "recency_score",
    "runs",
    "flaky_runs",
    "failed_runs",
    "fail_rate",
    "wilson_low",
    "wilson_high",
    "flip_rate",
    "flip_rate_low",
    "runs_per_week",
    "blast_radius",
    "signature",
    "signature_text",
    "owner",
    "first_bad_commit",
    "last_good_commit",
    "last_failure_at",
    "flake_rate_low",
    "current_runs",
    "current_bad_runs",
    "onset",
    "causes",
)
SCORE_KEYS = (
    "damage",
    "recency_score",
    "runs",
    "flaky_runs",
    "failed_runs",
    "fail_rate",
    "wilson_low",
    "wilson_high",
    "flip_rate",
    "flip_rate_low",
    "runs_per_week",
    "blast_radius",
    "last_failure_at",
    "flake_rate_low",
    "current_runs",
    "current_bad_runs",
)
FAMILY_KEYS = (
    "parent",
    "params",
    "rank",
    "regression_rank",
    "verdict",
    "reason",
    "flags",
    "owner",
    "onset",
    *SCORE_KEYS,
    "causes",
)
SIGNATURE_KEYS = (
    "signature",
    "signature_text",
    "tests",
    "rank",
    "regression_rank",
    "verdict",
    "reason",
    "flags",
    "owner",
    "onset",
    *SCORE_KEYS,
)

COFAILURE_KEYS = (
    "key",
    "label",
    "tests",
    "rank",
    "regression_rank",
    "verdict",
    "reason",
    "flags",
    "owner",
    "onset",
    *SCORE_KEYS,
    "causes",
)


def _plain(value: Any) -> Any:
    """JSON-ready value: rounded floats (no -0.0), ISO timestamps, plain containers."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        rounded = round(value, FLOAT_DIGITS)
        return 0.0 if rounded == 0 else rounded
    if isinstance(value, datetime):
        return to_iso(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _scores(scores: Scores) -> dict[str, Any]:
    return {key: getattr(scores, key) for key in SCORE_KEYS}


def test_entry(test: TestVerdict) -> dict[str, Any]:
    """One `tests` entry of the JSON report: exactly TEST_KEYS."""
    entry = _scores(test.scores)
    entry.update(
        rank=test.rank,
        regression_rank=test.regression_rank,
        test_id=test.test_id,
        parent=test.parent,
        suite=test.suite,
        verdict=test.verdict,
        reason=test.reason,
        flags=list(test.flags),
        signature=test.signature,
        signature_text=test.signature_text,
        owner=test.owner,
        first_bad_commit=test.first_bad_commit,
        last_good_commit=test.last_good_commit,
        onset=test.onset,
    )
    plain = {key: _plain(entry[key]) for key in TEST_KEYS if key != "causes"}
    plain["causes"] = [cause_entry(c) for c in test.causes]
    return plain


def cause_entry(suspect: Suspect) -> dict[str, Any]:
    """One `causes` entry: a suspect dimension value (see flaketui.core.scoring.causes)."""
    return {
        "dimension": suspect.dimension,
        "value": suspect.value,
        "bad": suspect.bad,
        "runs": suspect.runs,
        "rate": _plain(suspect.rate),
        "rest_rate": _plain(suspect.rest_rate),
        # Significant digits, not decimals: a strong suspect's p-value is far below 1e-6.
        "p_value": float(f"{suspect.p_value:.6g}"),
        "label": suspect.label,
    }


def family_entry(group: GroupVerdict) -> dict[str, Any]:
    """One `families` entry: exactly FAMILY_KEYS."""
    entry = _scores(group.scores)
    entry.update(
        parent=group.key,
        params=len(group.members),
        **_group_common(group),
    )
    plain = {key: _plain(entry[key]) for key in FAMILY_KEYS if key != "causes"}
    plain["causes"] = [cause_entry(c) for c in group.causes]
    return plain


def signature_entry(group: GroupVerdict) -> dict[str, Any]:
    """One `signatures` entry: exactly SIGNATURE_KEYS (tests = the member ids)."""
    entry = _scores(group.scores)
    entry.update(
        signature=group.key,
        signature_text=group.label,
        tests=list(group.members),
        **_group_common(group),
    )
    return {key: _plain(entry[key]) for key in SIGNATURE_KEYS}


def cofailure_entry(group: GroupVerdict) -> dict[str, Any]:
    """One `cofailures` entry: exactly COFAILURE_KEYS (tests = the member ids; the first of
    `causes` is the cause the tests share)."""
    entry = _scores(group.scores)
    entry.update(
        key=group.key, label=group.label, tests=list(group.members), **_group_common(group)
    )
    plain = {key: _plain(entry[key]) for key in COFAILURE_KEYS if key != "causes"}
    plain["causes"] = [cause_entry(c) for c in group.causes]
    return plain


def _group_common(group: GroupVerdict) -> dict[str, Any]:
    return {
        "rank": group.rank,
        "regression_rank": group.regression_rank,
        "verdict": group.verdict,
        "reason": group.reason,
        "flags": list(group.flags),
        "owner": group.owner,
        "onset": group.onset,
    }


def _cut(items: Sequence[Any], limit: int | None) -> list[Any]:
    return list(items if limit is None else items[:limit])


def report_dict(report: Report, limit: int | None = None) -> dict[str, Any]:
    """The JSON document as plain data."""
    return {
        "schema_version": SCHEMA_VERSION,
        "now": to_iso(report.now),
        "window_days": report.window_days,
        "config": _plain(report.config),
        "rare_flakes": rare_flakes(report),
        "proposed_incidents": _plain(report.proposed_incidents),
        "interrupted_runs": report.interrupted_runs,
        "no_default_branch_runs": report.no_default_branch_runs,
        "tests": [test_entry(t) for t in _cut(report.tests, limit)],
        "families": [family_entry(g) for g in _cut(report.families, limit)],
        "signatures": [signature_entry(g) for g in _cut(report.signatures, limit)],
        "cofailures": [cofailure_entry(g) for g in _cut(report.cofailures, limit)],
    }


def render_json(report: Report, limit: int | None = None) -> str:
    """The documented, byte-stable JSON form."""
    return (
        json.dumps(report_dict(report, limit), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    )


def _groups_of(report: Report, group_by: str) -> list[GroupVerdict]:
    return {
        "family": report.families,
        "signature": report.signatures,
        "cofailure": report.cofailures,
    }[group_by]


def _nothing_listed(report: Report, group_by: str | None) -> str:
    """What an empty table says: no test counted at all, or no group of the kind asked for."""
    if group_by is None or not report.tests:
        return "(no tests with counted runs in the window)"
    return {
        "family": "(no parametrized families in the window)",
        "signature": "(no failure signatures in the window)",
        "cofailure": "(no co-failure groups in the window: no flaky tests that fail together)",
    }[group_by]


def _rows(report: Report, group_by: str | None, limit: int | None) -> list[dict[str, Any]]:
    if group_by is None:
        return [test_entry(t) for t in _cut(report.tests, limit)]
    entry = {"family": family_entry, "signature": signature_entry, "cofailure": cofailure_entry}
    return [entry[group_by](g) for g in _cut(_groups_of(report, group_by), limit)]


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, list):
        # A cause is shown by its label ("host ci-runner-11"), the rest as they are.
        return ";".join(str(v["label"]) if isinstance(v, dict) else str(v) for v in value)
    return value


def render_csv(report: Report, group_by: str | None = None, limit: int | None = None) -> str:
    """RFC 4180 CSV (csv_table) with the JSON entry keys as header; lists joined with ';',
    nulls empty."""
    keys = {
        "family": FAMILY_KEYS,
        "signature": SIGNATURE_KEYS,
        "cofailure": COFAILURE_KEYS,
    }.get(group_by or "", TEST_KEYS)
    return csv_table(
        keys, ([_csv_cell(row[key]) for key in keys] for row in _rows(report, group_by, limit))
    )


def sparkline(values: Sequence[float], floor_max: float = 0.0) -> str:
    """Unicode block sparkline of values scaled to [0, max(max(values), floor_max)]."""
    if not values:
        return ""
    top = max(max(values), floor_max)
    if top <= 0:
        return SPARK_BLOCKS[0] * len(values)
    last = len(SPARK_BLOCKS) - 1
    return "".join(SPARK_BLOCKS[min(last, max(0, round(v / top * last)))] for v in values)


def rare_flakes(report: Report) -> int:
    """Tests judged healthy as rare flakes (flag `rare-flake`): counted in the header."""
    return sum("rare-flake" in t.flags for t in report.tests)


def _header(report: Report) -> str:
    line = f"flaketui report as of {to_iso(report.now)}, window {plural(report.window_days, 'day')}"
    if report.now_was_clamped:
        line += " (the history is older than the window: shown as of its newest run)"
    # Interrupted runs and suspected outages are the notices' (report_notices), said in full
    # under this line.
    rare = rare_flakes(report)
    if rare:
        line += f"; {rare} rare flake{'s' if rare != 1 else ''} below " + (
            f"{report.config.get('rare_flake_rate', 0.01):.0%} listed as healthy"
        )
    return line


def _rank_cell(entry: dict[str, Any]) -> str:
    if entry["rank"] is not None:
        return str(entry["rank"])
    if entry["regression_rank"] is not None:
        return f"R{entry['regression_rank']}"
    return "-"


def _name_of(entry: dict[str, Any], group_by: str | None) -> str:
    if group_by == "family":
        return f"{entry['parent']} ({plural(entry['params'], 'param')})"
    if group_by == "signature":
        count = len(entry["tests"])
        return f"{entry['signature_text']} ({count} test{'' if count == 1 else 's'})"
    if group_by == "cofailure":
        return f"{entry['label']} ({plural(len(entry['tests']), 'test')})"
    return str(entry["test_id"])


def render_table(
    report: Report,
    group_by: str | None = None,
    limit: int | None = None,
    *,
    history: str | None = None,
    now: str | None = None,
) -> str:
    """Plain aligned text: one line per entry, ranked entries first, under the header and a line
    per notice (history and now: see report_notices)."""
    head = (
        "RANK",
        "VERDICT",
        "DAMAGE",
        "SCORE",
        "RUNS",
        "BAD",
        "FLAKY",
        "FLIP",
        "FLAGS",
        "SINCE",
        {"family": "FAMILY", "signature": "SIGNATURE", "cofailure": "FAIL TOGETHER"}.get(
            group_by or "", "TEST"
        ),
    )
    lines = [head]
    for e in _rows(report, group_by, limit):
        lines.append(
            (
                _rank_cell(e),
                e["verdict"],
                f"{e['damage']:.3f}",
                f"{e['recency_score']:.3f}",
                str(e["runs"]),
                str(e["failed_runs"]),
                str(e["flaky_runs"]),
                f"{e['flip_rate']:.2f}",
                ",".join(e["flags"]) or "-",
                e["onset"] or "-",
                visible(_name_of(e, group_by)),
            )
        )
    widths = [max(len(row[i]) for row in lines) for i in range(len(head) - 1)]
    body = [
        "  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
        for row in lines
    ]
    if len(lines) == 1:
        body.append(_nothing_listed(report, group_by))
    top = "\n".join([_header(report), *report_notices(report, history, now)])
    return top + "\n\n" + "\n".join(body) + "\n"


def render_markdown(
    report: Report,
    group_by: str | None = None,
    limit: int | None = None,
    threshold: float = 0.30,
    *,
    history: str | None = None,
    now: str | None = None,
) -> str:
    """A Markdown table for a PR or an issue, with a 30-day sparkline of the daily score, under
    the header and a paragraph per notice (history and now: see report_notices)."""
    rows = _rows(report, group_by, limit)
    trends = _trends(report, group_by, limit)
    title = {"family": "Family", "signature": "Signature", "cofailure": "Fail together"}.get(
        group_by or "", "Test"
    )
    out = [f"### {_header(report)}", ""]
    for notice in report_notices(report, history, now):
        out += [f"⚠ {md_text(notice)}", ""]
    out += [
        f"| Rank | {title} | Verdict | Damage | Score | Trend (30 d) | Runs | Bad | Flaky | "
        "Owner | Reason |",
        "|---:|---|---|---:|---:|---|---:|---:|---:|---|---|",
    ]
    for entry, trend in zip(rows, trends, strict=True):
        out.append(
            f"| {_rank_cell(entry)} | {code_span(_name_of(entry, group_by))} | "
            f"{entry['verdict']} | "
            f"{entry['damage']:.3f} | {entry['recency_score']:.3f} | "
            f"{sparkline(trend, threshold)} | {entry['runs']} | {entry['failed_runs']} | "
            f"{entry['flaky_runs']} | {md_text(entry['owner'])} | {md_text(entry['reason'])} |"
        )
    if not rows:
        out.append(f"| | {_nothing_listed(report, group_by)} | | | | | | | | | |")
    return "\n".join(out) + "\n"


def _trends(report: Report, group_by: str | None, limit: int | None) -> list[list[float]]:
    """Daily scores per listed entry: a group's pooled series, whose last day is its score."""
    if group_by is None:
        return [list(t.daily_scores) for t in _cut(report.tests, limit)]
    groups = _groups_of(report, group_by)
    return [list(group.daily_scores) for group in _cut(groups, limit)]


def render(
    report: Report,
    fmt: ReportFormat,
    *,
    group_by: str | None = None,
    limit: int | None = None,
    threshold: float = 0.30,
    history: str | None = None,
    now: str | None = None,
) -> str:
    """Render in one of the ReportFormat formats; history and now (the history as the user
    named it, the --now they gave) name the outages' review command in the table's and the
    Markdown's notices."""
    if fmt == ReportFormat.JSON:
        return render_json(report, limit)
    if fmt == ReportFormat.CSV:
        return render_csv(report, group_by, limit)
    if fmt == ReportFormat.MARKDOWN:
        return render_markdown(report, group_by, limit, threshold, history=history, now=now)
    return render_table(report, group_by, limit, history=history, now=now)
