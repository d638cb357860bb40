"""Scoring from the rollups gives exactly what the raw-row scorer gives, and stays so.

Every comparison runs the same request twice: once as shipped (rollups answer) and once with
`rollups.answers` forced to False, which is the raw-row scorer of flaketui.core.rollups.evidence.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import shutil
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
import sqlite_utils

from flaketui.core.config import Config
from flaketui.core.history.store import transaction
from flaketui.core.rollups import build as rollups
from flaketui.core.rollups.evidence import Evidence
from flaketui.core.scoring import cofailure
from flaketui.core.scoring.aggregates import (
    evidence_pass,
    per_family_evidence,
    per_signature_evidence,
    per_test_evidence,
    pooled_units,
    rate_changes,
    signature_counts,
)
from flaketui.core.scoring.report import build_report
from flaketui.core.scoring.results import Report
from flaketui.core.scoring.series import daily_recency_scores
from flaketui.core.scoring.stored import PLAIN_FIELDS
from flaketui.core.timeutil import parse_iso
from tests.connections import open_history
from tests.core.history_builder import HistoryBuilder

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data" / "history.db"
T = TypeVar("T")
# Looked up only when the default branch ends in a bad streak (the only case a verdict reads).
STREAK_ONLY = ("last_good_commit", "last_good_at")


@contextmanager
def raw_scoring() -> Iterator[None]:
    """Score from the raw rows, as a history without rollups is scored."""
    original = rollups.answers
    rollups.answers = lambda _conn, _config: False  # type: ignore[assignment]
    try:
        yield
    finally:
        rollups.answers = original  # type: ignore[assignment]


def both(fn: Callable[[], T]) -> tuple[T, T]:
    """(from rollups, from raw rows) of the same request."""
    fast = fn()
    with raw_scoring():
        raw = fn()
    return fast, raw


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def assert_same_evidence(fast: dict[Any, Evidence], raw: dict[Any, Evidence]) -> None:
    """Every field of every key (suites only where both scorers fill them)."""
    assert set(fast) == set(raw)
    for key, expected in raw.items():
        got = fast[key]
        for field in dataclasses.fields(Evidence):
            if field.name in STREAK_ONLY and expected.streak == 0:
                continue
            if field.name == "suites" and not (got.suites and expected.suites):
                continue
            a, b = getattr(got, field.name), getattr(expected, field.name)
            assert _same(a, b), (key, field.name, a, b)


def assert_same_report(fast: Report, raw: Report) -> None:
    """Every score, verdict, reason, flag, rank and daily score of tests and groups, and the
    report's own fields (its notices among them)."""
    for name in ("now", *PLAIN_FIELDS):
        assert getattr(fast, name) == getattr(raw, name), name
    assert [t.test_id for t in fast.tests] == [t.test_id for t in raw.tests]
    for got, expected in zip(fast.tests, raw.tests, strict=True):
        for field in dataclasses.fields(got):
            a, b = getattr(got, field.name), getattr(expected, field.name)
            if field.name == "scores":
                assert dataclasses.asdict(a).keys() == dataclasses.asdict(b).keys()
                for name, value in dataclasses.asdict(b).items():
                    assert _same(getattr(a, name), value), (got.test_id, name)
            else:
                assert _same(a, b), (got.test_id, field.name, a, b)
    for kind in ("families", "signatures", "cofailures"):
        got_groups, raw_groups = getattr(fast, kind), getattr(raw, kind)
        assert [g.key for g in got_groups] == [g.key for g in raw_groups]
        for got, expected in zip(got_groups, raw_groups, strict=True):
            for field in dataclasses.fields(got):
                a, b = getattr(got, field.name), getattr(expected, field.name)
                if field.name == "scores":
                    for name, value in dataclasses.asdict(b).items():
                        assert _same(getattr(a, name), value), (kind, got.key, name)
                else:
                    assert _same(a, b), (kind, got.key, field.name, a, b)


def assert_same_onsets(
    db: sqlite_utils.Database,
    now: datetime,
    config: Config,
    tests: dict[int, Evidence],
    members: dict[int, str],
    where: dict[str, str] | None = None,
) -> None:
    """The daily rate change of the failing tests, of the families and of the `members`'
    groups, and the co-failure groups of the failing tests, as the raw-row scorer finds them
    (`tests`: per_test_evidence of the same request)."""
    where = where or {}
    failing = sorted(pk for pk, ev in tests.items() if ev.failed_runs)
    for kind, pks, groups in (
        ("test", failing, None),
        ("family", sorted(tests), None),
        ("signature", sorted(members), members),
    ):
        fast, raw = both(
            lambda: rate_changes(db, now, config, kind, pks, members=groups, **where)  # noqa: B023
        )
        assert_same_changes(fast, raw, kind)
    named = {pk: f"t{pk:04d}" for pk in failing}
    found, raw_found = both(lambda: cofailure.cofailure_groups(db, named, now, config, **where))
    assert found == raw_found
    assert_shared_units_agree(db, now, config, tests, members, where)


