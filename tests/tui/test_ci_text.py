"""The app shows text from CI (test ids, messages, branches, workers, hosts, suites) as it is:
never read as markup, its control characters as escapes, so nothing in a report reaches the
terminal as a command or hides part of an id."""

from __future__ import annotations

import html
import re
import unicodedata
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pilots import app_on, notices_stay, settle, until
from textual.pilot import Pilot
from textual.widgets import Static
from tui_history import NOW

from flaketui.core.config import Config
from flaketui.core.history.outages import record_outages
from flaketui.core.ingest.writer import RunRecorder
from flaketui.core.models import Attempt, CaseResult, RunMeta
from flaketui.tui.app import FlaketuiApp
from flaketui.tui.screens.detail import DetailScreen
from flaketui.tui.screens.order_modal import OrderModal
from flaketui.tui.screens.outages import OutagesScreen
from flaketui.tui.screens.quarantine_modal import QuarantineModal
from flaketui.tui.widgets.flake_table import FlakeTable
from tests.connections import open_history

# Lower-case parameters are what Rich markup takes for a style tag: "[gbp]" would vanish.
FAMILY = "tests/test_pay.py::test_charge"
PARAMS = ("gbp", "usd-2")
# A closing tag with nothing to close (markup would fail on it), an OSC sequence that sets the
# terminal's title, a right-to-left override.
ODD = "tests/test_odd.py::test_[/]x\x1b]0;PWNED\x07y\u202eevil"
ODD_SHOWN = "tests/test_odd.py::test_[/]x\\x1b]0;PWNED\\x07y\\u202eevil"
MESSAGE = "AssertionError: [/] closes [b]bold \x1b[2J cleared \u2066 isolated"
MESSAGE_SHOWN = "AssertionError: [/] closes [b]bold \\x1b[2J cleared \\u2066 isolated"
WORKERS = ("gw0[/]\x1b[31m", "gw1")
HOST = "ci-[/]\x1b[1m-host"
SUITE = "unit[/]\x1b[5m"
OUTAGE_RUN = "down-1\x1b[8m"  # ESC [8m: concealed text
SIZE = (200, 150)  # tall enough for every section of a family's detail


def hostile_history(path: Path) -> Path:
    """40 main-branch runs: a flaky family with lower-case params, a flaky test whose id,
    message, worker ids and host hold markup, escape sequences and bidirectional controls."""
    db = open_history(path)
    try:
        for index in range(40):
            worker = WORKERS[index % 2]
            meta = RunMeta(
                run_id=f"run-{index:03d}",
                suite=SUITE,
                branch="main",
                branch_kind="main",
                commit_sha=f"{index:04d}" + "c0ffee" * 6,
                ts=NOW - timedelta(days=20) + timedelta(hours=12 * index),
                worker_count=2,
                runner_host=HOST,
            )
            bad = index % 3 == 0
            cases = [
                CaseResult(
                    f"{FAMILY}[{param}]",
                    "tests/test_pay.py",
                    [Attempt("fail", 10, MESSAGE, worker), Attempt("pass", 10, None, worker)]
                    if bad and p == index % 2
                    else [Attempt("pass", 10, None, worker)],
                )
                for p, param in enumerate(PARAMS)
            ]
            cases.append(
                CaseResult(
                    ODD,
                    "tests/test_odd.py",
                    [Attempt("fail", 10, MESSAGE, worker), Attempt("pass", 10, None, worker)]
                    if index % 4 == 1
                    else [Attempt("pass", 10, None, worker)],
                )
            )
            recorder = RunRecorder(db, meta)
            recorder.add(cases)
            recorder.finish()
    finally:
        db.conn.close()
    return path


def add_outage(path: Path) -> Path:
    """Four tests failing with one hostile message in a run whose id holds an escape sequence,
    passing 40 minutes later: an outage proposed as of NOW."""
    db = open_history(path)
    try:
        start = NOW - timedelta(days=2)
        tests = [f"tests/test_shop.py::test_{n}" for n in ("cart", "pay", "ship", "tax")]
        for run_id, ts, failing in (
            (OUTAGE_RUN, start, True),
            ("back-1", start + timedelta(minutes=40), False),
        ):
            meta = RunMeta(
                run_id=run_id,
                suite="unit",
                branch="main",
                branch_kind="main",
                commit_sha=f"{run_id}-sha",
                ts=ts,
                worker_count=1,
            )
            recorder = RunRecorder(db, meta)
            recorder.add(
                [
                    CaseResult(
                        test_id,
                        "tests/test_shop.py",
                        [Attempt("fail" if failing else "pass", 10, MESSAGE if failing else None)],
                    )
                    for test_id in tests
                ]
            )
            recorder.finish()
        assert len(record_outages(db, now=NOW, config=Config())) == 1
    finally:
        db.conn.close()
    return path


