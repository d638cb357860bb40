"""The headless core and the pytest plugin never import a UI library."""

from __future__ import annotations

import ast
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
    assert "flaketui.core.history.store" in CORE_MODULES


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


def test_import_contracts_hold() -> None:
    """The layering in pyproject.toml's import-linter contracts (run as `lint-imports`)."""
    root = Path(__file__).resolve().parents[1]
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint), "--no-cache"], cwd=root, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def _private_imports(package: Path) -> list[str]:
    found = []
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("flaketui"):
                found += [
                    f"{path.relative_to(package.parent)}:{node.lineno} {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    return found


def test_no_private_name_is_imported_across_modules() -> None:
    assert _private_imports(Path(flaketui.core.__file__).parents[1]) == []


def test_the_private_import_check_sees_one(tmp_path: Path) -> None:
    package = tmp_path / "flaketui"
    package.mkdir()
    (package / "a.py").write_text("from flaketui.core.b import _hidden, shown\n")
    assert _private_imports(package) == ["flaketui/a.py:1 flaketui.core.b._hidden"]


def test_the_headless_contract_names_every_command_but_open() -> None:
    """A new command module is headless unless it is the app's: the contract must list it."""
    import tomllib

    import flaketui.cli.commands

    root = Path(__file__).resolve().parents[1]
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    headless = next(c for c in contracts if c["name"] == "Headless commands never load the app")
    commands = {
        f"flaketui.cli.commands.{m.name}"
        for m in pkgutil.iter_modules(flaketui.cli.commands.__path__)
        if m.name != "open"
    }
    assert set(headless["source_modules"]) == commands | {
        "flaketui.cli.group",
        "flaketui.cli.options",
        "flaketui.cli.stdout",
    }
    assert {"flaketui.tui", "textual", "textual_plotext", "plotext"} <= set(
        headless["forbidden_modules"]
    )
