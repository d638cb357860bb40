"""CLI commands, one module each; importing this package registers them all on `cli`."""

from __future__ import annotations

import importlib
import pkgutil

from flaketui.cli import cli

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["cli"]
