"""Read CTRF (the Common Test Report Format): the JSON that jest, Playwright, Cypress and other
reporters write as ``{"results": {"tool": ..., "summary": ..., "tests": [...]}}``.

JSON has no streaming reader in the standard library, so a CTRF file is parsed whole (refused
above MAX_BYTES); its test cases are then yielded one by one like every other format's.

Decisions where producers differ:
- Test id: the ``filePath``, the ``suite`` names (a list, or one string) and the ``name``,
  joined with ``::``; ``test_file`` is the ``filePath``.
- Outcome: ``passed`` = pass, ``failed`` = fail, ``skipped``/``pending`` = skipped; ``other``
  is a fail when its ``rawStatus`` says the test timed out or was interrupted, else skipped.
- Retries: a ``retryAttempts`` list gives the earlier attempts (by ``attempt`` number) before
  the test's own, final one; when it holds ``retries`` + 1 entries it already ends with the
  final attempt, and is taken alone. Without it, ``retries: n`` means n earlier attempts that failed
  (with the final message); a test marked ``flaky`` with no count had one.
- Message: ``message``, else the first line of ``trace``; ``threadId`` is the worker.
- A test listed twice is yielded twice: the writer adds the second as more attempts.
- Timestamp: ``summary.start`` (Unix epoch milliseconds).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flaketui.core.errors import ReportError
from flaketui.core.ingest.report_time import plausible
from flaketui.core.ingest.rows import AttemptRow, CaseRow

MAX_BYTES = 512 * 1024 * 1024
MAX_DURATION_MS = 7 * 24 * 3600 * 1000
STATUSES = {"passed": "pass", "failed": "fail", "skipped": "skipped", "pending": "skipped"}
FAILING_RAW_STATUSES = frozenset({"timedout", "timeout", "interrupted", "broken", "error"})


def _load(path: Path) -> dict[str, Any]:
    """The parsed document; ReportError when it is not a CTRF report."""
    label = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise ReportError(f"{label}: CTRF report too large ({size} bytes, at most {MAX_BYTES})")
        raw = path.read_bytes()
    except OSError as exc:
        raise ReportError(f"{label}: cannot read ({exc.strerror or exc})") from exc
    if not raw.strip():
        raise ReportError(f"{label}: empty file")
    try:
        doc = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise ReportError(f"{label}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ReportError(f"{label}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except RecursionError:  # the decoder recurses per nested array or object
        raise ReportError(f"{label}: not valid JSON (nested too deeply)") from None
    results = doc.get("results") if isinstance(doc, dict) else None
    if not isinstance(results, dict) or not isinstance(results.get("tests"), list):
        raise ReportError(f"{label}: not a CTRF report (no results.tests list)")
    return results


def _duration(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0 or value > MAX_DURATION_MS:
        return None
    return round(value)


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _message(test: dict[str, Any]) -> str | None:
    message = _text(test.get("message"))
    if message is None and (trace := _text(test.get("trace"))):
        message = trace.splitlines()[0]
    return message


def _outcome(label: str, where: str, test: dict[str, Any]) -> str:
    status = test.get("status")
    if status in STATUSES:
        return STATUSES[status]
    if status == "other":
        raw = str(test.get("rawStatus") or "").replace("_", "").replace("-", "").lower()
        return "fail" if raw in FAILING_RAW_STATUSES else "skipped"
    raise ReportError(
        f"{label}: {where}: unknown status {status!r} (passed, failed, skipped, pending or other)"
    )


def _identity(label: str, where: str, test: dict[str, Any]) -> tuple[str, str | None]:
    name = test.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ReportError(f"{label}: {where}: no 'name'")
    file = _text(test.get("filePath"))
    suite = test.get("suite")
    suites = [suite] if isinstance(suite, str) else suite if isinstance(suite, list) else []
    parts = [file, *(s.strip() for s in suites if isinstance(s, str) and s.strip()), name.strip()]
    return "::".join(p for p in parts if p), file


def _attempts(label: str, where: str, test: dict[str, Any]) -> list[AttemptRow]:
    worker = _text(test.get("threadId"))
    final: AttemptRow = (
        _outcome(label, where, test),
        _duration(test.get("duration")),
        _message(test),
        worker,
        None,
        None,
        None,
    )
    earlier = test.get("retryAttempts")
    if isinstance(earlier, list) and earlier:
        ordered = sorted(
            (a for a in earlier if isinstance(a, dict)),
            key=lambda a: a["attempt"] if isinstance(a.get("attempt"), int) else 0,
        )
        rows: list[AttemptRow] = [
            (
                _outcome(label, f"{where}.retryAttempts[{index}]", attempt),
                _duration(attempt.get("duration")),
                _message(attempt),
                worker,
                None,
                None,
                None,
            )
            for index, attempt in enumerate(ordered)
        ]
        retries = test.get("retries")
        if isinstance(retries, int) and len(rows) == retries + 1:
            return rows  # the list already ends with the final attempt
        return [*rows, final]
    retries = test.get("retries")
    count = retries if isinstance(retries, int) and not isinstance(retries, bool) else 0
    if count <= 0 and test.get("flaky") is True and final[0] == "pass":
        count = 1
    if count <= 0 or final[0] == "skipped":
        return [final]
    failed: AttemptRow = ("fail", None, final[2], worker, None, None, None)
    return [*([failed] * count), final]


def iter_case_rows(path: Path) -> Iterator[CaseRow]:
    """The report's test cases, in order; ReportError on anything that is not CTRF."""
    label = str(path)
    results = _load(Path(path))
    for index, test in enumerate(results["tests"]):
        where = f"results.tests[{index}]"
        if not isinstance(test, dict):
            raise ReportError(f"{label}: {where}: not an object")
        test_id, file = _identity(label, where, test)
        yield test_id, file, _attempts(label, where, test), None


def report_timestamp(path: Path) -> datetime | None:
    """``summary.start`` as aware UTC, when plausible."""
    summary = _load(Path(path)).get("summary")
    start = summary.get("start") if isinstance(summary, dict) else None
    if isinstance(start, bool) or not isinstance(start, int | float) or not math.isfinite(start):
        return None
    try:
        moment = datetime.fromtimestamp(start / 1000, UTC).replace(microsecond=0)
    except (OverflowError, OSError, ValueError):
        return None
    return moment if plausible(moment) else None
