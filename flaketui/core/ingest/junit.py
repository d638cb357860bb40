r"""Stream test cases out of JUnit XML reports, refusing DTDs and entities.

Parsing uses expat directly, fed 64 KiB at a time, so memory stays constant in the file size: only
the open test case is held, and captured failure texts stop growing at 64 KiB. Any DOCTYPE, entity
declaration or external entity is refused before it is expanded or fetched. (Attribute values,
such as googletest's multi-KB ``message``, arrive whole from expat; only text is cut while read.)
``report_timestamp`` raises ReportError like ``iter_cases`` when the file breaks before any
plausible timestamp, and returns None when the whole file has none.

Decisions where producers disagree:
- Roots: ``<testsuites>``, ``<testsuite>`` and Eclipse ``<testrun>``; suites nest to any depth;
  anything else is "not a JUnit report". A report with no test case yields nothing.
- Whitespace before the ``<?xml ...?>`` declaration (strict parsers refuse it) is accepted: it is
  moved after the declaration, which keeps every later line number right.
- Outcome: the first ``<failure>``/``<error>`` child decides fail/error and every such child's
  message is joined into the one attempt; else ``<skipped>``; else a ``status``/``result``
  attribute (``disabled``, ``skipped``, ``notrun``... = skipped; ``failed`` = fail; ``errored`` =
  error); else pass. Retries: each ``flakyFailure``/``flakyError`` is a failed attempt BEFORE the
  case's own attempt, each ``rerunFailure``/``rerunError`` one AFTER it.
- ``<error>``/``<failure>`` directly inside a ``<testsuite>`` (no test case) is ignored: there is
  no test identity to record it against. Suite-level counts are ignored; test cases are the truth.
- A test case repeated in one report is yielded again; the writer merges repeats.
- Message: the ``message`` attribute, else the element's own text (``system-out``/``system-err``
  inside it excluded), stripped; None when both are empty. Skipped attempts keep the skip reason.
- Duration: ``time`` in seconds (``"0."``, ``"2,503.1"`` and ``"1,234"`` as thousands, ``"0,25"``
  as a decimal comma). Negative, non-numeric,
  non-finite or above 7 days gives None -- this drops container-structure-test's nanosecond
  values, which would otherwise read as decades.
- Test ids: see ``pytest_ids`` for pytest reports (suite named ``pytest`` or ``file`` ending in
  ``.py``); otherwise ``classname::name``; without classname the nearest named suite stands in
  for it (jest-junit writes ``classname=""`` and same-named tests in different files must not
  merge), ``name`` alone when there is none; ``classname`` alone for an empty name (JUnit 5
  class-level failures); ``(unnamed)`` when all are empty.
- A case's file: its ``file`` attribute, else that of its nearest named suite, else the name of
  that suite (or of an enclosing one) when the name is a path -- it holds ``/`` or ``\`` or ends
  in a source suffix such as ``.ts`` (jest-junit, Vitest, Playwright) -- else unknown. pytest
  cases need none: their ids start with their file.
- An id that cases of two or more different files share in one report is prefixed with each
  case's file, ``<file>::<id>``: those are different tests, not retries. Only such ids change;
  a report whose cases name files is read a second time (start tags only) to find them, before
  the first such case is handed on. Cases of an unknown file keep the plain id, and so does a case
  repeated within one file (a rerun), or across suites that name no file (nextest stress
  iterations, karma browsers). A case naming no file but its describe block in a
  ``parentSuites`` attribute (a karma reporter's) is told apart by that block the same way:
  ``<block>::<id>`` where two blocks share an id, a repeat within one block still a retry.
- The rule holds across the reports of one run (SharedNames): shards of a sharded job hold
  different files, and a name two shards' files share is prefixed in each, whether the shards
  come in one ingest or a manifest's lines of one run, or a later ingest appends one to the run
  holding the name under a file-prefixed id already, or under the plain id from another file
  (the writer stores each case's file with its attempts and moves those rows to their prefixed
  id). A report read alone decides for itself.
"""

from __future__ import annotations

import codecs
import math
import re
import xml.parsers.expat
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import BinaryIO, NoReturn

from flaketui.core.config import RUN_DIMENSIONS
from flaketui.core.errors import ReportError
from flaketui.core.ingest.pytest_ids import pytest_node_id
from flaketui.core.ingest.report_time import parse_report_timestamp, plausible
from flaketui.core.models import Attempt, CaseResult
from flaketui.core.testids import names_file

