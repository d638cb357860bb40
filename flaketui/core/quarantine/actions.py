"""Quarantine and release: skip-file entries plus their append-only audit-log rows.

Lock order, for every writer: the history's write transaction first, then the skip file's lock.
"""

from __future__ import annotations

import getpass
import json
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from flaketui.core.config import Config
from flaketui.core.errors import FlaketuiError
from flaketui.core.history.dbhandle import Connected
from flaketui.core.history.store import transaction
from flaketui.core.owners import find_repo_root
from flaketui.core.quarantine.skipfile import (
    MODES,
    SCORE_KEYS,
    SkipEntry,
    SkipFile,
    SkipMode,
    check_skip_file_to_write,
    round_scores,
    update_skip_file,
)
from flaketui.core.scoring.detail import did_you_mean, did_you_mean_among
from flaketui.core.testids import parent_of
from flaketui.core.timeutil import MAX_EXPIRY_DAYS, to_iso
from flaketui.core.words import plural

SOURCES = ("cli", "app", "lifecycle")


class QuarantineError(FlaketuiError):
    """A quarantine or release that cannot be done (unknown test, not quarantined, bad value)."""


@dataclass(slots=True)
class Quarantined:
    """What a quarantine wrote: its entries, the ones they replaced, and the file's entry count."""

    entries: list[SkipEntry]
    replaced: dict[str, SkipEntry]  # test id -> its entry before, for the tests that had one
    listed: int  # entries in the skip file after the write


@dataclass(slots=True)
class Evidence:
    """What the history says about one test at the moment it is quarantined."""

    scores: dict[str, Any]
    owner: str | None = None
    signature: str | None = None


def current_user() -> str:
    """Who is acting: git's user.name <user.email>, else the login name."""
    values: list[str] = []
    for key in ("user.name", "user.email"):
        try:
            out = subprocess.run(
                ["git", "config", "--get", key], capture_output=True, text=True, timeout=5
            )
        except (OSError, subprocess.SubprocessError):
            break
        values.append(out.stdout.strip() if out.returncode == 0 else "")
    name, email = [*values, "", ""][:2]
    if name and email:
        return f"{name} <{email}>"
    if name or email:
        return name or email
    try:
        return getpass.getuser()
    except (OSError, KeyError, ImportError):
        return "unknown"


# --- targets and evidence -------------------------------------------------------------------


def expand_target(db: Connected, test_id_or_parent: str) -> list[str]:
    """The full ids a name stands for: the test itself, else every param of a family; [] if none."""
    row = db.conn.execute(
        "SELECT test_id FROM tests WHERE test_id = ?", (test_id_or_parent,)
    ).fetchone()
    if row is not None:
        return [str(row[0])]
    return [
        str(r[0])
        for r in db.conn.execute(
            "SELECT test_id FROM tests WHERE parent = ? ORDER BY test_id", (test_id_or_parent,)
        )
    ]


def evidence_for(
    db: Connected,
    test_ids: list[str],
    *,
    now: datetime,
    config: Config,
    repo_root: Path | None = None,
) -> dict[str, Evidence]:
    """Scores, owner and signature of each test as of now, from one scoring pass."""
    from flaketui.core.scoring import report  # scoring is heavy; only writers need it

    wanted = set(test_ids)
    scored = report.build_report(db, now=now, config=config, repo_root=repo_root, groups=False)
    found: dict[str, Evidence] = {}
    for verdict in scored.tests:
        if verdict.test_id in wanted:
            scores = {key: getattr(verdict.scores, key) for key in SCORE_KEYS}
            found[verdict.test_id] = Evidence(
                scores=round_scores(scores), owner=verdict.owner, signature=verdict.signature
            )
    return found


# --- audit log ------------------------------------------------------------------------------

