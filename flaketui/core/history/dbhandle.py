"""What flaketui needs of a history: an open connection, with or without sqlite-utils."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Protocol


class Connected(Protocol):
    """A history handle: the Reader flaketui's commands and app open (store.history_file), or
    a sqlite_utils.Database (store.open_history, for scripts and notebooks)."""

    @property
    def conn(self) -> sqlite3.Connection:
        """The open SQLite connection."""
        ...


@dataclass(frozen=True, slots=True)
class Reader:
    """A plain handle holding the connection: importing sqlite-utils (which imports pandas
    and numpy where they are installed) costs a starting app 0.1-1 s, and each command 0.3 s."""

    conn: sqlite3.Connection