CHUNK_BYTES = 64 * 1024
MAX_CHUNK_BYTES = 16 * 1024 * 1024
MESSAGE_CAP_CHARS = 64 * 1024
MAX_DURATION_SECONDS = 7 * 24 * 3600

ROOT_TAGS = frozenset({"testsuites", "testsuite", "testrun"})
SUITE_TAGS = ROOT_TAGS
CAPTURE_OUTCOMES = {
    "failure": "fail",
    "error": "error",
    "skipped": "skipped",
    "flakyFailure": "fail",
    "flakyError": "error",
    "rerunFailure": "fail",
    "rerunError": "error",
}
MUTED_TAGS = frozenset({"system-out", "system-err"})
SKIPPED_STATUSES = frozenset(
    {"skipped", "skip", "disabled", "notrun", "not run", "not_run", "ignored", "pending"}
)
FAILED_STATUSES = frozenset({"fail", "failed", "failure"})
ERROR_STATUSES = frozenset({"error", "errored"})
_THOUSANDS = re.compile(r"^[1-9]\d{0,2}(,\d{3})+(\.\d*)?$")


def _local(tag: str) -> str:
    """The element name without any namespace prefix."""
    return tag.rpartition(":")[2]


def _refuse(label: str) -> ReportError:
    """The error for any DTD or entity declaration."""
    return ReportError(f"{label}: refused: DTDs and entities are not allowed")


def parse_duration_ms(text: str | None) -> int | None:
    """Milliseconds from a JUnit ``time`` in seconds, or None when it is not a sane duration."""
    if text is None:
        return None
    cleaned = text.strip()
    if "," in cleaned:
        if _THOUSANDS.match(cleaned) or "." in cleaned:
            cleaned = cleaned.replace(",", "")
        else:
            cleaned = cleaned.replace(",", ".")  # decimal comma from some locales
    try:
        seconds = float(cleaned)
    except ValueError:
        return None
    if not math.isfinite(seconds) or seconds < 0 or seconds > MAX_DURATION_SECONDS:
        return None
    return round(seconds * 1000)


class _Capture:
    """Text and attributes of one failure/error/skipped/retry element being read."""

    __slots__ = ("chunks", "kind", "message_attr", "size", "time")

    def __init__(self, kind: str, attrs: dict[str, str]) -> None:
        self.kind = kind
        self.message_attr = attrs.get("message")
        self.time = attrs.get("time")
        self.chunks: list[str] = []
        self.size = 0

    def add(self, text: str) -> None:
        # Truncate while reading so a multi-megabyte stack trace never sits in memory.
        room = MESSAGE_CAP_CHARS - self.size
        if room > 0:
            self.chunks.append(text[:room])
            self.size += min(len(text), room)

    def message(self) -> str | None:
        for candidate in (self.message_attr, "".join(self.chunks)):
            if candidate and candidate.strip():
                return candidate.strip()[:MESSAGE_CAP_CHARS]
        return None


# What the parser hands the writer: (outcome, duration_ms, message, worker_id, predecessor,
# position, timeout_ms) per attempt -- a report never says the last three, so they are None --
# and (test_id, test_file, attempts, origin) per case, origin the file the case named (see
# _CaseReader._origin; None when it named none). Plain tuples: no object per row on the hot path.
AttemptRow = tuple[str, int | None, str | None, str | None, str | None, int | None, int | None]
CaseRow = tuple[str, str | None, tuple[AttemptRow, ...], str | None]


def _status_outcome(attrs: dict[str, str]) -> str:
    """A childless case's outcome from its ``status``/``result`` attribute (default pass)."""
    status = attrs.get("status") or attrs.get("result")
    if not status:
        return "pass"
    status = status.strip().lower()
    if status in SKIPPED_STATUSES:
        return "skipped"
    if status in FAILED_STATUSES:
        return "fail"
    if status in ERROR_STATUSES:
        return "error"
    return "pass"


