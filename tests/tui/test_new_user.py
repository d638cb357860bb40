"""The app as a new user meets it: trying it never dirties the clone, and it says what it did."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from pilots import app_on, notices_stay, settle
from textual.widgets import Input, Static
from tui_history import NOW

from flaketui.cli import cli
from flaketui.core.quarantine.skipfile import read_skip_file
from flaketui.core.timeutil import parse_iso, utc_now
from flaketui.tui.app import FlaketuiApp, make_app
from flaketui.tui.clipboard import save_copy
from flaketui.tui.screens.detail import DetailScreen
from flaketui.tui.screens.export_modal import ExportModal
from flaketui.tui.widgets.flake_table import FlakeTable

SIZE = (160, 48)
GIT = ("git", "-c", "user.name=New User", "-c", "user.email=new@example.com")


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        [*GIT, *args], cwd=repo, capture_output=True, text=True, check=True, timeout=30
    )
    return done.stdout


def _audit(history: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(history)
    try:
        return conn.execute("SELECT action, source FROM audit_log ORDER BY id").fetchall()
    finally:
        conn.close()


@pytest.fixture
def clone(history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git work tree whose committed sample is the test history; the current directory."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "clone"
    (repo / "sample_data").mkdir(parents=True)
    shutil.copyfile(history, repo / "sample_data" / "history.db")
    (repo / ".gitignore").write_text(".quarantine.json.lock\n*.db-wal\n*.db-shm\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "sample")
    monkeypatch.chdir(repo)
    monkeypatch.delenv("FLAKETUI_SKIP_FILE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return repo


async def test_the_quickstart_key_tour_leaves_the_clone_clean(clone: Path, tmp_path: Path) -> None:
    sample = clone / "sample_data" / "history.db"
    before = hashlib.sha256(sample.read_bytes()).hexdigest()
    app: FlaketuiApp = make_app("sample_data/history.db", cursor_blink=False, watch=False)
    notices_stay(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("q")
        await settle(pilot)
        await pilot.press("ctrl+s")
        await settle(pilot)
        quarantined = [n.message for n in app._notifications if n.title == "Done"]
        await pilot.press("u")
        await settle(pilot)
        messages = [n.message for n in app._notifications]
    assert _git(clone, "status", "--porcelain", "--ignored=no") == ""
    assert hashlib.sha256(sample.read_bytes()).hexdigest() == before
    # The quarantine and the release did happen, in a trial copy the app named.
    assert quarantined and "trial copy" in quarantined[0], messages
    trial = app.source.path
    assert trial != sample.absolute() and trial.is_relative_to(tmp_path / "cache")
    assert _audit(trial) == [("quarantine", "app"), ("release", "app")]
    assert any(m.startswith("sample_data/history.db is tracked by git") for m in messages), messages


async def test_a_committed_history_with_runs_waiting_is_read_and_left_as_it_is(
    clone: Path,
) -> None:
    """A history committed after `flaketui ingest` holds runs whose rows wait for the fold:
    the app shows them, from a folded private copy, and the tracked file stays as it is."""
    sample = clone / "sample_data" / "history.db"
    report = clone / "run.xml"
    report.write_text(
        '<testsuite name="s"><testcase classname="tests.test_brand_new" name="test_arrived"'
        ' file="tests/test_brand_new.py"><failure message="boom">boom</failure></testcase>'
        "</testsuite>\n"
    )
    for index in range(2):
        args = ["ingest", str(sample), str(report), "--run-id", f"waiting-{index}"]
        args += ["--timestamp", f"2026-11-30T1{index}:30:00Z", "--no-detect"]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
    report.unlink()
    conn = sqlite3.connect(sample)
    assert conn.execute("SELECT count(*) FROM test_runs_waiting").fetchone() == (2,)
    conn.close()
    _git(clone, "add", ".")
    _git(clone, "commit", "-q", "-m", "two runs ingested")
    before = hashlib.sha256(sample.read_bytes()).hexdigest()
    app: FlaketuiApp = make_app("sample_data/history.db", now=NOW, cursor_blink=False, watch=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        data = app.main_screen.data
        assert data is not None
        [arrived] = [
            t for t in data.report.tests if t.test_id == "tests/test_brand_new.py::test_arrived"
        ]
        assert arrived.scores.runs == 2
        await pilot.press("ctrl+q")
    assert _git(clone, "status", "--porcelain", "--ignored=no") == ""
    assert hashlib.sha256(sample.read_bytes()).hexdigest() == before


async def test_an_action_is_stamped_with_the_wall_clock_not_with_now(
    history: Path, tmp_path: Path
) -> None:
    skip_path = tmp_path / "quarantine.json"
    app = make_app(history, now=NOW, skip_file=skip_path, cursor_blink=False, watch=False)
    started = utc_now().replace(microsecond=0)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.main_screen.data is not None and app.main_screen.data.report.now == NOW
        await pilot.press("q")
        await settle(pilot)
        await pilot.press("ctrl+s")
        await settle(pilot)
        # Its days left count from the wall clock too: 30, not 30 plus the days since --now.
        await pilot.press("3")
        await settle(pilot)
        row = app.main_screen.query_one(FlakeTable).current_row
    assert row is not None and "30d" in row.cell_source
    skip = read_skip_file(skip_path, explicit=True)
    assert skip is not None and len(skip.entries) == 1
    entry = next(iter(skip.entries.values()))
    assert entry.quarantined_at is not None and entry.quarantined_at >= started
    assert entry.expires is not None and entry.expires > started
    conn = sqlite3.connect(history)
    try:
        (stamp,) = conn.execute("SELECT ts FROM audit_log").fetchone()
    finally:
        conn.close()
    assert parse_iso(stamp) >= started


async def test_a_broken_skip_file_is_shown_as_broken_not_as_empty(
    history: Path, tmp_path: Path
) -> None:
    skip_path = tmp_path / "quarantine.json"
    skip_path.write_text('{"version": 1, "tests": {\n')
    app = make_app(history, now=NOW, skip_file=skip_path, cursor_blink=False, watch=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)
        status = str(app.main_screen.query_one("#loading", Static).content)
    assert "Nothing quarantined" not in status
    assert status.startswith("⚠ The skip file cannot be read: ") and str(skip_path) in status
    assert "\n" not in status


async def test_copy_says_where_the_text_went_and_keeps_it_in_a_file(
    history: Path, tmp_path: Path
) -> None:
    app = app_on(history, tmp_path)
    notices_stay(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DetailScreen) and screen.data is not None
        await pilot.press("c")
        await settle(pilot)
        repro = screen.data.repro
        notes = [n for n in app._notifications if repro in n.message]
    assert app.clipboard == repro
    assert [n.title for n in notes] == ["Sent to the terminal's clipboard (OSC 52)"]
    saved = tmp_path / "cache" / "flaketui" / "copied.txt"
    assert saved.read_text() == repro + "\n"
    assert notes[0].message.endswith(f"it is also in {saved}.")


def test_inside_tmux_the_copy_is_also_in_the_paste_buffer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    socket = tmp_path / "tmux.sock"
    server = ["tmux", "-S", str(socket)]
    subprocess.run([*server, "new-session", "-d", "-s", "copy"], check=True, timeout=30)
    try:
        env = {"PATH": os.environ["PATH"], "TMUX": f"{socket},0,0"}
        outcome = save_copy("pytest 'tests/a.py::t' --count=50", env)
        shown = subprocess.run(
            [*server, "show-buffer"], capture_output=True, text=True, check=True, timeout=30
        ).stdout
    finally:
        subprocess.run([*server, "kill-server"], check=False, timeout=30)
    assert outcome.tmux_buffer and shown == "pytest 'tests/a.py::t' --count=50"
    assert "tmux's paste buffer (prefix ])" in outcome.message("x")
    # Outside tmux, only the file.
    assert not save_copy("x", {"PATH": os.environ["PATH"]}).tmux_buffer


async def test_a_long_signature_wraps_under_its_own_text(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=(72, 60)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        box = app.screen.query_one("#signatures", Static)
        lines = [box.render_line(y).text.rstrip() for y in range(box.size.height)]
    counted = [line for line in lines if re.match(r"^\s*\d+ runs? ", line)]
    assert counted and "database is locked" in counted[0], lines
    text_column = counted[0].index("sqlite")
    # Every other line (the wrapped rest of a signature, its example) starts under the text.
    for line in lines:
        if line.strip() and line not in counted:
            assert line[:text_column].strip() == "", lines
    assert any(line.strip().startswith("e.g. ") for line in lines), lines


async def test_counts_of_one_are_singular_in_the_app(history: Path, tmp_path: Path) -> None:
    app = app_on(history, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"login", "enter")
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        assert isinstance(app.screen, ExportModal)
        title = str(app.screen.query_one(".dialog-title", Static).content)
    assert title == "Export the flaky view (1 test)"


async def test_the_export_dialog_proposes_a_file_outside_the_work_tree(
    clone: Path, tmp_path: Path
) -> None:
    app = make_app("sample_data/history.db", now=NOW, cursor_blink=False, watch=False)
    notices_stay(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        proposed = Path(app.screen.query_one("#path", Input).value)
        await pilot.press("ctrl+s")
        await settle(pilot)
        messages = [n.message for n in app._notifications]
    assert proposed == tmp_path / "cache" / "flaketui" / "exports" / "flaketui-flaky.json"
    assert json.loads(proposed.read_text())
    assert any(str(proposed) in m for m in messages), messages
    assert _git(clone, "status", "--porcelain", "--ignored=no") == ""
