"""The recording half of the pytest plugin (being written: see register_recorder)."""

from __future__ import annotations

import pytest


def register_recorder(config: pytest.Config) -> None:
    """Register the recorder when --flaketui-db or the ini option asks for it."""
