"""The headless core and the pytest plugin never import a UI library."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import flaketui.core

UI_LIBRARIES = ("textual", "rich", "plotext", "textual_plotext")
CORE_MODULES = sorted(
    m.name for m in pkgutil.walk_packages(flaketui.core.__path__, prefix="flaketui.core.")
)


def _ui_modules_after_import(module: str) -> list[str]:
    code = (
        f"import sys, importlib; importlib.import_module({module!r}); "
        f"print(','.join(m for m in {UI_LIBRARIES!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    return [m for m in out.split(",") if m]


def test_core_modules_are_found() -> None:
    assert "flaketui.core.store" in CORE_MODULES


@pytest.mark.parametrize("module", [*CORE_MODULES, "flaketui.pytest_plugin"])
def test_module_imports_no_ui_library(module: str) -> None:
    assert _ui_modules_after_import(module) == []


def test_no_ui_import_statement_in_core_source() -> None:
    core = Path(flaketui.core.__file__).parent
    offenders = [
        str(path)
        for path in core.rglob("*.py")
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip().startswith(
            tuple(f"{kw} {lib}" for kw in ("import", "from") for lib in UI_LIBRARIES)
        )
    ]
    assert offenders == []
