"""Stream test results out of .NET TRX files (``dotnet test --logger trx``, VSTest, MSTest).

Read with defusedxml's iterparse, which refuses DTDs, entity declarations and external
references before anything is expanded or fetched; each element is dropped once read, so
memory does not grow with the file's outputs and messages. Two passes: the first collects the
test definitions (``UnitTest`` id -> ``TestMethod`` class name, about 80 bytes per distinct
test, class names shared), which TRX writes after the results; the second yields the results.

Decisions where producers differ:
- Test id: ``Class.Name::method`` from the definition's ``className`` (an assembly-qualified
  name loses its ``, Assembly...`` tail) and the result's ``testName`` without that class
  prefix (xUnit writes the full name there); a result without a definition keeps its
  ``testName`` whole. TRX names no source file.
- Outcome: ``Passed``, ``PassedButRunAborted``, ``Completed`` and ``Warning`` = pass;
  ``Failed`` = fail; ``Error``, ``Timeout`` and ``Aborted`` = error; every other outcome
  (``NotExecuted``, ``Inconclusive``, ``Pending``...) = skipped.
- Data-driven tests: each inner result (``InnerResults``) is a test of its own; the outer one,
  which only sums them, is not stored.
- Retries: a test with several results in the file (same test id) gets them as attempts, in
  document order.
- Message: ``ErrorInfo/Message``, else the first line of ``ErrorInfo/StackTrace``; duration from
  ``duration`` (``hh:mm:ss.fffffff``).
- Timestamp: ``Times/@start``.
"""

from __future__ import annotations

import re
import sys
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import iterparse

from flaketui.core.errors import ReportError
from flaketui.core.ingest.report_time import parse_report_timestamp, plausible
from flaketui.core.ingest.rows import AttemptRow, CaseRow

MESSAGE_CAP_CHARS = 64 * 1024
MAX_DURATION_MS = 7 * 24 * 3600 * 1000
PASSED = frozenset({"passed", "passedbutrunaborted", "completed", "warning"})
ERRORED = frozenset({"error", "timeout", "aborted"})
_DURATION = re.compile(r"^(?:(\d+)\.)?(\d+):(\d{1,2}):(\d{1,2}(?:\.\d+)?)$")


def _local(tag: str) -> str:
    """An element name without its namespace."""
    return tag.rpartition("}")[2]


def _events(path: Path) -> Iterator[tuple[str, Any, Any]]:
    """(event, element, parent) for each start and end, parser problems as one-line ReportErrors.

    Once the reader is done with an element two levels under the root (a result, a test
    definition, an entry), it is dropped: the tree never holds more than the open elements and
    the one being read.
    """
    label = str(path)
    stack: list[Any] = []
    try:
        with path.open("rb") as stream:
            if not stream.read(1):
                raise ReportError(f"{label}: empty file")
            stream.seek(0)
            for event, elem in iterparse(
                stream,
                events=("start", "end"),
                forbid_dtd=True,
                forbid_entities=True,
                forbid_external=True,
            ):
                if event == "start":
                    yield event, elem, stack[-1] if stack else None
                    stack.append(elem)
                    continue
                stack.pop()
                parent = stack[-1] if stack else None
                yield event, elem, parent
                if len(stack) == 2 and parent is not None:
                    # A grandchild of the root (a result, a definition, an entry) was read:
                    # drop it and its earlier siblings.
                    parent.clear()
    except OSError as exc:
        raise ReportError(f"{label}: cannot read ({exc.strerror or exc})") from exc
    except DefusedXmlException:
        raise ReportError(f"{label}: refused: DTDs and entities are not allowed") from None
    except ET.ParseError as exc:
        line = exc.position[0] if exc.position else 0
        reason = str(exc).split(":")[0]
        raise ReportError(f"{label}:{line}: {reason}") from None


def _class_names(path: Path) -> dict[int | str, str]:
    """Test definition id -> class name (first pass); ReportError when the root is not TRX."""
    classes: dict[int | str, str] = {}
    unit_id: str | None = None
    for event, elem, parent in _events(path):
        tag = _local(elem.tag)
        if parent is None and event == "start" and tag != "TestRun":
            raise ReportError(f"{path}: not a TRX report (root element <{tag}>)")
        if event == "start":
            if tag == "UnitTest":
                unit_id = elem.get("id")
            continue
        if tag == "TestMethod" and unit_id and elem.get("className"):
            classes[_key(unit_id)] = sys.intern(str(elem.get("className")).split(",")[0].strip())
    return classes


def parse_duration_ms(text: str | None) -> int | None:
    """Milliseconds from a TRX ``hh:mm:ss.fffffff`` duration, or None when it is not one."""
    found = _DURATION.match(text.strip()) if text else None
    if found is None:
        return None
    days, hours, minutes, seconds = found.groups()
    total = ((int(days or 0) * 24 + int(hours)) * 60 + int(minutes)) * 60 + float(seconds)
    milliseconds = round(total * 1000)
    return milliseconds if milliseconds <= MAX_DURATION_MS else None


def _outcome(text: str | None) -> str:
    value = (text or "").strip().lower()
    if value in PASSED:
        return "pass"
    if value == "failed":
        return "fail"
    if value in ERRORED:
        return "error"
    return "skipped"


def _message(result: Any) -> str | None:
    message = stack = None
    for child in result.iter():
        tag = _local(child.tag)
        if tag == "Message" and message is None and (child.text or "").strip():
            message = child.text.strip()
        elif tag == "StackTrace" and stack is None and (child.text or "").strip():
            stack = child.text.strip().splitlines()[0].strip()
    text = message or stack
    return text[:MESSAGE_CAP_CHARS] if text else None


def _key(test_id: str) -> int | str:
    """A definition id as a small key: a GUID's 128-bit integer, else the text itself."""
    try:
        return uuid.UUID(test_id).int
    except ValueError:
        return test_id


def _test_id(result: Any, classes: dict[int | str, str]) -> str:
    name = (result.get("testName") or "").strip()
    class_name = classes.get(_key(result.get("testId") or ""))
    if not class_name:
        return name or "(unnamed)"
    if name.startswith(class_name + "."):
        name = name[len(class_name) + 1 :]
    return f"{class_name}::{name or '(unnamed)'}"


def iter_case_rows(path: Path) -> Iterator[CaseRow]:
    """Stream one TRX file's results as the writer's rows; ReportError on bad input."""
    path = Path(path)
    classes = _class_names(path)
    has_inner: list[bool] = []  # per open UnitTestResult: whether it holds inner results
    for event, elem, _parent in _events(path):
        if _local(elem.tag) != "UnitTestResult":
            continue
        if event == "start":
            if has_inner:
                has_inner[-1] = True
            has_inner.append(False)
            continue
        if not has_inner.pop():
            attempt: AttemptRow = (
                _outcome(elem.get("outcome")),
                parse_duration_ms(elem.get("duration")),
                _message(elem),
                None,
                None,
                None,
                None,
            )
            yield _test_id(elem, classes), None, (attempt,), None


def report_timestamp(path: Path) -> datetime | None:
    """``Times/@start`` (else ``@creation``) as aware UTC, when plausible."""
    for event, elem, _parent in _events(Path(path)):
        if event != "end":
            continue
        if _local(elem.tag) == "Times":
            for key in ("start", "creation"):
                moment = parse_report_timestamp(elem.get(key) or "")
                if plausible(moment):
                    return moment
            return None
        if _local(elem.tag) == "Results":
            return None
    return None