class _OpenCase:
    """A test case with child elements (failure, skipped, retries, properties) being read."""

    def __init__(self, attrs: dict[str, str]) -> None:
        self.attrs = attrs
        self.results: list[_Capture] = []  # failure/error children
        self.skips: list[_Capture] = []
        self.flaky: list[_Capture] = []
        self.reruns: list[_Capture] = []
        self.worker_id: str | None = None

    def _own_outcome(self) -> tuple[str, str | None]:
        if self.results:
            messages = [m for m in (c.message() for c in self.results) if m]
            return CAPTURE_OUTCOMES[self.results[0].kind], "\n".join(messages) or None
        if self.skips:
            return "skipped", self.skips[0].message()
        return _status_outcome(self.attrs), None

    def _retry(self, capture: _Capture) -> AttemptRow:
        return (
            CAPTURE_OUTCOMES[capture.kind],
            parse_duration_ms(capture.time),
            capture.message(),
            self.worker_id,
            None,
            None,
            None,
        )

    def attempts(self) -> tuple[AttemptRow, ...]:
        outcome, message = self._own_outcome()
        own = (
            outcome, parse_duration_ms(self.attrs.get("time")), message, self.worker_id,
            None, None, None,
        )  # fmt: skip
        return (
            *(self._retry(c) for c in self.flaky),
            own,
            *(self._retry(c) for c in self.reruns),
        )


