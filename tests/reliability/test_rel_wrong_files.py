"""Wrong files: each gets one clear `Error: ...` line naming it, and is never modified."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from reliability_support import (
    TS,
    assert_one_line_error,
    child_command,
    child_env,
    file_state,
    invoke,
    junit_case,
    snapshot,
    write_report,
)

from flaketui.core.history.store import SCHEMA_VERSION, open_history
from flaketui.core.ingest.writer import ingest_reports
from flaketui.core.models import RunMeta
from tests.history_damage import damage

NOW = ["--now", "2026-11-02T00:00:00Z"]
TEST_ID = "pkg.Mod::t1"
EMPTY_SKIP_FILE = '{\n  "format": "flaketui-skip-file",\n  "tests": {},\n  "version": 1\n}\n'
# The skip file release is given lists its test: a release the skip file alone refuses is
# refused before the history is opened.
LISTED_SKIP_FILE = (
    '{"format": "flaketui-skip-file", "tests": {"' + TEST_ID + '": {}}, "version": 1}\n'
)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No pyproject.toml, git repository or skip-file variable from the surroundings."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLAKETUI_SKIP_FILE", raising=False)
    # Should a bad history get past the checks, `open` must fail the test, not wait for keys.
    monkeypatch.setattr("flaketui.tui.app.FlaketuiApp.run", _app_must_not_start)


def _app_must_not_start(*args: object, **kwargs: object) -> None:
    raise AssertionError("the app started on a history that should have been refused")


def good_history(path: Path) -> Path:
    report = write_report(
        path.with_suffix(".xml"), [junit_case("pkg.Mod", f"t{n}", "fail") for n in range(3)]
    )
    history = open_history(path)
    ingest_reports(history, [report], RunMeta(run_id="r1", ts=TS))
    history.conn.close()
    return path


def commands(history: Path, tmp_path: Path) -> dict[str, list[str | Path]]:
    """Every command that opens a history, with history as its database."""
    report = write_report(tmp_path / "new.xml", [junit_case("pkg.Mod", "t9")])
    other = good_history(tmp_path / "other.db")
    skip_file = tmp_path / "q.json"
    if not skip_file.exists():
        skip_file.write_text(EMPTY_SKIP_FILE)
    listing = tmp_path / "q-release.json"
    if not listing.exists():
        listing.write_text(LISTED_SKIP_FILE)
    skip: list[str | Path] = ["--skip-file", skip_file]
    return {
        "ingest": ["ingest", history, report, "--no-detect", "--run-id", "r2"],
        "report": ["report", history, *NOW],
        "open": ["open", history, *NOW],
        "incident-list": ["incident", "list", history, *NOW],
        "pivot": ["pivot", history, TEST_ID, *NOW],
        "export": ["export", history, "--format", "json", *skip, *NOW],
        "quarantine": ["quarantine", history, TEST_ID, "--reason", "r", *skip, *NOW],
        "release": ["release", history, TEST_ID, "--skip-file", listing, *NOW],
        "lifecycle": ["lifecycle", history, *NOW],
        "merge-into": ["merge", history, other],
        "merge-from": ["merge", other, history],
    }


def assert_skip_files_untouched(tmp_path: Path) -> None:
    """The skip files commands() gives are as it wrote them."""
    assert (tmp_path / "q.json").read_text() == EMPTY_SKIP_FILE
    assert (tmp_path / "q-release.json").read_text() == LISTED_SKIP_FILE


# The names of commands(), known before any test runs: building its arguments writes files.
COMMAND_NAMES = sorted(
    (
        "ingest", "report", "open", "incident-list", "pivot", "export", "quarantine", "release",
        "lifecycle", "merge-into", "merge-from",
    )
)  # fmt: skip


def test_command_names_are_those_of_commands(tmp_path: Path) -> None:
    assert sorted(commands(tmp_path / "h.db", tmp_path)) == COMMAND_NAMES


NOT_SQLITE = {
    # SQLite itself would take a file this short for an empty database and overwrite it.
    "one-newline": b"\n",
    "text": b"hello, this is my shopping list\n",
    "junit-xml": b'<?xml version="1.0"?>\n<testsuite name="s"><testcase name="t"/></testsuite>\n',
    "binary": bytes(range(256)) * 64,
    "sqlite-header-then-garbage": b"SQLite format 3\x00" + b"\xff" * 4000,
}


@pytest.mark.parametrize("kind", sorted(NOT_SQLITE))
@pytest.mark.parametrize("command", COMMAND_NAMES)
def test_non_sqlite_history_is_refused_and_untouched(
    tmp_path: Path, kind: str, command: str
) -> None:
    history = tmp_path / "history.db"
    history.write_bytes(NOT_SQLITE[kind])
    args = commands(history, tmp_path)[command]
    before = file_state(history)
    result = invoke(*args)
    assert_one_line_error(result, str(history))
    assert file_state(history) == before
    assert_skip_files_untouched(tmp_path)


@pytest.mark.parametrize("command", [name for name in COMMAND_NAMES if name != "open"])
def test_damaged_history_gets_one_line_naming_it(tmp_path: Path, command: str) -> None:
    """A history damaged past its header fails where a read first meets the damage, anywhere in
    a command: one line naming the file, never a traceback (the app: tests/tui)."""
    history = good_history(tmp_path / "history.db")
    damage(history)
    args = commands(history, tmp_path)[command]
    result = invoke(*args)
    assert_one_line_error(result, str(history), "damaged (database disk image is malformed)")
    assert_skip_files_untouched(tmp_path)


@pytest.mark.parametrize(
    "command", ["report", "open", "incident-list", "pivot", "export", "lifecycle", "merge-from"]
)
def test_empty_history_is_refused_by_readers_and_untouched(tmp_path: Path, command: str) -> None:
    history = tmp_path / "history.db"
    history.touch()
    args = commands(history, tmp_path)[command]
    before = file_state(history)
    result = invoke(*args)
    assert_one_line_error(result, str(history), "is empty")
    assert file_state(history) == before


def test_empty_report_is_refused_and_the_history_untouched(tmp_path: Path) -> None:
    history = good_history(tmp_path / "history.db")
    before = snapshot(history)
    empty = tmp_path / "empty.xml"
    empty.touch()
    result = invoke("ingest", history, empty, "--no-detect")
    assert_one_line_error(result, str(empty), "empty file")
    assert snapshot(history) == before


@pytest.mark.parametrize("command", COMMAND_NAMES)
def test_history_from_a_newer_flaketui_is_refused_and_untouched(
    tmp_path: Path, command: str
) -> None:
    history = good_history(tmp_path / "history.db")
    conn = sqlite3.connect(history)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    args = commands(history, tmp_path)[command]
    before = file_state(history)
    result = invoke(*args)
    assert_one_line_error(result, str(history), "newer than this flaketui supports")
    assert file_state(history) == before


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Make path unwritable even for root (immutable flag), else by its mode bits."""
    if os.geteuid() == 0:
        flagged = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
        if flagged.returncode != 0:
            pytest.skip("running as root without chattr: cannot make a file read-only")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        mode = path.stat().st_mode
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(mode)


