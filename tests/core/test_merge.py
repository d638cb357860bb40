"""Merging histories: id remapping, shards published separately, idempotence."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlite_utils
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from flaketui.core.errors import HistoryError
from flaketui.core.history.merge import merge_histories
from flaketui.core.history.store import open_history, transaction
from flaketui.core.ingest.writer import RunRecorder
from flaketui.core.models import Attempt, CaseResult, RunMeta

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def record(db: sqlite_utils.Database, run_id: str, hours: int, cases: dict[str, list[str]]) -> None:
    recorder = RunRecorder(
        db, RunMeta(run_id=run_id, ts=T0 + timedelta(hours=hours), changed_files=["t/a.py"])
    )
    recorder.add(
        CaseResult(
            tid, None, [Attempt(o, 1, f"Error {tid} 42" if o == "fail" else None) for o in outs]
        )
        for tid, outs in cases.items()
    )
    recorder.finish()


def audit(db: sqlite_utils.Database, ts: str, test_id: str, written_at: str | None = None) -> None:
    with transaction(db.conn):
        db.conn.execute(
            "INSERT INTO audit_log (ts, who, action, test_id, reason, written_at)"
            " VALUES (?, 'ana', 'quarantine', ?, 'flaky', ?)",
            (ts, test_id, written_at or ts),
        )


def logical(db: sqlite_utils.Database) -> dict[str, list[tuple[object, ...]]]:
    """The history's content by natural keys (integer ids differ between files)."""
    q = db.conn.execute
    return {
        "runs": sorted(q("SELECT run_id, suite, ts, source, finished, incident FROM runs")),
        "results": sorted(
            q(
                "SELECT ru.run_id, t.test_id, r.attempt, r.outcome, r.message, s.hash"
                " FROM results r JOIN runs ru ON ru.id = r.run JOIN tests t ON t.id = r.test"
                " LEFT JOIN signatures s ON s.id = r.signature"
            )
        ),
        "test_runs": sorted(
            q(
                "SELECT ru.run_id, t.test_id, tr.outcome, tr.bad, tr.attempts, tr.edited"
                " FROM test_runs tr JOIN runs ru ON ru.id = tr.run JOIN tests t ON t.id = tr.test"
            )
        ),
        "tests": sorted(q("SELECT test_id, parent, test_file, first_seen FROM tests")),
        "changed": sorted(
            q("SELECT ru.run_id, c.path FROM run_changed_files c JOIN runs ru ON ru.id = c.run")
        ),
        "audit": sorted(q("SELECT ts, who, action, test_id, written_at FROM audit_log")),
        "incidents": sorted(q("SELECT tag, note FROM incidents")),
    }


@pytest.fixture
def histories(tmp_path: Path) -> tuple[Path, Path]:
    dest = open_history(tmp_path / "dest.db")
    record(dest, "r1", 1, {"t/a.py::test_x": ["fail", "pass"], "t/a.py::test_y": ["pass"]})
    audit(dest, "2026-11-01T05:00:00Z", "t/a.py::test_x")
    dest.conn.close()
    src = open_history(tmp_path / "src.db")
    # r1 again (same content), a new run r2 and a test dest has never seen.
    record(src, "r1", 1, {"t/a.py::test_x": ["fail", "pass"], "t/a.py::test_y": ["pass"]})
    record(src, "r2", 0, {"t/a.py::test_x": ["fail"], "t/b.py::test_z[1]": ["pass"]})
    RunRecorder(src, RunMeta(run_id="r3", ts=T0, incident="outage")).add(
        [CaseResult("t/a.py::test_y", None, [Attempt("error", None, "Error boom 7")])]
    )  # never finished
    audit(src, "2026-11-01T05:00:00Z", "t/a.py::test_x")  # the same decision
    # Decided at 06:00, written days later (as the lifecycle's --apply does).
    audit(src, "2026-11-01T06:00:00Z", "t/b.py::test_z[1]", written_at="2026-11-04T12:00:00Z")
    src.conn.close()
    return tmp_path / "dest.db", tmp_path / "src.db"


def test_merge_copies_new_runs_and_remaps_ids(histories: tuple[Path, Path]) -> None:
    dest_path, src_path = histories
    dest = open_history(dest_path)
    summary = merge_histories(dest, [src_path])
    assert (summary.runs_added, summary.runs_unchanged, summary.audit_rows_added) == (2, 1, 1)
    assert summary.results_added == 3
    content = logical(dest)
    src_content = logical(open_history(src_path, readonly=True))
    for table in ("runs", "results", "test_runs", "tests", "changed", "incidents"):
        assert content[table] == src_content[table], table
    assert len(content["audit"]) == 2
    # An audit row keeps the moment it was written, which `check` lists it by.
    assert content["audit"] == src_content["audit"]
    assert content["audit"][1][4] == "2026-11-04T12:00:00Z"
    # r2 is earlier than r1: test_x's first_seen moved back.
    assert ("t/a.py::test_x", "t/a.py::test_x", "t/a.py", "2026-11-01T00:00:00Z") in content[
        "tests"
    ]
    assert ("r3", "default", "2026-11-01T00:00:00Z", "pytest", 0, "outage") in content["runs"]


