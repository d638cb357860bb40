"""Re-sign stored failure messages when the signature scheme changes.

A signature depends on the normalisation algorithm (SIGNATURE_VERSION, see
flaketui.core.ingest.scheme) and on the user's `mask_patterns`. The scheme a history was signed
with is kept in `meta.signature_scheme`; a history without the key was signed with version 1
and no user patterns (everything written before the key existed). When the scheme differs,
every stored failure message is signed again so one cause keeps one group instead of
splitting into an old and a new hash.

Stored messages are the capped, secret-masked text the writer signed in the first place, so
re-signing reproduces exactly what a fresh ingest would store. Signature incidents follow their
messages: an incident on an old hash is moved to the new hash (or hashes, if a pattern split it).
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flaketui.core.history.store import get_meta, transaction
from flaketui.core.ingest.scheme import LEGACY_SCHEME as LEGACY_SCHEME
from flaketui.core.ingest.scheme import SCHEME_KEY as SCHEME_KEY
from flaketui.core.ingest.scheme import record_scheme as record_scheme
from flaketui.core.ingest.scheme import scheme_of as scheme_of
from flaketui.core.ingest.signatures import sign
from flaketui.core.rollups.pending import file_waiting

if TYPE_CHECKING:
    from flaketui.core.history.dbhandle import Connected

_BATCH = 5000


def stored_scheme(db: Connected) -> str:
    """The scheme the history's signatures were computed with."""
    return get_meta(db, SCHEME_KEY) or LEGACY_SCHEME


def is_current(db: Connected, patterns: Iterable[str]) -> bool:
    """Whether stored signatures match this flaketui's algorithm and these mask patterns.

    A history without a run has nothing signed, so it is current whatever its key says.
    """
    return stored_scheme(db) == scheme_of(patterns) or not has_runs(db)


def stale_note(db: Connected, patterns: Iterable[str]) -> str | None:
    """A one-line note when signatures are stale (for read-only commands), else None."""
    if is_current(db, patterns):
        return None
    return (
        "note: failure signatures were computed with other mask patterns or an older "
        "algorithm; `flaketui resign HISTORY` groups them with the current ones"
    )


@dataclass(frozen=True, slots=True)
class ResignSummary:
    """What a re-signing changed."""

    messages: int  # failed results with a message, all signed again
    changed: int  # results whose signature changed
    signatures_before: int
    signatures_after: int


def _signature_ids(conn: sqlite3.Connection, new: dict[str, tuple[str, str]]) -> dict[str, int]:
    """Insert the new signatures (first example wins) and return hash -> row id."""
    conn.executemany(
        "INSERT OR IGNORE INTO signatures (hash, text, example) VALUES (?, ?, ?)",
        [(h, text, example) for h, (text, example) in new.items()],
    )
    ids: dict[str, int] = {}
    for pk, sig_hash in conn.execute("SELECT id, hash FROM signatures"):
        ids[str(sig_hash)] = int(pk)
    return ids


def _move_signature_incidents(conn: sqlite3.Connection, moves: dict[str, set[str]]) -> None:
    """Point each signature incident at the hash(es) its messages carry now."""
    incidents = conn.execute(
        "SELECT id, tag, start_ts, end_ts, signature, created_at, note FROM incidents"
        " WHERE signature IS NOT NULL"
    ).fetchall()
    for pk, tag, start, end, old, created, note in incidents:
        targets = sorted(moves.get(str(old), ()))
        if not targets or targets == [old]:
            continue
        conn.execute("UPDATE incidents SET signature = ? WHERE id = ?", (targets[0], pk))
        conn.executemany(
            "INSERT INTO incidents (tag, start_ts, end_ts, signature, created_at, note)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [(tag, start, end, extra, created, note) for extra in targets[1:]],
        )


def resign(db: Connected, patterns: Iterable[str]) -> ResignSummary:
    """Sign every stored failure message again with the current scheme, in one transaction."""
    from flaketui.core.rollups import build as rollups

    patterns = tuple(patterns)
    conn = db.conn
    with transaction(conn):
        file_waiting(conn)  # the per-test rows carry signatures too
        before = int(conn.execute("SELECT count(*) FROM signatures").fetchone()[0])
        old_hash = {int(pk): str(h) for pk, h in conn.execute("SELECT id, hash FROM signatures")}
        rows = conn.execute(
            "SELECT run, test, attempt, message, signature FROM results"
            " WHERE outcome IN ('fail', 'error') AND message IS NOT NULL"
        ).fetchall()
        signed: dict[str, tuple[str, str] | None] = {}
        new: dict[str, tuple[str, str]] = {}
        for *_key, message, _sig in rows:
            if message not in signed:
                signature = sign(message, patterns)
                signed[message] = None if signature is None else (signature.hash, signature.text)
                if signature is not None:
                    new.setdefault(signature.hash, (signature.text, message))
        ids = _signature_ids(conn, new)
        updates: list[tuple[int | None, int, int, int]] = []
        moves: dict[str, set[str]] = defaultdict(set)
        for run, test, attempt, message, sig in rows:
            target = signed[message]
            target_id = None if target is None else ids[target[0]]
            if sig is not None and target is not None:
                moves[old_hash.get(int(sig), "")].add(target[0])
            if target_id != sig:
                updates.append((target_id, run, test, attempt))
        for start in range(0, len(updates), _BATCH):
            chunk = updates[start : start + _BATCH]
            conn.executemany(
                "UPDATE results SET signature = ? WHERE run = ? AND test = ? AND attempt = ?",
                chunk,
            )
            # The run-level row carries the first failed attempt's signature.
            conn.executemany(
                "UPDATE test_runs SET signature = (SELECT r.signature FROM results r"
                " WHERE r.run = test_runs.run AND r.test = test_runs.test"
                " AND r.outcome IN ('fail', 'error') ORDER BY r.attempt LIMIT 1)"
                " WHERE run = ? AND test = ?",
                sorted({(run, test) for _sig, run, test, _attempt in chunk}),
            )
        _move_signature_incidents(conn, moves)
        conn.execute(
            "DELETE FROM signatures WHERE id NOT IN"
            " (SELECT signature FROM results WHERE signature IS NOT NULL)"
        )
        half_life = rollups.half_life(conn)  # keep the decay the rollups were built with
        if updates and half_life is not None:
            rollups.rebuild(conn, half_life)
        record_scheme(conn, patterns)
        after = int(conn.execute("SELECT count(*) FROM signatures").fetchone()[0])
    return ResignSummary(len(rows), len(updates), before, after)


def has_runs(db: Connected) -> bool:
    """Whether the history holds any run (a history without one is stamped, not re-signed)."""
    return db.conn.execute("SELECT 1 FROM runs LIMIT 1").fetchone() is not None


def stamp(db: Connected, patterns: Iterable[str]) -> None:
    """Record the current scheme on a history whose every signature was just made with it."""
    with transaction(db.conn):
        record_scheme(db.conn, patterns)


def ensure_current(db: Connected, patterns: Iterable[str]) -> ResignSummary | None:
    """Re-sign before a write when the scheme changed; None when nothing had to be done."""
    patterns = tuple(patterns)
    if is_current(db, patterns):
        return None
    return resign(db, patterns)
