"""Column lists shared by push, sync and merge: what both sides of a copy have.

Rows are copied column by column where the SQLite history and the server both have a column,
so a column added to both (by each side's migrations) flows without changes here; surrogate
ids and the server's change ids never cross.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

# Never copied: surrogate ids (remapped through natural keys) and the server's change ids.
NOT_COPIED = {
    "runs": {"id", "change"},
    "results": {"run", "test", "signature", "predecessor", "change"},
}
# A result column holding a tests.id, remapped through test_id where both sides have it.
PREDECESSOR = "predecessor"
# The audit log's columns, copied as they are both ways. A row is a duplicate only of a row
# equal in every one of them (the server's unique key since schema version 7, as a merge of
# history files compares them). written_at came with schema version 3 on the server: a server
# from before it (only ever met unmigrated) gives ts in its place, as the migration does.
AUDIT_COLUMNS = (
    "ts",
    "who",
    "action",
    "test_id",
    "mode",
    "reason",
    "ticket",
    "scores",
    "source",
    "written_at",
)
AUDIT_FALLBACK = {"written_at": "ts"}
# The audit columns that may hold NULL (a duplicate has NULL there too).
AUDIT_NULLABLE = {"mode", "reason", "ticket", "scores"}


def add_audit_rows(conn: sqlite3.Connection, rows: Iterable[Sequence[Any]]) -> int:
    """Insert into a SQLite history's audit log each row (values of AUDIT_COLUMNS, in order)
    it holds no row equal to in every column; the number added."""
    marks = ", ".join(f":{column}" for column in AUDIT_COLUMNS)
    same = " AND ".join(
        f"{column} {'IS' if column in AUDIT_NULLABLE else '='} :{column}"
        for column in AUDIT_COLUMNS
    )
    before = conn.total_changes
    conn.executemany(
        f"INSERT INTO audit_log ({', '.join(AUDIT_COLUMNS)}) SELECT {marks}"
        f" WHERE NOT EXISTS (SELECT 1 FROM audit_log WHERE {same})",
        [dict(zip(AUDIT_COLUMNS, row, strict=True)) for row in rows],
    )
    return conn.total_changes - before


def sqlite_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    """The columns of a SQLite table, in table order."""
    return [str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")]


def server_columns(pg: Any, table: str) -> list[str]:
    """The columns of a server table, in table order."""
    rows = pg.execute(
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = %s ORDER BY ordinal_position",
        (table,),
    ).fetchall()
    return [str(row[0]) for row in rows]


def shared_columns(conn: sqlite3.Connection, pg: Any, table: str) -> list[str]:
    """The columns both sides have, minus those never copied, in the SQLite table's order."""
    on_server = set(server_columns(pg, table))
    skip = NOT_COPIED[table]
    return [c for c in sqlite_columns(conn, table) if c in on_server and c not in skip]


def both_have(conn: sqlite3.Connection, pg: Any, table: str, column: str) -> bool:
    """Whether the SQLite table and the server table both have the column."""
    return column in sqlite_columns(conn, table) and column in server_columns(pg, table)


def server_audit_columns(pg: Any) -> list[str]:
    """AUDIT_COLUMNS as the server's audit_log has them: the columns it lacks dropped."""
    on_server = set(server_columns(pg, "audit_log"))
    return [c for c in AUDIT_COLUMNS if c in on_server]


def server_audit_select(pg: Any) -> str:
    """The select list reading AUDIT_COLUMNS from the server's audit_log, in that order."""
    on_server = set(server_columns(pg, "audit_log"))
    return ", ".join(c if c in on_server else f"{AUDIT_FALLBACK[c]} AS {c}" for c in AUDIT_COLUMNS)
