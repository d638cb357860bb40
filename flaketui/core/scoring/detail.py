"""Per-test detail for the app's detail screen: outcome sequence, signatures, family members."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from flaketui.core.config import Config
from flaketui.core.errors import FlaketuiError
from flaketui.core.history.dbhandle import Connected
from flaketui.core.testids import parent_of
from flaketui.core.timeutil import parse_iso, to_iso


class UnknownTestError(FlaketuiError):
    """A test id or family parent that the history does not hold."""


@dataclass(slots=True)
class Target:
    """What a user named: one test, or a parametrized family pooled by run."""

    key: str  # the id as given
    kind: str  # test | family
    test_pks: list[int]
    test_ids: list[str]

    @property
    def pks_json(self) -> str:
        """The test primary keys as a JSON array, for `IN (SELECT value FROM json_each(?))`."""
        return json.dumps(self.test_pks)


@dataclass(slots=True)
class RunOutcome:
    """One (run, test) of the outcome sequence, excluded runs included and marked."""

    ts: datetime
    run_id: str
    test_id: str  # the param, for a family
    branch: str | None
    branch_kind: str
    commit: str | None
    suite: str
    worker_count: int
    worker_id: str | None
    attempts: int
    outcome: str  # pass | flaky | fail | skipped
    bad: bool  # first attempt failed
    incident: str | None
    edited: bool  # the run's commit changed this test's file
    message: str | None  # first failure message
    signature: str | None  # hash of the first failure's signature

    @property
    def counted(self) -> bool:
        """Whether scoring counts this run (not skipped, no incident, not edited)."""
        return self.outcome != "skipped" and self.incident is None and not self.edited


@dataclass(slots=True)
class SignatureCount:
    """One failure signature of a test or family in the window."""

    hash: str
    text: str
    count: int  # failed attempts with this signature
    runs: int  # distinct (run, test) pairs with this signature
    example: str  # one raw (masked) message
    incident_runs: int = 0  # of `runs`, those in incident runs (not scored)


def window_bounds(now: datetime, config: Config) -> tuple[str, str]:
    """The stored-form (exclusive start, inclusive end) of the scoring window."""
    return to_iso(now - timedelta(days=config.window_days)), to_iso(now)


def resolve_target(db: Connected, test_or_parent: str) -> Target:
    """An exact test id first, else a family parent; raise UnknownTestError otherwise."""
    conn = db.conn
    row = conn.execute(
        "SELECT id, test_id FROM tests WHERE test_id = ?", (test_or_parent,)
    ).fetchone()
    if row is not None:
        return Target(test_or_parent, "test", [int(row[0])], [str(row[1])])
    rows = conn.execute(
        "SELECT id, test_id FROM tests WHERE parent = ? ORDER BY test_id", (test_or_parent,)
    ).fetchall()
    if not rows:
        raise UnknownTestError(
            f"no test or family named {test_or_parent!r}{did_you_mean(db, test_or_parent)}"
        )
    return Target(test_or_parent, "family", [int(r[0]) for r in rows], [str(r[1]) for r in rows])


# How alike a typed test name and a stored one must be (difflib's ratio) to be offered: a
# letter or two dropped, doubled or swapped in a name of a dozen letters passes, another name
# of the same module does not.
CLOSE_NAME_RATIO = 0.8


def did_you_mean(db: Connected, text: str, limit: int = 3) -> str:
    """A '; did you mean ...' suffix naming tests or families of the history like `text`, or ''.

    First what contains the typed name (a bare function name or a partial path is the usual
    slip), else names close to it in spelling: difflib's similarity of the test-name parts
    (after the last `::`, parameters aside) at CLOSE_NAME_RATIO or more, the same file first.
    """
    typed, needle = _typed(text)
    if not needle:
        return ""
    rows = db.conn.execute(
        # `parent` is the test id itself for unparametrized tests, so this lists both kinds.
        "SELECT DISTINCT parent FROM tests WHERE instr(lower(parent), lower(?)) > 0"
        " ORDER BY length(parent), parent LIMIT ?",
        (needle, limit + 1),
    ).fetchall()
    names = [str(r[0]) for r in rows]
    if not names:
        parents = (str(r[0]) for r in db.conn.execute("SELECT DISTINCT parent FROM tests"))
        names = _close_names(parents, typed, limit + 1)
    return _suggestion(names, limit)


def did_you_mean_among(test_ids: Iterable[str], text: str, limit: int = 3) -> str:
    """did_you_mean's suffix for tests held elsewhere than the history (a skip file's): their
    parents (a test's own id when unparametrized), chosen and ordered as the history's are."""
    typed, needle = _typed(text)
    if not needle:
        return ""
    known = sorted({parent_of(t) for t in test_ids})
    found = sorted((n for n in known if needle.lower() in n.lower()), key=lambda n: (len(n), n))
    return _suggestion(found[: limit + 1] or _close_names(known, typed, limit + 1), limit)


def _typed(text: str) -> tuple[str, str]:
    """The typed id stripped, and the part of it that a name must contain: its test name."""
    typed = text.strip()
    return typed, typed.split("::")[-1] if "::" in typed else typed


def _suggestion(names: list[str], limit: int) -> str:
    if not names:
        return ""
    shown = ", ".join(repr(n) for n in names[:limit])
    more = " or more" if len(names) > limit else ""
    return f"; did you mean {shown}{more}?"


def _name_part(test_id: str) -> str:
    return test_id.split("::")[-1].split("[")[0].lower()


def _close_names(names: Iterable[str], typed: str, limit: int) -> list[str]:
    """The names whose test name is spelled like the typed one, the closest first."""
    wanted = _name_part(typed)
    file_part = typed.split("::")[0] if "::" in typed else None
    scored: list[tuple[float, bool, str]] = []
    matcher = difflib.SequenceMatcher(b=wanted, autojunk=False)
    for name in names:
        matcher.set_seq1(_name_part(name))
        if (
            matcher.real_quick_ratio() < CLOSE_NAME_RATIO
            or matcher.quick_ratio() < CLOSE_NAME_RATIO
        ):
            continue
        ratio = matcher.ratio()
        if ratio >= CLOSE_NAME_RATIO:
            same_file = file_part is not None and name.split("::")[0] == file_part
            scored.append((ratio, same_file, name))
    scored.sort(key=lambda t: (not t[1], -t[0], len(t[2]), t[2]))
    return [name for _, _, name in scored[:limit]]


def family_members(db: Connected, parent: str) -> list[str]:
    """The test ids sharing a parent, sorted; empty when there is none."""
    return [
        str(row[0])
        for row in db.conn.execute(
            "SELECT test_id FROM tests WHERE parent = ? ORDER BY test_id", (parent,)
        )
    ]


_SEQUENCE_SQL = """
SELECT tr.ts, runs.run_id, tests.test_id, runs.branch, runs.branch_kind, runs.commit_sha,
       runs.suite, runs.worker_count, tr.worker_id, tr.attempts, tr.outcome, tr.bad,
       runs.incident, tr.edited,
       (SELECT r.message FROM results AS r
         WHERE r.run = tr.run AND r.test = tr.test AND r.outcome IN ('fail', 'error')
         ORDER BY r.attempt LIMIT 1) AS message,
       signatures.hash
FROM test_runs AS tr
JOIN runs ON runs.id = tr.run
JOIN tests ON tests.id = tr.test
LEFT JOIN signatures ON signatures.id = tr.signature
WHERE tr.test IN (SELECT value FROM json_each(?)) AND tr.ts > ? AND tr.ts <= ?
  AND runs.source <> 'diagnose'
ORDER BY tr.ts, runs.run_id, tests.test_id
"""


def outcome_sequence(
    db: Connected, test_or_parent: str, *, now: datetime, config: Config
) -> list[RunOutcome]:
    """Every (run, test) in the window, oldest first, skipped/incident/edited runs included."""
    target = resolve_target(db, test_or_parent)
    since, until = window_bounds(now, config)
    rows = db.conn.execute(_SEQUENCE_SQL, (target.pks_json, since, until)).fetchall()
    return [
        RunOutcome(
            ts=parse_iso(ts),
            run_id=run_id,
            test_id=test_id,
            branch=branch,
            branch_kind=branch_kind,
            commit=commit,
            suite=suite,
            worker_count=int(worker_count),
            worker_id=worker_id,
            attempts=int(attempts),
            outcome=outcome,
            bad=bool(bad),
            incident=incident,
            edited=bool(edited),
            message=message,
            signature=signature,
        )
        for (
            ts, run_id, test_id, branch, branch_kind, commit, suite, worker_count,
            worker_id, attempts, outcome, bad, incident, edited, message, signature,
        ) in rows
    ]  # fmt: skip


_SIGNATURES_SQL = """
SELECT signatures.hash, signatures.text, signatures.example,
       count(*) AS attempts, count(DISTINCT results.run || ':' || results.test) AS runs,
       count(DISTINCT CASE WHEN runs.incident IS NOT NULL
                           THEN results.run || ':' || results.test END) AS incident_runs
FROM test_runs AS tr
JOIN results ON results.run = tr.run AND results.test = tr.test
JOIN runs ON runs.id = tr.run
JOIN signatures ON signatures.id = results.signature
WHERE tr.test IN (SELECT value FROM json_each(?)) AND tr.ts > ? AND tr.ts <= ?
GROUP BY signatures.id
ORDER BY runs - incident_runs DESC, runs DESC, attempts DESC, signatures.hash
"""


def signatures_of(
    db: Connected, test_or_parent: str, *, now: datetime, config: Config
) -> list[SignatureCount]:
    """The failure signatures of a test or family in the window, most frequent first."""
    target = resolve_target(db, test_or_parent)
    since, until = window_bounds(now, config)
    return [
        SignatureCount(
            hash=h,
            text=text,
            count=int(attempts),
            runs=int(runs),
            example=example,
            incident_runs=int(incident),
        )
        for h, text, example, attempts, runs, incident in db.conn.execute(
            _SIGNATURES_SQL, (target.pks_json, since, until)
        )
    ]
