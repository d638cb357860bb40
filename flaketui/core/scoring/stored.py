"""A report as plain JSON data and back, for a ranking kept between two openings of the app.

`report_to_data` keeps every field of the report, its tests, groups and suspects;
`report_from_data` rebuilds the same objects (equal field by field), or raises ValueError on
data it does not recognise. The data names the layout version (LAYOUT): a reader of another
layout treats the data as absent.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from flaketui.core.scoring.causes import Suspect
from flaketui.core.scoring.results import GroupVerdict, Report, Scores, TestVerdict, Verdict

LAYOUT = 1

_SCORE_FIELDS = tuple(f.name for f in dataclasses.fields(Scores))
_SUSPECT_FIELDS = tuple(f.name for f in dataclasses.fields(Suspect))


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _time_from(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _scores(scores: Scores) -> list[Any]:
    values = [getattr(scores, name) for name in _SCORE_FIELDS]
    values[_SCORE_FIELDS.index("last_failure_at")] = _time(scores.last_failure_at)
    return values


def _scores_from(values: list[Any]) -> Scores:
    if len(values) != len(_SCORE_FIELDS):
        raise ValueError("scores of another layout")
    fields = dict(zip(_SCORE_FIELDS, values, strict=True))
    fields["last_failure_at"] = _time_from(fields["last_failure_at"])
    return Scores(**fields)


def _suspects(causes: list[Suspect]) -> list[list[Any]]:
    return [[getattr(s, name) for name in _SUSPECT_FIELDS] for s in causes]


def _suspects_from(rows: list[list[Any]]) -> list[Suspect]:
    return [Suspect(**dict(zip(_SUSPECT_FIELDS, row, strict=True))) for row in rows]


def _item(item: TestVerdict | GroupVerdict) -> dict[str, Any]:
    """One test or group: its fields, the scores and suspects as rows of values."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(item):
        value = getattr(item, field.name)
        if field.name == "scores":
            value = _scores(value)
        elif field.name == "causes":
            value = _suspects(value)
        elif field.name == "verdict":
            value = str(value)
        out[field.name] = value
    return out


def _item_from(kind: type[TestVerdict] | type[GroupVerdict], data: dict[str, Any]) -> Any:
    fields = dict(data)
    fields["scores"] = _scores_from(fields["scores"])
    fields["causes"] = _suspects_from(fields.get("causes", []))
    fields["verdict"] = Verdict(fields["verdict"])
    return kind(**fields)


def report_to_data(report: Report) -> dict[str, Any]:
    """The report as JSON-ready data (lists, dicts, strings and numbers)."""
    return {
        "layout": LAYOUT,
        "now": report.now.isoformat(),
        "window_days": report.window_days,
        "config": report.config,
        "now_was_clamped": report.now_was_clamped,
        "proposed_incidents": report.proposed_incidents,
        "interrupted_runs": report.interrupted_runs,
        "tests": [_item(t) for t in report.tests],
        "families": [_item(g) for g in report.families],
        "signatures": [_item(g) for g in report.signatures],
    }


def report_from_data(data: Any) -> Report:
    """The report `report_to_data` gave; ValueError when `data` is not one of this layout."""
    if not isinstance(data, dict) or data.get("layout") != LAYOUT:
        raise ValueError("not a report of this layout")
    try:
        return Report(
            now=datetime.fromisoformat(data["now"]),
            window_days=int(data["window_days"]),
            config=dict(data["config"]),
            tests=[_item_from(TestVerdict, t) for t in data["tests"]],
            families=[_item_from(GroupVerdict, g) for g in data["families"]],
            signatures=[_item_from(GroupVerdict, g) for g in data["signatures"]],
            now_was_clamped=bool(data["now_was_clamped"]),
            proposed_incidents=list(data["proposed_incidents"]),
            interrupted_runs=int(data["interrupted_runs"]),
        )
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a report of this layout ({exc})") from None
