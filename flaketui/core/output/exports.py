"""Exports of quarantine decisions (`flaketui export`) and of listed tests (the app): five formats.

json and csv carry every field; markdown groups by owner, ready to paste as an issue body;
deselect prints one shell-quoted `--deselect <full node id>` per line (pytest matches
`--deselect` by prefix, so only full ids are safe); list prints plain ids, one per line.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from flaketui.core.errors import FlaketuiError
from flaketui.core.output.text import code_span, csv_table, md_text, one_line
from flaketui.core.quarantine.skipfile import (
    SCORE_KEYS,
    SkipEntry,
    SkipFile,
    SkipMode,
    round_scores,
)
from flaketui.core.scoring.results import Report, Scores, TestVerdict, Verdict
from flaketui.core.timeutil import to_iso

EXPORT_VERSION = 1
UNOWNED = "Unowned"


class ExportFormat(StrEnum):
    """The formats decisions and listed tests export to; compares and prints as its value."""

    JSON = "json"
    CSV = "csv"
    MARKDOWN = "markdown"
    DESELECT = "deselect"  # pytest --deselect arguments
    LIST = "list"  # one test id a line


FORMATS = tuple(fmt.value for fmt in ExportFormat)  # plain names, for option choices


class ExportError(FlaketuiError):
    """An export that cannot be rendered (unknown format, an id a format cannot hold)."""


@dataclass(slots=True)
class Decision:
    """A skip-file entry joined with what the history says about the test now."""

    entry: SkipEntry
    owner: str | None  # the current owner where the history knows it, else the entry's
    verdict: Verdict | None  # current verdict; None when the history has not scored the test
    verdict_reason: str | None
    current: Scores | None
    expired: bool


def decisions(
    skip: SkipFile | None,
    report: Report | None,
    *,
    now: datetime,
    owner: str | None = None,
    mode: SkipMode | None = None,
) -> list[Decision]:
    """The skip file's entries by test id, joined with the report, filtered by owner and mode."""
    if skip is None:
        return []
    scored = {t.test_id: t for t in report.tests} if report is not None else {}
    found: list[Decision] = []
    for test_id in sorted(skip.entries):
        entry = skip.entries[test_id]
        verdict = scored.get(test_id)
        decision = Decision(
            entry=entry,
            owner=(verdict.owner if verdict is not None else None) or entry.owner,
            verdict=verdict.verdict if verdict is not None else None,
            verdict_reason=verdict.reason if verdict is not None else None,
            current=verdict.scores if verdict is not None else None,
            expired=entry.is_expired(now),
        )
        if owner is not None and (decision.owner or "") != owner:
            continue
        if mode is not None and entry.mode != mode:
            continue
        found.append(decision)
    return found


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else to_iso(moment)


def _scores_dict(scores: Scores | None) -> dict[str, Any] | None:
    if scores is None:
        return None
    return round_scores({key: getattr(scores, key) for key in SCORE_KEYS})


# --- rows: one flat dict per item, shared by every format -----------------------------------

DECISION_COLUMNS = (
    "test_id",
    "mode",
    "owner",
    "reason",
    "ticket",
    "quarantined_at",
    "expires",
    "expired",
    "added_by",
    "signature",
    "verdict",
    "verdict_reason",
    *(f"quarantined_{key}" for key in SCORE_KEYS),
    *(f"current_{key}" for key in SCORE_KEYS),
)

TEST_COLUMNS = (
    "test_id",
    "rank",
    "verdict",
    "reason",
    "owner",
    "suite",
    "signature",
    *SCORE_KEYS,
)


def decision_json(decision: Decision) -> dict[str, Any]:
    """One decision as a JSON object (scores nested)."""
    entry = decision.entry
    return {
        "test_id": entry.test_id,
        "mode": entry.mode,
        "owner": decision.owner,
        "reason": entry.reason,
        "ticket": entry.ticket,
        "quarantined_at": _iso(entry.quarantined_at),
        "expires": _iso(entry.expires),
        "expired": decision.expired,
        "added_by": entry.added_by,
        "signature": entry.signature,
        "verdict": decision.verdict,
        "verdict_reason": decision.verdict_reason,
        "scores_at_quarantine": round_scores(entry.scores),
        "current_scores": _scores_dict(decision.current),
    }


def _decision_row(decision: Decision) -> dict[str, Any]:
    obj = decision_json(decision)
    row = {key: obj[key] for key in DECISION_COLUMNS[:12]}
    for key in SCORE_KEYS:
        row[f"quarantined_{key}"] = obj["scores_at_quarantine"].get(key)
        row[f"current_{key}"] = (obj["current_scores"] or {}).get(key)
    return row


def verdict_json(test: TestVerdict) -> dict[str, Any]:
    """One listed test as a JSON object."""
    return {
        "test_id": test.test_id,
        "rank": test.rank,
        "verdict": test.verdict,
        "reason": test.reason,
        "owner": test.owner,
        "suite": test.suite,
        "signature": test.signature,
        "scores": _scores_dict(test.scores),
    }


def _verdict_row(test: TestVerdict) -> dict[str, Any]:
    obj = verdict_json(test)
    row = {key: obj[key] for key in TEST_COLUMNS[:7]}
    row.update({key: obj["scores"].get(key) for key in SCORE_KEYS})
    return row


# --- the five formats -----------------------------------------------------------------------