def test_merging_twice_equals_merging_once(histories: tuple[Path, Path]) -> None:
    dest_path, src_path = histories
    dest = open_history(dest_path)
    merge_histories(dest, [src_path])
    once = list(dest.conn.iterdump())
    second = merge_histories(dest, [src_path, src_path])
    assert (second.runs_added, second.runs_extended, second.results_added) == (0, 0, 0)
    assert list(dest.conn.iterdump()) == once


def test_shards_published_as_separate_histories_join_one_run(tmp_path: Path) -> None:
    shard_paths = []
    for n in range(3):
        shard = open_history(tmp_path / f"shard{n}.db")
        record(shard, "ci-1", 0, {f"t/a.py::test_{n}": ["pass"], "t/a.py::common": ["fail"]})
        shard.conn.close()
        shard_paths.append(tmp_path / f"shard{n}.db")
    dest = open_history(tmp_path / "all.db")
    summary = merge_histories(dest, shard_paths)
    assert (summary.runs_added, summary.runs_extended) == (1, 2)
    q = dest.conn.execute
    assert q("SELECT count(*) FROM runs").fetchone() == (1,)
    assert q("SELECT count(*) FROM test_runs").fetchone() == (4,)
    # 'common' ran in every shard: the first copy's attempts are kept, not duplicated.
    assert q("SELECT count(*) FROM results").fetchone() == (4,)


@pytest.mark.parametrize("kind", ["missing", "not-sqlite", "self"])
def test_bad_sources_are_refused_before_anything_is_merged(
    histories: tuple[Path, Path], tmp_path: Path, kind: str
) -> None:
    dest_path, src_path = histories
    bad = {"missing": tmp_path / "nope.db", "not-sqlite": tmp_path / "x.txt", "self": dest_path}[
        kind
    ]
    if kind == "not-sqlite":
        bad.write_text("plain text\n")
    dest = open_history(dest_path)
    before = list(dest.conn.iterdump())
    with pytest.raises(HistoryError):
        merge_histories(dest, [src_path, bad])
    assert list(dest.conn.iterdump()) == before
    # The sources opened before the refusal are closed: no -wal or -shm is left beside them.
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("src.db")) == ["src.db"]


def test_newer_schema_source_is_refused(histories: tuple[Path, Path]) -> None:
    dest_path, src_path = histories
    src = open_history(src_path)
    src.conn.execute("PRAGMA user_version = 99")
    src.conn.close()
    with pytest.raises(HistoryError, match="newer"):
        merge_histories(open_history(dest_path), [src_path])


AUDIT_ROW = {
    "ts": "2026-11-01T05:00:00Z",
    "who": "ci-bot",
    "action": "quarantine",
    "test_id": "t/a.py::test_x",
    "mode": "skip",
    "reason": "flaky on the runner",
    "ticket": None,
    "scores": None,
    "source": "cli",
    "written_at": "2026-11-01T05:00:00Z",
}
OTHER_VALUES = {
    "mode": st.sampled_from([None, "run"]),
    "reason": st.one_of(st.none(), st.text(max_size=10)),
    "ticket": st.text(min_size=1, max_size=6),
    "scores": st.sampled_from(['{"recency": 0.4}', '{"recency": 0.5}']),
    "source": st.sampled_from(["app", "lifecycle"]),
    "written_at": st.sampled_from(["2026-11-01T05:00:01Z", "2026-11-03T00:00:00Z"]),
}


def write_audit(path: Path, rows: list[dict[str, object]]) -> None:
    db = open_history(path)
    with transaction(db.conn):
        for row in rows:
            db.conn.execute(
                f"INSERT INTO audit_log ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                tuple(row.values()),
            )
    db.conn.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(OTHER_VALUES)).flatmap(
        lambda column: st.tuples(st.just(column), OTHER_VALUES[column])
    )
)
def test_audit_rows_differing_in_any_column_are_all_kept(change: tuple[str, object]) -> None:
    """Two decisions at the same second by one identity on one test are both kept, and
    merging again adds nothing."""
    column, value = change
    other = {**AUDIT_ROW, column: value}
    assume(other != AUDIT_ROW)
    with tempfile.TemporaryDirectory() as folder:
        dest, src = Path(folder) / "dest.db", Path(folder) / "src.db"
        write_audit(dest, [AUDIT_ROW])
        write_audit(src, [AUDIT_ROW, other])
        for added in (1, 0):
            db = open_history(dest)
            try:
                assert merge_histories(db, [src]).audit_rows_added == added
                rows = db.conn.execute(
                    f"SELECT {', '.join(AUDIT_ROW)} FROM audit_log ORDER BY id"
                ).fetchall()
            finally:
                db.conn.close()
            assert rows == [tuple(AUDIT_ROW.values()), tuple(other.values())]
