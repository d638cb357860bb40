"""flaketui and pytest-flaketui as pip installs them from wheels: pytest finds the plugin, and
loads flaketui's modules from their bytecode instead of rewriting them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.connections import connected

BENCH = Path(__file__).resolve().parents[2] / "bench"

# Written when the session ends: how each flaketui module it imported was loaded.
CONFTEST = """
import json
import sys
from pathlib import Path

def pytest_unconfigure(config):
    loaders = {
        name: type(module.__spec__.loader).__name__
        for name, module in sys.modules.items()
        if name.startswith("flaketui") and getattr(module, "__spec__", None) is not None
    }
    Path(__file__).with_name("loaders.json").write_text(json.dumps(loaders))
"""


def test_pytest_records_with_flaketui_loaded_from_bytecode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Builds both wheels and a new environment (pytest from the package index).
    monkeypatch.syspath_prepend(str(BENCH))
    __import__("plugin")
    python = sys.modules["plugin"].install_wheel(tmp_path)
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_one.py").write_text("def test_ok():\n    assert True\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST"))}
    db = tmp_path / "history.db"
    done = subprocess.run(
        [python, "-m", "pytest", "-p", "no:cacheprovider", f"--flaketui-db={db}", str(suite)],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    loaders = json.loads((suite / "loaders.json").read_text())
    assert "flaketui.pytest_plugin.recording" in loaders  # the entry point loaded the recorder
    assert {name: loader for name, loader in loaders.items() if loader != "SourceFileLoader"} == {}
    with connected(db) as conn:
        assert conn.execute("SELECT count(*) FROM attempt_journal").fetchone() == (1,)