class _CaseReader:
    """Expat handlers that turn element events into finished case rows.

    Speed: a Python call per event is most of a parse's cost, so only start events reach Python.
    Ends go to ``ends.append`` (a C call); the depth of any event is starts minus ends so far,
    and a case (or a captured failure text) is known to be over when a later event is no deeper
    than it, or when a chunk has been parsed. Text is only delivered while a failure, error,
    skipped or retry element of a case is open (the handler is switched on and off).
    """

    def __init__(
        self, label: str, parser: xml.parsers.expat.XMLParserType, *, scan: bool = False
    ) -> None:
        self.label = label
        self.parser = parser
        self.ends: list[str] = []
        self.closed = 0  # ends counted before `ends` was last cleared
        self.starts = 0
        self.suite_depths: list[int] = []  # depths of the open named suites
        self.suite_names: list[str] = []
        self.suite_origins: list[str | None] = []  # the file each open named suite names
        self.scan = scan  # only collect each case's identity and origin (see _ambiguous_ids)
        self.seen: dict[str, str] = {}  # scan: a test id's first origin
        self.ambiguous: set[str] = set()  # scan: test ids found with two or more origins
        self.origins: dict[int, str] = {}  # index in `done` -> origin, for cases with one
        self.pytest_depth = 0  # depth of the outermost open suite named "pytest", else 0
        self.case_depth = 0  # depth of the open test case, 0 when none is open
        self.case_attrs: dict[str, str] = {}
        self.case_suite = ""  # nearest named suite of the open case
        self.case_pytest = False
        self.case: _OpenCase | None = None  # only once the case has a child element
        self.capture: _Capture | None = None
        self.capture_depth = 0
        self.muted_depth = 0  # depth of an open system-out/err inside a capture, else 0
        self.durations: dict[str | None, int | None] = {}
        self.done: list[CaseRow] = []
        parser.StartElementHandler = self.start
        parser.EndElementHandler = self.ends.append

    def depth(self) -> int:
        """How many elements are open now."""
        return self.starts - self.closed - len(self.ends)

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        depth = self.starts - self.closed - len(self.ends) + 1  # this element's depth
        self.starts = self.starts + 1
        if self.case_depth:
            if depth > self.case_depth:
                self._child(tag, attrs, depth)
                return
            self._finish_case()
        if ":" in tag:
            tag = tag.rpartition(":")[2]
        suite_depths = self.suite_depths
        while suite_depths and suite_depths[-1] >= depth:  # suites that have ended
            suite_depths.pop()
            self.suite_names.pop()
            self.suite_origins.pop()
            if self.pytest_depth >= depth:
                self.pytest_depth = 0
        if depth == 1 and tag not in ROOT_TAGS:
            raise ReportError(f"{self.label}: not a JUnit report (root element <{tag}>)")
        if tag == "testcase":
            self.case_suite = self.suite_names[-1] if self.suite_names else ""
            self.case_pytest = self.pytest_depth > 0
            if self.scan:
                self._scan_case(attrs)
                return
            self.case_depth = depth
            self.case_attrs = attrs
        elif tag in SUITE_TAGS:
            name = attrs.get("name")
            if name:
                suite_depths.append(depth)
                self.suite_names.append(name)
                origin = attrs.get("file") or (name if names_file(name) else None)
                if origin is None and self.suite_origins:
                    origin = self.suite_origins[-1]
                self.suite_origins.append(origin)
                if name == "pytest" and not self.pytest_depth:
                    self.pytest_depth = depth

    def _child(self, tag: str, attrs: dict[str, str], depth: int) -> None:
        """An element inside the open test case."""
        case = self.case
        if case is None:
            case = self.case = _OpenCase(self.case_attrs)
        if self.muted_depth and depth <= self.muted_depth:
            self.muted_depth = 0
        if self.capture is not None and depth <= self.capture_depth:
            self._end_capture()
        name = tag.rpartition(":")[2] if ":" in tag else tag
        relative = depth - self.case_depth
        if relative == 1 and name in CAPTURE_OUTCOMES:
            self.capture = _Capture(name, attrs)
            self.capture_depth = depth
            if name.startswith("flaky"):
                case.flaky.append(self.capture)
            elif name.startswith("rerun"):
                case.reruns.append(self.capture)
            elif name == "skipped":
                case.skips.append(self.capture)
            else:
                case.results.append(self.capture)
            self.parser.CharacterDataHandler = self.text
        elif self.capture is not None and name in MUTED_TAGS and not self.muted_depth:
            self.muted_depth = depth
        elif relative == 2 and name == "property" and attrs.get("name") == "worker_id":
            case.worker_id = attrs.get("value") or case.worker_id

    def text(self, data: str) -> None:
        # The handler is never switched from here (pyexpat would re-flush this same text); an
        # ended capture ignores text until the next start event switches the handler off.
        depth = self.starts - self.closed - len(self.ends)
        if self.capture is None or depth < self.capture_depth:
            return
        if self.muted_depth:
            if depth >= self.muted_depth:
                return
            self.muted_depth = 0
        self.capture.add(data)

    def _end_capture(self) -> None:
        self.capture = None
        self.capture_depth = 0
        self.muted_depth = 0
        self.parser.CharacterDataHandler = None

    def chunk_done(self) -> None:
        """After a chunk: finish a case that has ended, and forget the counted ends."""
        depth = self.depth()
        self.closed += len(self.ends)
        self.ends.clear()
        if self.case_depth and depth < self.case_depth:
            self._finish_case()

    def _finish_case(self) -> None:
        attrs = self.case_attrs
        if self.case is None:
            time = attrs.get("time")
            durations = self.durations
            if time in durations:
                duration = durations[time]
            else:
                if len(durations) > 1024:
                    durations.clear()
                duration = durations[time] = parse_duration_ms(time)
            attempts: tuple[AttemptRow, ...] = (
                (_status_outcome(attrs), duration, None, None, None, None, None),
            )
        else:
            attempts = self.case.attempts()
            self.case = None
            if self.capture is not None:
                self._end_capture()
        self.case_depth = 0
        test_id, test_file = self._identity(attrs)
        origin = None
        if not self.case_pytest:
            origin = self._origin(attrs)
            if origin is not None:
                self.origins[len(self.done)] = origin
        self.done.append((test_id, test_file, attempts, origin))

    def _origin(self, attrs: dict[str, str]) -> str | None:
        """Where a (non-pytest) case comes from: its ``file``, else its suite's; else the
        describe block a ``parentSuites`` attribute names (karma); else None."""
        if self.case_pytest:
            return None  # pytest ids start with the file already
        file = attrs.get("file")
        if file:
            return None if file.endswith(".py") else (file.strip() or None)
        origin = self.suite_origins[-1] if self.suite_origins else None
        if origin and origin.strip():
            return origin.strip()
        return (attrs.get("parentSuites") or "").strip() or None

    def _scan_case(self, attrs: dict[str, str]) -> None:
        origin = self._origin(attrs)
        if origin is None:
            return
        test_id = self._identity(attrs)[0]
        first = self.seen.setdefault(test_id, origin)
        if first != origin:
            self.ambiguous.add(test_id)

    def _identity(self, attrs: dict[str, str]) -> tuple[str, str | None]:
        classname = attrs.get("classname") or ""
        name = attrs.get("name") or ""
        file = attrs.get("file") or None
        if self.case_pytest or (file is not None and file.endswith(".py")):
            return pytest_node_id(classname.strip(), name, file)
        # Without a classname, the suite (a jest file, a mocha describe) keeps same-named tests
        # of different files apart; otherwise they would merge into fake retries.
        scope = classname.strip() or self.case_suite.strip()
        if scope and name:
            return f"{scope}::{name}", file
        return (name or scope or "(unnamed)"), file


