"""`flaketui open` validates the history before any screen appears."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli.commands import cli
from flaketui.core.history.store import SCHEMA_VERSION
from flaketui.tui.loaders import read_skip


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def _error_line(output: str) -> str:
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    assert lines[0].startswith("Error: "), output
    return lines[0]


def test_missing_history_is_one_line_error(tmp_path: Path) -> None:
    code, output = _run(str(tmp_path / "nope.db"))
    assert code == 1
    assert "does not exist" in _error_line(output)
    assert not (tmp_path / "nope.db").exists()


def test_directory_is_refused(tmp_path: Path) -> None:
    code, output = _run("open", str(tmp_path))
    assert code == 1
    assert "directory" in _error_line(output)


def test_non_sqlite_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    path.write_text("not a database\n")
    code, output = _run(str(path))
    assert code == 1
    assert "not a SQLite database" in _error_line(output)
    assert path.read_text() == "not a database\n"


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    code, output = _run(str(path))
    assert code == 1
    assert "newer" in _error_line(output)


@pytest.mark.parametrize("now", ["yesterday", ""])
def test_bad_now_is_refused(tmp_path: Path, now: str) -> None:
    # An empty value is one too, as in every other command (it once opened the app as of now).
    code, output = _run(str(tmp_path / "x.db"), "--now", now)
    assert code == 1
    assert f"not an ISO 8601 timestamp: {now!r}" in _error_line(output)


def test_valid_history_starts_the_app(monkeypatch: pytest.MonkeyPatch, history: Path) -> None:
    started: list[object] = []
    from flaketui.tui.app import FlaketuiApp

    monkeypatch.setattr(FlaketuiApp, "run", lambda self: started.append(self))
    code, output = _run(str(history), "--now", "2026-11-30T18:00:00Z", "--skip-file", "q.json")
    assert code == 0, output
    app = started[0]
    assert isinstance(app, FlaketuiApp)
    # The history was being read before the app ran; the read is stopped once it ends.
    assert app.first_read is not None and app.first_read.stopped
    assert app.source.requested_now is not None
    assert app.source.skip_path.name == "q.json"


def test_a_server_is_named_by_its_masked_url_not_its_replica_file() -> None:
    from flaketui.cli.commands.open import history_display

    shown = history_display("postgresql://ci:s3cret@db.example:5432/flaky")
    assert shown is not None and "s3cret" not in shown
    assert shown.startswith("postgresql://ci:") and shown.endswith(
        "db.example:5432/flaky (local replica)"
    )
    assert history_display(Path("history.db")) is None


def test_a_named_pipe_as_the_skip_file_is_the_apps_problem_line_not_a_wait(
    tmp_path: Path,
) -> None:
    # The app reads the skip file in its reading thread: a named pipe would hold that thread
    # in open() for good, and the app could neither load nor quit.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert read_skip(fifo) == (None, f"{fifo}: is a pipe, not a skip file")