_AUDIT_INSERT = """
INSERT INTO audit_log (ts, who, action, test_id, mode, reason, ticket, scores, source,
    written_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""


def _audit(
    db: Connected,
    rows: list[tuple[str, str | None, str | None, str | None, Mapping[str, Any] | None]],
    *,
    action: str,
    now: datetime,
    written_at: datetime,
    who: str,
    source: str,
) -> None:
    """Append one audit row per (test_id, mode, reason, ticket, scores): dated now, the moment
    the decision holds for, and written_at, the moment it is written."""
    db.conn.executemany(
        _AUDIT_INSERT,
        [
            (
                to_iso(now),
                who,
                action,
                test_id,
                mode,
                reason,
                ticket,
                None if scores is None else json.dumps(dict(scores), sort_keys=True),
                source,
                to_iso(written_at),
            )
            for test_id, mode, reason, ticket, scores in rows
        ],
    )


def _check_source(source: str) -> None:
    if source not in SOURCES:
        raise QuarantineError(f"unknown source {source!r} (one of {', '.join(SOURCES)})")


# --- operations -----------------------------------------------------------------------------


def _refuse_replacing(
    entries: Mapping[str, SkipEntry], test_ids: list[str], target: str, skip_path: Path
) -> None:
    """QuarantineError when a test of test_ids already has an entry (see quarantine's replace)."""
    present = [test_id for test_id in test_ids if test_id in entries]
    if not present:
        return
    entry = entries[present[0]]
    until = to_iso(entry.expires) if entry.expires is not None else "never"
    held = f"{entry.mode}, until {until}, reason {entry.reason!r}"
    if present == [target]:
        raise QuarantineError(
            f"{target!r} is already quarantined in {skip_path} ({held}); "
            "--update replaces its entry"
        )
    one = len(present) == 1
    raise QuarantineError(
        f"{len(present)} of the {plural(len(test_ids), 'param')} of {target!r} "
        f"{'is' if one else 'are'} already quarantined in {skip_path} ({present[0]!r}: {held}); "
        f"--update replaces {'its entry' if one else 'their entries'}"
    )


def check_quarantine(
    skip_path: Path,
    *,
    reason: str,
    mode: str = SkipMode.SKIP,
    expires_days: int | None = None,
    source: str = "cli",
    config: Config,
) -> SkipFile | None:
    """Refuse (QuarantineError, SkipFileError) what a quarantine can refuse without the
    history: the source, the mode, an empty reason, the expiry, and a skip file that cannot be
    changed (see check_skip_file_to_write). The skip file as it reads now, None if absent.
    A command asks this before it opens the history for writing."""
    _check_source(source)
    if mode not in MODES:
        raise QuarantineError(f"mode must be 'skip' or 'run', not {mode!r}")
    if not reason.strip():
        raise QuarantineError("a reason is required")
    days = config.skip_expiry_days if expires_days is None else expires_days
    if not 0 < days <= MAX_EXPIRY_DAYS:
        raise QuarantineError(
            f"expiry must be a number of days from 1 to {MAX_EXPIRY_DAYS}, not {days}"
        )
    return check_skip_file_to_write(skip_path)


def quarantine(
    db: Connected,
    skip_path: Path,
    test_id_or_parent: str,
    *,
    reason: str,
    mode: str = SkipMode.SKIP,
    expires_days: int | None = None,
    expires_from: datetime | None = None,
    ticket: str | None = None,
    now: datetime,
    who: str | None = None,
    source: str = "cli",
    config: Config,
    force: bool = False,
    replace: bool = False,
    repo_root: Path | None = None,
    scored_at: datetime | None = None,
    written_at: datetime | None = None,
) -> Quarantined:
    """Quarantine a test, or every param of a family, in the skip file and the audit log.

    A test that already has an entry is refused (nothing written) unless replace: its entry is
    then replaced by this one (mode, reason, expiry, ticket, scores), which keeps the original
    quarantined_at, so extending an entry does not reset the lifecycle clock; the result holds
    the entries replaced. force quarantines an id absent from the history.
    Owners come from CODEOWNERS under repo_root (default: the repository holding the skip file).
    Scores are taken as of scored_at (default now; the CLI passes the effective now, so an
    old history is scored as of its newest run while the entry is dated now). The audit rows
    are dated now and record written_at (default now) as the moment they were written: the
    lifecycle dates a quarantine its transition and writes it later. The entry expires
    expires_days after expires_from (default now): the lifecycle counts from the apply.
    """
    # Before scoring, which takes a while on a big history: a refusal comes at once.
    current = check_quarantine(
        skip_path,
        reason=reason,
        mode=mode,
        expires_days=expires_days,
        source=source,
        config=config,
    )
    chosen_mode = SkipMode(mode)
    days = config.skip_expiry_days if expires_days is None else expires_days
    test_ids = expand_target(db, test_id_or_parent)
    if not test_ids:
        if not force:
            raise QuarantineError(
                f"no test or family named {test_id_or_parent!r} in the history"
                f"{did_you_mean(db, test_id_or_parent)}"
                " (use --force to quarantine a test the history has not seen)"
            )
        test_ids = [test_id_or_parent]

    def check(entries: Mapping[str, SkipEntry]) -> None:
        if not replace:
            _refuse_replacing(entries, test_ids, test_id_or_parent, skip_path)

    check({} if current is None else current.entries)
    if repo_root is None:
        repo_root = find_repo_root(skip_path.absolute().parent)
    evidence = evidence_for(db, test_ids, now=scored_at or now, config=config, repo_root=repo_root)
    expires = (expires_from or now) + timedelta(days=days)
    written: list[SkipEntry] = []
    replaced: dict[str, SkipEntry] = {}

    def mutate(entries: dict[str, SkipEntry]) -> None:
        check(entries)
        written.clear()
        replaced.clear()
        for test_id in test_ids:
            known = evidence.get(test_id, Evidence(scores={}))
            previous = entries.get(test_id)
            if previous is not None:
                replaced[test_id] = previous
            started = previous.quarantined_at if previous is not None else None
            entries[test_id] = SkipEntry(
                test_id=test_id,
                mode=chosen_mode,
                reason=reason.strip(),
                owner=known.owner,
                ticket=ticket or None,
                quarantined_at=started or now,
                expires=expires,
                scores=known.scores,
                signature=known.signature,
                added_by="flaketui",
            )
            written.append(entries[test_id])

    acting = who or current_user()
    with transaction(db.conn):
        skip = update_skip_file(skip_path, mutate, check=check)
        _audit(
            db,
            [(e.test_id, e.mode, e.reason, e.ticket, e.scores) for e in written],
            action="quarantine",
            now=now,
            written_at=written_at or now,
            who=acting,
            source=source,
        )
    return Quarantined(written, replaced, len(skip.entries))


def _released(
    entries: Mapping[str, SkipEntry], test_id_or_parent: str, skip_path: Path
) -> list[str]:
    """The entries a release of test_id_or_parent removes: the test, else every quarantined
    param of the family; QuarantineError when there is none."""
    if test_id_or_parent in entries:
        return [test_id_or_parent]
    matches = sorted(t for t in entries if parent_of(t) == test_id_or_parent)
    if not matches:
        # The skip file's entries are offered, not the history's tests.
        close = did_you_mean_among(entries, test_id_or_parent)
        raise QuarantineError(f"{test_id_or_parent!r} is not quarantined in {skip_path}{close}")
    return matches


def check_release(skip_path: Path, test_id_or_parent: str) -> None:
    """Refuse (QuarantineError, SkipFileError) a release the skip file alone refuses: one it
    cannot change (see check_skip_file_to_write), or a test it does not list. A command asks
    this before it opens the history for writing."""
    current = check_skip_file_to_write(skip_path)
    _released({} if current is None else current.entries, test_id_or_parent, skip_path)


def release(
    db: Connected,
    skip_path: Path,
    test_id_or_parent: str,
    *,
    reason: str | None = None,
    now: datetime,
    who: str | None = None,
    source: str = "cli",
    written_at: datetime | None = None,
) -> list[str]:
    """Remove a test, or every quarantined param of a family, from the skip file; audit it
    (dated now, written_at as for quarantine)."""
    _check_source(source)
    removed: list[SkipEntry] = []

    def matching(entries: Mapping[str, SkipEntry]) -> list[str]:
        return _released(entries, test_id_or_parent, skip_path)

    def mutate(entries: dict[str, SkipEntry]) -> None:
        removed.clear()
        removed.extend(entries.pop(test_id) for test_id in matching(entries))

    acting = who or current_user()
    with transaction(db.conn):
        update_skip_file(skip_path, mutate, check=matching)
        _audit(
            db,
            [(e.test_id, e.mode, reason, e.ticket, None) for e in removed],
            action="release",
            now=now,
            written_at=written_at or now,
            who=acting,
            source=source,
        )
    return [e.test_id for e in removed]
