"""Form fields shared by the dialogs."""

from __future__ import annotations

from typing import Any

from textual.widgets import Input


def text_input(value: str = "", *, blink: bool = True, **kwargs: Any) -> Input:
    """An Input whose cursor blink can be turned off (stable snapshots)."""
    box = Input(value, **kwargs)
    box.cursor_blink = blink
    return box
