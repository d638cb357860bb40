"""Daily series of pooled groups (families, signature groups): the trend a group row shows."""

from __future__ import annotations

import random
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
import sqlite_utils

from flaketui.core.config import Config
from flaketui.core.scoring import series
from flaketui.core.scoring.report import DAILY_DAYS, build_report
from flaketui.core.scoring.results import Report
from flaketui.core.timeutil import parse_iso
from tests.connections import open_history
from tests.core.test_rollup_scoring import SAMPLE, _with_rollups, fuzz_history

SAMPLE_NOW = parse_iso("2026-11-30T18:00:00Z")
ROLLUP_SUMS = series._group_sums_from_rollups  # before any test patches it


@pytest.fixture
def sample(tmp_path: Path) -> sqlite_utils.Database:
    path = tmp_path / "sample.db"
    shutil.copy(SAMPLE, path)
    return _with_rollups(open_history(path))


def _group_members(db: sqlite_utils.Database, report: Report) -> dict[str, dict[int, str]]:
    """tests.id -> group key, for the report's families and for its signature groups."""
    pks = dict(db.conn.execute("SELECT test_id, id FROM tests").fetchall())
    families = {
        int(pk): str(parent)
        for pk, parent in db.conn.execute("SELECT id, parent FROM tests WHERE test_id <> parent")
    }
    signatures = {pks[m]: g.key for g in report.signatures for m in g.members}
    return {"family": families, "signature": signatures}


def _both_paths(
    db: sqlite_utils.Database, members: dict[int, str], now, config: Config, monkeypatch
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """daily_group_scores from the rollups (checked to be taken), then from the raw rows."""
    used = []

    def spy(*args):
        used.append(ROLLUP_SUMS(*args))
        return used[-1]

    monkeypatch.setattr(series, "_group_sums_from_rollups", spy)
    fast = series.daily_group_scores(db, members, now=now, days=DAILY_DAYS, config=config)
    assert used and used[0] is not None, "the rollups should have answered"
    monkeypatch.setattr(series, "_group_sums_from_rollups", lambda *args: None)
    raw = series.daily_group_scores(db, members, now=now, days=DAILY_DAYS, config=config)
    return fast, raw


def _assert_same(fast: dict[str, list[float]], raw: dict[str, list[float]]) -> None:
    assert fast.keys() == raw.keys()
    for key in raw:
        assert fast[key] == pytest.approx(raw[key], rel=1e-9, abs=1e-12), key


def test_group_rows_carry_a_series_ending_at_their_score(sample: sqlite_utils.Database) -> None:
    report = build_report(sample, now=SAMPLE_NOW)
    groups = [*report.families, *report.signatures]
    failing = [g for g in groups if g.scores.last_failure_at is not None]
    assert report.families and len(report.signatures) > 10 and failing
    for group in groups:
        assert len(group.daily_scores) == DAILY_DAYS
        assert group.daily_scores[-1] == pytest.approx(group.scores.recency_score, abs=1e-12)
    # The billing family fails throughout the month: its trend is never flat at zero.
    billing = next(g for g in report.families if "billing" in g.key)
    assert min(billing.daily_scores) > 0


def test_sample_groups_agree_with_the_raw_rows(sample: sqlite_utils.Database, monkeypatch) -> None:
    report = build_report(sample, now=SAMPLE_NOW)
    for members in _group_members(sample, report).values():
        _assert_same(*_both_paths(sample, members, SAMPLE_NOW, Config(), monkeypatch))


@pytest.mark.parametrize("seed", range(4))
def test_random_histories_agree_with_the_raw_rows(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Short windows, midnight runs, incidents and edits: every day of every group agrees."""
    db = open_history(tmp_path / "fuzz.db")
    start = fuzz_history(db, seed)
    _with_rollups(db)
    rng = random.Random(seed)
    for _ in range(3):
        now = start + timedelta(days=rng.choice([2, 5, 9, 13]), hours=rng.choice([0, 6, 17.5]))
        config = Config(window_days=rng.choice([3, 5]), n_min=2)
        report = build_report(db, now=now, config=config)
        for members in _group_members(db, report).values():
            if members:
                _assert_same(*_both_paths(db, members, now, config, monkeypatch))


def test_groups_without_runs_get_zeros(sample: sqlite_utils.Database) -> None:
    pk = int(sample.conn.execute("SELECT max(id) FROM tests").fetchone()[0])
    far_past = parse_iso("2020-01-01T00:00:00Z")
    out = series.daily_group_scores(
        sample, {pk: "lonely"}, now=far_past, days=DAILY_DAYS, config=Config()
    )
    assert out == {"lonely": [0.0] * DAILY_DAYS}


def test_a_family_with_its_plain_test_ends_at_its_score(tmp_path: Path) -> None:
    """`test_p` beside `test_p[1]`, `test_p[2]`: the family's score pools all three, so does its
    series (it used to leave the plain test out and end elsewhere)."""
    db = open_history(tmp_path / "fuzz.db")
    start = fuzz_history(db, 1)
    _with_rollups(db)
    assert db.conn.execute(
        "SELECT count(*) FROM tests WHERE test_id = 'tests/test_a.py::test_p'"
    ).fetchone() == (1,)
    now = start + timedelta(days=9, hours=6)
    report = build_report(db, now=now, config=Config(window_days=5, n_min=2))
    family = next(f for f in report.families if f.key == "tests/test_a.py::test_p")
    assert family.scores.last_failure_at is not None
    assert family.daily_scores[-1] == pytest.approx(family.scores.recency_score, abs=1e-12)
