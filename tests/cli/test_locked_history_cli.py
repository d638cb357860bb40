"""A history another connection keeps locked: every command says so in one line naming the file."""

from __future__ import annotations

import gc
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from flaketui.cli.commands import cli
from flaketui.core.errors import HistoryLockedError
from flaketui.core.history.store import transaction
from tests.connections import open_connection
from tests.process_state import collector_off, handles_on

NOW = ["--now", "2026-11-02T00:00:00Z"]
EMPTY_SKIP_FILE = '{\n  "format": "flaketui-skip-file",\n  "tests": {},\n  "version": 1\n}\n'
# A skip file listing the test release is given: a release the skip file refuses is refused
# before the history is opened.
LISTED_SKIP_FILE = '{"format": "flaketui-skip-file", "tests": {"m.C::t0": {}}, "version": 1}\n'
LOCKED = "Error: history.db: database is locked (another process is writing to it; retry)\n"
WRITERS: dict[str, list[str]] = {
    "ingest": ["ingest", "history.db", "new.xml", "--no-detect", "--run-id", "r2"],
    "quarantine": ["quarantine", "history.db", "m.C::t0", "--reason", "r", "--skip-file", "q.json"],
    "release": ["release", "history.db", "m.C::t0", "--skip-file", "listed.json"],
    "incident-add": ["incident", "add", "history.db", "outage", "--from", NOW[1], "--to", NOW[1]],
    "merge-into": ["merge", "history.db", "other.db"],
    "prune": ["prune", "history.db", "--older-than", "1"],
    "resign": ["resign", "history.db"],
}
READERS: dict[str, list[str]] = {
    "report": ["report", "history.db", *NOW],
    "pivot": ["pivot", "history.db", "m.C::t0", *NOW],
    "export": ["export", "history.db", "--format", "json", "--skip-file", "q.json", *NOW],
    "lifecycle": ["lifecycle", "history.db", *NOW],
    "incident-list": ["incident", "list", "history.db", *NOW],
    "merge-from": ["merge", "other.db", "history.db"],
    "open": ["open", "history.db"],  # refused before any screen is drawn
}


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def write_report(path: Path, name: str) -> None:
    path.write_text(
        f'<testsuite><testcase classname="m.C" name="{name}"><failure message="boom"/>'
        "</testcase></testsuite>\n"
    )


@pytest.fixture(autouse=True)
def histories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """history.db and other.db in the working directory, and a busy timeout of 50 ms (not 30 s)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLAKETUI_SKIP_FILE", raising=False)
    for n, db in enumerate(["history.db", "other.db"]):
        write_report(tmp_path / f"r{n}.xml", f"t{n}")
        result = invoke("ingest", db, f"r{n}.xml", "--no-detect", "--run-id", f"r{n}")
        assert result.exit_code == 0, result.output
    write_report(tmp_path / "new.xml", "t9")
    (tmp_path / "q.json").write_text(EMPTY_SKIP_FILE)
    (tmp_path / "listed.json").write_text(LISTED_SKIP_FILE)
    gc.collect()  # no connection of the set-up left open: an exclusive holder must get its lock
    monkeypatch.setattr("flaketui.core.history.store.BUSY_TIMEOUT_MS", 50)


@contextmanager
def held(path: Path, *, readers_too: bool) -> Iterator[None]:
    """Another connection holding the write lock (readers_too: every lock, as WAL allows)."""
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        if readers_too:
            holder.execute("PRAGMA locking_mode = EXCLUSIVE")
            holder.execute("BEGIN EXCLUSIVE")
            holder.execute("INSERT INTO meta (key, value) VALUES ('held', '1')")
        else:
            holder.execute("BEGIN IMMEDIATE")
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_a_writer_on_a_write_locked_history_names_it_in_one_line(
    tmp_path: Path, command: str
) -> None:
    with held(tmp_path / "history.db", readers_too=False):
        result = invoke(*WRITERS[command])
    assert result.exit_code == 1, result.output
    assert result.output == LOCKED


def test_every_command_on_an_exclusively_locked_history_names_it_in_one_line(
    tmp_path: Path,
) -> None:
    with held(tmp_path / "history.db", readers_too=True):
        outputs = {name: invoke(*args).output for name, args in {**WRITERS, **READERS}.items()}
    assert outputs == dict.fromkeys(outputs, LOCKED)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd")
@pytest.mark.parametrize("command", sorted({**WRITERS, **READERS}))
def test_a_command_refused_on_a_locked_history_leaves_it_open_nowhere(
    tmp_path: Path, command: str
) -> None:
    # An sqlite3 connection sits in a reference cycle: one a refusal left open would hold the
    # file until the garbage collector came by, so the collector is held off to see it. SQLite
    # keeps a closed connection's descriptor while another of the process holds locks on the
    # file: they are counted once the holder is gone.
    history = tmp_path / "history.db"
    before = handles_on(history)
    with collector_off():
        with held(history, readers_too=True):
            result = invoke(*({**WRITERS, **READERS}[command]))
        after = handles_on(history)
    assert result.output == LOCKED
    assert after == before


def test_a_sqlite_error_past_the_core_names_the_history_the_command_opened(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The command line's last resort: a raw OperationalError still says which file."""

    def locked(*args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr("flaketui.cli.commands.report.build_report", locked)
    assert invoke(*READERS["report"]).output == LOCKED

    def broken(*args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr("flaketui.cli.commands.report.build_report", broken)
    assert invoke(*READERS["report"]).output == "Error: history.db: disk I/O error\n"


def test_a_locked_transaction_is_still_an_operational_error(tmp_path: Path) -> None:
    """Best-effort callers (the recorder, the scheme stamp) catch OperationalError and go on."""
    conn = open_connection("history.db")
    try:
        with held(tmp_path / "history.db", readers_too=False):
            message = r"^history\.db: database is locked"
            with pytest.raises(HistoryLockedError, match=message), transaction(conn):
                pass  # pragma: no cover
            with pytest.raises(sqlite3.OperationalError), transaction(conn):
                pass  # pragma: no cover
    finally:
        conn.close()