def assert_same_changes(fast: dict[Any, Any], raw: dict[Any, Any], kind: str) -> None:
    """Every field of every key's rate change."""
    assert fast.keys() == raw.keys(), kind
    for key, expected in raw.items():
        got = dataclasses.asdict(fast[key])
        for name, value in dataclasses.asdict(expected).items():
            assert _same(got[name], value), (kind, key, name, got[name], value)


def assert_shared_units_agree(
    db: sqlite_utils.Database,
    now: datetime,
    config: Config,
    tests: dict[int, Evidence],
    members: dict[int, str],
    where: dict[str, str],
) -> None:
    """Groups' run sets read once (pooled_units; a restricted request's families' from the
    tests' pass, evidence_pass) and handed to their evidence and onsets give what the raw-row
    scorer gives, also for fewer groups than read."""
    if not rollups.answers(db.conn, config):
        return  # the raw-row scorer reads no run sets
    units = pooled_units(db, members, now, config)
    assert units is not None
    fast = per_signature_evidence(db, members, now, config, **where, tests=tests, units=units)
    with raw_scoring():
        raw = per_signature_evidence(db, members, now, config, **where)
    assert_same_evidence(fast, raw)
    first = min(members.values(), default=None)
    some = {pk: key for pk, key in members.items() if key == first}
    pks = sorted(some)
    changes = rate_changes(db, now, config, "signature", pks, **where, members=some, units=units)
    with raw_scoring():
        raw_changes = rate_changes(db, now, config, "signature", pks, **where, members=some)
    assert_same_changes(changes, raw_changes, "signature")
    family_units = evidence_pass(db, now, config, **where).group_units
    assert (family_units is None) == (not where)
    fast = per_family_evidence(db, now, config, **where, tests=tests, units=family_units)
    with raw_scoring():
        raw = per_family_evidence(db, now, config, **where)
    assert_same_evidence(fast, raw)
    changes = rate_changes(db, now, config, "family", sorted(tests), **where, units=family_units)
    with raw_scoring():
        raw_changes = rate_changes(db, now, config, "family", sorted(tests), **where)
    assert_same_changes(changes, raw_changes, "family")


def assert_everything_agrees(db: sqlite_utils.Database, now: datetime, config: Config) -> int:
    """Evidence of tests, families, groups, signature counts, series and the whole report."""
    tests, raw_tests = both(lambda: per_test_evidence(db, now, config))
    assert_same_evidence(tests, raw_tests)
    assert_same_evidence(*both(lambda: per_family_evidence(db, now, config)))
    failing = sorted(pk for pk, ev in raw_tests.items() if ev.last_failure_at is not None)
    counts, raw_counts = both(lambda: signature_counts(db, now, config, test_pks=failing))
    assert sorted(counts) == sorted(raw_counts)
    members: dict[int, str] = {}
    for pk, sig_hash, *_ in sorted(raw_counts, key=lambda c: (c[3], c[4], c[1])):
        members[pk] = sig_hash  # the most frequent, then latest, then highest hash wins
    assert_same_evidence(*both(lambda: per_signature_evidence(db, members, now, config)))
    assert_same_onsets(db, now, config, raw_tests, members)
    ids = [str(t) for (t,) in db.conn.execute("SELECT test_id FROM tests ORDER BY id")]
    series, raw_series = both(
        lambda: daily_recency_scores(db, ids, now=now, days=30, config=config)
    )
    assert series.keys() == raw_series.keys()
    for key, values in raw_series.items():
        assert _same(series[key], values), key
    parents = [str(p) for (p,) in db.conn.execute("SELECT DISTINCT parent FROM tests ORDER BY 1")]
    family_series, raw_family_series = both(
        lambda: daily_recency_scores(db, parents, now=now, days=30, config=config, family=True)
    )
    assert family_series.keys() == raw_family_series.keys()
    for key, values in raw_family_series.items():
        assert _same(family_series[key], values), ("family", key)
    assert_same_report(*both(lambda: build_report(db, now=now, config=config)))
    return len(raw_tests)


# Restrictions a report takes (`report --suite`, `--branch-kind`, the app's filters), each
# read from the rollups' run lists (flaketui.core.rollups.filtered).
FILTERS = (
    {"suite": "unit"},
    {"suite": "nightly"},
    {"suite": "ci"},
    {"branch_kind": "main"},
    {"branch_kind": "pr"},
    {"branch_kind": "release"},
    {"suite": "unit", "branch_kind": "main"},
    {"suite": "no-such-suite"},
)


def assert_filtered_agrees(db: sqlite_utils.Database, now: datetime, config: Config) -> int:
    """Evidence of tests, families and groups, signature counts and the whole report of
    every filter."""
    return sum(_assert_filter_agrees(db, now, config, where) for where in FILTERS)


