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
from dataclasses import dataclass
from pathlib import Path

from flaketui import __version__
from flaketui.core.atomic import write_atomically
from flaketui.core.errors import FlaketuiError
from flaketui.core.scoring.results import Report
from flaketui.core.scoring.stored import read_head, report_from_lines, report_lines
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
    try:
        with ranking_file(source).open(encoding="utf-8") as lines:
            head = read_head(next(lines, ""))
            if head.get("identity") != _identity(source):
                return None
            return KeptRanking(report_from_lines(head, lines), head.get("with_causes") is True)
    except (OSError, ValueError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
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