def screen_text(app: FlaketuiApp) -> str:
    """What the terminal shows, as the characters of the app's screenshot."""
    svg = app.export_screenshot()
    pieces = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    return html.unescape("".join(pieces)).replace("\xa0", " ")


def assert_inert(app: FlaketuiApp) -> str:
    """The screen holds no control character and no bidirectional formatting character."""
    shown = screen_text(app)
    bad = [
        char
        for char in shown
        if unicodedata.category(char) in ("Cc", "Cf") and char not in "\n\u200d"
    ]
    assert not bad, f"shown as is: {bad!r}"
    return shown


async def open_row(pilot: Pilot[Any], app: FlaketuiApp, ending: str) -> DetailScreen:
    """Enter on the row whose key ends with `ending`; the detail once it has loaded."""
    table = app.main_screen.query_one(FlakeTable)
    table.move_cursor(row=next(i for i, k in enumerate(table.row_order) if k.endswith(ending)))
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.data is not None)
    await settle(pilot)
    screen = app.screen
    assert isinstance(screen, DetailScreen)
    return screen


@pytest.fixture
def history(tmp_path: Path) -> Path:
    return hostile_history(tmp_path / "history.db")


async def test_the_list_and_a_family_show_ids_as_they_are(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)
        await until(pilot, lambda: ODD_SHOWN in screen_text(app))
        assert_inert(app)
        await pilot.press("f")
        await settle(pilot)
        await open_row(pilot, app, FAMILY)
        # The runs are drawn, and the members table, which fills in on its own turn.
        await until(
            pilot,
            lambda: (
                MESSAGE_SHOWN[:40] in screen_text(app)
                and all(f"{FAMILY}[{param}]" in screen_text(app) for param in PARAMS)
            ),
        )
        shown = assert_inert(app)
        for param in PARAMS:  # the members table and the runs' param column
            assert f"{FAMILY}[{param}]" in shown
            assert f"[{param}]" in shown.split("Runs (newest first", 1)[1]
        assert MESSAGE_SHOWN[:40] in shown


async def test_a_test_with_hostile_text_opens_and_its_pivots_show(
    history: Path, tmp_path: Path
) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)
        screen = await open_row(pilot, app, "evil")
        # The runs table draws its rows when the app is next idle: wait for the worker column.
        await until(pilot, lambda: "gw0[/]\\x1b[31m" in screen_text(app))
        shown = assert_inert(app)
        assert f"test {ODD_SHOWN}" in shown
        assert MESSAGE_SHOWN[:40] in shown
        # Each dimension's pivot: worker ids, hosts, ...
        for _ in range(6):
            await pilot.press("d")
            await settle(pilot)
            assert_inert(app)
        assert screen.dimension != "worker_count"
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, QuarantineModal))
        await settle(pilot)
        assert f"Quarantine {ODD_SHOWN}" in assert_inert(app)
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, OrderModal))
        await settle(pilot)
        assert f"Ran before {ODD_SHOWN}" in assert_inert(app)


async def test_notices_naming_ci_text_show_it_as_it_is(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    notices_stay(app)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("t")  # the next suite: its name in a notice and in the header
        await settle(pilot)
        await until(pilot, lambda: bool(app.screen.query("Toast")))
        shown = assert_inert(app)
        assert "Suite: unit[/]\\x1b[5m" in shown and "suite: unit[/]\\x1b[5m" in shown
        await pilot.press("4")
        await settle(pilot)
        table = app.main_screen.query_one(FlakeTable)
        table.move_cursor(row=next(i for i, k in enumerate(table.row_order) if "evil" in k))
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, QuarantineModal))
        await pilot.press("ctrl+s")
        await until(pilot, lambda: (tmp_path / "quarantine.json").exists())
        await settle(pilot)
        await until(pilot, lambda: "Quarantined" in screen_text(app))
        assert_inert(app)
        toasts = " ".join(str(toast.render()) for toast in app.screen.query("Toast"))
        assert f"Quarantined {ODD_SHOWN}" in toasts


async def test_an_outage_review_shows_its_evidence_inert(history: Path, tmp_path: Path) -> None:
    app = app_on(add_outage(history), tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, OutagesScreen) and app.screen.loaded)
        await until(pilot, lambda: "down-1\\x1b[8m" in screen_text(app))
        shown = assert_inert(app)
        # The signature's text: the message normalised (its escape codes are not signed).
        assert "AssertionError: [/] closes [b]bold" in shown


async def test_a_filter_matching_nothing_is_named_as_typed(history: Path, tmp_path: Path) -> None:
    # The empty view names the filter: "[/]" in it, read as markup, stopped the app.
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"zz[/]x[b]")
        await settle(pilot)
        status = app.main_screen.query_one("#loading", Static)
        assert status.display and "No row matches “zz[/]x[b]”" in str(status.content)