def _assert_filter_agrees(
    db: sqlite_utils.Database, now: datetime, config: Config, where: dict[str, str]
) -> int:
    tests, raw_tests = both(lambda: per_test_evidence(db, now, config, **where))
    assert_same_evidence(tests, raw_tests)
    assert_same_evidence(*both(lambda: per_family_evidence(db, now, config, **where, tests=tests)))
    failing = sorted(pk for pk, ev in raw_tests.items() if ev.last_failure_at is not None)
    counts, raw_counts = both(lambda: signature_counts(db, now, config, **where, test_pks=failing))
    assert sorted(counts) == sorted(raw_counts)
    members = {pk: "g" + str(pk % 3) for pk in raw_tests}
    assert_same_evidence(*both(lambda: per_signature_evidence(db, members, now, config, **where)))
    assert_same_onsets(db, now, config, raw_tests, members, where)
    assert_same_report(*both(lambda: build_report(db, now=now, config=config, **where)))
    return len(raw_tests)


def _newest(db: sqlite_utils.Database) -> datetime:
    return parse_iso(str(db.conn.execute("SELECT max(ts) FROM runs").fetchone()[0]))


def _with_rollups(db: sqlite_utils.Database) -> sqlite_utils.Database:
    with transaction(db.conn):
        rollups.rebuild(db.conn)
    return db


@pytest.fixture
def sample(tmp_path: Path) -> sqlite_utils.Database:
    """A copy of the committed sample history (shared commits, families, incidents)."""
    path = tmp_path / "sample.db"
    shutil.copy(SAMPLE, path)
    return _with_rollups(open_history(path))


