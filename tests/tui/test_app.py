"""Pilot tests of the app: every action against a small real history."""

from __future__ import annotations

import csv
import json
import sqlite3
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pilots import app_on, notices_stay, settle, until
from textual.binding import Binding, BindingType
from textual.command import CommandList
from textual.widgets import Input, Select, Static
from tui_history import AUTH, BILLING, CART, NOW, SEARCH, build_history, record_run

from flaketui.core.errors import HistoryError
from flaketui.core.history.incidents import add_incident
from flaketui.core.history.store import read_header
from flaketui.core.quarantine.skipfile import read_skip_file
from flaketui.tui import startup
from flaketui.tui.app import FlaketuiApp
from flaketui.tui.history_access import reading
from flaketui.tui.loaders import QuarantineRequest, Source, load_in_stages, quarantine_test
from flaketui.tui.screens import main as main_screen
from flaketui.tui.screens.detail import DetailScreen
from flaketui.tui.screens.export_modal import ExportModal
from flaketui.tui.screens.quarantine_modal import QuarantineModal
from flaketui.tui.startup import make_source
from flaketui.tui.widgets.flake_table import FlakeTable
from flaketui.tui.widgets.keybar import KeyBar
from tests.connections import open_history
from tests.history_damage import damage
from tests.process_state import collector_off, handles_on

SIZE = (160, 48)


def _targets(app: FlaketuiApp) -> list[str]:
    table = app.main_screen.query_one(FlakeTable)
    return [table.rows_by_key[key].target for key in table.row_order]


def _audit(history: Path) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(history)
    try:
        return conn.execute("SELECT action, test_id, source FROM audit_log ORDER BY id").fetchall()
    finally:
        conn.close()


async def test_a_list_left_empty_by_incidents_says_why(tmp_path: Path) -> None:
    history = build_history(tmp_path / "outage.db", runs=12)
    db = open_history(history)
    try:
        add_incident(db, "registry-down", start=NOW - timedelta(days=31), end=NOW)
    finally:
        db.conn.close()
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        status = app.main_screen.query_one("#loading", Static)
        why = "No test to list: none of the window's 84 test-runs counts: 84 belong to runs"
        for view in ("1", "2", "4"):
            await pilot.press(view)
            assert _targets(app) == []
            assert status.display
            assert str(status.content) == f"{why} tagged as an incident."
        await pilot.press("3")  # the quarantined view says its own
        assert "Nothing quarantined in" in str(status.content)


