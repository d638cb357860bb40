"""The notice line of a history without a run on the default branch, where bad runs between good
ones are no flake evidence: it says so, naming the default branches and where to fix it."""

from __future__ import annotations

import dataclasses
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest
from pilots import app_on, settle
from test_outage_review import add_outages
from tui_history import NOW, WORKER_COUNTS, cases_for_run, run_meta

from flaketui.core.config import Config
from flaketui.core.ingest.writer import RunRecorder
from flaketui.tui.app import FlaketuiApp, make_app
from flaketui.tui.widgets.banner import TrustBanner
from tests.connections import open_history

NOTICE = "⚠ no run on main or master: failing on and off is not judged flaky (--branch)"


def _unbranched_history(path: Path, runs: int = 30) -> Path:
    """Runs with no branch recorded (kept as pull-request runs), as `flaketui ingest` outside CI
    and outside a git checkout stores them."""
    db = open_history(path)
    try:
        for index in range(runs):
            workers = WORKER_COUNTS[index % len(WORKER_COUNTS)]
            ts = NOW - timedelta(days=30) + timedelta(days=30) / runs * index
            meta = dataclasses.replace(run_meta(index, ts, workers), branch=None, branch_kind="pr")
            recorder = RunRecorder(db, meta)
            recorder.add(cases_for_run(index, workers))
            recorder.finish()
    finally:
        db.conn.close()
    return path


def _banner(app: FlaketuiApp) -> TrustBanner:
    return app.main_screen.query_one(TrustBanner)


async def test_the_notice_line_says_no_run_is_on_the_default_branch(tmp_path: Path) -> None:
    app = app_on(_unbranched_history(tmp_path / "history.db"), tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        banner = _banner(app)
        assert banner.display
        assert str(banner.render()) == NOTICE
        assert banner.region.height == 1  # one row even at 80 columns


async def test_no_such_notice_beside_default_branch_runs(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert not _banner(app).display


async def test_three_notices_fit_the_line_at_80_columns(history: Path, tmp_path: Path) -> None:
    add_outages(history)  # two suspected outages and an interrupted run
    conn = sqlite3.connect(history)
    with conn:
        conn.execute("UPDATE runs SET branch = NULL, branch_kind = 'pr'")
    conn.close()
    app = app_on(history, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        banner = _banner(app)
        text = banner.render()
        assert str(text).startswith(NOTICE)
        assert "2 suspected outages excluded" in str(text)
        assert str(text).endswith("1 interrupted run, counted only for the tests it recorded")
        width = banner.content_region.width
        assert len(text.wrap(width)) == 3 == banner.region.height


@pytest.mark.parametrize(
    ("branches", "notice"),
    [
        (
            ("main", "master", "develop", "release-integration"),
            "⚠ no default-branch run: failing on and off is not judged flaky (--branch)",
        ),
        ((), "⚠ no default branch is configured: failing on and off is not judged flaky"),
    ],
    ids=["many", "none"],
)
async def test_the_notice_keeps_to_one_row_whatever_the_default_branches(
    tmp_path: Path, branches: tuple[str, ...], notice: str
) -> None:
    # Many or long names are left to the reports; the notice itself never wraps at 80 columns.
    history = _unbranched_history(tmp_path / "history.db")
    config = dataclasses.replace(Config(), default_branches=branches)
    app = make_app(
        history,
        now=NOW,
        skip_file=tmp_path / "quarantine.json",
        config=config,
        cursor_blink=False,
        watch=False,
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        banner = _banner(app)
        assert str(banner.render()) == notice
        assert banner.region.height == 1