@pytest.fixture
def generated(tmp_path: Path) -> sqlite_utils.Database:
    """A small CI-shaped history from the benchmark generator, written by the real writer."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from generate import generate
    finally:
        sys.path.remove(str(ROOT / "bench"))
    path = tmp_path / "gen.db"
    generate(path, 6000, seed=3, tests_count=50)
    return open_history(path)


def fuzz_history(db: sqlite_utils.Database, seed: int, hours_apart: float = 3.2) -> datetime:
    """90 random runs (12 days at the default spacing): shared commits, midnight runs,
    families, incidents, edits."""
    rng = random.Random(seed)
    hb = HistoryBuilder(db)
    tests = [
        "tests/test_a.py::test_a",
        "tests/test_a.py::test_p[1]",
        "tests/test_a.py::test_p[2]",
        "tests/test_a.py::test_p",
        "tests/test_b.py::test_b",
        "tests/test_b.py::test_q[x]",
    ]
    rate = {t: rng.choice([0.0, 0.1, 0.3, 0.6, 0.95]) for t in tests}
    commits = [f"c{i}" for i in range(12)]
    start = datetime(2026, 11, 1, tzinfo=UTC)
    for index in range(90):
        ts = start + timedelta(hours=rng.choice([0, 0, 3, 7, 13, 24, 31]) + index * hours_apart)
        if rng.random() < 0.15:
            ts = ts.replace(hour=0, minute=0, second=0)  # runs exactly at midnight
        kind = rng.choice(["main", "main", "pr", "release"])
        run = hb.run(
            ts=ts,
            branch_kind=kind,
            commit=rng.choice(commits) if rng.random() < 0.9 else None,
            suite=rng.choice(["unit", "unit", "nightly"]),
            incident="outage" if rng.random() < 0.05 else None,
            changed_files=["tests/test_b.py"] if rng.random() < 0.1 else (),
        )
        for test in tests:
            if rng.random() < 0.15:
                continue
            if rng.random() < 0.05:
                run.result(test, ["skipped"])
                continue
            attempts = []
            for _ in range(rng.choice([1, 1, 2, 3])):
                attempts.append(
                    "pass" if rng.random() >= rate[test] else rng.choice(["fail", "error"])
                )
                if attempts[-1] == "pass":
                    break
            run.result(test, attempts, message=rng.choice(["E1: x 1", "E2: y", "E3: z 0x1f"]))
    return start


@pytest.mark.parametrize("hours_back", [0, 5, 30, 24 * 40 + 7])
def test_sample_history_agrees(sample: sqlite_utils.Database, hours_back: int) -> None:
    now = _newest(sample) - timedelta(hours=hours_back)
    assert assert_everything_agrees(sample, now, Config()) > 100
    assert assert_filtered_agrees(sample, now, Config()) > 100


def test_sample_history_agrees_with_other_settings(sample: sqlite_utils.Database) -> None:
    now = _newest(sample)
    for config in (Config(window_days=30), Config(main_weight=5.0, other_weight=0.5)):
        assert assert_everything_agrees(sample, now, config) > 0


@pytest.mark.parametrize("hours_back", [0, 7, 24 * 20 + 5])
def test_generated_history_agrees(generated: sqlite_utils.Database, hours_back: int) -> None:
    assert rollups.enabled(generated.conn)  # the writer built and kept them
    now = _newest(generated) - timedelta(hours=hours_back)
    assert assert_everything_agrees(generated, now, Config()) > 40
    assert assert_filtered_agrees(generated, now, Config()) > 40


@pytest.mark.parametrize("seed", range(6))
def test_random_histories_agree_at_every_edge(tmp_path: Path, seed: int) -> None:
    """Short windows so that edges, straddling commits and midnights fall everywhere."""
    db = open_history(tmp_path / "fuzz.db")
    start = fuzz_history(db, seed)
    _with_rollups(db)
    rng = random.Random(seed)
    for _ in range(4):
        now = start + timedelta(days=rng.choice([2, 5, 9, 13]), hours=rng.choice([0, 6, 17.5]))
        for config in (Config(window_days=5, n_min=3), Config(window_days=3, n_min=2)):
            assert_everything_agrees(db, now, config)
            assert_filtered_agrees(db, now, config)


def test_a_history_without_default_branch_runs_agrees_and_says_so(tmp_path: Path) -> None:
    """Every path, filtered or not, finds the window without a default-branch run."""
    db = open_history(tmp_path / "fuzz.db")
    start = fuzz_history(db, 0)
    with transaction(db.conn):
        db.conn.execute("UPDATE runs SET branch_kind = 'pr' WHERE branch_kind = 'main'")
    _with_rollups(db)
    now, config = start + timedelta(days=9, hours=6), Config(window_days=5, n_min=3)
    assert assert_everything_agrees(db, now, config) > 0
    assert assert_filtered_agrees(db, now, config) > 0
    for where in FILTERS:
        assert build_report(db, now=now, config=config, **where).no_default_branch_runs


@pytest.mark.parametrize("seed", range(2))
def test_windows_with_whole_weeks_agree(tmp_path: Path, seed: int) -> None:
    """Whole weeks come from the week rows, the days around them from the day rows: windows
    of one week and more ending on every weekday, at midnight and inside a day."""
    db = open_history(tmp_path / "fuzz.db")
    start = fuzz_history(db, seed, hours_apart=10.0)  # 90 runs over ~38 days
    _with_rollups(db)
    assert db.conn.execute("SELECT count(DISTINCT week) FROM test_week_rollups").fetchone()[0] > 4
    for day in range(20, 27):
        for hours in (0, 13.5) if day % 2 else (13.5,):
            now = start + timedelta(days=day, hours=hours)
            for window_days in (6, 7, 8, 13, 15):
                assert_everything_agrees(db, now, Config(window_days=window_days, n_min=3))


def test_week_rows_are_read(tmp_path: Path) -> None:
    """The reader takes whole weeks from the week rows (a wrong week row shows)."""
    db = open_history(tmp_path / "fuzz.db")
    start = fuzz_history(db, 1, hours_apart=10.0)
    _with_rollups(db)
    now, config = start + timedelta(days=24, hours=13.5), Config(window_days=15, n_min=3)
    assert_everything_agrees(db, now, config)
    with transaction(db.conn):
        db.conn.execute("UPDATE test_week_rollups SET runs = runs + 1")
    with pytest.raises(AssertionError):
        assert_everything_agrees(db, now, config)


def test_recency_sums_re_anchor_when_the_history_moves_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sums are kept relative to an anchor day; far from it the reader goes raw, and a write
    past its span re-anchors. The span is shrunk to 5 half-lives of 1 day (5 days)."""
    monkeypatch.setattr(rollups, "ANCHOR_SPAN", 5.0)
    half_life = 1.0
    config = Config(half_life_days=half_life, window_days=4, n_min=3)
    db = open_history(tmp_path / "fuzz.db")
    start = fuzz_history(db, 2)  # 12 days
    with transaction(db.conn):
        rollups.rebuild(db.conn, half_life)
    anchor = db.conn.execute(
        "SELECT value FROM meta WHERE key = ?", (rollups.ANCHOR_KEY,)
    ).fetchone()[0]
    assert anchor == _newest(db).date().isoformat()
    early = start + timedelta(days=3, hours=5)  # more than 5 days before the anchor
    assert rollups.test_base(db.conn, early, config) is None
    assert_everything_agrees(db, early, config)
    late = _newest(db)
    assert rollups.test_base(db.conn, late, config) is not None
    assert_everything_agrees(db, late, config)
    # A run 6 days after the anchor: the writer re-anchors (the maintained tables equal a
    # rebuild with the new anchor) and the newest window is read from the rollups again.
    ahead = late + timedelta(days=6)
    _record(db, "ahead", ahead, {"tests/test_a.py::test_a": ["fail", "pass"]}, commit="c1")
    moved = db.conn.execute(
        "SELECT value FROM meta WHERE key = ?", (rollups.ANCHOR_KEY,)
    ).fetchone()[0]
    assert moved == ahead.date().isoformat()
    assert rollups.test_base(db.conn, ahead, config) is not None
    assert_everything_agrees(db, ahead, config)
    assert_maintained(db)


