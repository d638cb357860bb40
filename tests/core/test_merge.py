"""Merging histories: id remapping, shards published separately, idempotence."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlite_utils
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from flaketui.core.config import Config
from flaketui.core.errors import HistoryError
from flaketui.core.history import merge as merge_module
from flaketui.core.history.merge import merge_histories
from flaketui.core.history.store import transaction
from flaketui.core.ingest.writer import RunRecorder
from flaketui.core.models import Attempt, CaseResult, RunMeta
from flaketui.core.output.formats import render_json
from flaketui.core.scoring.report import build_report
from tests.connections import open_history
from tests.core.test_rollup_scoring import assert_everything_agrees

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


SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "history.db"
SAMPLE_NOW = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)


def _every_column(db: sqlite_utils.Database) -> dict[str, list[tuple[object, ...]]]:
    """logical(), with every column of runs, results, per-run rows, incidents and meta but the
    rollups' (a rebuild anchors their sums on another day, with the same scores) and the
    signature scheme (a copy keeps the source's; `flaketui merge` stamps or re-signs both)."""
    q = db.conn.execute
    return {
        **logical(db),
        "runs": sorted(q(f"SELECT {merge_module.RUN_COLUMNS} FROM runs")),
        "results": sorted(
            q(
                "SELECT ru.run_id, t.test_id, r.attempt, r.outcome, r.worker_id, r.duration_ms,"
                " r.message, s.hash, p.test_id, r.position, r.timeout_ms, r.leg, r.origin"
                " FROM results r JOIN runs ru ON ru.id = r.run JOIN tests t ON t.id = r.test"
                " LEFT JOIN signatures s ON s.id = r.signature"
                " LEFT JOIN tests p ON p.id = r.predecessor"
            )
        ),
        "test_runs": sorted(
            q(
                "SELECT ru.run_id, t.test_id, tr.ts, tr.outcome, tr.bad, tr.attempts,"
                " tr.failed_attempts, tr.worker_id, s.hash, tr.edited, tr.first_duration_ms,"
                " tr.first_timeout_ms, tr.first_position FROM test_runs tr"
                " JOIN runs ru ON ru.id = tr.run JOIN tests t ON t.id = tr.test"
                " LEFT JOIN signatures s ON s.id = tr.signature"
            )
        ),
        "signatures": sorted(q("SELECT hash, text, example FROM signatures")),
        "incidents": sorted(
            q("SELECT tag, start_ts, end_ts, signature, created_at, note FROM incidents")
        ),
        "audit": sorted(q("SELECT * FROM audit_log"), key=lambda row: row[1:]),
        "files": sorted(
            q("SELECT ru.run_id, f.content_hash FROM run_files f JOIN runs ru ON ru.id = f.run")
        ),
        "meta": sorted(
            q(
                "SELECT key, value FROM meta"
                " WHERE key NOT LIKE 'rollup%' AND key <> 'signature_scheme'"
            )
        ),
    }


def _assert_merged_as_row_by_row(
    copied: sqlite_utils.Database,
    summary: merge_module.MergeSummary,
    source: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A history the source was copied into holds what merging it row by row into a new
    history gives, with the same summary: every column, the report, the rollups' agreement
    (the copy keeps the source's ids and rollups, the merge makes its own)."""
    with monkeypatch.context() as patch:
        patch.setattr(merge_module, "_copy_into_blank", lambda *_: False)
        merged = open_history(Path(tempfile.mkdtemp(dir=source.parent)) / "merged.db")
        by_rows = merge_histories(merged, [source])
    assert summary == by_rows and summary.runs_added > 400
    assert _every_column(copied) == _every_column(merged)
    assert render_json(build_report(copied, now=SAMPLE_NOW)) == render_json(
        build_report(merged, now=SAMPLE_NOW)
    )
    assert_everything_agrees(copied, SAMPLE_NOW, Config())
    merged.conn.close()


def test_merging_into_a_new_history_copies_it_as_a_merge_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A history that holds nothing takes the first source's tables whole (ids, rollups): the
    same content, the same report, as the row-by-row merge it replaces."""
    source = tmp_path / "source.db"
    shutil.copy(SAMPLE, source)
    copied = open_history(tmp_path / "copied.db")
    taken: list[bool] = []
    real = merge_module._copy_into_blank
    with monkeypatch.context() as patch:
        patch.setattr(
            merge_module, "_copy_into_blank", lambda *args: taken.append(real(*args)) or taken[-1]
        )
        summary = merge_histories(copied, [source])
    assert taken == [True]
    _assert_merged_as_row_by_row(copied, summary, source, monkeypatch)
    # The copy's messages were signed with the source's scheme, which it names.
    scheme = "SELECT value FROM meta WHERE key = 'signature_scheme'"
    source_db = open_history(source, readonly=True)
    assert copied.conn.execute(scheme).fetchone() == source_db.conn.execute(scheme).fetchone()
    # The source was only read.
    assert source_db.conn.execute("SELECT count(*) FROM runs").fetchone() == (summary.runs_added,)


def test_merging_into_a_missing_file_backs_the_source_up_into_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file not there yet takes a copy of the first source made by SQLite's backup: the same
    content, report and rollups as the row-by-row merge, the same summary, nothing else left in
    its folder, and the permissions any new history gets."""
    source = tmp_path / "source.db"
    shutil.copy(SAMPLE, source)
    folder = tmp_path / "jobs"
    folder.mkdir()
    summary = merge_module.copy_to_new(folder / "copied.db", source)
    assert summary is not None
    copied = open_history(folder / "copied.db")
    assert merge_histories(copied, [], copied=summary) is summary
    _assert_merged_as_row_by_row(copied, summary, source, monkeypatch)
    copied.conn.close()
    assert sorted(p.name for p in folder.iterdir()) == ["copied.db"]
    open_history(tmp_path / "new.db").conn.close()
    mode = (folder / "copied.db").stat().st_mode & 0o777
    assert mode == (tmp_path / "new.db").stat().st_mode & 0o777


def test_the_copy_never_takes_the_place_of_a_file_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A destination that exists (even empty), appears while the copy is made, or has no
    folder, a source this process may not write, a folder without hard links and a copy that
    fails are left to the row-by-row merge: None, nothing written, no part file left."""
    source = tmp_path / "source.db"
    shutil.copy(SAMPLE, source)
    folder = tmp_path / "jobs"
    folder.mkdir()
    empty = folder / "empty.db"
    empty.touch()
    assert merge_module.copy_to_new(empty, source) is None
    assert empty.read_bytes() == b""
    assert merge_module.copy_to_new(tmp_path / "gone" / "new.db", source) is None
    assert not (tmp_path / "gone").exists()

    real = merge_module._backup

    def another_writer_first(src: Path, part: Path) -> dict[str, int]:
        counts = real(src, part)
        (folder / "raced.db").write_bytes(b"written meanwhile")
        return counts

    monkeypatch.setattr(merge_module, "_backup", another_writer_first)
    assert merge_module.copy_to_new(folder / "raced.db", source) is None
    assert (folder / "raced.db").read_bytes() == b"written meanwhile"
    monkeypatch.undo()

    source.chmod(0o444)
    try:
        assert merge_module.copy_to_new(folder / "new.db", source) is None
    finally:
        source.chmod(0o644)

    def no_hard_links(_src: object, _dst: object) -> None:
        raise PermissionError(1, "Operation not permitted")  # as a FAT or SMB folder answers

    def disk_full(_src: Path, _part: Path) -> dict[str, int]:
        raise sqlite3.OperationalError("database or disk is full")

    for name, patched, failing in (("link", merge_module.os, no_hard_links),
                                   ("_backup", merge_module, disk_full)):  # fmt: skip
        with monkeypatch.context() as patch:
            patch.setattr(patched, name, failing)
            assert merge_module.copy_to_new(folder / "new.db", source) is None
    assert sorted(p.name for p in folder.iterdir()) == ["empty.db", "raced.db"]


def test_a_history_holding_anything_is_merged_row_by_row(
    histories: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a history with nothing in it is copied over: one with a single audit row (or any
    row) gets the source's rows merged, its own kept."""
    dest_path, src_path = histories
    blank = open_history(dest_path.with_name("blank.db"))
    audit(blank, "2026-11-01T05:00:00Z", "t/a.py::test_kept")
    copies: list[object] = []
    real = merge_module._copy_into_blank
    monkeypatch.setattr(
        merge_module, "_copy_into_blank", lambda *args: copies.append(real(*args)) or copies[-1]
    )
    merge_histories(blank, [src_path])
    assert copies == [False]
    assert ("2026-11-01T05:00:00Z", "ana", "quarantine", "t/a.py::test_kept") in [
        row[:4] for row in logical(blank)["audit"]
    ]
    assert len(logical(blank)["runs"]) == 3


def test_a_main_only_transaction_locks_the_main_file_and_reads_the_attached(
    tmp_path: Path,
) -> None:
    """The copy's transaction: another writer waits for the history being written, never for
    the source it reads."""
    import sqlite3

    for name in ("dest.db", "source.db"):
        open_history(tmp_path / name).conn.close()
    dest = sqlite3.connect(tmp_path / "dest.db", isolation_level=None)
    dest.execute("ATTACH DATABASE ? AS merged_source", (str(tmp_path / "source.db"),))
    others = {
        name: sqlite3.connect(tmp_path / name, isolation_level=None, timeout=0)
        for name in ("dest.db", "source.db")
    }
    with transaction(dest, main_only=True):
        dest.execute("SELECT count(*) FROM merged_source.runs").fetchone()
        others["source.db"].execute("BEGIN IMMEDIATE")  # the source: free to write
        others["source.db"].execute("ROLLBACK")
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            others["dest.db"].execute("BEGIN IMMEDIATE")
    others["dest.db"].execute("BEGIN IMMEDIATE")  # released at the end
    others["dest.db"].execute("ROLLBACK")
    for conn in (dest, *others.values()):
        conn.close()
