"""The current schema as one script, schema.sql beside store.py, written from the migrations.

    python -m flaketui.core.history.schema_file            # rewrite schema.sql
    python -m flaketui.core.history.schema_file --check    # exit 1 if it is not what it writes

A new history is created from this script in one transaction (store.open_connection), rather
than by replaying every migration in a transaction of its own. The replay is what creating a
history cost: it rebuilds tables and rereads the whole schema at each ALTER TABLE, about half of
the time to open a new file, and the recording pytest plugin creates one in every CI job that
starts without a history.

The migrations stay the one source of truth. The script is what they leave in sqlite_master,
statement for statement and in the same words (the text each ALTER TABLE wrote included), and
its last line is the version they reach; this module writes it, never a person. A test checks
that a new history and an oldest one upgraded step by step end with the same schema, and that
the file is what this module writes. The migrations replayed in one transaction would need no
file, but would keep the cost: one commit instead of eight was never it (under WAL with
synchronous NORMAL a commit waits for no disk). Should the script ever lag behind a migration,
a new history still ends current: the migrations past the script's version run after it, in
the same transaction.
"""

from __future__ import annotations

import sqlite3
import sys

from flaketui.core.history import store
from flaketui.core.history.store import SCHEMA_FILE

HEADER = """\
-- The history schema at version {version}: what the migrations in store.py leave in sqlite_master,
-- in their words. A new history is created from it in one transaction. Written by
-- `python -m flaketui.core.history.schema_file` (or `make docs`); do not edit by hand.
"""


def render() -> str:
    """The script: a history migrated step by step from nothing, as its statements."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        for migration in store.MIGRATIONS:
            migration(conn)
        statements = [
            f"{sql};\n"
            for (sql,) in conn.execute(
                "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid"
            )
        ]
    finally:
        conn.close()
    version = store.SCHEMA_VERSION
    return (
        HEADER.format(version=version) + "".join(statements) + f"PRAGMA user_version = {version};\n"
    )


def main(argv: list[str] | None = None) -> int:
    """Write the script, or with --check report whether the written one is current."""
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--check"]):
        print("usage: python -m flaketui.core.history.schema_file [--check]", file=sys.stderr)
        return 2
    text = render()
    if args:
        current = SCHEMA_FILE.exists() and SCHEMA_FILE.read_text(encoding="utf-8") == text
        if not current:
            print(
                f"{SCHEMA_FILE} is stale: run `python -m flaketui.core.history.schema_file`",
                file=sys.stderr,
            )
        return 0 if current else 1
    SCHEMA_FILE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