def test_crowded_runs_leave_the_pairing_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs where more tests failed than the pairing takes are left out alike: a and b fail
    together in uncrowded runs, c, d and e only in crowded ones (the limit shrunk to 3)."""
    monkeypatch.setattr(cofailure, "MAX_BAD_TESTS_PER_RUN", 3)
    db = open_history(tmp_path / "h.db")
    hb = HistoryBuilder(db)
    names = [f"tests/test_c.py::test_{letter}" for letter in "abcdef"]
    start = datetime(2026, 11, 1, tzinfo=UTC)
    for index in range(24):
        run = hb.run(ts=start + timedelta(hours=7 * index), branch_kind=("main", "pr")[index % 2])
        failing = {0: "ab", 1: "abcde"}.get(index % 4, "f" if index % 3 else "")
        for letter, name in zip("abcdef", names, strict=True):
            run.result(name, ["fail" if letter in failing else "pass"])
    _with_rollups(db)
    now = start + timedelta(days=7, hours=3)
    config = Config(window_days=10)
    pks = dict(db.conn.execute("SELECT id, test_id FROM tests").fetchall())
    found, raw = both(lambda: cofailure.cofailure_groups(db, pks, now, config))
    assert found == raw
    assert [[pks[pk] for pk in group] for group in found] == [names[:2]]
    for where in FILTERS:
        assert_same_onsets(db, now, config, per_test_evidence(db, now, config, **where), {}, where)


def test_other_half_life_falls_back_to_raw_rows(sample: sqlite_utils.Database) -> None:
    config = Config(half_life_days=7.0)
    assert not rollups.answers(sample.conn, config)
    assert_same_evidence(*both(lambda: per_test_evidence(sample, _newest(sample), config)))


def test_comparison_catches_stale_rollups(sample: sqlite_utils.Database) -> None:
    """The agreement check is a real check: a forgotten refresh makes it fail."""
    run, day = sample.conn.execute(
        "SELECT r.id, substr(r.ts, 1, 10) FROM runs r JOIN test_runs tr ON tr.run = r.id"
        " WHERE tr.bad = 1 AND r.incident IS NULL"
        " AND r.ts < date((SELECT max(ts) FROM runs), '-3 days') ORDER BY r.ts DESC LIMIT 1"
    ).fetchone()
    with transaction(sample.conn):
        sample.conn.execute("UPDATE runs SET incident = 'late' WHERE id = ?", (run,))
    with pytest.raises(AssertionError):
        assert_everything_agrees(sample, _newest(sample), Config())
    with transaction(sample.conn):
        rollups.refresh_runs(sample.conn, [run])
    assert day < _newest(sample).date().isoformat()
    assert_everything_agrees(sample, _newest(sample), Config())


# ---- maintenance: every refresh leaves the tables as a rebuild from scratch would ----------

TABLES = (
    "test_day_rollups",
    "test_week_rollups",
    "test_day_seq",
    "family_day_seq",
    "test_commit_mixed",
    "family_commit_mixed",
    "test_day_signatures",
)


def _snapshot(db: sqlite_utils.Database) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    for table in TABLES:
        rows = db.conn.execute(f"SELECT * FROM {table}").fetchall()
        # Run lists are sets: their order inside group_concat is not defined.
        out[table] = sorted(
            tuple(
                ",".join(sorted(v.split(","))) if isinstance(v, str) and v[:1].isdigit() else v
                for v in row
            )
            for row in rows
        )
    return out


def assert_maintained(db: sqlite_utils.Database) -> None:
    """The maintained tables, once the runs waiting to be folded are, equal a rebuild from the
    raw rows."""
    with transaction(db.conn):
        rollups.fold_pending(db.conn)
    kept = _snapshot(db)
    half_life = rollups.half_life(db.conn)
    assert half_life is not None
    with transaction(db.conn):
        rollups.rebuild(db.conn, half_life)
    fresh = _snapshot(db)
    for table in TABLES:
        assert len(kept[table]) == len(fresh[table]), table
        for a, b in zip(kept[table], fresh[table], strict=True):
            assert all(_same(x, y) for x, y in zip(a, b, strict=True)), (table, a, b)


def _record(
    db: sqlite_utils.Database,
    run_id: str,
    ts: datetime,
    outcomes: dict[str, list[str]],
    *,
    commit: str,
    branch_kind: str = "main",
) -> None:
    from flaketui.core.ingest.writer import RunRecorder
    from flaketui.core.models import Attempt, CaseResult, RunMeta

    meta = RunMeta(
        run_id=run_id,
        suite="ci",
        branch="main" if branch_kind == "main" else "feature/x",
        branch_kind=branch_kind,
        ts=ts,
        commit_sha=commit,
    )
    recorder = RunRecorder(db, meta)
    for test_id, attempts in outcomes.items():  # one batch per test: refreshed per batch
        recorder.add(
            [
                CaseResult(
                    test_id,
                    test_id.split("::")[0],
                    [Attempt(o, 1, "AssertionError: boom" if o != "pass" else None)
                     for o in attempts],
                )
            ]
        )  # fmt: skip
    recorder.finish()


def _write_history(db: sqlite_utils.Database, now: datetime, count: int, prefix: str) -> None:
    rng = random.Random(prefix)
    for index in range(count):
        ts = now - timedelta(hours=7 * index + 1)
        _record(
            db,
            f"{prefix}{index}",
            ts,
            {
                "tests/test_x.py::test_a": rng.choice([["pass"], ["fail", "pass"], ["fail"]]),
                "tests/test_x.py::test_b[1]": rng.choice([["pass"], ["pass"], ["fail"]]),
                "tests/test_x.py::test_b[2]": rng.choice([["pass"], ["error", "pass"]]),
                "tests/test_y.py::test_c": ["skipped"],
            },
            commit=f"c{index // 3}",  # three runs per commit: same-commit pass and fail
            branch_kind="main" if index % 4 else "pr",
        )


def test_writer_incidents_merge_and_prune_keep_every_table_exact(tmp_path: Path) -> None:
    from flaketui.core.history.incidents import add_incident, remove_incident
    from flaketui.core.history.merge import merge_histories
    from flaketui.core.history.prune import prune_history

    now = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)
    db = open_history(tmp_path / "h.db")
    _write_history(db, now, 40, "r")
    assert rollups.enabled(db.conn)
    assert_maintained(db)
    # A later batch appending a retry to an existing run, and a test that starts a family.
    _record(db, "r3", now - timedelta(hours=22), {"tests/test_x.py::test_b[1]": ["pass"]},
            commit="c1")  # fmt: skip
    _record(db, "late", now - timedelta(days=3), {"tests/test_y.py::test_c[new]": ["fail"]},
            commit="c2")  # fmt: skip
    assert_maintained(db)
    assert_everything_agrees(db, now, Config())
    add_incident(db, "outage", start=now - timedelta(days=5), end=now - timedelta(days=3))
    assert_maintained(db)
    assert_everything_agrees(db, now, Config())
    remove_incident(db, "outage")
    assert_maintained(db)
    other = open_history(tmp_path / "other.db")
    _write_history(other, now - timedelta(hours=3), 20, "o")
    other.conn.close()
    merge_histories(db, [tmp_path / "other.db"])
    assert_maintained(db)
    assert_everything_agrees(db, now, Config())
    prune_history(db, 6.3, now=now)
    assert_maintained(db)
    assert_everything_agrees(db, now, Config(window_days=5))


def test_appended_runs_are_added_exactly(tmp_path: Path) -> None:
    """after_write: later runs are added, out-of-order ones and repeats recomputed."""
    db = open_history(tmp_path / "h.db")
    hb = HistoryBuilder(db)
    rng = random.Random(7)
    tests = [
        "tests/t.py::test_a",
        "tests/t.py::test_p[1]",
        "tests/t.py::test_p[2]",
        "tests/u.py::test_u",
    ]
    start = datetime(2026, 11, 1, 6, tzinfo=UTC)
    _with_rollups(db)  # empty history: rollups on from the start
    hours = sorted(rng.uniform(0, 24 * 9) for _ in range(60))
    hours[20:25] = [hours[19] - 1.5, hours[18] - 0.2, hours[24], hours[24], hours[24]]  # late ones
    for index, offset in enumerate(hours):
        run = hb.run(
            ts=start + timedelta(hours=offset),
            branch_kind=rng.choice(["main", "main", "pr"]),
            commit=f"c{index // 3}",
            suite=rng.choice(["unit", "nightly"]),
        )
        picked = [t for t in tests if rng.random() < 0.8]
        halves = (picked[: len(picked) // 2], picked[len(picked) // 2 :])  # two recorder batches
        for batch in halves:
            for test in batch:
                run.result(test, rng.choice([["pass"], ["pass"], ["fail", "pass"], ["fail"]]))
            pks = [
                pk
                for (pk,) in db.conn.execute(
                    "SELECT id FROM tests WHERE test_id IN (SELECT value FROM json_each(?))",
                    (json.dumps(batch),),
                )
            ]
            with transaction(db.conn):
                rollups.after_write(db.conn, run.run_pk, pks)
        if index % 7 == 3 and picked:  # a later write changes a counted test-run: recomputed
            (pk,) = db.conn.execute(
                "SELECT id FROM tests WHERE test_id = ?", (picked[0],)
            ).fetchone()
            with transaction(db.conn):
                db.conn.execute(
                    "UPDATE test_runs SET outcome = 'fail', bad = 1, failed_attempts = attempts"
                    " WHERE run = ? AND test = ?",
                    (run.run_pk, pk),
                )
                rollups.after_write(db.conn, run.run_pk, [pk])
        if index % 20 == 19:
            assert_maintained(db)
    assert_maintained(db)
    assert_everything_agrees(db, start + timedelta(days=9), Config(window_days=5, n_min=3))


def test_writer_in_time_order_adds_runs_exactly(tmp_path: Path) -> None:
    """The real writer, runs in time order, one batch per test (families split over batches)."""
    now = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)
    db = open_history(tmp_path / "h.db")
    rng = random.Random(11)
    for index in range(30):
        _record(
            db,
            f"r{index}",
            now - timedelta(hours=5 * (30 - index)),
            {
                "tests/test_x.py::test_a": rng.choice([["pass"], ["fail", "pass"], ["fail"]]),
                "tests/test_x.py::test_b[1]": rng.choice([["pass"], ["fail"]]),
                "tests/test_x.py::test_b[2]": rng.choice([["pass"], ["error", "pass"]]),
            },
            commit=f"c{index // 2}",
            branch_kind="main" if index % 3 else "pr",
        )
    # A second recorder appending a retry to the latest run (a counted test-run changes).
    _record(
        db, "r29", now - timedelta(hours=5), {"tests/test_x.py::test_a": ["fail"]}, commit="c14"
    )
    assert_maintained(db)
    assert_everything_agrees(db, now, Config(window_days=3, n_min=3))


def test_diagnose_experiment_runs_change_no_rollup_and_no_score(tmp_path: Path) -> None:
    from flaketui.core.ingest.writer import RunRecorder
    from flaketui.core.models import Attempt, CaseResult, RunMeta

    now = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)
    db = open_history(tmp_path / "h.db")
    _write_history(db, now, 30, "r")
    before = _snapshot(db)
    report = build_report(db, now=now, config=Config())
    for index in range(5):  # failing experiments inside the window, as `flaketui diagnose` stores
        meta = RunMeta(
            run_id=f"diagnose-x-{index}", suite="diagnose", branch_kind="pr",
            ts=now - timedelta(hours=5 * index + 2), worker_count=4,
        )  # fmt: skip
        recorder = RunRecorder(db, meta, source="diagnose")
        recorder.add(
            [
                CaseResult(test, test.split("::")[0], [Attempt("fail", 1, "AssertionError: x")])
                for test in ("tests/test_x.py::test_a", "tests/test_x.py::test_b[1]")
            ]
        )
        recorder.finish()
    assert_maintained(db)
    after = _snapshot(db)  # the same rows (recomputed sums may differ in the last bits)
    for table in TABLES:
        assert len(after[table]) == len(before[table]), table
        for a, b in zip(after[table], before[table], strict=True):
            assert all(_same(x, y) for x, y in zip(a, b, strict=True)), (table, a, b)
    assert_everything_agrees(db, now, Config())
    assert_same_report(build_report(db, now=now, config=Config()), report)


# ---- deferred folds: a recorder lists its run, the next writer or reader folds it ----------


def _deferred_run(
    conn: sqlite3.Connection, run_id: str, ts: datetime, rng: random.Random, batches: int = 3
) -> None:
    """A recorded run whose rollups are deferred, written in several batches."""
    from flaketui.core.ingest.writer import RunRecorder
    from flaketui.core.models import Attempt, CaseResult, RunMeta

    kind = rng.choice(["main", "pr"])
    meta = RunMeta(
        run_id=run_id,
        suite=rng.choice(["ci", "nightly"]),
        branch="main" if kind == "main" else "feature/x",
        branch_kind=kind,
        ts=ts,
        commit_sha=f"c{rng.randrange(4)}",
    )
    recorder = RunRecorder(conn, meta, defer_rollups=True)
    tests = ["tests/test_x.py::test_a", "tests/test_x.py::test_b[1]", "tests/test_x.py::test_b[2]"]
    for batch in range(batches):
        recorder.add(
            [
                CaseResult(
                    test_id,
                    test_id.split("::")[0],
                    [Attempt(rng.choice(["pass", "pass", "fail"]), 1, "AssertionError: boom")],
                )
                for test_id in tests[batch % len(tests) :]
            ]
        )
    recorder.finish()


def test_a_reader_racing_a_deferring_writer_gets_raw_scorer_results(tmp_path: Path) -> None:
    """While a run waits to be folded the rollups answer nothing, so a reader scores the raw
    rows; a reader's snapshot taken before a batch or a fold is answered as of that snapshot."""
    from tests.connections import open_connection

    path = tmp_path / "h.db"
    now = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)
    _write_history(open_history(path), now - timedelta(days=2), 16, "old")
    reader = open_history(path, readonly=True)
    writer = open_connection(path, fold=False)
    rng = random.Random(11)
    config = Config()
    for index in range(6):
        # The reader's snapshot is taken, then the writer commits a deferred run under it.
        reader.conn.execute("BEGIN")
        assert reader.conn.execute("SELECT count(*) FROM runs").fetchone()[0] >= 16
        waiting = rollups.pending(reader.conn)
        _deferred_run(writer, f"new{index}", now - timedelta(hours=30 - 5 * index), rng)
        assert rollups.pending(writer)
        assert rollups.pending(reader.conn) == waiting  # its snapshot does not move
        assert_everything_agrees(reader, now, config)
        reader.conn.execute("COMMIT")
        # A new snapshot sees the run waiting: the rollups step aside for the raw rows.
        assert not rollups.answers(reader.conn, config)
        assert rollups.test_base(reader.conn, now, config) is None
        assert_everything_agrees(reader, now, config)
        assert_filtered_agrees(reader, now, config)
        if index % 2:
            reader.conn.execute("BEGIN")
            reader.conn.execute("SELECT count(*) FROM runs").fetchone()
            with transaction(writer):  # folded under the reader's snapshot
                assert rollups.fold_pending(writer) >= 1
            assert_everything_agrees(reader, now, config)
            assert_filtered_agrees(reader, now, config)
            reader.conn.execute("COMMIT")
            assert rollups.answers(reader.conn, config)
            assert_everything_agrees(reader, now, config)
            assert_maintained(reader_writable := open_history(path))
            reader_writable.conn.close()
    # The next reader that may write folds what waits; the rollups answer again.
    _deferred_run(writer, "last", now - timedelta(hours=1), rng)
    assert rollups.pending(writer)
    again = open_history(path, readonly=True)
    assert not rollups.pending(again.conn)
    assert rollups.answers(again.conn, config)
    assert_everything_agrees(again, now, config)
    assert_filtered_agrees(again, now, config)
    assert_maintained(open_history(path))


