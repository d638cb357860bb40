"""A new user's first team history, end to end against a real server: two pytest sessions
record into it at the same time, a desk syncs a replica, opens the app on it and quarantines
the flaky test; the next session skips it. The README's quickstart needs none of it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from flaketui.cli import cli
from flaketui.core.quarantine.skipfile import read_skip_file

ROOT = Path(__file__).resolve().parents[2]
SIZE = (160, 48)
FLAKY = "test_shop.py::test_checkout"
# Each session waits, at its first test, until the other session has started too: the two
# recorders are open at the same time. Polled against a deadline, never slept blind.
SUITE = """
import os
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def test_both_sessions_run_at_once():
    me, other = os.environ["SESSION"], os.environ["OTHER"]
    (HERE / f"started-{me}").touch()
    deadline = time.monotonic() + 60
    while not (HERE / f"started-{other}").exists():
        assert time.monotonic() < deadline, "the other session never started"
        time.sleep(0.05)


def test_cart():
    pass


@pytest.mark.flaky(reruns=1)
def test_checkout():
    mark = HERE / f"tried-{os.environ['SESSION']}"
    if not mark.exists():
        mark.touch()
        assert False, "payment gateway timed out"
"""
PLUGINS = ("-p", "xdist.plugin", "-p", "pytest_rerunfailures", "-p", "flaketui.pytest_plugin")


def session_env(**extra: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("GITHUB_", "GITLAB_", "CI", "BUILDKITE", "CIRCLE", "JENKINS"))
        and name not in ("PYTEST_ADDOPTS", "FLAKETUI_SKIP_FILE")
    }
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env.update(extra)
    return env


def pytest_session(project: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *PLUGINS, *args],
        cwd=project,
        env=session_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finished(process: subprocess.Popen[str]) -> tuple[int, str]:
    output, _ = process.communicate(timeout=300)
    return process.returncode, output


async def _settle(pilot: object) -> None:
    app = pilot.app  # type: ignore[attr-defined]
    for _ in range(3):
        await app.workers.wait_for_complete()
        await pilot.pause()  # type: ignore[attr-defined]


async def quarantine_in_the_app(url: str, skip_file: Path, cache: Path) -> None:
    """`flaketui URL`'s path: the replica in the cache, synced; press q, then Ctrl+S."""
    from flaketui.cli.commands.open import history_display, prepare_history
    from flaketui.tui.app import make_app
    from flaketui.tui.screens.quarantine_modal import QuarantineModal
    from flaketui.tui.widgets.flake_table import FlakeTable

    with click.Context(cli) as ctx:
        path = prepare_history(url)
        assert path.is_relative_to(cache)
        display = history_display(url)
        app = make_app(path, skip_file=skip_file, cursor_blink=False, watch=False, display=display)
        async with app.run_test(size=SIZE) as pilot:
            await _settle(pilot)
            # The header names the server, its password masked, not the cache file.
            header = str(app.main_screen.query_one("#header").render())
            assert display is not None and display.split(" ")[0] in header
            assert "(local replica)" in header and str(path) not in header
            assert url.split(":")[2].split("@")[0] not in header  # the password
            # Two runs are too few for a verdict: the All view lists the test, worst first.
            await pilot.press("4")
            await _settle(pilot)
            row = app.main_screen.query_one(FlakeTable).current_row
            assert row is not None and row.target == FLAKY
            await pilot.press("q")
            await pilot.pause()
            assert isinstance(app.screen, QuarantineModal)
            await pilot.press("ctrl+s")
            await _settle(pilot)
        ctx.close()  # what ends the command: the app's audit row goes to the server


def test_two_sessions_a_replica_the_app_and_a_quarantine(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    project = tmp_path / "shop"
    project.mkdir()
    (project / "test_shop.py").write_text(SUITE)
    # 1. Two CI jobs record into the server at the same time.
    jobs = [
        pytest_session(project, "--flaketui-db", pg_url, SESSION=me, OTHER=other)
        for me, other in (("a", "b"), ("b", "a"))
    ]
    for code, output in map(finished, jobs):
        assert code == 0, output
        assert "3 passed, 1 rerun" in output, output
        assert pg_url.split(":")[2].split("@")[0] not in output  # the password
    # 2. A desk syncs a replica.
    replica = tmp_path / "history.db"
    result = CliRunner().invoke(cli, ["sync", pg_url, str(replica)])
    assert result.exit_code == 0, result.output
    assert "2 runs and 8 results added" in result.output
    # 3. The app on the server's replica (`flaketui URL`): quarantine the flaky test.
    skip_file = project / ".quarantine.json"
    asyncio.run(quarantine_in_the_app(pg_url, skip_file, tmp_path / "cache"))
    skip = read_skip_file(skip_file, explicit=True)
    assert skip is not None and list(skip.entries) == [FLAKY]
    import psycopg

    with psycopg.connect(pg_url) as conn:
        audit = conn.execute("SELECT action, test_id, source FROM audit_log").fetchall()
    assert audit == [("quarantine", FLAKY, "app")]
    # 4. The next session honours the skip file written beside the suite.
    code, output = finished(pytest_session(project, "-k", "not at_once", SESSION="c", OTHER="c"))
    assert code == 0, output
    assert f"deselected 1 quarantined test (mode skip):\n  {FLAKY}" in output, output
    assert "1 passed, 2 deselected" in output, output


def test_the_readme_quickstart_needs_no_server() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quickstart = readme.split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    assert ".venv/bin/flaketui sample_data/history.db" in quickstart
    assert "postgres" not in quickstart.lower() and "[postgres]" not in quickstart
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert not any(dep.lower().startswith("psycopg") for dep in project["dependencies"])
    assert any(d.startswith("psycopg") for d in project["optional-dependencies"]["postgres"])
