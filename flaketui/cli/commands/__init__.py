"""CLI commands, one module each, imported lazily by `cli` (see FlaketuiGroup.lazy_commands)."""

from __future__ import annotations

from flaketui.cli import cli

__all__ = ["cli"]