def test_the_next_write_folds_deferred_runs(tmp_path: Path) -> None:
    """An ingest or an undeferred recording folds the deferred runs first."""
    from tests.connections import open_connection

    path = tmp_path / "h.db"
    now = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)
    db = open_history(path)
    _write_history(db, now - timedelta(days=1), 6, "old")
    writer = open_connection(path, fold=False)
    rng = random.Random(3)
    for index in range(3):
        _deferred_run(writer, f"deferred{index}", now - timedelta(hours=20 - index), rng)
    assert rollups.pending(db.conn)
    _record(
        db, "plain", now - timedelta(hours=1), {"tests/test_x.py::test_a": ["fail"]}, commit="c1"
    )
    assert not rollups.pending(db.conn)
    assert_everything_agrees(db, now, Config())
    assert_maintained(db)


def test_a_reader_does_not_queue_behind_a_writer_to_fold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the write lock held elsewhere, a reader opens without folding (it does not wait
    out the busy timeout for it) and scores the raw rows; the next open folds."""
    import threading
    from contextlib import closing

    from flaketui.core.history import store
    from tests.connections import open_connection

    path = tmp_path / "h.db"
    now = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)
    _write_history(open_history(path), now - timedelta(days=1), 6, "old")
    writer = open_connection(path, fold=False)
    _deferred_run(writer, "deferred", now - timedelta(hours=3), random.Random(1))
    # The lock is let go of once the reader has opened, or after a minute: a reader waiting
    # out the busy timeout (longer than that) would then take it and fold.
    monkeypatch.setattr(store, "BUSY_TIMEOUT_MS", 600_000)
    locked, opened = threading.Event(), threading.Event()

    def hold_the_write_lock() -> None:
        with closing(sqlite3.connect(path, isolation_level=None)) as other:
            other.execute("BEGIN IMMEDIATE")
            locked.set()
            opened.wait(60)
            other.execute("ROLLBACK")

    holder = threading.Thread(target=hold_the_write_lock)
    holder.start()
    try:
        assert locked.wait(60)
        reader = open_history(path, readonly=True)
    finally:
        opened.set()
        holder.join()
    assert rollups.pending(reader.conn)
    assert_everything_agrees(reader, now, Config())
    assert not rollups.pending(open_history(path, readonly=True).conn)


def test_deferred_runs_into_a_new_history_build_no_rollups_until_the_fold(tmp_path: Path) -> None:
    """A deferring recorder on a new history leaves the rollups to the fold, which builds them
    from every raw row: the same rows and scores as the raw scorer's."""
    from tests.connections import open_connection

    path = tmp_path / "h.db"
    now = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)
    writer = open_connection(path, fold=False)
    rng = random.Random(5)
    for index in range(3):
        _deferred_run(writer, f"deferred{index}", now - timedelta(hours=20 - index), rng)
    assert not rollups.enabled(writer)
    assert rollups.pending(writer)
    writer.close()
    db = open_history(path)
    assert rollups.enabled(db.conn)
    assert not rollups.pending(db.conn)
    assert_everything_agrees(db, now, Config())
    assert_maintained(db)
