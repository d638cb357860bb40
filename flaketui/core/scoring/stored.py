"""A report as lines of JSON and back, for a ranking kept between two openings of the app.

`report_lines` keeps every field of the report, its tests, groups and suspects;
`report_from_lines` rebuilds the same objects (equal field by field), or raises ValueError on
lines it does not recognise. The head line names the layout version (LAYOUT): a reader of
another layout treats the lines as absent.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from flaketui.core.scoring.results import (
    GroupVerdict,
    Report,
    Scores,
    Suspect,
    TestVerdict,
    Verdict,
)

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


# The report's fields as the lines hold them: the head keeps the plain ones, a line each the
# tests and the groups of each list.
PLAIN_FIELDS = (
    "window_days",
    "config",
    "now_was_clamped",
    "proposed_incidents",
    "interrupted_runs",
)
GROUP_LISTS = ("families", "signatures", "cofailures")


def report_lines(report: Report, head: Mapping[str, Any]) -> Iterator[str]:
    """The report as lines of JSON: a head line (`head`'s keys beside the report's own), then
    one line per test and per group of each group list.

    One small encoding per line: a big report never holds the interpreter in one long call.
    """
    lists: dict[str, list[Any]] = {"tests": report.tests}
    lists.update((name, getattr(report, name)) for name in GROUP_LISTS)
    yield json.dumps(
        {
            **head,
            "layout": LAYOUT,
            "now": report.now.isoformat(),
            **{name: getattr(report, name) for name in PLAIN_FIELDS},
            "sizes": {name: len(items) for name, items in lists.items()},
        }
    )
    for items in lists.values():
        for item in items:
            yield json.dumps(_item(item), separators=(",", ":"))


def read_head(line: str) -> dict[str, Any]:
    """The head line of `report_lines`; ValueError when it is not one of this layout."""
    head = json.loads(line)
    if not isinstance(head, dict) or head.get("layout") != LAYOUT:
        raise ValueError("not a report of this layout")
    return head


def report_from_lines(head: Mapping[str, Any], lines: Iterator[str]) -> Report:
    """The report `report_lines` gave, from its head (read_head) and the lines after it;
    ValueError when they are not those of a report of this layout."""
    try:
        sizes = head["sizes"]

        def items(kind: type[TestVerdict] | type[GroupVerdict], name: str) -> list[Any]:
            return [_item_from(kind, json.loads(next(lines))) for _ in range(int(sizes[name]))]

        tests = items(TestVerdict, "tests")
        groups: dict[str, Any] = {name: items(GroupVerdict, name) for name in GROUP_LISTS}
        return Report(
            now=datetime.fromisoformat(head["now"]),
            tests=tests,
            **groups,
            **{name: head[name] for name in PLAIN_FIELDS},
        )
    except (KeyError, TypeError, ValueError, StopIteration, AttributeError) as exc:
        raise ValueError(f"not a report of this layout ({exc!r})") from None
