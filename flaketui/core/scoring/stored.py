"""A report as lines of JSON and back, for a ranking kept between two openings of the app.

`report_lines` keeps every field of the report, its tests, groups and suspects;
`report_from_lines` rebuilds the same objects (equal field by field), or raises ValueError on
lines it does not recognise. The head line names the layout version (LAYOUT) and the fields
of each row: a reader of another layout, or of other fields, treats the lines as absent.

The tests follow the head in the report's order, which lists the flaky tests first in rank
order, and the head counts the tests of each verdict: a reader wanting only the flaky tests
(`read_flaky`) decodes those lines and stops, and `report_from_lines` goes on from there.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
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

LAYOUT = 4


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
_SCORES, _SUSPECT = FIELDS["scores"], FIELDS["suspect"]


def _row(item: TestVerdict | GroupVerdict, names: list[str]) -> list[Any]:
    """One test or group as a row of values, its scores and suspects rows too."""
    row: list[Any] = []
    for name in names:
        value = getattr(item, name)
        # Flat records of atoms, read field by field: dataclasses.astuple deep-copies every
        # value, seven times slower (a quarter of a second for 10 000 tests).
        if name == "scores":
            value = [getattr(value, field) for field in _SCORES]
            failed_at = value[_FAILED_AT]
            value[_FAILED_AT] = None if failed_at is None else failed_at.isoformat()
        elif name == "causes":
            value = [[getattr(suspect, field) for field in _SUSPECT] for suspect in value]
        elif name == "verdict":
            value = str(value)
        row.append(value)
    return row


def _reader(kind: type[TestVerdict] | type[GroupVerdict], names: list[str]) -> Any:
    """A function turning a row `_row` wrote back into a `kind`."""
    at_scores, at_causes, at_verdict, at_daily, at_flags = (
        names.index(n) for n in ("scores", "causes", "verdict", "daily_scores", "flags")
    )

    def read(row: list[Any]) -> TestVerdict | GroupVerdict:
        scores = row[at_scores]
        failed_at = scores[_FAILED_AT]
        if failed_at is not None:
            scores[_FAILED_AT] = datetime.fromisoformat(failed_at)
        row[at_scores] = Scores(*scores)
        row[at_causes] = tuple(Suspect(*suspect) for suspect in row[at_causes])
        row[at_flags] = tuple(row[at_flags])
        row[at_verdict] = Verdict(row[at_verdict])
        row[at_daily] = tuple(row[at_daily])
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
    "no_default_branch_runs",
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
            "verdicts": dict(Counter(str(test.verdict) for test in report.tests)),
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


def read_flaky(head: Mapping[str, Any], lines: Iterator[str]) -> list[TestVerdict] | None:
    """The report's flaky tests in rank order, from the test lines that follow the head, which
    are read no further than them (their count is the head's); None when those lines are not
    all flaky (a report in another order). ValueError as report_from_lines."""
    try:
        counts = head["verdicts"]
        if not all(isinstance(n, int) and n >= 0 for n in counts.values()):
            raise ValueError("verdict counts")
        count = counts.get(str(Verdict.FLAKY), 0)
        if not 0 <= count <= int(head["sizes"]["tests"]):
            raise ValueError(f"{count} flaky tests")
        read_test = _reader(TestVerdict, FIELDS["test"])
        loads = json.loads
        tests = [read_test(loads(next(lines))) for _ in range(count)]
    except (KeyError, IndexError, TypeError, ValueError, StopIteration, AttributeError) as exc:
        raise ValueError(f"not a report of this layout ({exc!r})") from None
    if any(test.verdict != Verdict.FLAKY for test in tests):
        return None
    return tests


def report_from_lines(
    head: Mapping[str, Any], lines: Iterator[str], *, leading: Sequence[TestVerdict] = ()
) -> Report:
    """The report `report_lines` gave, from its head (read_head) and the lines after it;
    ValueError when they are not those of a report of this layout.

    leading: the tests already read from the lines (read_flaky), which the report starts with.
    """
    try:
        sizes = head["sizes"]
        read_test = _reader(TestVerdict, FIELDS["test"])
        read_group = _reader(GroupVerdict, FIELDS["group"])
        loads = json.loads
        rest = int(sizes["tests"]) - len(leading)
        tests = [*leading, *(read_test(loads(next(lines))) for _ in range(rest))]
        if sum(head["verdicts"].values()) != len(tests):
            raise ValueError("the verdict counts are not the tests'")
        groups: dict[str, Any] = {
            name: [read_group(loads(next(lines))) for _ in range(int(sizes[name]))]
            for name in GROUP_LISTS
        }
        return _report(head, tests, groups)
    except (KeyError, IndexError, TypeError, ValueError, StopIteration, AttributeError) as exc:
        raise ValueError(f"not a report of this layout ({exc!r})") from None


def flaky_report(head: Mapping[str, Any], flaky: list[TestVerdict]) -> Report:
    """The report of `head` as far as its flaky tests (read_flaky): no other test, no group."""
    try:
        return _report(head, flaky, {name: [] for name in GROUP_LISTS})
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a report of this layout ({exc!r})") from None


def _report(head: Mapping[str, Any], tests: list[TestVerdict], groups: dict[str, Any]) -> Report:
    return Report(
        now=datetime.fromisoformat(head["now"]),
        tests=tests,
        **groups,
        **{name: head[name] for name in PLAIN_FIELDS},
    )