def render_json(kind: str, now: datetime, items: list[dict[str, Any]]) -> str:
    """A JSON document with a format marker, the moment and the items."""
    doc = {
        "format": f"flaketui-{kind}",
        "version": EXPORT_VERSION,
        "now": to_iso(now),
        "count": len(items),
        "items": items,
    }
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def render_csv(columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> str:
    """RFC 4180 CSV (csv_table), a header row; empty cell = unknown, booleans true/false."""
    return csv_table(columns, ([_csv_cell(row.get(col)) for col in columns] for row in rows))


def _checked_id(test_id: str) -> str:
    if "\n" in test_id or "\r" in test_id:
        raise ExportError(f"test id {test_id!r} contains a line break; it cannot be listed")
    return test_id


def render_list(test_ids: Iterable[str]) -> str:
    """Plain test ids, one per line."""
    return "".join(f"{_checked_id(tid)}\n" for tid in test_ids)


def render_deselect(test_ids: Iterable[str]) -> str:
    """One shell-quoted `--deselect <full node id>` per line, for pytest without the plugin."""
    return "".join(f"--deselect {shlex.quote(_checked_id(tid))}\n" for tid in test_ids)


def md_cell(text: str | None) -> str:
    """Text as an inert table cell (md_text: one line, HTML and Markdown escaped); empty stays
    empty."""
    return md_text(text) if one_line(text or "") else ""


def render_markdown(
    title: str,
    headers: Sequence[str],
    items: Sequence[tuple[str | None, list[str]]],
) -> str:
    """A heading, then one table per owner (owners sorted, unowned last)."""
    groups: dict[str | None, list[list[str]]] = {}
    for owner, cells in items:
        groups.setdefault(owner, []).append(cells)
    lines = [f"# {title}", ""]
    if not groups:
        lines += ["Nothing to report.", ""]
    for owner in sorted(groups, key=lambda o: (o is None, o or "")):
        rows = groups[owner]
        lines += [f"## {md_cell(owner or UNOWNED)} ({len(rows)})", ""]
        lines.append("| " + " | ".join(headers) + " |")
        lines.append("|" + "|".join("---" for _ in headers) + "|")
        lines += ["| " + " | ".join(cells) + " |" for cells in rows]
        lines.append("")
    return "\n".join(lines)


def _day(moment: datetime | None) -> str:
    return "" if moment is None else to_iso(moment)[:10]


def _decision_cells(decision: Decision) -> list[str]:
    entry = decision.entry
    expires = _day(entry.expires) + (" **expired**" if decision.expired else "")
    added = " (hand-added)" if entry.hand_added else ""
    return [
        code_span(entry.test_id),
        entry.mode + added,
        md_cell(decision.verdict or "not in history"),
        md_cell(entry.reason),
        md_cell(entry.ticket),
        _day(entry.quarantined_at),
        expires,
    ]


DECISION_HEADERS = ("Test", "Mode", "Verdict now", "Reason", "Ticket", "Quarantined", "Expires")
TEST_HEADERS = ("Test", "Verdict", "Damage", "Recency", "Runs", "Reason")


def _verdict_cells(test: TestVerdict) -> list[str]:
    return [
        code_span(test.test_id),
        test.verdict,
        f"{test.scores.damage:.3f}",
        f"{test.scores.recency_score:.3f}",
        str(test.scores.runs),
        md_cell(test.reason),
    ]


def export_format(name: str) -> ExportFormat:
    """The export format called name; ExportError, one line, for any other name."""
    if name not in FORMATS:
        raise ExportError(f"unknown export format {name!r} (one of {', '.join(FORMATS)})")
    return ExportFormat(name)


def render_decisions(found: list[Decision], fmt: str, *, now: datetime) -> str:
    """Render quarantine decisions in one of the ExportFormat formats (checked)."""
    chosen = export_format(fmt)
    ids = [d.entry.test_id for d in found]
    renderers: dict[ExportFormat, Callable[[], str]] = {
        ExportFormat.JSON: lambda: render_json("decisions", now, [decision_json(d) for d in found]),
        ExportFormat.CSV: lambda: render_csv(DECISION_COLUMNS, (_decision_row(d) for d in found)),
        ExportFormat.MARKDOWN: lambda: render_markdown(
            f"Quarantined tests: {len(found)} (as of {to_iso(now)})",
            DECISION_HEADERS,
            [(d.owner, _decision_cells(d)) for d in found],
        ),
        ExportFormat.DESELECT: lambda: render_deselect(ids),
        ExportFormat.LIST: lambda: render_list(ids),
    }
    return renderers[chosen]()


def render_tests(tests: list[TestVerdict], fmt: str, *, report: Report) -> str:
    """Render listed tests (the app's current view) in one of the ExportFormat formats."""
    chosen = export_format(fmt)
    ids = [t.test_id for t in tests]
    renderers: dict[ExportFormat, Callable[[], str]] = {
        ExportFormat.JSON: lambda: render_json(
            "tests", report.now, [verdict_json(t) for t in tests]
        ),
        ExportFormat.CSV: lambda: render_csv(TEST_COLUMNS, (_verdict_row(t) for t in tests)),
        ExportFormat.MARKDOWN: lambda: render_markdown(
            f"Tests: {len(tests)} (as of {to_iso(report.now)})",
            TEST_HEADERS,
            [(t.owner, _verdict_cells(t)) for t in tests],
        ),
        ExportFormat.DESELECT: lambda: render_deselect(ids),
        ExportFormat.LIST: lambda: render_list(ids),
    }
    return renderers[chosen]()