def test_read_only_history_is_read_and_never_written(tmp_path: Path) -> None:
    history = good_history(tmp_path / "history.db")
    with read_only(history):
        assert not os.access(history, os.W_OK)
        before = file_state(history)
        # Readers work, the app would open it read-only and say so in its header.
        report = invoke("report", history, *NOW)
        assert report.exit_code == 0, report.output
        assert TEST_ID in report.output
        from flaketui.tui.app import make_app

        assert make_app(history, watch=False).source.readonly
        # Writers refuse with one line naming the file.
        ingest = invoke(*commands(history, tmp_path)["ingest"])
        assert_one_line_error(ingest, str(history))
        quarantine = invoke(*commands(history, tmp_path)["quarantine"])
        assert_one_line_error(quarantine, str(history))
        assert_skip_files_untouched(tmp_path)
        assert file_state(history) == before


BROKEN_SKIP_FILES = {
    "invalid-json": '{"format": "flaketui-skip-file", "version": 1, "tests": {\n',
    "trailing-comma": '{"format": "flaketui-skip-file", "version": 1, "tests": {},}\n',
    "bad-version": '{"format": "flaketui-skip-file", "version": "one", "tests": {}}\n',
    "tests-a-list": '{"format": "flaketui-skip-file", "version": 1, "tests": []}\n',
    "bad-mode": '{"format": "flaketui-skip-file", "version": 1, "tests": {"a": {"mode": "x"}}}\n',
    "bad-date": (
        '{"format": "flaketui-skip-file", "version": 1,'
        ' "tests": {"a": {"expires": "next tuesday"}}}\n'
    ),
    "no-marker": '{"tests": {}}\n',
    "not-utf8": '{"format": "flaketui-skip-file", "version": 1, "tests": {"\xe9": {}}}\n',
}


