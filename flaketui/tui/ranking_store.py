"""The last ranking the app made of a history, kept in the user's cache directory.

Ranking a big history takes a moment. So that the list is there at once, the app first shows
the ranking it made the last time it opened the same history with the same settings, clock
option and CODEOWNERS, marked in the header as being refreshed, and replaces it with the new
ranking as soon as that is made: rows move only if the history changed in between. The file
is the app's own (never in a work tree, never in the history); a missing, unreadable or
outdated one is simply not used.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from flaketui import __version__
from flaketui.core.atomic import write_atomically
from flaketui.core.errors import FlaketuiError
from flaketui.core.scoring.results import Report, TestVerdict
from flaketui.core.scoring.stored import (
    flaky_report,
    read_flaky,
    read_head,
    report_from_lines,
    report_lines,
)
from flaketui.tui.cache import cache_home
from flaketui.tui.loaders import Source


def ranking_file(source: Source) -> Path:
    """Where the ranking of `source`'s history is kept: one file per history path."""
    digest = hashlib.sha256(str(source.path).encode()).hexdigest()[:32]
    return cache_home() / "flaketui" / "rankings" / f"{digest}.json"


def _identity(source: Source) -> str:
    """What a kept ranking must have been made with to be shown for `source`."""
    now = source.requested_now
    return json.dumps(
        {
            "flaketui": __version__,
            "history": str(source.path),
            "now": None if now is None else now.isoformat(),
            "config": source.config.as_dict(),
            "owners": None if source.owners_from is None else str(source.owners_from),
        },
        sort_keys=True,
        default=str,
    )


@dataclass(frozen=True, slots=True)
class KeptRanking:
    """A ranking kept from an earlier opening, and whether its likely causes were in yet."""

    report: Report
    with_causes: bool


def load_ranking(source: Source) -> KeptRanking | None:
    """The ranking kept for `source`, or None when there is none it can use."""
    opened = open_ranking(source)
    if opened is None:
        return None
    return opened.rest()


@dataclass(slots=True)
class OpenedRanking:
    """A kept ranking read as far as its flaky tests, the rest of the file still to read.

    The list opens on the flaky tests: at 10 000 tests they are a few hundred lines of the
    file, and the first screen need not wait for the others to be decoded.
    """

    head: dict[str, Any]
    flaky: list[TestVerdict]
    lines: IO[str] | None = field(repr=False)

    @property
    def with_causes(self) -> bool:
        """Whether the report's flaky tests and families carry their likely causes."""
        return self.head.get("with_causes") is True

    @property
    def verdicts(self) -> dict[str, int]:
        """How many tests of the whole report carry each verdict."""
        return dict(self.head["verdicts"])

    def first_view(self) -> Report:
        """The report as far as read: its flaky tests, no other test and no group."""
        return flaky_report(self.head, self.flaky)

    def rest(self) -> KeptRanking | None:
        """The whole kept ranking, the rest of the file read now; None when it is unreadable."""
        lines, self.lines = self.lines, None
        if lines is None:
            return None
        try:
            # Read at once, then decoded: iterating over the file would release the
            # interpreter for every chunk read and take it straight back, and a thread that
            # does that so often keeps the UI thread from ever being handed it.
            with lines:
                rest = lines.read().split("\n")
            report = report_from_lines(self.head, iter(rest), leading=self.flaky)
        except (OSError, ValueError):
            return None
        return KeptRanking(report, self.with_causes)

    def close(self) -> None:
        """Read no further."""
        if self.lines is not None:
            self.lines.close()
            self.lines = None


def open_ranking(source: Source) -> OpenedRanking | None:
    """The ranking kept for `source` read as far as its flaky tests, or None when there is none
    it can use (the rest is read by OpenedRanking.rest)."""
    try:
        lines = ranking_file(source).open(encoding="utf-8")
    except OSError:
        return None
    try:
        head = read_head(next(lines, ""))
        if head.get("identity") == _identity(source):
            flaky = read_flaky(head, lines)
            if flaky is not None:  # else not in the order a report lists its tests
                return OpenedRanking(head, flaky, lines)
    except (OSError, ValueError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        pass
    lines.close()
    return None


def keep_ranking(source: Source, report: Report, *, with_causes: bool) -> None:
    """Keep `report` as the ranking to show first next time; a failure only loses the copy.

    with_causes: the report's flaky tests and families carry their likely causes.
    """
    target = ranking_file(source)
    head = {"identity": _identity(source), "with_causes": with_causes}
    text = "\n".join(report_lines(report, head)) + "\n"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(target, text.encode())
    except (OSError, FlaketuiError):
        pass
