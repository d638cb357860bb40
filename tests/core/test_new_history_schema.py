"""A new history gets the current schema in one transaction, from schema.sql, and that schema is
the one an older history reaches through the migrations step by step: same tables, columns,
indexes, keys, version, journal mode and rows, whatever created it and however many at once.

When a test here fails after a migration was added, run
`python -m flaketui.core.history.schema_file` (or `make docs`) and commit schema.sql.
"""

from __future__ import annotations

import re
import sqlite3
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from flaketui.core.history import schema_file, store
from flaketui.core.ingest.writer import ingest_reports
from flaketui.core.models import RunMeta
from tests.child_processes import child_context
from tests.connections import open_connection, open_history

CREATORS = 4  # processes creating one new history at the same moment


def _normalized(sql: str | None) -> str | None:
    """A statement without its comments, its whitespace collapsed and dropped beside (),."""
    if sql is None:
        return None
    text = re.sub(r"--[^\n]*", "", sql)
    text = re.sub(r"\s+", " ", text)
    return re.sub(r"\s*([(),])\s*", r"\1", text).strip()


def _schema(path: Path) -> dict[str, Any]:
    """Everything about a history's schema the migrations decide, with every table's rows."""
    conn = sqlite3.connect(path)
    try:
        master = sorted(
            (str(kind), str(name), str(table), _normalized(sql))
            for kind, name, table, sql in conn.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master"
            )
        )
        tables = [name for kind, name, _, _ in master if kind == "table"]
        indexes = [name for kind, name, _, _ in master if kind == "index"]
        found: dict[str, Any] = {"sqlite_master": master}
        for table in tables:
            found[f"{table}: columns"] = conn.execute(f'PRAGMA table_xinfo("{table}")').fetchall()
            found[f"{table}: indexes"] = sorted(
                conn.execute(f'PRAGMA index_list("{table}")').fetchall()
            )
            found[f"{table}: foreign keys"] = conn.execute(
                f'PRAGMA foreign_key_list("{table}")'
            ).fetchall()
            found[f"{table}: rows"] = sorted(
                conn.execute(f'SELECT * FROM "{table}"').fetchall(), key=repr
            )
        for index in indexes:
            found[f"{index}: columns"] = conn.execute(f'PRAGMA index_xinfo("{index}")').fetchall()
        for pragma in (
            "user_version", "journal_mode", "application_id", "encoding", "auto_vacuum",
            "page_size",
        ):  # fmt: skip
            found[pragma] = conn.execute(f"PRAGMA {pragma}").fetchone()[0]
        return found
    finally:
        conn.close()


def _version_history(path: Path, version: int) -> None:
    """A history as the flaketui of `version` left it: its migrations, its user_version (as
    tests/core/test_cause_columns.py writes the oldest one)."""
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in store.MIGRATIONS[:version]:
        migration(conn)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.close()


def _upgraded(tmp_path: Path, version: int = 1) -> dict[str, Any]:
    """The schema of a history of `version` brought up to date by open_connection."""
    path = tmp_path / f"v{version}.db"
    _version_history(path, version)
    open_connection(path).close()
    return _schema(path)


