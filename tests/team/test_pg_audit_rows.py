"""Audit rows on the server are decisions in all their columns, as in a merge of history files:
rows of one moment, person, action and test that differ in anything else all stay, on the
server and on every replica, and pushing or syncing a row again adds nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from flaketui.cli import cli
from tests.pgcluster import Cluster

REPORT = Path(__file__).resolve().parents[2] / "sample_data" / "reports" / "main-unit.xml"
TEST = "tests/api/test_auth.py::test_login_ok"
NOW = "2026-12-05T12:00:00Z"
COLUMNS = ("ts", "who", "action", "test_id", "mode", "reason", "ticket", "scores", "source")
ALL_COLUMNS = (*COLUMNS, "written_at")
SELECT = f"SELECT {', '.join(ALL_COLUMNS)} FROM audit_log"


def invoke(*args: object) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def server_rows(url: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return sorted(conn.execute(SELECT).fetchall(), key=repr)


def file_rows(path: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return sorted(conn.execute(SELECT).fetchall(), key=repr)
    finally:
        conn.close()


def history_with(path: Path, rows: list[tuple[Any, ...]]) -> Path:
    """A history file holding one run and the given audit rows (ALL_COLUMNS order)."""
    from flaketui.core.history.store import transaction
    from tests.connections import open_history

    invoke("ingest", path, REPORT, "--run-id", "r", "--no-detect")
    db = open_history(path)
    with transaction(db.conn):
        db.conn.executemany(
            f"INSERT INTO audit_log ({', '.join(ALL_COLUMNS)})"
            f" VALUES ({', '.join('?' * len(ALL_COLUMNS))})",
            rows,
        )
    db.conn.close()
    return path


def test_two_people_quarantining_a_test_at_one_moment_both_stay(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    invoke("ingest", pg_url, REPORT, "--run-id", "r", "--no-detect")
    for person in ("alice", "bob"):  # two desks, each with its own cached replica
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / f"cache-{person}"))
        skip = tmp_path / f"q-{person}.json"
        invoke("quarantine", pg_url, TEST, "--reason", person, "--skip-file", skip, "--now", NOW)
    assert [row[5] for row in server_rows(pg_url)] == ["alice", "bob"]
    replica = tmp_path / "r.db"
    assert "2 audit rows added" in invoke("sync", pg_url, replica)
    assert [row[5] for row in file_rows(replica)] == ["alice", "bob"]
    # Syncing again, or alice's desk syncing bob's row, takes nothing twice.
    assert "0 audit rows added" in invoke("sync", pg_url, replica)
    alice = tmp_path / "cache-alice"
    monkeypatch.setenv("XDG_CACHE_HOME", str(alice))
    (alice_replica,) = alice.rglob("*.db")
    assert "1 audit row added" in invoke("sync", pg_url, alice_replica)
    assert file_rows(alice_replica) == file_rows(replica) == server_rows(pg_url)


W = "2026-12-05T12:00:01Z"
BASE = (NOW, "me", "quarantine", TEST, "skip", "flaky", None, None, "cli", W)


def variant(**changed: object) -> tuple[Any, ...]:
    row = dict(zip(ALL_COLUMNS, BASE, strict=True))
    row.update(changed)
    return tuple(row.values())


# Rows of one moment, person, action and test, differing in one other column each; NULL and ''
# are different values.
VARIANTS = [
    BASE,
    variant(reason=None),
    variant(reason=""),
    variant(mode=None),
    variant(mode="run"),
    variant(ticket="JIRA-1"),
    variant(ticket=""),
    variant(scores='{"flip_rate": 0.5}'),
    variant(source="app"),
    variant(written_at="2026-12-06T00:00:00Z"),
]


def test_pushing_the_same_history_twice_adds_nothing(pg_url: str, tmp_path: Path) -> None:
    local = history_with(tmp_path / "local.db", VARIANTS)
    assert "10 audit rows added" in invoke("merge", pg_url, local)
    assert "0 audit rows added" in invoke("merge", pg_url, local)
    assert server_rows(pg_url) == sorted(VARIANTS, key=repr)
    replica = tmp_path / "replica.db"
    assert "10 audit rows added" in invoke("sync", pg_url, replica)
    # The replica pushed back (its rows are the server's) adds nothing either.
    assert "0 audit rows added" in invoke("merge", pg_url, replica)
    assert file_rows(replica) == server_rows(pg_url)


def test_a_long_reason_is_stored(pg_url: str, tmp_path: Path) -> None:
    import hashlib

    # Past what a btree index row holds (2704 bytes), and not compressible.
    long = "".join(hashlib.sha256(str(n).encode()).hexdigest() for n in range(320))[:10_000]
    rows = [variant(reason=long), variant(reason=long[:-1]), variant(scores=long)]
    local = history_with(tmp_path / "local.db", rows)
    assert "3 audit rows added" in invoke("merge", pg_url, local)
    assert "0 audit rows added" in invoke("merge", pg_url, local)
    assert server_rows(pg_url) == sorted(rows, key=repr)
    replica = tmp_path / "replica.db"
    invoke("sync", pg_url, replica)
    assert file_rows(replica) == sorted(rows, key=repr)


def test_a_version_6_server_keeps_every_audit_row(pg_url: str, tmp_path: Path) -> None:
    from flaketui.core.history.pg import schema
    from flaketui.core.history.pg.connect import connect

    old_rows = [
        BASE,
        variant(who="you", reason=None, scores=None),
        variant(ts="2026-12-05T12:00:02Z", reason=""),
        variant(test_id="tests/test_b.py::test_b", mode=None, ticket="T-1"),
    ]
    old = connect(pg_url, migrate=False)
    try:
        with old.transaction():
            for migration in schema.MIGRATIONS[:6]:
                old.execute(migration)
            old.execute("INSERT INTO flaketui_meta (key, value) VALUES ('schema_version', '6')")
            with old.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO audit_log ({', '.join(ALL_COLUMNS)})"
                    f" VALUES ({', '.join(['%s'] * len(ALL_COLUMNS))})",
                    old_rows,
                )
    finally:
        old.close()
    connect(pg_url).close()  # the next connection upgrades the server
    import psycopg

    with psycopg.connect(pg_url) as conn:
        version = "SELECT value FROM flaketui_meta WHERE key = 'schema_version'"
        assert conn.execute(version).fetchone() == (str(len(schema.MIGRATIONS)),)
    assert server_rows(pg_url) == sorted(old_rows, key=repr)
    # The upgraded server takes a row its old key held for a duplicate, and only once.
    local = history_with(tmp_path / "local.db", [*old_rows, variant(reason="other")])
    assert "1 audit row added" in invoke("merge", pg_url, local)
    assert "0 audit rows added" in invoke("merge", pg_url, local)
    assert len(server_rows(pg_url)) == len(old_rows) + 1


# Small alphabets, so that generated rows often agree in most columns.
TEXT = st.sampled_from(["", "a", "b", "a|b", "n"])
ROW = st.tuples(
    st.sampled_from([NOW, W]),
    st.sampled_from(["me", "you"]),
    st.sampled_from(["quarantine", "release"]),
    st.sampled_from([TEST, "t::b"]),
    st.none() | TEXT,
    st.none() | TEXT,
    st.none() | TEXT,
    st.none() | TEXT,
    st.sampled_from(["cli", "app"]),
    st.sampled_from([W, NOW]),
)


@settings(max_examples=15)
@given(rows=st.lists(ROW, max_size=8))
def test_the_server_and_its_replicas_keep_each_distinct_row_once(
    pg_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[Any, ...]]
) -> None:
    from flaketui.core.history.pg.connect import connect
    from flaketui.core.history.pg.push import push_history
    from flaketui.core.history.pg.sync import sync_replica
    from flaketui.core.history.store import transaction
    from tests.connections import open_history

    url = pg_cluster.create_database()
    tmp = tmp_path_factory.mktemp("audit")
    local = open_history(tmp / "local.db")
    with transaction(local.conn):
        local.conn.executemany(
            f"INSERT INTO audit_log ({', '.join(ALL_COLUMNS)})"
            f" VALUES ({', '.join('?' * len(ALL_COLUMNS))})",
            rows,
        )
    distinct = sorted(set(rows), key=repr)
    pg = connect(url)
    try:
        assert push_history(pg, local.conn).audit_rows_added == len(distinct)
        assert push_history(pg, local.conn).audit_rows_added == 0
        replica = open_history(tmp / "replica.db")
        assert sync_replica(pg, replica.conn).audit_rows_added == len(distinct)
        replica.conn.close()
    finally:
        pg.close()
        local.conn.close()
    assert server_rows(url) == distinct
    assert file_rows(tmp / "replica.db") == distinct
