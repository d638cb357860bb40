"""The skip-file half of the pytest plugin (being written: see register_skip_file)."""

from __future__ import annotations

import pytest


def register_skip_file(config: pytest.Config) -> None:
    """Register skip-file honouring when a skip file is given or discovered."""