def _new(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "new.db"
    open_connection(path).close()
    return _schema(path)


def test_a_new_history_has_the_schema_the_oldest_one_is_migrated_to(tmp_path: Path) -> None:
    new = _new(tmp_path)
    assert new["user_version"] == store.SCHEMA_VERSION
    assert new["journal_mode"] == "wal"
    assert _upgraded(tmp_path) == new


@pytest.mark.parametrize("version", range(2, store.SCHEMA_VERSION))
def test_every_older_history_is_migrated_to_the_new_one_s_schema(
    tmp_path: Path, version: int
) -> None:
    assert _upgraded(tmp_path, version) == _new(tmp_path)


def test_the_schemas_stay_equal_once_a_run_is_stored_in_each(tmp_path: Path) -> None:
    """Tables the writers add when first needed (the rollups, the list of runs to fold) and the
    meta rows they set come out the same in both."""
    report = tmp_path / "report.xml"
    report.write_text(
        '<testsuite name="s"><testcase classname="tests.test_a" name="test_a"/>'
        '<testcase classname="tests.test_a" name="test_b"><failure message="boom"/></testcase>'
        "</testsuite>"
    )
    meta = RunMeta(run_id="r1", ts=datetime(2026, 11, 2, 9, tzinfo=UTC))
    old = tmp_path / "v1.db"
    _version_history(old, 1)
    for path in (old, tmp_path / "new.db"):
        db = open_history(path)
        ingest_reports(db, [report], meta)
        db.conn.close()
    assert "test_day_rollups" in {row[1] for row in _schema(old)["sqlite_master"]}
    assert _schema(old) == _schema(tmp_path / "new.db")


def test_a_new_history_is_created_in_one_transaction_without_the_migrations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    open_connection(tmp_path / "new.db").close()
    assert [s for s in statements if s.startswith(("BEGIN", "COMMIT"))] == [
        "BEGIN IMMEDIATE",
        "COMMIT",
    ]
    assert statements.count("PRAGMA journal_mode = WAL") == 1
    assert [s for s in statements if "ALTER TABLE" in s or "DROP" in s] == []
    assert f"PRAGMA user_version = {store.SCHEMA_VERSION}" in statements


def test_the_schema_script_is_what_the_migrations_write() -> None:
    assert store.SCHEMA_FILE.read_text(encoding="utf-8") == schema_file.render(), (
        "schema.sql is stale: run `python -m flaketui.core.history.schema_file` and commit it"
    )
    assert schema_file.main(["--check"]) == 0


def _script_of_version(version: int) -> str:
    """schema.sql as it read when `version` was the current one."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    for migration in store.MIGRATIONS[:version]:
        migration(conn)
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid")
    script = "".join(f"{statement};\n" for (statement,) in sql)
    conn.close()
    return f"{script}PRAGMA user_version = {version};\n"


@pytest.mark.parametrize("version", [None, 1, store.SCHEMA_VERSION - 2])
def test_a_lagging_or_missing_script_still_ends_at_the_migrations_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: int | None
) -> None:
    script = tmp_path / "schema.sql"
    if version is not None:
        script.write_text(_script_of_version(version), encoding="utf-8")
    monkeypatch.setattr(store, "SCHEMA_FILE", script)
    assert _new(tmp_path) == _upgraded(tmp_path)


def test_a_sqlite_file_of_other_tables_goes_through_the_migrations_as_before(
    tmp_path: Path,
) -> None:
    """No version and tables of its own: not a new history. The first migration meets its
    table and the file is refused in one line, its tables as they were."""
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (k)")
    conn.close()
    with pytest.raises(store.HistoryError, match=r"cannot write \(table meta already exists\)"):
        open_connection(path)
    assert _schema(path)["sqlite_master"] == [("table", "meta", "meta", "CREATE TABLE meta(k)")]
    assert _schema(path)["user_version"] == 0


def _create(path: str, barrier: Any, errors: Any) -> None:
    try:
        barrier.wait(60)  # every process opens the missing file at the same moment
        store.open_connection(path).close()  # a child's, outside any test
    except BaseException:
        errors.put(traceback.format_exc())
        raise


def test_processes_creating_one_new_history_at_once_end_with_one_current_history(
    tmp_path: Path,
) -> None:
    path = tmp_path / "new.db"
    ctx = child_context()
    barrier = ctx.Barrier(CREATORS)
    errors = ctx.Queue()
    procs = [
        ctx.Process(target=_create, args=(str(path), barrier, errors)) for _ in range(CREATORS)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
    assert [errors.get() for _ in range(errors.qsize())] == []
    assert [proc.exitcode for proc in procs] == [0] * CREATORS
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()
    assert _schema(path) == _upgraded(tmp_path)
