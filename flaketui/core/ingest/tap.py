"""Stream test results out of TAP (the Test Anything Protocol, versions 13 and 14), line by line.

TAP is what node's test runner, node-tap, tape, Perl's prove and many C harnesses print:
``ok 1 - description``, ``not ok 2 - description # SKIP reason``, plans (``1..N``), comments,
YAML diagnostic blocks (``---`` ... ``...``, indented under their test line) and subtests
(indented four spaces, closed by their parent's own test line, or opened by ``ok N - name {``
and closed by ``}`` when buffered).

Decisions where the protocol leaves room:
- Test id: the description (``test N`` without one, a ``Subtest: `` prefix dropped); a
  subtest's tests are prefixed by their parents' descriptions, joined with `` > ``. A
  subtest's own line sums its children and is not stored, unless it failed while none of its
  children did (a failure of its own, such as a plan mismatch). A TAP stream names no source
  file; give each test program's output its own run or suite when their descriptions may
  collide.
- Outcome: ``ok`` = pass, ``not ok`` = fail; a ``# SKIP`` or ``# TODO`` directive = skipped
  (a TODO's failure is expected and counts for nothing).
- Repeats: TAP has no retries, and test points often share a description (each assertion of
  node-tap, tape or Test::More prints ``ok N - should be equal``). A test id seen again in one
  stream is another test, numbered by its occurrence: ``should be equal #2``, ``#3``, ... (the
  first keeps the bare id; inside a subtest the whole id is numbered, ``suite > should be equal
  #2``). Where an earlier test has that id already (its own description ends in ``#2``), the
  next free number is taken. So every test of a stream has one attempt, and its id stays the
  same from run to run while the stream keeps its order.
- Message: the diagnostic block's ``message`` or ``error`` (prefixed by its ``name``, as
  node's runner writes the error class there); duration from its ``duration_ms``.
- ``Bail out!`` ends the stream: what ran before it is kept. Lines that are not TAP are
  ignored, as the protocol asks. A file with no TAP line at all, or that is not UTF-8, is
  refused.

Memory: one line (at most MAX_LINE_BYTES are read of any line), one diagnostic block (at most
MESSAGE_CAP_CHARS), the tests of the subtest being read (its parent's description is only
known once it closes) and an 8-byte digest of each id given out, to number repeats (about 90
bytes a test; two ids sharing a digest is a chance in 10^19 a pair, and would number the
second).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from flaketui.core.errors import ReportError
from flaketui.core.ingest.rows import AttemptRow, CaseRow

MAX_LINE_BYTES = 1024 * 1024
MESSAGE_CAP_CHARS = 64 * 1024
MAX_DURATION_MS = 7 * 24 * 3600 * 1000
INDENT = 4
_RESULT = re.compile(r"^(not )?ok\b(?:\s+(\d+))?\s*(?:-\s*)?(.*)$")
_DIRECTIVE = re.compile(r"(?<!\\)#\s*(skip|todo)\b", re.IGNORECASE)
_VERSION = re.compile(r"^TAP version (\d+)\s*$")
_PLAN = re.compile(r"^1\.\.\d+")
_YAML_KEY = re.compile(r"^(\w+):\s*(.*)$")


@dataclass(slots=True)
class _Pending:
    """A test line whose diagnostic block may still follow."""

    level: int
    description: str
    outcome: str
    yaml_indent: int
    diagnostics: list[str] = field(default_factory=list)
    in_yaml: bool = False
    size: int = 0


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return value.replace("''", "'")


def _key(test_id: str) -> int:
    """A test id's 8-byte digest: the same in every process, unlike hash()."""
    digest = hashlib.blake2b(test_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


class _Ids:
    """Ids given out in one stream: a repeated id gets the next free occurrence number."""

    def __init__(self) -> None:
        self.taken: set[int] = set()
        self.last_number: dict[int, int] = {}  # a repeated id's key -> the last number it got

    def claim(self, test_id: str) -> str:
        key = _key(test_id)
        if key not in self.taken:
            self.taken.add(key)
            return test_id
        number = self.last_number.get(key, 1)
        while True:
            number += 1
            numbered = f"{test_id} #{number}"
            numbered_key = _key(numbered)
            if numbered_key not in self.taken:
                break
        self.last_number[key] = number
        self.taken.add(numbered_key)
        return numbered


def _attempt(pending: _Pending) -> AttemptRow:
    keys: dict[str, str] = {}
    for line in pending.diagnostics:
        found = _YAML_KEY.match(line)  # top-level keys only: lines are stored dedented
        if found and found.group(1) not in keys:
            keys[found.group(1)] = _unquote(found.group(2))
    message = None
    if pending.outcome == "fail":
        message = keys.get("message") or keys.get("error") or None
        if message and keys.get("name") and keys.get("message") is None:
            message = f"{keys['name']}: {message}"
    duration = None
    try:
        value = float(keys.get("duration_ms", ""))
        if math.isfinite(value) and 0 <= value <= MAX_DURATION_MS:
            duration = round(value)
    except ValueError:
        pass
    return pending.outcome, duration, message, None, None, None, None


class _Reader:
    """The subtest structure: tests collected per level until their parent line closes them."""

    def __init__(self) -> None:
        self.collected: dict[int, list[tuple[list[str], AttemptRow]]] = {}
        self.names: dict[int, str] = {}  # "# Subtest: name" comments, by level
        self.out: list[CaseRow] = []
        self.ids = _Ids()

    def emit(self, parts: list[str], attempt: AttemptRow) -> None:
        self.out.append((self.ids.claim(" > ".join(parts)), None, (attempt,), None))

    def result(self, pending: _Pending) -> None:
        level = pending.level
        attempt = _attempt(pending)
        children = self.collected.pop(level + 1, [])
        for deeper in [lvl for lvl in self.collected if lvl > level + 1]:
            children.extend(self.collected.pop(deeper))
        for lvl in [lvl for lvl in self.names if lvl >= level]:
            del self.names[lvl]
        rows = [([pending.description, *parts], att) for parts, att in children]
        if not children or (
            attempt[0] == "fail" and not any(att[0] == "fail" for _, att in children)
        ):
            rows.append(([pending.description], attempt))
        if level == 0:
            for parts, att in rows:
                self.emit(parts, att)
        else:
            self.collected.setdefault(level, []).extend(rows)

    def finish(self) -> None:
        """Tests of subtests whose parent line never came (a truncated stream)."""
        for level in sorted(self.collected, reverse=True):
            prefix = [
                self.names.get(lvl - 1, "(unfinished subtest)") for lvl in range(1, level + 1)
            ]
            for parts, att in self.collected.pop(level):
                self.emit([*prefix, *parts], att)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    label = str(path)
    try:
        with path.open("rb") as stream:
            number = 0
            while True:
                raw = stream.readline(MAX_LINE_BYTES)
                if not raw:
                    return
                number += 1
                if not raw.endswith(b"\n"):
                    while (rest := stream.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                        pass  # the rest of an over-long line is dropped
                if number == 1:
                    raw = raw.removeprefix(b"\xef\xbb\xbf")
                try:
                    yield number, raw.decode("utf-8").rstrip("\r\n")
                except UnicodeDecodeError:
                    raise ReportError(f"{label}:{number}: not UTF-8 text") from None
    except OSError as exc:
        raise ReportError(f"{label}: cannot read ({exc.strerror or exc})") from exc


def iter_case_rows(path: Path) -> Iterator[CaseRow]:
    """Stream one TAP file's tests as the writer's rows; ReportError on bad input."""
    path = Path(path)
    reader = _Reader()
    pending: _Pending | None = None
    opened: list[_Pending] = []  # buffered subtests ("ok 1 - name {") not yet closed
    seen_tap = False
    lines_read = 0
    for lines_read, line in _lines(path):  # noqa: B007 - the count is read after the loop
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if pending is not None:
            if pending.in_yaml:
                if stripped.rstrip() == "..." and indent == pending.yaml_indent:
                    pending.in_yaml = False
                elif pending.size < MESSAGE_CAP_CHARS:
                    text = line[pending.yaml_indent :]
                    pending.diagnostics.append(text)
                    pending.size += len(text)
                continue
            if stripped.rstrip() == "---" and indent == pending.yaml_indent:
                pending.in_yaml = True
                continue
        level = indent // INDENT
        found = _RESULT.match(stripped)
        if found is not None:
            seen_tap = True
            if pending is not None:
                reader.result(pending)
            not_ok, test_number, rest = found.groups()
            outcome = "fail" if not_ok else "pass"
            directive = _DIRECTIVE.search(rest)
            description = rest
            if directive is not None:
                outcome = "skipped"
                description = rest[: directive.start()]
            description = description.strip()
            buffered = description.endswith("{")
            description = description.removesuffix("{").strip().removeprefix("Subtest: ")
            description = description.replace("\\#", "#") or f"test {test_number or '?'}"
            pending = _Pending(level, description, outcome, indent + 2)
            if buffered:  # TAP 14 buffered subtest: its tests follow, closed by "}"
                opened.append(pending)
                pending = None
        elif stripped.rstrip() == "}" and opened and opened[-1].level == level:
            if pending is not None:
                reader.result(pending)
                pending = None
            reader.result(opened.pop())
        elif stripped.startswith("Bail out!"):
            seen_tap = True
            break
        elif _VERSION.match(stripped) or _PLAN.match(stripped):
            seen_tap = True
        elif stripped.startswith("# Subtest:"):
            if pending is not None:
                # The test before the comment is whole: judged now, it cannot clear the name.
                reader.result(pending)
                pending = None
            reader.names[level] = stripped.removeprefix("# Subtest:").strip()
        if reader.out:
            yield from reader.out
            reader.out.clear()
    if pending is not None:
        reader.result(pending)
    while opened:
        reader.result(opened.pop())
    reader.finish()
    yield from reader.out
    if lines_read == 0:
        raise ReportError(f"{path}: empty file")
    if not seen_tap:
        raise ReportError(f"{path}: not a TAP stream (no version, plan or test line)")
