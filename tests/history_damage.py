"""A history damaged past its header, as a failing disk or a copy that went wrong leaves one."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def damage(history: Path) -> None:
    """Overwrite the first page of every table and index with bytes no page holds: the file
    still opens (header and schema intact) and fails where a read first reaches a table."""
    conn = sqlite3.connect(history)
    try:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        roots = [
            row[0] for row in conn.execute("SELECT rootpage FROM sqlite_schema WHERE rootpage > 1")
        ]
    finally:
        conn.close()
    with history.open("r+b") as stream:
        for page in roots:
            stream.seek((page - 1) * page_size)
            stream.write(b"\xff" * page_size)
