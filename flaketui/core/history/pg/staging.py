"""A private SQLite history in a temporary directory, where a server writer builds its rows."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from flaketui.core.history.store import open_connection


class Staging:
    """A staging history that lives until close(); its file never outlives the process's
    clean exit (a killed process leaves it in the temporary directory, never on the server)."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="flaketui-staging-"))
        self.conn: sqlite3.Connection = open_connection(self.dir / "staging.db")

    def close(self) -> None:
        try:
            self.conn.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


@contextmanager
def staging_history() -> Iterator[sqlite3.Connection]:
    """A staging history's connection for the duration of the block."""
    staging = Staging()
    try:
        yield staging.conn
    finally:
        staging.close()
