"""flaketui: triage flaky tests from a local SQLite run history."""

from __future__ import annotations

__version__ = "0.1.0"
