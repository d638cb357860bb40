"""The list follows a history written while the app is open, to the state the last write left."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pilots import SAFETY_S, app_on, notices_stay, until
from textual.message import Message
from textual.worker import Worker, WorkerState
from tui_history import CART, NOW, record_run

from flaketui.cli import cli
from flaketui.core.errors import HistoryError
from flaketui.tui import history_access, startup
from flaketui.tui.app import FlaketuiApp
from flaketui.tui.loaders import history_stamp, load_main
from flaketui.tui.messages import LoadFailed, MainLoaded
from flaketui.tui.ranking_store import keep_ranking
from flaketui.tui.screens import main as main_screen
from flaketui.tui.startup import StagedRead, make_source

SIZE = (160, 48)


def _loads(app: FlaketuiApp) -> list[Worker[Any]]:
    return [w for w in app.main_screen.workers if w.group == "load"]


def _done_loading(app: FlaketuiApp) -> bool:
    """No load worker runs, and the list shows a load to its last step."""
    data = app.main_screen.data
    running = any(not w.is_finished for w in _loads(app))
    return not running and data is not None and data.causes_loaded


def _cart_runs(app: FlaketuiApp) -> int:
    data = app.main_screen.data
    assert data is not None
    return next(t for t in data.report.tests if t.test_id == CART).scores.runs


def _record(history: Path, first: int, count: int) -> None:
    for index in range(first, first + count):
        record_run(history, index, NOW.replace(hour=8 + index - first))


def _watch_posts(app: FlaketuiApp, kind: type[Message]) -> threading.Event:
    """An event set once the list's screen posts a message of `kind` (from any thread)."""
    posted = threading.Event()
    screen = app.main_screen
    post = screen.post_message

    def watching(message: Message) -> bool:
        result = post(message)
        if isinstance(message, kind):
            posted.set()
        return result

    screen.post_message = watching  # type: ignore[method-assign]
    return posted


