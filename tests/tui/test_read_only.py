"""Opening a history only to read it leaves the file and its directory exactly as they were."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pilots import SAFETY_S, app_on, settle
from tui_history import NOW

from flaketui.core.errors import HistoryError
from flaketui.core.history import journal
from flaketui.core.ingest.writer import RunRecorder
from flaketui.core.models import RunMeta
from flaketui.tui.app import READ_ONLY_NOTICE, FlaketuiApp
from flaketui.tui.history_access import check_history, open_reader, tidy_sidecars, uses_wal
from flaketui.tui.loaders import Source
from flaketui.tui.screens.quarantine_modal import QuarantineModal
from tests.connections import open_connection

SIZE = (160, 48)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _sidecars(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name + "-"))


async def _open_and_quit(app: FlaketuiApp, *keys: str) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.main_screen.data is not None
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        await settle(pilot)
        await pilot.press("ctrl+q")


def _copy_sample(sample_history: Path, tmp_path: Path) -> Path:
    target = tmp_path / "sample" / "history.db"
    target.parent.mkdir()
    shutil.copyfile(sample_history, target)
    return target


async def test_the_sample_opens_and_quits_unchanged(sample_history: Path, tmp_path: Path) -> None:
    history = _copy_sample(sample_history, tmp_path)
    before = _digest(history)
    app = app_on(history, tmp_path)
    await _open_and_quit(app, "down", "down")
    assert not app.source.readonly
    assert _digest(history) == before
    assert _sidecars(history) == []


async def test_a_wal_history_leaves_no_wal_or_shm(history: Path, tmp_path: Path) -> None:
    # Histories written by ingest are in WAL mode; a mode=ro reader would leave -wal and -shm.
    assert uses_wal(history)
    before = _digest(history)
    await _open_and_quit(app_on(history, tmp_path))
    assert _digest(history) == before
    assert _sidecars(history) == []


async def test_after_a_quarantine_no_wal_or_shm_is_left(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, QuarantineModal)
        await pilot.press("ctrl+s")
        await settle(pilot)  # the write, then the reload it triggers
        assert app.main_screen.data is not None
        assert app.main_screen.data.quarantine  # the reload saw the entry
    assert (tmp_path / "quarantine.json").exists()
    assert _sidecars(history) == []


async def test_quitting_stops_every_read_the_app_started(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        first = list(app.reads)
        app.main_screen.reload()  # what a change of the history, or a write, starts
        await pilot.pause()
        reload = [read for read in app.reads if read not in first]
        assert len(reload) == 1  # the reload reads in a thread of its own, known to the app
    assert all(read.stopped for read in app.reads)
    assert app.stop_reads(SAFETY_S)
    assert not any(read.thread.is_alive() for read in app.reads)


def test_stopping_the_reads_waits_for_the_step_each_is_in(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reload still reading when the app quits: its reader must be closed before the process
    # ends, or the -wal and -shm files it holds stay beside the history.
    import flaketui.tui.startup as startup

    real = startup.load_in_stages
    reading_step = threading.Event()
    step_may_end = threading.Event()

    def slow_stages(source: Source, apart: Any = None) -> Iterator[object]:
        stages = real(source, apart)
        with closing(stages):
            yield next(stages)
            reading_step.set()
            step_may_end.wait()  # a long query of the next step, its reader open
            yield from stages

    monkeypatch.setattr(startup, "load_in_stages", slow_stages)
    app = app_on(history, tmp_path)
    read = app.start_read()
    read.first()
    read.ask(1)
    assert reading_step.wait(SAFETY_S)
    assert _sidecars(history) == ["history.db-shm", "history.db-wal"]  # a WAL reader is open
    read.stop()
    assert read.thread.is_alive()
    step_may_end.set()
    assert app.stop_reads(SAFETY_S)
    assert not read.thread.is_alive()
    assert _sidecars(history) == []  # its reader, the last connection, closed and tidied


def test_sidecars_a_read_only_reader_leaves_are_tidied(
    sample_history: Path, tmp_path: Path
) -> None:
    # A mode=ro reader opened while the file used a rollback journal goes on reading after a
    # writer switched the file to WAL; closing last, it cannot remove the -wal and -shm files.
    history = _copy_sample(sample_history, tmp_path)
    assert not uses_wal(history)
    early = open_reader(history)
    writer = sqlite3.connect(history)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("INSERT INTO meta (key, value) VALUES ('tidy-test', '1')")
    writer.commit()
    assert early.conn.execute("SELECT value FROM meta WHERE key = 'tidy-test'").fetchone()
    writer.close()
    early.conn.close()
    assert _sidecars(history) == ["history.db-shm", "history.db-wal"]
    tidy_sidecars(history)
    assert _sidecars(history) == []
    conn = sqlite3.connect(history)  # the write is in the file itself now
    assert conn.execute("SELECT value FROM meta WHERE key = 'tidy-test'").fetchone() == ("1",)
    conn.close()


def test_tidying_leaves_the_sidecars_another_connection_needs(history: Path) -> None:
    other = sqlite3.connect(history)
    other.execute("SELECT count(*) FROM runs").fetchone()
    assert "history.db-wal" in _sidecars(history)
    tidy_sidecars(history)
    assert "history.db-wal" in _sidecars(history)  # still open elsewhere: kept
    other.close()
    assert _sidecars(history) == []


def _record_notices(app: FlaketuiApp) -> list[str]:
    """Every message the app notifies from now on, as it is posted: a notice shown while a slow
    machine still loads may have timed out and left the screen before the test looks."""
    seen: list[str] = []
    notify = app.notify

    def recording(message: str, *args: Any, **kwargs: Any) -> None:
        seen.append(message)
        notify(message, *args, **kwargs)

    app.notify = recording  # type: ignore[method-assign]
    return seen


@pytest.mark.parametrize("wal", [False, True], ids=["rollback-journal", "wal"])
async def test_a_chmod_444_history_opens_read_only_and_says_so(
    sample_history: Path, tmp_path: Path, wal: bool
) -> None:
    history = _copy_sample(sample_history, tmp_path)
    if wal:
        import sqlite3

        conn = sqlite3.connect(history)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.close()
    history.chmod(0o444)
    before = _digest(history)
    app = app_on(history, tmp_path)
    assert app.source.readonly
    notices = _record_notices(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.main_screen.data is not None  # it still reads
        assert "read-only" in str(app.main_screen.query_one("#header").render())
        await pilot.press("q")  # quarantine is refused with a message, nothing written
        await pilot.pause()
        assert not isinstance(app.screen, QuarantineModal)
    assert READ_ONLY_NOTICE in notices
    assert any("nothing was written" in n for n in notices)
    assert not (tmp_path / "quarantine.json").exists()
    assert _digest(history) == before
    if not wal:
        assert _sidecars(history) == []  # mode=ro on a rollback journal: no file at all
    # A WAL-mode history read with mode=ro may keep a -shm: it is how a read stays consistent
    # with a process writing the file meanwhile (tests/reliability/test_rel_concurrency.py).


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "does not exist"), (b"", "is empty"), (b"not sqlite at all", "not a SQLite")],
)
def test_the_reader_refuses_bad_files_in_one_line(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    path = tmp_path / "history.db"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(HistoryError, match=message):
        open_reader(path)
    if content is not None:
        assert path.read_bytes() == content


def test_immutable_only_when_mode_ro_cannot_open_a_file_nobody_may_write(
    history: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flaketui.tui import history_access

    tried: list[str] = []
    real_connect = history_access._connect

    def connect(path: Path, how: str) -> object:
        tried.append(how)
        if how == "ro":
            raise HistoryError(f"{path}: unable to open database file")
        return real_connect(path, how)

    monkeypatch.setattr(history_access, "_connect", connect)
    history.chmod(0o444)
    history_access.open_reader(history).conn.close()
    assert tried == ["ro", "immutable"]
    history.chmod(0o644)  # writable and in WAL mode: the plain reader, never immutable
    tried.clear()
    history_access.open_reader(history).conn.close()
    assert tried == ["plain"]


def _journal_a_run(history: Path) -> None:
    """A pytest recorder's run, still in the attempt journal (never opened since)."""
    conn = open_connection(history, fold=False)
    recorder = RunRecorder(conn, RunMeta(run_id="journaled", ts=NOW - timedelta(hours=1)))
    recorder.append(
        [
            ("tests/test_new.py::test_journaled", "fail", 12, 1, None, None, None,
             "AssertionError: late", None, None),
            ("tests/test_new.py::test_journaled", "pass", 10, 2, None),
        ]
    )  # fmt: skip
    recorder.finish()
    conn.close()


async def test_the_app_stores_journaled_attempts_before_it_reads(
    history: Path, tmp_path: Path
) -> None:
    _journal_a_run(history)
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        data = app.main_screen.data
        assert data is not None
        [new] = [t for t in data.report.tests if t.test_id == "tests/test_new.py::test_journaled"]
        assert new.scores.flaky_runs == 1
        await pilot.press("ctrl+q")
    with closing(sqlite3.connect(history)) as conn:
        assert journal.waiting(conn) == 0
    assert _sidecars(history) == []


@pytest.mark.parametrize("opening", [open_reader, check_history])
def test_a_read_only_history_with_journaled_attempts_is_refused_in_one_line(
    history: Path, opening: Callable[[Path], object]
) -> None:
    _journal_a_run(history)
    history.chmod(0o444)
    try:
        with pytest.raises(HistoryError, match="not stored yet, and is read-only here"):
            opening(history)
    finally:
        history.chmod(0o644)
