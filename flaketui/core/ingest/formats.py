"""Which parser reads a report: JUnit XML, CTRF JSON, .NET TRX or TAP, told apart by content.

Sniffing reads the first SNIFF_BYTES only: a JSON object is CTRF; an XML document whose root
element is ``TestRun`` is TRX, any other XML is JUnit; text whose first meaningful line is a TAP
version, a plan or a test line is TAP. Anything else goes to the JUnit parser, whose errors
("not well-formed", "not a JUnit report") then name the problem. A format given by the user
(``ingest --format``, a manifest line's ``format``) skips the sniffing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from flaketui.core.errors import ReportError
from flaketui.core.ingest.rows import CaseRow
from flaketui.core.timeutil import utc_now

if TYPE_CHECKING:
    from flaketui.core.ingest.junit import SharedNames

REPORT_FORMATS = ("junit", "ctrf", "trx", "tap")
SNIFF_BYTES = 64 * 1024
_XML_ROOT = re.compile(rb"<(?![?!])(?:[A-Za-z_][\w.-]*:)?([A-Za-z_][\w.-]*)")
_TAP_LINE = re.compile(rb"^\s*(TAP version \d+|1\.\.\d+|(not )?ok\b|Bail out!)")


def check_format(report_format: str | None) -> str | None:
    """The format as given, or ReportError naming the known ones."""
    if report_format is not None and report_format not in REPORT_FORMATS:
        raise ReportError(
            f"unknown report format {report_format!r} (one of {', '.join(REPORT_FORMATS)})"
        )
    return report_format


def sniff_format(path: Path) -> str:
    """The report format of a file, from its first bytes (see the module docstring)."""
    try:
        with Path(path).open("rb") as stream:
            head = stream.read(SNIFF_BYTES)
    except OSError:
        return "junit"  # the parser reports the file as unreadable, in its words
    body = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if body.startswith(b"{"):
        return "ctrf"
    if body.startswith(b"<"):
        root = _XML_ROOT.search(body)
        return "trx" if root is not None and root.group(1) == b"TestRun" else "junit"
    for line in body.splitlines()[:50]:
        if not line.strip() or line.lstrip().startswith(b"#"):
            continue
        return "tap" if _TAP_LINE.match(line) else "junit"
    return "junit"


def iter_report_rows(
    path: Path, report_format: str | None = None, names: SharedNames | None = None
) -> Iterator[CaseRow]:
    """Stream one report's test cases as the writer's rows, in the format given or sniffed.

    names: a JUnit report's run-wide shared ids (junit.SharedNames); the other formats' ids
    name their file already or never do.
    """
    fmt = check_format(report_format) or sniff_format(path)
    if fmt == "ctrf":
        from flaketui.core.ingest.ctrf import iter_case_rows as ctrf_rows

        return ctrf_rows(path)
    if fmt == "trx":
        from flaketui.core.ingest.trx import iter_case_rows as trx_rows

        return trx_rows(path)
    if fmt == "tap":
        from flaketui.core.ingest.tap import iter_case_rows as tap_rows

        return tap_rows(path)
    from flaketui.core.ingest.junit import iter_case_rows as junit_rows

    return junit_rows(path, names)


def report_timestamp(path: Path, report_format: str | None = None) -> datetime | None:
    """When the report says its run happened (aware UTC), if it says so plausibly."""
    fmt = check_format(report_format) or sniff_format(path)
    if fmt == "ctrf":
        from flaketui.core.ingest.ctrf import report_timestamp as ctrf_time

        return ctrf_time(path)
    if fmt == "trx":
        from flaketui.core.ingest.trx import report_timestamp as trx_time

        return trx_time(path)
    if fmt == "tap":
        return None  # TAP carries no date
    from flaketui.core.ingest.junit import report_timestamp as junit_time

    return junit_time(path)


def reports_date(
    paths: Iterable[Path], report_format: str | None = None
) -> tuple[Path, datetime] | None:
    """The first plausible date the reports give, in the files' order, with its file."""
    for path in paths:
        moment = report_timestamp(path, report_format)
        if moment is not None:
            return path, moment
    return None


def run_date(stated: datetime, now: datetime | None = None) -> datetime:
    """A report's date as its run's: never later than now (by default the clock's). A report
    exists once its run has ended: a later date is local time written without its zone in a
    zone ahead of UTC, or a clock set ahead, and dating the run by it would leave it out of
    every report until then."""
    return min(stated, now or utc_now())


def reports_timestamp(paths: Iterable[Path], report_format: str | None = None) -> datetime | None:
    """A run's date from its reports: the first plausible one, in the files' order (run_date)."""
    found = reports_date(paths, report_format)
    return None if found is None else run_date(found[1])
