"""A report as lines of JSON and back, for a ranking kept between two openings of the app.

`report_lines` keeps every field of the report, its tests, groups and suspects;
`report_from_lines` rebuilds the same objects (equal field by field), or raises ValueError on
lines it does not recognise. The head line names the layout version (LAYOUT) and the fields
of each row: a reader of another layout, or of other fields, treats the lines as absent.
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

LAYOUT = 2


def _names(kind: type[Any]) -> list[str]:
    return [f.name for f in dataclasses.fields(kind)]


# Each test, group, score set and suspect is a row of values in its dataclass's field order;
# the head line names the fields, and lines written with other fields are not read.
FIELDS = {
    "test": _names(TestVerdict),
    "group": _names(GroupVerdict),
    "scores": _names(Scores),
    "suspect": _names(Suspect),
}
_FAILED_AT = FIELDS["scores"].index("last_failure_at")


def _row(item: TestVerdict | GroupVerdict, names: list[str]) -> list[Any]:
    """One test or group as a row of values, its scores and suspects rows too."""
    row: list[Any] = []
    for name in names:
        value = getattr(item, name)
        if name == "scores":
            value = dataclasses.astuple(value)
            failed_at = value[_FAILED_AT]
            value = list(value)
            value[_FAILED_AT] = None if failed_at is None else failed_at.isoformat()
        elif name == "causes":
            value = [dataclasses.astuple(suspect) for suspect in value]
        elif name == "verdict":
            value = str(value)
        row.append(value)
    return row


def _reader(kind: type[TestVerdict] | type[GroupVerdict], names: list[str]) -> Any:
    """A function turning a row `_row` wrote back into a `kind`."""
    at_scores, at_causes, at_verdict = (names.index(n) for n in ("scores", "causes", "verdict"))

    def read(row: list[Any]) -> TestVerdict | GroupVerdict:
        scores = row[at_scores]
        failed_at = scores[_FAILED_AT]
        if failed_at is not None:
            scores[_FAILED_AT] = datetime.fromisoformat(failed_at)
        row[at_scores] = Scores(*scores)
        row[at_causes] = [Suspect(*suspect) for suspect in row[at_causes]]
        row[at_verdict] = Verdict(row[at_verdict])
        return kind(*row)

    return read


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
            "fields": FIELDS,
        }
    )
    for name, items in lists.items():
        names = FIELDS["test" if name == "tests" else "group"]
        for item in items:
            yield json.dumps(_row(item, names), separators=(",", ":"))


def read_head(line: str) -> dict[str, Any]:
    """The head line of `report_lines`; ValueError when it is not one of this layout."""
    head = json.loads(line)
    if not isinstance(head, dict) or head.get("layout") != LAYOUT or head.get("fields") != FIELDS:
        raise ValueError("not a report of this layout")
    return head


def report_from_lines(head: Mapping[str, Any], lines: Iterator[str]) -> Report:
    """The report `report_lines` gave, from its head (read_head) and the lines after it;
    ValueError when they are not those of a report of this layout."""
    try:
        sizes = head["sizes"]
        read_test = _reader(TestVerdict, FIELDS["test"])
        read_group = _reader(GroupVerdict, FIELDS["group"])
        loads = json.loads
        tests = [read_test(loads(next(lines))) for _ in range(int(sizes["tests"]))]
        groups: dict[str, Any] = {
            name: [read_group(loads(next(lines))) for _ in range(int(sizes[name]))]
            for name in GROUP_LISTS
        }
        return Report(
            now=datetime.fromisoformat(head["now"]),
            tests=tests,
            **groups,
            **{name: head[name] for name in PLAIN_FIELDS},
        )
    except (KeyError, IndexError, TypeError, ValueError, StopIteration, AttributeError) as exc:
        raise ValueError(f"not a report of this layout ({exc!r})") from None
