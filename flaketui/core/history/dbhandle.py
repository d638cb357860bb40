"""What the read path needs of a history: an open connection, with or without sqlite-utils."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Protocol


class Connected(Protocol):
    """A history handle: a sqlite_utils.Database, or a bare Reader where none is needed."""

    @property
    def conn(self) -> sqlite3.Connection:
        """The open SQLite connection."""
        ...


@dataclass(frozen=True, slots=True)
class Reader:
    """A plain handle for what only uses `conn` (scoring, ingest): importing sqlite-utils
    (which imports pandas and numpy when they are installed) costs a starting app 0.1-1 s,
    and each `flaketui ingest` 0.3 s."""

    conn: sqlite3.Connection
