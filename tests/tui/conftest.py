"""Fixtures of the app tests: a small history built once per session, copied per test."""

from __future__ import annotations

import asyncio
import inspect
import shutil
from pathlib import Path

import pytest
from tui_history import NOW, build_history

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "history.db"
SAMPLE_NOW = NOW  # the sample history's anchor: 2026-11-30T18:00:00Z


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's cache files (trial copies, copied text) stay in the test's folder, and no
    test copies into the tmux server it may run in."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("TMUX", raising=False)


@pytest.fixture(scope="session")
def built_history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The history of tests/tui/history_builder.py, built once."""
    return build_history(tmp_path_factory.mktemp("history") / "history.db")


@pytest.fixture
def history(built_history: Path, tmp_path: Path) -> Path:
    """A private copy of the built history (tests write into it)."""
    target = tmp_path / "history.db"
    shutil.copyfile(built_history, target)
    return target


@pytest.fixture
def sample_history() -> Path:
    """The committed sample history; skipped until it exists."""
    if not SAMPLE.exists():
        pytest.skip("sample_data/history.db is not built yet")
    return SAMPLE


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run `async def` tests in a fresh event loop (no asyncio plugin is installed)."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    asyncio.run(pyfuncitem.obj(**{name: pyfuncitem.funcargs[name] for name in names}))
    return True
