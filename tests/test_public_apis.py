"""flaketui uses Textual through its public API only, and changes nothing process-wide.

A private Textual name (a method, an attribute, a module) can change in any release: overriding
or reading one ties flaketui to the versions it was written against. The checks read the source
of flaketui/ with `ast`:
- a Textual class's private name (its own, or set on `self` in its source) overridden, read or
  written by a flaketui subclass through `self`, or through `super()`;
- any `super()._name`, and any `obj._name` whose name Textual has and flaketui never defines;
- an import from a private Textual module (`textual._xxx`, `textual.widgets._xxx`);
- the cyclic collector (`gc`), the GIL's switch interval, or pickling hooks (`pickle`,
  `copyreg`): process-wide changes, and custom serialisation of the app's data.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import textwrap
from functools import cache
from pathlib import Path

import pytest
import textual

import flaketui
import flaketui.tui

PACKAGE = Path(flaketui.__file__).parent
TEXTUAL = Path(textual.__file__).parent
# Names of DataTable and ScrollView internals the ranked list once overrode: never again.
BANNED = frozenset(
    {
        "_render_cell",
        "_render_line_in_row",
        "_get_row_style",
        "_update_dimensions",
        "_size_updated",
        "_data",
        "_row_locations",
        "_column_locations",
        "_row_render_cache",
        "_cell_render_cache",
        "_line_cache",
        "_update_count",
        "_show_hover_cursor",
        "_pseudo_class_state",
        "_require_update_dimensions",
        "_get_styles_to_render_cell",
    }
)
PROCESS_WIDE = frozenset({"gc", "pickle", "copyreg", "setswitchinterval", "getswitchinterval"})


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def _self_attributes(tree: ast.AST) -> set[str]:
    """Private names a class body defines, assigns on `self`/`cls`, or reads from them."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _private(node.name):
            names.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
            and _private(node.attr)
        ):
            names.add(node.attr)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name) and _private(t.id))
    return names


@cache
def _textual_class_privates(cls: type) -> frozenset[str]:
    """Private names of one Textual class: its attributes and those its source sets on self."""
    names = {name for name in vars(cls) if _private(name)}
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return frozenset(names)
    return frozenset(names | _self_attributes(ast.parse(source)))


@cache
def _all_textual_privates() -> frozenset[str]:
    """Every private name any Textual class defines or sets on self."""
    names: set[str] = set()
    for path in TEXTUAL.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                names |= _self_attributes(node)
    return frozenset(names)