async def test_list_views_filter_and_sort(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # Ranked by damage; regressions and healthy tests are not in the flaky list.
        targets = _targets(app)
        assert targets[0] == f"{BILLING}[gbp]" and AUTH in targets and len(targets) == 5
        assert SEARCH not in targets and CART not in targets
        damages = [t.scores.damage for t in app.main_screen.visible_tests()]
        assert damages == sorted(damages, reverse=True)
        # Views.
        await pilot.press("2")
        assert _targets(app) == [SEARCH]
        await pilot.press("4")
        assert len(_targets(app)) == 7
        await pilot.press("3")
        assert _targets(app) == []
        # An empty view says why and what to do; a view with rows says nothing.
        status = app.main_screen.query_one("#loading", Static)
        assert status.display and "Nothing quarantined in" in str(status.content)
        await pilot.press("1")
        assert not status.display
        # The filter narrows by id, then by signature text; Esc clears it.
        await pilot.press("slash", *"login")
        assert _targets(app) == [AUTH]
        await pilot.press(*"zzz")
        assert _targets(app) == []
        assert status.display and "No row matches “loginzzz”" in str(status.content)
        await pilot.press("escape")
        assert len(_targets(app)) == 5 and not status.display
        await pilot.press("slash", *"database is locked", "enter")
        assert sorted(_targets(app)) == sorted(
            f"{BILLING}[{p}]" for p in ("usd", "eur", "gbp", "jpy")
        )
        await pilot.press("escape")
        # Sort by a column, then reverse it.
        await pilot.press("s", "s")  # rank, then test id
        assert app.main_screen.state.sort_column == "test"
        assert _targets(app) == sorted(_targets(app))
        await pilot.press("S")
        assert _targets(app) == sorted(_targets(app), reverse=True)


async def test_grouping_toggles_and_expands(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("f")
        assert _targets(app) == [BILLING, AUTH]  # the pooled family outranks the lone test
        await pilot.press("space")
        assert len(_targets(app)) == 6
        assert all(t.startswith(BILLING) for t in _targets(app)[:5])
        await pilot.press("space")
        assert len(_targets(app)) == 2
        await pilot.press("f")
        assert len(_targets(app)) == 5
        await pilot.press("g")
        table = app.main_screen.query_one(FlakeTable)
        kinds = [table.rows_by_key[key].kind for key in table.row_order]
        assert kinds == ["group", "group"]
        await pilot.press("enter")  # Enter on a signature group expands it
        assert len(_targets(app)) == 6
        assert not isinstance(app.screen, DetailScreen)


class _HeldStages:
    """The staged load, its later steps (groups, lifecycle) held until the test's release."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def __call__(self, source: Any, apart: Any = None) -> Iterator[object]:
        stages = load_in_stages(source, apart)
        yield next(stages)
        assert self.release.wait(60)
        yield from stages


async def test_a_grouped_view_waits_for_the_groups_read_after_the_ranking(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = make_source(history, NOW, tmp_path / "quarantine.json")
    held = _HeldStages()
    monkeypatch.setattr(startup, "load_in_stages", held)
    app = FlaketuiApp(source, cursor_blink=False, watch=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main_screen.data is not None)
        assert _targets(app)[0] == f"{BILLING}[gbp]"  # the ranked list is up, groups are not
        await pilot.press("f")
        loading = app.main_screen.query_one("#loading", Static)
        assert loading.display and "groups are still being read" in str(loading.render())
        assert BILLING not in _targets(app)  # members listed alone until their group arrives
        held.release.set()
        await settle(pilot)
        assert not loading.display
        assert _targets(app) == [BILLING, AUTH]


async def test_enter_opens_detail_family_pivot_rises_with_workers(
    history: Path, tmp_path: Path
) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("f", "enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DetailScreen)
        assert screen.data is not None
        rows = screen.data.pivot.by_worker_count
        assert [r.key for r in rows] == ["1", "4", "8", "16"]
        rates = [r.fail_rate for r in rows]
        assert rates == sorted(rates) and rates[-1] > rates[0]
        assert "-n 16" in screen.data.repro
        assert screen.data.members[0].test_id == f"{BILLING}[gbp]"
        await pilot.press("c")
        assert app.clipboard == screen.data.repro
        await pilot.press("escape")
        assert app.screen is app.main_screen
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, DetailScreen)
        await pilot.press("backspace")  # back as well, without the wait a terminal's Esc has
        assert app.screen is app.main_screen
        # A regression's detail offers a bisect between its last good and first bad commits.
        await pilot.press("f", "2", "enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DetailScreen) and screen.data is not None
        assert screen.data.repro.startswith("git bisect start 0040")
        assert "0039" in screen.data.repro
        assert len(screen.data.outcomes) == 60
        # Its verdict changes name the day it turned (loaded apart from the rest).
        changes = str(screen.query_one("#changes", Static).content)
        assert "healthy → regression" in changes and "reading" not in changes


async def test_quarantine_then_release_from_the_list(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    notices_stay(app)
    skip_path = tmp_path / "quarantine.json"
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # Cancelling writes nothing.
        await pilot.press("q", "escape")
        await settle(pilot)
        assert not skip_path.exists() and _audit(history) == []
        # Quarantine the top test with a ticket.
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, QuarantineModal)
        await pilot.click("#ticket")
        await pilot.press(*"JIRA-7", "ctrl+s")
        await settle(pilot)
        skip = read_skip_file(skip_path, explicit=True)
        assert skip is not None
        entry = skip.entries[f"{BILLING}[gbp]"]
        assert entry.mode == "skip" and entry.ticket == "JIRA-7"
        assert "flaky runs" in entry.reason
        assert _audit(history) == [("quarantine", f"{BILLING}[gbp]", "app")]
        assert any("quarantine.json" in n.message for n in app._notifications)
        # The Quarantined view lists it; release removes it.
        await pilot.press("3")
        assert _targets(app) == [f"{BILLING}[gbp]"]
        await pilot.press("u")
        await settle(pilot)
        skip = read_skip_file(skip_path, explicit=True)
        assert skip is not None and skip.entries == {}
        assert [a[0] for a in _audit(history)] == ["quarantine", "release"]
        assert _targets(app) == []


def test_quarantining_a_quarantined_test_from_the_app_names_the_entry_it_replaces(
    history: Path, tmp_path: Path
) -> None:
    source = Source(path=history, skip_path=tmp_path / "quarantine.json", skip_display="q.json")
    first = QuarantineRequest(f"{BILLING}[gbp]", "leaks a fixture")
    assert quarantine_test(source, first, NOW) == f"Quarantined {BILLING}[gbp] (skip) in q.json"
    again = QuarantineRequest(f"{BILLING}[gbp]", "still leaks", mode="run")
    assert quarantine_test(source, again, NOW) == (
        f"Updated {BILLING}[gbp] (run) in q.json; it was skip, reason 'leaks a fixture'"
    )
    family = quarantine_test(source, QuarantineRequest(BILLING, "all of them"), NOW)
    assert family.endswith("in q.json; 1 of them had an entry, now replaced")
    assert family.startswith("Quarantined ") and f"params of {BILLING} (skip)" in family


async def test_readonly_history_refuses_quarantine(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    app.source.readonly = True
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("q")
        await pilot.pause()
        assert not isinstance(app.screen, QuarantineModal)
        assert "read-only" in str(app.main_screen.query_one("#header").render())
        assert _audit(history) == []


async def test_a_damaged_history_says_so_and_stops_loading(history: Path, tmp_path: Path) -> None:
    """A read that meets a damaged page ends the load with one message naming the file (the
    load's worker once ended with the error, the list saying "reading" for ever)."""
    damage(history)
    app = app_on(history, tmp_path)
    notices_stay(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: bool(app._notifications))
        [note] = app._notifications
        assert note.title == "Cannot read the history"
        assert note.severity == "error"
        assert f"{history}: damaged (database disk image is malformed)" in note.message
        await settle(pilot)
        assert not app.main_screen.query_one("#loading").display
        header = str(app.main_screen.query_one("#header").render())
        assert "loading" not in header
        assert header.endswith(
            "not read: damaged (database disk image is malformed); restore it from a copy"
        )


def test_a_reader_meeting_a_damaged_page_keeps_no_handle_on_the_file(history: Path) -> None:
    """The reader raises the one-line error and closes its connection (it once kept it open
    until the garbage collector found it)."""
    damage(history)
    read_header(history, 16)  # the header's descriptor, which stays open on purpose
    with collector_off():
        before = handles_on(history)
        with pytest.raises(HistoryError, match="damaged"), reading(history):
            pass
        assert handles_on(history) == before


async def test_export_writes_parseable_files(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for fmt in ("json", "csv"):
            await pilot.press("e")
            await pilot.pause()
            modal = app.screen
            assert isinstance(modal, ExportModal)
            modal.query_one("#format", Select).value = fmt
            await pilot.pause()
            modal.query_one("#path", Input).value = str(tmp_path / f"out.{fmt}")
            await pilot.press("ctrl+s")
            await settle(pilot)
    doc = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    ids = [item["test_id"] for item in doc["items"]]
    assert ids[0] == f"{BILLING}[gbp]" and len(ids) == 5
    rows = list(csv.DictReader((tmp_path / "out.csv").read_text(encoding="utf-8").splitlines()))
    assert [row["test_id"] for row in rows] == ids


async def test_refresh_picks_up_a_run_ingested_while_open(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        data = app.main_screen.data
        assert data is not None
        app.check_history()  # nothing changed: no reload
        await settle(pilot)
        assert app.main_screen.data is data
        before = next(t for t in data.report.tests if t.test_id == CART).scores.runs
        record_run(history, 60, NOW.replace(hour=17))
        app.check_history()
        await settle(pilot)
        data = app.main_screen.data
        assert data is not None
        assert next(t for t in data.report.tests if t.test_id == CART).scores.runs == before + 1


def _palette_offers(app: Any, word: str) -> bool:
    """Whether the command palette highlights a command whose name holds `word` (it searches
    in a task of its own)."""
    commands = app.screen.query_one(CommandList)
    highlighted = commands.highlighted
    if highlighted is None or not commands.option_count:
        return False
    return word in str(commands.get_option_at_index(highlighted).prompt).lower()


async def test_command_palette_and_help(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p", *"group by family")
        await until(pilot, lambda: _palette_offers(app, "family"))
        await pilot.press("enter")
        await settle(pilot)
        assert app.main_screen.state.grouping == "family"
        await pilot.press("question_mark")
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("escape")
        assert app.screen is app.main_screen


async def test_read_only_file_opens_read_only(history: Path, tmp_path: Path) -> None:
    history.chmod(0o444)
    app = app_on(history, tmp_path)
    assert app.source.readonly
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.main_screen.data is not None  # it still reads
        assert "read-only" in str(app.main_screen.query_one("#header").render())


async def test_the_key_bar_lists_each_screens_keys_and_runs_a_clicked_one(
    history: Path, tmp_path: Path
) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        bar = app.main_screen.query_one(KeyBar)
        line = bar.render().plain
        assert line.startswith(" / Filter ") and " q Quarantine " in line
        assert line.rstrip().endswith("^p palette") and len(line) == SIZE[0]
        # A click on a key runs its action, as pressing it does.
        start = line.index(" q Quarantine ")
        await pilot.click(KeyBar, offset=(start + 2, 0))
        await pilot.pause()
        assert isinstance(app.screen, QuarantineModal)
        await pilot.press("escape")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, DetailScreen)
        detail_line = app.screen.query_one(KeyBar).render().plain
        assert detail_line.startswith(" esc Back ") and "Filter" not in detail_line


async def test_a_big_history_rebuilds_a_changed_view_in_a_worker_with_the_same_rows(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def rows_after(keys: list[str]) -> list[str]:
        app = app_on(history, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            for key in keys:
                await pilot.press(key)
            await settle(pilot)
            return _targets(app)

    keys = ["4", "s", "s", "/", "b", "i", "l", "l", "enter", "f"]
    at_once = await rows_after(keys)
    threads: list[str] = []
    original = main_screen.prepare_rows

    def recorded(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return original(*args, **kwargs)

    monkeypatch.setattr(main_screen, "SYNC_REBUILD_TESTS", 0)  # every history is "big"
    monkeypatch.setattr(main_screen, "prepare_rows", recorded)
    assert await rows_after(keys) == at_once and at_once
    # Every rebuild ran in a worker thread, none on the UI thread.
    assert threads and threading.main_thread().name not in threads


async def test_workers_never_print_the_loaded_report(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Textual describes a worker by the repr of its arguments unless told otherwise: for a
    # loaded report that is megabytes of text made on the UI thread before the first paint.
    from flaketui.tui.loaders import MainData

    printed: list[str] = []
    monkeypatch.setattr(MainData, "__repr__", lambda self: printed.append("data") or "data")
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.main_screen._rebuild_rows(app.main_screen.data, app.main_screen.state.copy())
        await pilot.press("r")
        await settle(pilot)
        assert app.main_screen.data is not None
    assert printed == []


def test_the_list_and_the_detail_give_a_key_one_meaning() -> None:
    # People go back and forth between the two screens: a key both bind does the same thing
    # on each (Escape aside: it clears the filter on the list and goes back on the detail).
    def actions(bindings: list[BindingType]) -> dict[str, str]:
        return {b.key: b.action for b in bindings if isinstance(b, Binding)}

    main, detail = actions(main_screen.MainScreen.BINDINGS), actions(DetailScreen.BINDINGS)
    shared = (main.keys() & detail.keys()) - {"escape"}
    assert shared >= {"q", "u", "r"}
    assert {key: (main[key], detail[key]) for key in shared if main[key] != detail[key]} == {}