@pytest.mark.parametrize("kind", sorted(BROKEN_SKIP_FILES))
@pytest.mark.parametrize("command", ["quarantine", "release", "export"])
def test_hand_broken_skip_file_is_refused_and_untouched(
    tmp_path: Path, kind: str, command: str
) -> None:
    history = good_history(tmp_path / "history.db")
    skip = tmp_path / ("q-release.json" if command == "release" else "q.json")
    text = BROKEN_SKIP_FILES[kind]
    skip.write_bytes(text.encode("latin-1" if kind == "not-utf8" else "utf-8"))
    before_skip, before_history = file_state(skip), snapshot(history)
    result = invoke(*commands(history, tmp_path)[command])
    assert_one_line_error(result, str(skip))
    assert file_state(skip) == before_skip
    assert snapshot(history) == before_history  # no audit-log row for a write that failed


def test_a_history_locked_by_another_writer_gets_one_line_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds the write lock past the busy timeout (shortened here from 30 s)."""
    monkeypatch.setattr("flaketui.core.history.store.BUSY_TIMEOUT_MS", 200)
    history = good_history(tmp_path / "history.db")
    before = snapshot(history)
    holder = sqlite3.connect(history, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        for command in ("ingest", "quarantine"):
            result = invoke(*commands(history, tmp_path)[command])
            assert_one_line_error(result, "database is locked")
        assert_skip_files_untouched(tmp_path)  # no entry without its audit
        report = invoke("report", history, *NOW)  # readers are not blocked by a writer
        assert report.exit_code == 0, report.output
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert snapshot(history) == before


def test_error_messages_stay_one_line_whatever_the_file_is_called(tmp_path: Path) -> None:
    """A newline or tab in a file name cannot split the error over lines (or forge a second)."""
    history = good_history(tmp_path / "history.db")
    report = tmp_path / "nightly\nError: forged\t.xml"
    report.write_text("this is not XML\n")
    result = invoke("ingest", history, report, "--no-detect")
    assert_one_line_error(result, "nightly Error: forged .xml")
    skip = tmp_path / "broken\nskip.json"
    skip.write_text("{\n")
    result = invoke("export", history, "--format", "json", "--skip-file", skip, *NOW)
    assert_one_line_error(result, "broken skip.json")


def test_the_installed_command_line_prints_one_line_on_stderr(tmp_path: Path) -> None:
    """Through the real entry point in a fresh process (not click's test runner): exit 1, one
    `Error:` line on stderr, nothing on stdout, no traceback."""
    history = good_history(tmp_path / "history.db")
    not_xml = tmp_path / "report.xml"
    not_xml.write_text("<testsuite><testcase name='t'>\n")
    not_sqlite = tmp_path / "notes.db"
    not_sqlite.write_bytes(NOT_SQLITE["text"])
    broken_skip = tmp_path / "q.json"
    broken_skip.write_text(BROKEN_SKIP_FILES["trailing-comma"])
    cases: list[tuple[list[str | Path], Path]] = [
        (["ingest", history, not_xml, "--no-detect"], not_xml),
        (["report", not_sqlite, *NOW], not_sqlite),
        (
            ["quarantine", history, TEST_ID, "--reason", "r", "--skip-file", broken_skip],
            broken_skip,
        ),
    ]
    for args, named in cases:
        before = file_state(named)
        proc = subprocess.run(
            child_command("cli", *args), env=child_env(), capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 1, (args, proc.stderr)
        assert proc.stdout == ""
        assert proc.stderr.startswith("Error: ") and proc.stderr.count("\n") == 1, proc.stderr
        assert str(named) in proc.stderr and "Traceback" not in proc.stderr
        assert file_state(named) == before
