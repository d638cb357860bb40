"""Verdicts, lifecycle states, skip modes and formats: typed members that read as plain strings."""

from __future__ import annotations

import csv
import io
import json
from enum import StrEnum

import pytest

from flaketui.core.output.exports import FORMATS as EXPORT_FORMATS
from flaketui.core.output.exports import ExportError, ExportFormat, export_format
from flaketui.core.output.formats import FORMATS as REPORT_FORMATS
from flaketui.core.output.formats import ReportFormat
from flaketui.core.quarantine.machine import QUARANTINED, STATES, LifecycleState
from flaketui.core.quarantine.skipfile import MODES, SkipMode
from flaketui.core.scoring.results import Verdict
from tests.connections import sqlite_connect

NAMED: list[tuple[type[StrEnum], tuple[str, ...]]] = [
    (Verdict, ("insufficient", "healthy", "flaky", "regression")),
    (
        LifecycleState,
        ("none", "watching", "warning", "quarantined", "fix_or_delete", "removal_recommended"),
    ),
    (SkipMode, ("skip", "run")),
    (ReportFormat, ("table", "json", "csv", "markdown")),
    (ExportFormat, ("json", "csv", "markdown", "deselect", "list")),
]


@pytest.mark.parametrize(("kind", "values"), NAMED, ids=lambda v: getattr(v, "__name__", ""))
def test_members_read_write_and_compare_as_their_plain_value(
    kind: type[StrEnum], values: tuple[str, ...]
) -> None:
    assert tuple(member.value for member in kind) == values
    conn = sqlite_connect(":memory:")
    for member, value in zip(kind, values, strict=True):
        assert member == value and hash(member) == hash(value)
        assert kind(value) is member
        assert (f"{member}", str(member), f"{member:>3}") == (value, value, f"{value:>3}")
        assert json.dumps({member: [member]}) == json.dumps({value: [value]})
        assert conn.execute("SELECT ?, typeof(?)", (member, member)).fetchone() == (value, "text")
        out = io.StringIO()
        csv.writer(out).writerow([member])
        assert out.getvalue() == f"{value}\r\n"


def test_the_tuples_commands_offer_hold_plain_names() -> None:
    # click shows an Enum choice by its member name: the options list the plain values instead.
    for names in (REPORT_FORMATS, EXPORT_FORMATS):
        assert all(type(name) is str for name in names)
    assert tuple(ReportFormat) == REPORT_FORMATS and tuple(ExportFormat) == EXPORT_FORMATS
    assert tuple(SkipMode) == MODES and tuple(LifecycleState) == STATES
    assert {str(state) for state in QUARANTINED} == {
        "quarantined",
        "fix_or_delete",
        "removal_recommended",
    }


def test_an_unknown_export_format_is_a_one_line_error() -> None:
    assert export_format("csv") is ExportFormat.CSV
    with pytest.raises(ExportError, match=r"^unknown export format 'xml' \(one of json, csv, "):
        export_format("xml")