def test_a_connection_that_fails_to_open_is_closed(
    history: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reader met another process's write half done: the failed connection must not stay
    # open, or every later reader of the process fails the same way.
    opened: list[sqlite3.Connection] = []
    connect = sqlite3.connect

    def tracked(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        opened.append(conn)
        return conn

    def malformed(conn: sqlite3.Connection) -> int:
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(history_access.sqlite3, "connect", tracked)
    monkeypatch.setattr(history_access, "schema_version", malformed)
    with pytest.raises(HistoryError, match="malformed"):
        history_access.open_reader(history)
    assert opened
    for conn in opened:
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            conn.execute("SELECT 1")


# Another process's write: commits `sql`, says so, and closes its connection when told.
WRITER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute(sys.argv[2])
conn.execute("COMMIT")
print("committed", flush=True)
sys.stdin.readline()
conn.close()
print("closed", flush=True)
"""


def _other_process_writes(history: Path, sql: str) -> subprocess.Popen[str]:
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(history), sql],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "committed"
    return writer


def _close(writer: subprocess.Popen[str]) -> None:
    assert writer.stdin is not None and writer.stdout is not None
    writer.stdin.write("\n")
    writer.stdin.flush()
    assert writer.stdout.readline().strip() == "closed"
    writer.wait(SAFETY_S)
    writer.stdin.close()
    writer.stdout.close()


def test_a_reader_opened_beside_another_sees_every_commit(history: Path) -> None:
    # The app opens a reader while an earlier one still reads. Opening one must not drop the
    # other's lock: without it, another process's last connection removes the -wal and -shm
    # files under it, and the readers opened after go on with a stale index of the WAL (they
    # miss later commits, or find the file malformed).
    with closing(sqlite3.connect(history)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
    first = _other_process_writes(history, "CREATE TABLE first_write AS SELECT * FROM meta")
    try:
        with history_access.reading(history) as reading:
            assert reading.conn.execute("SELECT count(*) FROM first_write").fetchone()[0] > 0
            with history_access.reading(history):
                pass
            _close(first)
            second = _other_process_writes(history, "CREATE TABLE second_write (n INTEGER)")
            try:
                with history_access.reading(history) as later:
                    tables = {
                        name
                        for (name,) in later.conn.execute(
                            "SELECT name FROM sqlite_master WHERE type = 'table'"
                        )
                    }
                assert "second_write" in tables
            finally:
                _close(second)
    finally:
        if first.poll() is None:
            _close(first)


async def test_the_watch_reloads_after_a_read_that_failed(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: _done_loading(app))
        before = _cart_runs(app)
        # CI writes a run; the reload it starts meets the write half done and fails.
        real = history_access.schema_version
        failures = [sqlite3.DatabaseError("database disk image is malformed")]

        def once_malformed(conn: sqlite3.Connection) -> int:
            if failures:
                raise failures.pop()
            return real(conn)

        monkeypatch.setattr(history_access, "schema_version", once_malformed)
        failed = _watch_posts(app, LoadFailed)
        _record(history, 60, 1)
        app.check_history()  # the watch's timer
        assert await asyncio.to_thread(failed.wait, SAFETY_S)
        await until(pilot, lambda: not any(not w.is_finished for w in _loads(app)))
        # More runs land; the watch sees them and the list ends on the last one.
        _record(history, 61, 2)
        app.check_history()
        await until(pilot, lambda: _done_loading(app) and _cart_runs(app) == before + 3)
        assert _cart_runs(app) == before + 3
        assert app.main_screen.data is not None and app.main_screen.data.causes_loaded


async def test_a_replaced_load_shows_nothing_and_stops_reading(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: _done_loading(app))
        before = _cart_runs(app)
        # A reload reads the history, then is held before it hands its ranking over.
        real = startup.load_in_stages
        held = threading.Event()
        release = threading.Event()
        calls: list[int] = []

        def held_stages(source: Any, apart: Any = None) -> Iterator[object]:
            stages = real(source, apart)
            with closing(stages):
                first = next(stages)
                if not calls:
                    calls.append(1)
                    held.set()
                    release.wait(SAFETY_S)
                yield first
                yield from stages

        monkeypatch.setattr(startup, "load_in_stages", held_stages)
        app.main_screen.reload()
        (old_load,) = [w for w in _loads(app) if not w.is_finished]
        assert await asyncio.to_thread(held.wait, SAFETY_S)
        await until(pilot, lambda: old_load.state == WorkerState.RUNNING)
        assert old_load.state == WorkerState.RUNNING
        # CI writes runs; a newer reload reads them to the end.
        _record(history, 60, 2)
        posted = _watch_posts(app, MainLoaded)
        app.main_screen.reload()
        await until(pilot, lambda: _done_loading(app))
        assert _cart_runs(app) == before + 2
        # The older load goes on to hand over the ranking it read before the runs: not shown.
        posted.clear()
        release.set()
        assert await asyncio.to_thread(posted.wait, SAFETY_S)
        await pilot.pause()
        await until(pilot, lambda: _done_loading(app))
        assert _cart_runs(app) == before + 2
        assert app.main_screen.data is not None and app.main_screen.data.causes_loaded
        for read in app.reads:
            read.thread.join(SAFETY_S)
        assert not any(read.thread.is_alive() for read in app.reads)


async def test_a_load_replaced_before_it_began_stops_its_read(
    history: Path, tmp_path: Path
) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: _done_loading(app))
        started: list[startup.StagedRead] = []
        start_read = app.start_read

        def recorded() -> startup.StagedRead:
            started.append(start_read())
            return started[-1]

        app.start_read = recorded  # type: ignore[method-assign]
        app.main_screen.reload()
        app.main_screen.reload()  # before the first reload's worker ran at all
        await until(pilot, lambda: _done_loading(app))
        assert len(started) == 2
        # Both reads end, the one no load asks for its next step too: waiting for it, it
        # would hold its read transaction open for good.
        for read in started:
            read.thread.join(SAFETY_S)
            assert not read.thread.is_alive()


async def test_each_later_step_is_read_once_the_step_before_is_on_screen(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A step read while the app paints the one before would take the interpreter from that
    # paint: the load asks for the lifecycle states once the complete report is shown, and for
    # the likely causes once the states are. Only a paint ends the load's wait for it here (a
    # busy machine can take longer to paint than the load waits).
    monkeypatch.setattr(main_screen, "PAINT_WAIT_S", 10 * SAFETY_S)
    app = app_on(history, tmp_path)
    seen: dict[str, tuple[bool, bool] | None] = {}

    def on_screen() -> tuple[bool, bool] | None:
        data = app.main_screen.data
        return None if data is None else (data.groups_loaded, data.extras_loaded)

    load_in_stages = startup.load_in_stages

    def recorded(source: Any, apart: Any = None) -> Iterator[object]:
        stages = load_in_stages(source, apart)
        for step in ("first", "complete", "extras", "causes"):
            seen[step] = on_screen()  # what the UI showed as the reader began this step
            yield next(stages)

    monkeypatch.setattr(startup, "load_in_stages", recorded)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: _done_loading(app))
        assert _done_loading(app)
    assert seen["extras"] == (True, False)  # the complete report, with its groups
    assert seen["causes"] == (True, True)  # the lifecycle states too


def _ingest_waiting(history: Path, tmp_path: Path, runs: int) -> None:
    """`flaketui ingest` of `runs` new runs, which it leaves waiting for the fold."""
    report = tmp_path / "waiting.xml"
    report.write_text(
        '<testsuite name="s"><testcase classname="tests.test_late" name="test_arrived"'
        ' file="tests/test_late.py"/></testsuite>\n'
    )
    for index in range(runs):
        args = ["ingest", str(history), str(report), "--run-id", f"waiting-{index}"]
        args += ["--timestamp", f"2026-11-30T1{index}:45:00Z", "--no-detect"]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
    with closing(sqlite3.connect(history)) as conn:
        assert conn.execute("SELECT count(*) FROM test_runs_waiting").fetchone() == (runs,)


async def test_folding_the_waiting_runs_as_it_opens_is_no_change_to_reload(
    history: Path, tmp_path: Path
) -> None:
    """The app's first read folds the runs an ingest left waiting: its own write, done before
    it notes the history's state, so the watch sees no change afterwards."""
    _ingest_waiting(history, tmp_path, 3)
    app = app_on(history, tmp_path)
    notices_stay(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: _done_loading(app))
        with closing(sqlite3.connect(history)) as conn:
            assert conn.execute("SELECT count(*) FROM test_runs_waiting").fetchone() == (0,)
        app.check_history()  # the watch's timer
        await until(pilot, lambda: all(w.is_finished for w in app.workers if w.group == "poll"))
        await pilot.pause()
        assert not [n for n in app._notifications if "history changed" in n.message]
        assert not any(not w.is_finished for w in _loads(app))  # no reload started


async def test_a_kept_ranking_hands_the_watch_the_stamp_of_the_folded_read(
    history: Path, tmp_path: Path
) -> None:
    """Shown first, a kept ranking carries the history's stamp from before the read folds
    what an ingest left waiting; the new ranking that replaces it brings the stamp of its
    own, folded, snapshot to the watch, so the fold is no change."""
    source = make_source(history, NOW, tmp_path / "quarantine.json")
    keep_ranking(source, load_main(source, suite=None, branch_kind=None).report, with_causes=False)
    _ingest_waiting(history, tmp_path, 2)
    read = StagedRead(source, kept=True)
    assert read.first().provisional
    app = FlaketuiApp(source, watch=False, first_read=read)
    notices_stay(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: _done_loading(app) and not app.main_screen.data.provisional)
        assert app.last_stamp == history_stamp(history)
        app.check_history()  # the watch's timer
        await until(pilot, lambda: all(w.is_finished for w in app.workers if w.group == "poll"))
        await pilot.pause()
        assert not [n for n in app._notifications if "history changed" in n.message]