def _flaketui_sources() -> list[tuple[Path, ast.Module]]:
    return [
        (path, ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


def _own_privates(sources: list[tuple[Path, ast.Module]]) -> set[str]:
    """Private names flaketui itself defines (functions, class attributes, self attributes)."""
    names: set[str] = set()
    for _path, tree in sources:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        names.add(item.name)
                    elif isinstance(item, ast.Assign | ast.AnnAssign):
                        targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                        names.update(t.id for t in targets if isinstance(t, ast.Name))
                for item in ast.walk(node):
                    if (
                        isinstance(item, ast.Attribute)
                        and isinstance(item.ctx, ast.Store)
                        and isinstance(item.value, ast.Name)
                        and item.value.id in ("self", "cls")
                    ):
                        names.add(item.attr)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
    return {name for name in names if _private(name)}


def _is_super_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


def misuses_in_source(sources: list[tuple[Path, ast.Module]], root: Path) -> list[str]:
    """Private Textual names, process-wide changes and pickling in the given modules' source."""
    found: list[str] = []
    textual_privates = _all_textual_privates()
    own = _own_privates(sources)
    for path, tree in sources:
        where = str(path.relative_to(root))
        for node in ast.walk(tree):
            line = getattr(node, "lineno", 0)
            if isinstance(node, ast.Attribute) and _private(node.attr):
                name = node.attr
                if _is_super_call(node.value):
                    found.append(f"{where}:{line} super().{name}")
                elif name in BANNED:
                    found.append(f"{where}:{line} .{name}")
                elif name in textual_privates and name not in own:
                    found.append(f"{where}:{line} .{name} (a private Textual name)")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in BANNED:
                found.append(f"{where}:{line} def {node.name}")
            elif isinstance(node, ast.Constant) and node.value in BANNED:
                found.append(f"{where}:{line} {node.value!r}")
            elif isinstance(node, ast.Import | ast.ImportFrom):
                modules = (
                    [alias.name for alias in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                )
                for module in modules:
                    parts = module.split(".")
                    if parts[0] == "textual" and any(_private(part) for part in parts):
                        found.append(f"{where}:{line} import {module}")
                    if parts[0] in PROCESS_WIDE:
                        found.append(f"{where}:{line} import {module}")
                if isinstance(node, ast.ImportFrom):
                    for alias in node.names:
                        if alias.name in PROCESS_WIDE or (
                            (node.module or "").startswith("textual") and _private(alias.name)
                        ):
                            found.append(f"{where}:{line} from {node.module} import {alias.name}")
            elif isinstance(node, ast.Name) and node.id in PROCESS_WIDE:
                found.append(f"{where}:{line} {node.id}")
            elif isinstance(node, ast.Attribute) and node.attr in PROCESS_WIDE:
                found.append(f"{where}:{line} .{node.attr}")
    return found


def _textual_subclasses() -> list[type]:
    """flaketui's classes that derive from a Textual class (the app's modules imported)."""
    classes = []
    for info in pkgutil.walk_packages(flaketui.tui.__path__, prefix="flaketui.tui."):
        module = importlib.import_module(info.name)
        for cls in vars(module).values():
            if (
                inspect.isclass(cls)
                and cls.__module__ == module.__name__
                and any(base.__module__.startswith("textual") for base in cls.__mro__[1:])
            ):
                classes.append(cls)
    return classes


def overrides_in_subclass(cls: type) -> list[str]:
    """Private names of Textual bases that `cls`'s own source defines, sets or reads on self."""
    inherited: set[str] = set()
    for base in cls.__mro__[1:]:
        if base.__module__.startswith("textual"):
            inherited |= _textual_class_privates(base)
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    return sorted(f"{cls.__qualname__}.{name}" for name in _self_attributes(tree) & inherited)


def test_no_private_textual_name_process_wide_change_or_pickling_in_flaketui() -> None:
    assert misuses_in_source(_flaketui_sources(), PACKAGE.parent) == []


def test_textual_subclasses_neither_override_nor_touch_textual_private_names() -> None:
    classes = _textual_subclasses()
    assert {cls.__name__ for cls in classes} >= {"FlaketuiApp", "MainScreen", "FlakeTable"}
    assert [name for cls in classes for name in overrides_in_subclass(cls)] == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("class T:\n    def f(self):\n        return super()._render_cell()\n",
         "super()._render_cell"),
        ("def f(table):\n    return table._row_locations\n", "._row_locations"),
        ("def f(table):\n    return table._clear_caches()\n", "._clear_caches (a private"),
        ("class T:\n    def _update_dimensions(self, rows):\n        pass\n",
         "def _update_dimensions"),
        ("def f(table):\n    return getattr(table, '_data')\n", "'_data'"),
        ("from textual.widgets._data_table import RowKey\n", "import textual.widgets._data_table"),
        ("import gc\n", "import gc"),
        ("import sys\nsys.setswitchinterval(0.001)\n", ".setswitchinterval"),
        ("import copyreg\n", "import copyreg"),
        ("from pickle import dumps\n", "import pickle"),
    ],
)  # fmt: skip
def test_the_source_check_sees_each_kind_of_misuse(
    tmp_path: Path, source: str, expected: str
) -> None:
    path = tmp_path / "flaketui" / "bad.py"
    path.parent.mkdir()
    path.write_text(source)
    found = misuses_in_source([(path, ast.parse(source))], tmp_path)
    assert any(expected in line for line in found), found


def test_the_subclass_check_sees_an_override_and_an_access() -> None:
    from textual.widgets import DataTable

    class Overriding(DataTable[str]):
        def _on_resize(self, event: object) -> None:
            return None

        def peek(self) -> object:
            return self._data

    assert overrides_in_subclass(Overriding) == [
        "test_the_subclass_check_sees_an_override_and_an_access.<locals>.Overriding._data",
        "test_the_subclass_check_sees_an_override_and_an_access.<locals>.Overriding._on_resize",
    ]