def _new_parser(label: str) -> xml.parsers.expat.XMLParserType:
    """An expat parser that refuses DTDs, entity declarations and external entities."""
    parser = xml.parsers.expat.ParserCreate()

    def refuse(*_args: object) -> NoReturn:
        raise _refuse(label)

    parser.SetParamEntityParsing(xml.parsers.expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.UnparsedEntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse
    return parser


def _fix_prolog(chunk: bytes) -> bytes:
    """Move whitespace found before the XML declaration to just after it."""
    bom = b"\xef\xbb\xbf" if chunk.startswith(b"\xef\xbb\xbf") else b""
    body = chunk[len(bom) :]
    stripped = body.lstrip(b" \t\r\n")
    if len(stripped) == len(body) or not stripped.startswith(b"<?xml"):
        return chunk
    end = stripped.find(b"?>")
    if end < 0:
        return chunk
    leading = body[: len(body) - len(stripped)]
    return bom + stripped[: end + 2] + leading + stripped[end + 2 :]


_EXPAT = xml.parsers.expat.errors
# Expat's terse reasons in plain words, with the usual cause of each in a test report.
XML_PROBLEMS: dict[str, str] = {
    _EXPAT.XML_ERROR_NO_ELEMENTS: "the file ends before its XML is complete (truncated?)",
    _EXPAT.XML_ERROR_SYNTAX: "not XML: text or markup where an XML tag was expected",
    _EXPAT.XML_ERROR_INVALID_TOKEN: (
        "a character XML does not allow here (an unescaped < or & in an attribute or text?)"
    ),
    _EXPAT.XML_ERROR_UNCLOSED_TOKEN: "the file ends inside a tag (truncated?)",
    _EXPAT.XML_ERROR_PARTIAL_CHAR: "the file ends inside a character (truncated?)",
    _EXPAT.XML_ERROR_TAG_MISMATCH: "a closing tag that does not match the element it closes",
    _EXPAT.XML_ERROR_DUPLICATE_ATTRIBUTE: "an attribute given twice in one tag",
    _EXPAT.XML_ERROR_JUNK_AFTER_DOC_ELEMENT: (
        "more after the end of the report's root element (two reports in one file?)"
    ),
    _EXPAT.XML_ERROR_UNDEFINED_ENTITY: "an undefined entity (an & not written as &amp;?)",
    _EXPAT.XML_ERROR_BAD_CHAR_REF: "a character reference to a character XML does not allow",
    _EXPAT.XML_ERROR_UNCLOSED_CDATA_SECTION: "the file ends inside a CDATA section (truncated?)",
    _EXPAT.XML_ERROR_INCORRECT_ENCODING: "bytes that do not match the declared encoding",
}


def xml_problem(exc: xml.parsers.expat.ExpatError) -> str:
    """What is wrong with a report expat refused, in plain words."""
    reason = xml.parsers.expat.ErrorString(exc.code)
    return XML_PROBLEMS.get(reason, f"not valid XML ({reason})")


_DECLARED_ENCODING = re.compile(
    rb"""^(?:\xef\xbb\xbf)?\s*<\?xml[^>]*?encoding\s*=\s*["']([^"']*)"""
)


def _not_utf8(
    path: Path, parser: xml.parsers.expat.XMLParserType, exc: xml.parsers.expat.ExpatError
) -> str | None:
    """The plain words for a token expat refused because its bytes are not UTF-8 -- a report
    written in another encoding (cp1252, Latin-1) without saying so reads as UTF-8 -- or None
    when that is not the cause."""
    if xml.parsers.expat.ErrorString(exc.code) != _EXPAT.XML_ERROR_INVALID_TOKEN:
        return None
    try:
        with path.open("rb") as stream:
            declared = _DECLARED_ENCODING.match(stream.read(512))
            if declared and declared.group(1).decode("ascii", "replace").lower() not in (
                "utf-8",
                "utf8",
            ):
                return None  # bytes in a declared encoding: expat's own reason stands
            stream.seek(max(parser.ErrorByteIndex, 0))
            here = stream.read(4)
    except OSError:
        return None
    try:
        codecs.getincrementaldecoder("utf-8")().decode(here, final=False)
    except UnicodeDecodeError as bad:
        if bad.start == 0:
            return (
                f"not valid UTF-8 (byte 0x{here[0]:02X}); a report in another encoding must "
                "name it in an XML declaration, such as "
                '<?xml version="1.0" encoding="windows-1252"?>'
            )
    return None


def _open(path: Path, label: str) -> BinaryIO:
    """Open a report for binary reading; ReportError when that is impossible."""
    try:
        return path.open("rb")
    except OSError as exc:
        raise ReportError(f"{label}: cannot read ({exc.strerror or exc})") from exc


def _feed(path: Path, label: str, parser: xml.parsers.expat.XMLParserType) -> Iterator[None]:
    """Feed the file to the parser chunk by chunk, yielding after each chunk."""
    with _open(path, label) as stream:
        first = True
        size, fed = CHUNK_BYTES, 0
        while True:
            # Expat rescans an unfinished token (a huge attribute) on every feed: while one is
            # open, double the read size so that costs O(n) instead of O(n^2).
            stuck = fed - parser.CurrentByteIndex
            size = min(size * 2, MAX_CHUNK_BYTES) if stuck > 2 * size else CHUNK_BYTES
            try:
                chunk = stream.read(size)
            except OSError as exc:
                raise ReportError(f"{label}: cannot read ({exc.strerror or exc})") from exc
            if first:
                if not chunk:
                    raise ReportError(f"{label}: empty file")
                chunk = _fix_prolog(chunk)
                first = False
            fed += len(chunk)
            try:
                parser.Parse(chunk, not chunk)
            except xml.parsers.expat.ExpatError as exc:
                where = f"{label}:{exc.lineno}:{exc.offset + 1}"
                problem = _not_utf8(path, parser, exc) or xml_problem(exc)
                raise ReportError(f"{where}: {problem}") from None
            except (LookupError, UnicodeError, ValueError) as exc:
                # An encoding declaration expat or Python does not know.
                raise ReportError(f"{label}: unreadable encoding ({exc})") from None
            yield
            if not chunk:
                return


class SharedNames:
    """The test ids that cases of different files share across all the reports of one run.

    A sharded job writes a report per shard, and each shard holds other files: a name that
    files of two shards share is no clash within either report, yet two tests of the run. The
    reports are read (start tags only, as _ambiguous_ids) when a case naming its file first
    asks, so runs whose cases name no file never pay for it. stored: given each id the
    reports' cases of a known file bear, with its file, those the run being appended to holds
    already as another file's (testids.stored_clashes); a case of such an id is prefixed as well.
    """

    def __init__(
        self, paths: Sequence[Path], stored: Callable[[dict[str, str]], set[str]] | None = None
    ) -> None:
        self.paths = list(paths)
        self.stored = stored
        self._ambiguous: set[str] | None = None

    @property
    def decided(self) -> set[str] | None:
        """The shared ids if a case has asked for them, else None (nothing was read)."""
        return self._ambiguous

    def ambiguous(self) -> set[str]:
        """The shared ids (read once)."""
        if self._ambiguous is None:
            origins: dict[str, str] = {}
            ambiguous: set[str] = set()
            for path in self.paths:
                seen, shared = _scan_ids(Path(path))
                ambiguous |= shared
                for test_id, origin in seen.items():
                    if origins.setdefault(test_id, origin) != origin:
                        ambiguous.add(test_id)
            if self.stored is not None and origins:
                ambiguous |= self.stored(origins)
            self._ambiguous = ambiguous
        return self._ambiguous


def iter_case_rows(path: Path, names: SharedNames | None = None) -> Iterator[CaseRow]:
    """Stream one JUnit report's test cases as plain rows in document order (see CaseRow).

    names: the ids shared by files across the run's reports, this one among them; without it
    the report decides alone.
    """
    label = str(path)
    parser = _new_parser(label)
    parser.buffer_text = True  # one text event per run of characters, not one per line
    parser.buffer_size = CHUNK_BYTES
    reader = _CaseReader(label, parser)
    ambiguous: set[str] | None = None
    for _ in _feed(Path(path), label, parser):
        reader.chunk_done()
        if reader.done:
            finished, reader.done = reader.done, []
            if reader.origins:
                if ambiguous is None:
                    # Only a report whose cases name files pays for this second, lighter read.
                    ambiguous = (
                        names.ambiguous() if names is not None else _ambiguous_ids(Path(path))
                    )
                _qualify(finished, reader.origins, ambiguous)
                reader.origins = {}
            yield from finished


def _qualify(rows: list[CaseRow], origins: dict[int, str], ambiguous: set[str]) -> None:
    """Prefix with its file the id of each row whose id the report gives to several files."""
    if not ambiguous:
        return
    for index, origin in origins.items():
        test_id, test_file, attempts, _ = rows[index]
        if test_id in ambiguous:
            rows[index] = (f"{origin}::{test_id}", test_file, attempts, origin)


def _ambiguous_ids(path: Path) -> set[str]:
    """The test ids that cases of different files share in this report (see _CaseReader)."""
    return _scan_ids(path)[1]


def _scan_ids(path: Path) -> tuple[dict[str, str], set[str]]:
    """Each id of the report's cases of a known file with its first file, and the ids that
    cases of different files share in it."""
    label = str(path)
    parser = _new_parser(label)
    reader = _CaseReader(label, parser, scan=True)
    for _ in _feed(path, label, parser):
        reader.chunk_done()
    return reader.seen, reader.ambiguous


def iter_cases(path: Path) -> Iterator[CaseResult]:
    """Stream one JUnit report's test cases in document order; raise ReportError on bad input."""
    for test_id, test_file, attempts, _ in iter_case_rows(path):
        yield CaseResult(test_id, test_file, [Attempt(*attempt) for attempt in attempts])


# ---- timestamps -------------------------------------------------------------------------------


class _Found(Exception):
    """Stops parsing once a plausible timestamp is seen."""

    def __init__(self, moment: datetime) -> None:
        super().__init__()
        self.moment = moment


def report_timestamp(path: Path) -> datetime | None:
    """The report's first plausible suite timestamp (aware UTC), reading only as far as needed."""
    label = str(path)
    parser = _new_parser(label)

    def start(tag: str, attrs: dict[str, str]) -> None:
        if _local(tag) in SUITE_TAGS and "timestamp" in attrs:
            moment = parse_report_timestamp(attrs["timestamp"])
            if moment is not None and plausible(moment):
                raise _Found(moment)

    parser.StartElementHandler = start
    try:
        for _ in _feed(Path(path), label, parser):
            pass
    except _Found as found:
        return found.moment
    return None


# ---- run environment --------------------------------------------------------------------------

# Run dimensions a report can state, and the property names read for them unless configured
# otherwise (`[tool.flaketui] junit_properties`, property name -> dimension).
DEFAULT_PROPERTY_DIMENSIONS = {
    "hostname": "runner_host",
    "runner_host": "runner_host",
    "os": "os",
    "python": "python",
    "python_version": "python",
    "platform": "platform",
    "random_seed": "order_seed",
    "order_seed": "order_seed",
}
MAX_DIMENSION_CHARS = 200


def report_run_info(path: Path, properties: dict[str, str] | None = None) -> dict[str, str]:
    """The run dimensions a report states before its first test case.

    A suite's ``hostname`` attribute is the runner host; suite-level ``<property>`` elements
    whose name maps to a dimension (DEFAULT_PROPERTY_DIMENSIONS updated by `properties`) give
    the others. The first value of each dimension wins; values are stripped and capped.
    """
    mapping = {**DEFAULT_PROPERTY_DIMENSIONS, **(properties or {})}
    label = str(path)
    parser = _new_parser(label)
    found: dict[str, str] = {}

    def keep(dimension: str | None, value: str | None) -> None:
        if dimension in RUN_DIMENSIONS and value and value.strip() and dimension not in found:
            found[dimension] = value.strip()[:MAX_DIMENSION_CHARS]

    def start(tag: str, attrs: dict[str, str]) -> None:
        name = _local(tag)
        if name == "testcase":
            raise _Found(datetime.min)
        if name in SUITE_TAGS:
            keep("runner_host", attrs.get("hostname"))
        elif name == "property":
            keep(mapping.get(attrs.get("name") or ""), attrs.get("value"))

    parser.StartElementHandler = start
    try:
        for _ in _feed(Path(path), label, parser):
            pass
    except _Found:
        pass
    return found


def reports_run_info(
    paths: Iterable[Path], properties: dict[str, str] | None = None
) -> dict[str, str]:
    """report_run_info over a run's reports, the first file stating a dimension winning."""
    found: dict[str, str] = {}
    for path in paths:
        for dimension, value in report_run_info(path, properties).items():
            found.setdefault(dimension, value)
    return found
