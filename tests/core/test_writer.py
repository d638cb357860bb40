"""The history writer: runs, attempts, per-run outcomes, idempotence and atomicity."""

from __future__ import annotations

import sqlite3
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlite_utils
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from flaketui.core.config import Config
from flaketui.core.errors import FlaketuiError, ReportError
from flaketui.core.history.store import transaction
from flaketui.core.ingest.resign import SCHEME_KEY, scheme_of
from flaketui.core.ingest.rows import leg_of
from flaketui.core.ingest.runmeta import RunMetaError
from flaketui.core.ingest.writer import (
    RunRecorder,
    content_run_id,
    ingest_reports,
)
from flaketui.core.models import Attempt, CaseResult, RunMeta
from flaketui.core.testids import parent_of
from tests.connections import closed_at_exit, open_history

TS = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def dump(db: sqlite_utils.Database) -> list[str]:
    return list(db.conn.iterdump())


def rows(db: sqlite_utils.Database, sql: str, *params: object) -> list[tuple[object, ...]]:
    return [tuple(r) for r in db.conn.execute(sql, params)]


def case(test_id: str, *outcomes: str, message: str | None = "boom", worker: str | None = None):
    return CaseResult(
        test_id,
        None,
        [Attempt(o, 10, message if o in ("fail", "error") else None, worker) for o in outcomes],
    )


def report(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(f'<?xml version="1.0"?>\n<testsuite name="s">{body}</testsuite>\n')
    return path


def tc(cls: str, name: str, inner: str = "") -> str:
    return f'<testcase classname="{cls}" name="{name}" time="0.1">{inner}</testcase>'


@pytest.fixture
def db(tmp_path: Path) -> sqlite_utils.Database:
    return open_history(tmp_path / "history.db")


def test_parent_strips_one_trailing_param_block() -> None:
    assert parent_of("t.py::test_x[a-b]") == "t.py::test_x"
    assert parent_of("t.py::test_x[a[1]]") == "t.py::test_x"
    assert parent_of("t.py::test_x[1][2]") == "t.py::test_x[1]"
    assert parent_of("t.py::test_x") == "t.py::test_x"
    assert parent_of("[odd]") == "[odd]"


def reference_outcome(outcomes: list[str]) -> tuple[str, int]:
    """The per-run outcome and 'bad', spelled out independently of the SQL."""
    real = [o for o in outcomes if o != "skipped"]
    if not real:
        return "skipped", 0
    failed = [o in ("fail", "error") for o in real]
    if not any(failed):
        return "pass", 0
    if all(failed):
        return "fail", 1
    return "flaky", int(failed[0])


@pytest.mark.parametrize(
    ("outcomes", "expected", "bad"),
    [
        (["pass"], "pass", 0),
        (["fail"], "fail", 1),
        (["error", "fail"], "fail", 1),
        (["fail", "pass"], "flaky", 1),
        (["error", "error", "pass"], "flaky", 1),
        (["skipped"], "skipped", 0),
        (["skipped", "pass"], "pass", 0),
        (["skipped", "fail", "pass"], "flaky", 1),
        (["pass", "fail"], "flaky", 0),  # mixed in any order: flaky, but not a bad run
    ],
)
def test_per_run_outcome(
    db: sqlite_utils.Database, outcomes: list[str], expected: str, bad: int
) -> None:
    recorder = RunRecorder(db, RunMeta(run_id="r", ts=TS))
    recorder.add([case("t.py::test_a", *outcomes, worker="gw3")])
    [row] = rows(db, "SELECT outcome, bad, attempts, failed_attempts, worker_id, ts FROM test_runs")
    failed = sum(o in ("fail", "error") for o in outcomes)
    assert row == (expected, bad, len(outcomes), failed, "gw3", "2026-11-01T12:00:00Z")


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(["pass", "fail", "error", "skipped"]), min_size=1, max_size=3),
        min_size=1,
        max_size=4,
    )
)
def test_attempts_over_batches_match_the_rules(batches: list[list[str]]) -> None:
    with tempfile.TemporaryDirectory() as folder, closed_at_exit():
        _check_batches(open_history(Path(folder) / "h.db"), batches)


def _check_batches(db: sqlite_utils.Database, batches: list[list[str]]) -> None:
    recorder = RunRecorder(db, RunMeta(run_id="r", ts=TS))
    for index, outcomes in enumerate(batches):
        messages = [f"E{index}-{n}" for n in range(len(outcomes))]
        recorder.add(
            [
                CaseResult(
                    "t.py::t",
                    None,
                    [Attempt(o, None, m) for o, m in zip(outcomes, messages, strict=True)],
                )
            ]
        )
    flat = [o for batch in batches for o in batch]
    [(outcome, bad, attempts, failed, sig_text)] = rows(
        db,
        "SELECT tr.outcome, tr.bad, tr.attempts, tr.failed_attempts, s.text"
        " FROM test_runs tr LEFT JOIN signatures s ON s.id = tr.signature",
    )
    assert (outcome, bad) == reference_outcome(flat)
    assert (attempts, failed) == (len(flat), sum(o in ("fail", "error") for o in flat))
    numbers = [r[0] for r in rows(db, "SELECT attempt FROM results ORDER BY attempt")]
    assert numbers == list(range(1, len(flat) + 1))
    first_fail = next((i for i, o in enumerate(flat) if o in ("fail", "error")), None)
    if first_fail is None:
        assert sig_text is None
    else:
        # The first failure's message, normalised: E<NUM>-<NUM>.
        assert sig_text == "E<NUM>-<NUM>"


def test_recorder_marks_the_run_finished_only_at_finish(db: sqlite_utils.Database) -> None:
    recorder = RunRecorder(db, RunMeta(run_id="session", ts=TS))
    recorder.add([])
    assert rows(db, "SELECT count(*) FROM runs") == [(0,)]  # empty session: no run
    recorder.add([case("t.py::a", "fail")])
    assert rows(db, "SELECT source, finished FROM runs") == [("pytest", 0)]
    recorder.add([case("t.py::a", "pass"), case("t.py::b", "pass")])
    assert rows(db, "SELECT outcome, attempts FROM test_runs ORDER BY test") == [
        ("flaky", 2),
        ("pass", 1),
    ]
    recorder.finish()
    assert rows(db, "SELECT finished FROM runs") == [(1,)]


def test_recorder_stamps_the_scheme_of_a_new_history_only(db: sqlite_utils.Database) -> None:
    config = Config(mask_patterns=(r"tenant-\d+",))
    recorder = RunRecorder(db, RunMeta(run_id="first", ts=TS), config=config)
    recorder.add([])
    assert rows(db, "SELECT value FROM meta WHERE key = ?", SCHEME_KEY) == []  # no run yet
    recorder.add([case("t.py::a", "fail")])
    stamped = [(scheme_of(config.mask_patterns),)]
    assert rows(db, "SELECT value FROM meta WHERE key = ?", SCHEME_KEY) == stamped
    # A later session with other patterns does not claim the history's older messages.
    later = RunRecorder(db, RunMeta(run_id="second", ts=TS), config=Config())
    later.add([case("t.py::a", "pass")])
    assert rows(db, "SELECT value FROM meta WHERE key = ?", SCHEME_KEY) == stamped


def test_recorder_batch_with_bad_outcome_rolls_back_and_recovers(
    db: sqlite_utils.Database,
) -> None:
    recorder = RunRecorder(db, RunMeta(run_id="session", ts=TS))
    recorder.add([case("t.py::a", "pass")])
    before = dump(db)
    with pytest.raises(ReportError):
        recorder.add([case("t.py::new", "pass"), case("t.py::a", "exploded")])
    assert dump(db) == before
    recorder.add([case("t.py::new", "fail")])  # the rolled-back test id is not cached
    assert rows(db, "SELECT test_id FROM tests ORDER BY id") == [("t.py::a",), ("t.py::new",)]


def test_rows_of_a_run(db: sqlite_utils.Database) -> None:
    meta = RunMeta(
        run_id="ci-1",
        suite="unit",
        branch="main",
        commit_sha="abc",
        ts=TS,
        worker_count=4,
        changed_files=["./tests\\test_a.py", "src/x.py"],
        incident="outage-1",
    )
    recorder = RunRecorder(db, meta, source="pytest")
    recorder.add(
        [
            CaseResult(
                "tests/test_a.py::test_x[1]", None, [Attempt("fail", 5, "E: password=hunter2")]
            ),
            CaseResult("tests/test_b.py::test_y", None, [Attempt("pass", 1)]),
        ]
    )
    assert rows(
        db,
        "SELECT run_id, suite, branch, branch_kind, commit_sha, worker_count, incident FROM runs",
    ) == [("ci-1", "unit", "main", "main", "abc", 4, "outage-1")]
    assert rows(db, "SELECT path FROM run_changed_files ORDER BY path") == [
        ("src/x.py",),
        ("tests/test_a.py",),
    ]
    assert rows(db, "SELECT test_id, parent, test_file FROM tests ORDER BY id") == [
        ("tests/test_a.py::test_x[1]", "tests/test_a.py::test_x", "tests/test_a.py"),
        ("tests/test_b.py::test_y", "tests/test_b.py::test_y", "tests/test_b.py"),
    ]
    assert rows(db, "SELECT edited FROM test_runs ORDER BY test") == [(1,), (0,)]
    assert rows(db, "SELECT message FROM results WHERE outcome = 'fail'") == [
        ("E: password=<REDACTED>",)
    ]
    assert rows(db, "SELECT tag, note FROM incidents") == [("outage-1", "tagged at ingest")]


def test_first_seen_moves_to_an_earlier_run_and_signatures_keep_first_example(
    db: sqlite_utils.Database,
) -> None:
    late = RunRecorder(db, RunMeta(run_id="late", ts=TS))
    late.add([case("t.py::a", "fail", message="Timeout after 30s")])
    early = RunRecorder(db, RunMeta(run_id="early", ts=datetime(2026, 10, 1, tzinfo=UTC)))
    early.add([case("t.py::a", "fail", message="Timeout after 45s")])
    assert rows(db, "SELECT first_seen FROM tests") == [("2026-10-01T00:00:00Z",)]
    assert rows(db, "SELECT text, example FROM signatures") == [
        ("Timeout after <NUM>s", "Timeout after 30s")
    ]
    assert rows(db, "SELECT count(DISTINCT signature) FROM results") == [(1,)]


def test_same_report_twice_is_idempotent_with_and_without_run_id(
    db: sqlite_utils.Database, tmp_path: Path
) -> None:
    path = report(tmp_path, "r.xml", tc("a.B", "t1") + tc("a.B", "t2", "<failure message='x'/>"))
    first = ingest_reports(db, [path], RunMeta(ts=TS))
    assert (first.created, first.results, first.tests) == (True, 2, 2)
    assert first.run_id == content_run_id([_sha(path)])
    after_first = dump(db)
    again = ingest_reports(db, [path], RunMeta())
    assert (again.created, again.files_skipped, again.results) == (False, 1, 0)
    assert dump(db) == after_first
    ingest_reports(db, [path], RunMeta(run_id="named", ts=TS))
    after_named = dump(db)
    ingest_reports(db, [path], RunMeta(run_id="named", suite="other", ts=TS))
    assert dump(db) == after_named
    assert rows(db, "SELECT suite FROM runs WHERE run_id = 'named'") == [("default",)]


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_three_shards_form_one_run_and_each_shard_runs_the_test_once(
    db: sqlite_utils.Database, tmp_path: Path
) -> None:
    shards = [
        report(tmp_path, "s1.xml", tc("a.B", "t1", "<failure message='x'/>") + tc("a.B", "t2")),
        report(tmp_path, "s2.xml", tc("a.B", "t1") + tc("a.C", "t3")),
        report(tmp_path, "s3.xml", tc("a.D", "t4", "<skipped/>")),
    ]
    results = [ingest_reports(db, [s], RunMeta(run_id="R", ts=TS)) for s in shards]
    assert [r.created for r in results] == [True, False, False]
    assert rows(db, "SELECT count(*) FROM runs") == [(1,)]
    assert rows(db, "SELECT count(*) FROM run_files") == [(3,)]
    assert rows(
        db,
        "SELECT t.test_id, r.attempt, r.outcome FROM results r JOIN tests t ON t.id = r.test"
        " WHERE t.test_id = 'a.B::t1' ORDER BY r.attempt",
    ) == [("a.B::t1", 1, "fail"), ("a.B::t1", 2, "pass")]
    # t1 failed outright in s1 and passed in s2: two executions, one failed, so a failing run.
    assert rows(
        db, "SELECT outcome FROM test_runs JOIN tests ON tests.id = test ORDER BY test_id"
    ) == [
        ("fail",),
        ("pass",),
        ("pass",),
        ("skipped",),
    ]
    assert results[-1].tests == 4
    settled = dump(db)
    for shard in shards:
        again = ingest_reports(db, [shard], RunMeta(run_id="R", ts=TS))
        assert (again.files_skipped, again.results) == (1, 0)
    assert ingest_reports(db, shards, RunMeta(run_id="R")).files_skipped == 3
    assert dump(db) == settled


def test_truncated_report_leaves_the_database_unchanged(
    db: sqlite_utils.Database, tmp_path: Path
) -> None:
    good = report(tmp_path, "good.xml", tc("a.B", "t1"))
    ingest_reports(db, [good], RunMeta(run_id="R", ts=TS))
    before = dump(db)
    many = "".join(tc("a.B", f"t{n}") for n in range(5000))
    truncated = tmp_path / "bad.xml"
    truncated.write_text(f"<testsuite>{many}<testcase name='x'")
    for run_id in ("R", "new", None):  # an existing run, a new one, a content-hash one
        with pytest.raises(ReportError):
            ingest_reports(db, [good, truncated], RunMeta(run_id=run_id, ts=TS))
        assert dump(db) == before


@pytest.mark.parametrize(
    "meta",
    [RunMeta(run_id="m", branch_kind="feature"), RunMeta(run_id="m", worker_count=0)],
)
def test_bad_metadata_is_refused_before_writing(
    db: sqlite_utils.Database, tmp_path: Path, meta: RunMeta
) -> None:
    path = report(tmp_path, "r.xml", tc("a.B", "t1"))
    before = dump(db)
    with pytest.raises(RunMetaError):
        ingest_reports(db, [path], meta)
    assert dump(db) == before


def test_report_without_cases_creates_no_run(db: sqlite_utils.Database, tmp_path: Path) -> None:
    empty = report(tmp_path, "empty.xml", "")
    before = dump(db)
    result = ingest_reports(db, [empty], RunMeta(ts=TS))
    assert result.empty and not result.created and result.results == 0
    assert dump(db) == before


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_missing_or_directory_report_is_refused(
    db: sqlite_utils.Database, tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "nope.xml"
    if kind == "directory":
        path.mkdir()
    with pytest.raises(ReportError, match=r"nope\.xml"):
        ingest_reports(db, [path], RunMeta())
    assert rows(db, "SELECT count(*) FROM runs") == [(0,)]


def test_errors_are_user_errors() -> None:
    assert issubclass(RunMetaError, FlaketuiError)
    assert issubclass(ReportError, FlaketuiError)


def test_concurrent_writer_sees_committed_rows(tmp_path: Path) -> None:
    first = open_history(tmp_path / "h.db")
    second = open_history(tmp_path / "h.db")
    RunRecorder(first, RunMeta(run_id="a", ts=TS)).add([case("t.py::x", "pass")])
    RunRecorder(second, RunMeta(run_id="b", ts=TS)).add([case("t.py::x", "fail")])
    assert rows(first, "SELECT count(*) FROM tests") == [(1,)]
    assert rows(first, "SELECT count(*) FROM test_runs") == [(2,)]
    assert isinstance(first.conn, sqlite3.Connection)


def test_repeats_in_one_report_are_attempts_of_one_test(
    db: sqlite_utils.Database, tmp_path: Path
) -> None:
    body = (
        tc("a.B", "t1", "<failure message='first'/>")
        + tc("a.B", "t2")
        + tc("a.B", "t1", "<error message='second'/>")
        + tc("a.B", "t1")
    )
    result = ingest_reports(db, [report(tmp_path, "r.xml", body)], RunMeta(run_id="R", ts=TS))
    assert (result.results, result.tests) == (4, 2)
    assert rows(
        db,
        "SELECT t.test_id, tr.outcome, tr.bad, tr.attempts, tr.failed_attempts, s.example"
        " FROM test_runs tr JOIN tests t ON t.id = tr.test"
        " LEFT JOIN signatures s ON s.id = tr.signature ORDER BY t.test_id",
    ) == [("a.B::t1", "flaky", 1, 3, 2, "first"), ("a.B::t2", "pass", 0, 1, 0, None)]


def test_edited_is_set_for_a_later_shard_of_a_run_with_changed_files(
    db: sqlite_utils.Database,
) -> None:
    recorder = RunRecorder(db, RunMeta(run_id="R", ts=TS, changed_files=["tests/test_a.py"]))
    recorder.add([case("tests/test_b.py::test_y", "pass")])
    recorder.add([case("tests/test_a.py::test_x", "fail"), case("tests/test_a.py::test_x", "pass")])
    assert rows(
        db,
        "SELECT t.test_id, tr.edited, tr.outcome FROM test_runs tr JOIN tests t ON t.id = tr.test"
        " ORDER BY t.test_id",
    ) == [("tests/test_a.py::test_x", 1, "flaky"), ("tests/test_b.py::test_y", 0, "pass")]


# ---- the exclusive fast path of ingest_reports against the recorder's SQL path ----------------

_STORED = (
    "SELECT t.test_id, r.attempt, r.outcome, r.worker_id, r.duration_ms, r.message, s.hash"
    " FROM results r JOIN tests t ON t.id = r.test LEFT JOIN signatures s ON s.id = r.signature"
    " ORDER BY t.test_id, r.attempt",
    "SELECT t.test_id, tr.outcome, tr.bad, tr.attempts, tr.failed_attempts, tr.worker_id,"
    " s.hash, tr.edited FROM test_runs tr JOIN tests t ON t.id = tr.test"
    " LEFT JOIN signatures s ON s.id = tr.signature ORDER BY t.test_id",
)
_XML_OUTCOMES = {
    "pass": "",
    "fail": '<failure message="E{n} at 0x{n:08x}"/>',
    "error": "<error>crash {n}</error>",
    "skipped": '<skipped message="later"/>',
}


def _shard_xml(cases: list[tuple[int, str]], offset: int) -> str:
    body = "".join(
        f'<testcase classname="a.B" name="t{test}" file="a/B.py" time="0.{n}">'
        f'{_XML_OUTCOMES[outcome].format(n=offset + n)}<properties><property name="worker_id"'
        f' value="gw{n % 2}"/></properties></testcase>'
        for n, (test, outcome) in enumerate(cases)
    )
    return f'<?xml version="1.0"?>\n<testsuite name="s">{body}</testsuite>\n'


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.integers(0, 4), st.sampled_from(["pass", "fail", "error", "skipped"])),
            min_size=1,
            max_size=6,
        ),
        min_size=1,
        max_size=3,
    ),
    st.booleans(),
)
def test_ingest_fast_path_stores_what_the_recorder_stores(
    shards: list[list[tuple[int, str]]], one_call: bool
) -> None:
    """Repeats inside a file, across files of one call and across calls all number attempts and
    compute per-run rows exactly as the recorder's SQL path does (it takes no fast path)."""
    from flaketui.core.ingest.junit import iter_cases

    # The same content twice is one file to the ingest (content hash), two batches to a recorder.
    assume(len({_shard_xml(cases, 100 * i) for i, cases in enumerate(shards)}) == len(shards))
    with tempfile.TemporaryDirectory() as folder, closed_at_exit():
        base = Path(folder)
        paths = []
        for index, cases in enumerate(shards):
            paths.append(base / f"s{index}.xml")
            paths[-1].write_text(_shard_xml(cases, 100 * index))
        meta = RunMeta(run_id="R", ts=TS, changed_files=["a/B.py"])
        fast = open_history(base / "fast.db")
        if one_call:
            ingest_reports(fast, paths, meta)
        else:
            for path in paths:
                ingest_reports(fast, [path], meta)
        slow = open_history(base / "slow.db")
        recorder = RunRecorder(slow, meta)
        for path in paths:
            recorder.add(list(iter_cases(path)), leg=leg_of(_sha(path)))
        assert rows(fast, "SELECT sum(edited) FROM test_runs") > [(0,)]
        for sql in _STORED:
            assert rows(fast, sql) == rows(slow, sql)


def test_ingest_restores_connection_settings(
    db: sqlite_utils.Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a run is written its commit checkpoints only past WRITE_CHECKPOINT_PAGES of WAL
    (not after every run); the connection's own settings come back after, even on an error."""
    from flaketui.core.ingest import rows as rows_module
    from flaketui.core.ingest import writer as writer_module

    db.conn.execute("PRAGMA cache_size = -3000")
    db.conn.execute("PRAGMA wal_autocheckpoint = 500")
    seen = []
    real = writer_module._ingest_run

    def watched(conn: sqlite3.Connection, *args: object, **kwargs: object) -> object:
        seen.append(conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
        return real(conn, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(writer_module, "_ingest_run", watched)
    good = report(tmp_path, "good.xml", tc("a.B", "t1"))
    bad = tmp_path / "bad.xml"
    bad.write_text("<testsuite><testcase name='x'")
    ingest_reports(db, [good], RunMeta(run_id="R", ts=TS))
    with pytest.raises(ReportError):
        ingest_reports(db, [bad], RunMeta(run_id="R2", ts=TS))
    assert seen == [rows_module.WRITE_CHECKPOINT_PAGES] * 2
    assert rows(db, "PRAGMA foreign_keys") == [(1,)]
    assert rows(db, "PRAGMA cache_size") == [(-3000,)]
    assert rows(db, "PRAGMA wal_autocheckpoint") == [(500,)]


def test_id_and_message_caches_stay_within_their_character_bound(
    db: sqlite_utils.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flaketui.core.history.runs import create_run
    from flaketui.core.history.store import transaction
    from flaketui.core.ingest import rows as rows_module

    monkeypatch.setattr(rows_module, "MAX_CACHED_CHARS", 200)
    monkeypatch.setattr(rows_module, "BATCH_CASES", 3)
    cases = [case(f"tests/test_m.py::test_{'x' * 40}_{n}", "fail", message=f"E {n}" * 30)
             for n in range(20)]  # fmt: skip
    with transaction(db.conn):
        run_pk = create_run(
            db.conn, RunMeta(run_id="R", ts=TS, suite="s", branch_kind="pr",
                             worker_count=1), "junit", 1)  # fmt: skip
        writer = rows_module.RunWriter(db.conn, run_pk, "2026-11-01T12:00:00Z", Config())
        writer.write(cases)
        # At most one batch beyond the bound before the caches are dropped.
        assert writer.test_id_chars <= 200 + 3 * 60
        assert writer.signed_chars <= 200 + 3 * 200
    assert rows(db, "SELECT count(*), count(DISTINCT test), max(attempt) FROM results") == [
        (20, 20, 1)
    ]


def test_a_fold_recomputes_a_huge_run_in_slices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A day recomputed by a fold (a run earlier than one already folded) goes in slices of
    FOLD_SLICE tests, with the rows one slice gives."""
    from flaketui.core.rollups import build as rollups_build

    body = "".join(tc("a.B", f"t{n}", "<failure message='x'/>" if n % 3 else "") for n in range(7))
    first, second = report(tmp_path, "1.xml", body), report(tmp_path, "2.xml", body + tc("a", "z"))
    dumps = []
    for slice_size in (3, 1000):
        monkeypatch.setattr(rollups_build, "FOLD_SLICE", slice_size)
        history = open_history(tmp_path / f"h{slice_size}.db")
        ingest_reports(history, [first], RunMeta(run_id="R1", ts=TS))
        with transaction(history.conn):
            assert rollups_build.fold_pending(history.conn) == 1
        ingest_reports(history, [second], RunMeta(run_id="R2", ts=TS.replace(hour=11)))
        with transaction(history.conn):
            assert rollups_build.fold_pending(history.conn) == 1
        dumps.append(rows(history, "SELECT * FROM test_day_rollups ORDER BY test, day, suite"))
    assert dumps[0] == dumps[1]
    assert len(dumps[0]) == 8


def test_two_recorders_sharing_a_run_number_attempts_after_each_other(tmp_path: Path) -> None:
    """Each recorder re-reads what the run holds when the other has committed in between."""
    meta = RunMeta(run_id="shared", ts=TS)
    first = RunRecorder(open_history(tmp_path / "h.db"), meta)
    second = RunRecorder(open_history(tmp_path / "h.db"), meta)
    first.add([case("t.py::a", "fail")])
    second.add([case("t.py::a", "pass"), case("t.py::b", "fail")])
    first.add([case("t.py::b", "pass"), case("t.py::c", "pass")])
    second.add([case("t.py::c", "fail")])
    first.add([case("t.py::a", "pass")])  # nobody wrote in between: its own knowledge holds
    db = open_history(tmp_path / "h.db")
    assert rows(
        db,
        "SELECT t.test_id, r.attempt, r.outcome FROM results r JOIN tests t ON t.id = r.test"
        " ORDER BY t.test_id, r.attempt",
    ) == [
        ("t.py::a", 1, "fail"),
        ("t.py::a", 2, "pass"),
        ("t.py::a", 3, "pass"),
        ("t.py::b", 1, "fail"),
        ("t.py::b", 2, "pass"),
        ("t.py::c", 1, "pass"),
        ("t.py::c", 2, "fail"),
    ]
    assert rows(
        db,
        "SELECT t.test_id, tr.outcome, tr.attempts FROM test_runs tr JOIN tests t ON t.id = tr.test"
        " ORDER BY t.test_id",
    ) == [("t.py::a", "flaky", 3), ("t.py::b", "flaky", 2), ("t.py::c", "flaky", 2)]


def test_first_ingest_into_a_fresh_history_leaves_the_rollups_a_rebuild_gives(
    tmp_path: Path,
) -> None:
    """The writer builds the rollups before the first run's rows, then its fold adds the run."""
    from flaketui.core.rollups import build as rollups
    from flaketui.core.rollups.pending import pending_runs

    body = "".join(
        tc("a.B", f"t{n}[p{n % 2}]", "<failure message='x 1'/>" if n % 3 else "") for n in range(9)
    )
    history = open_history(tmp_path / "h.db")
    ingest_reports(history, [report(tmp_path, "1.xml", body)], RunMeta(run_id="R1", ts=TS))
    assert pending_runs(history.conn) == 1  # a small run waits for others
    with transaction(history.conn):
        rollups.fold_pending(history.conn)
    tables = [
        name
        for (name,) in history.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND (name LIKE '%day%'"
            " OR name LIKE '%mixed%') ORDER BY name"
        )
    ]
    assert "test_day_rollups" in tables
    written = {t: rows(history, f"SELECT * FROM {t} ORDER BY 1, 2, 3") for t in tables}
    assert written["test_day_rollups"]
    with history.conn:
        rollups.rebuild(history.conn)
    assert {t: rows(history, f"SELECT * FROM {t} ORDER BY 1, 2, 3") for t in tables} == written


# ---- one test in several files of a run (matrix legs, shards) --------------------------------


def _leg_outcome(outcomes: list[str]) -> str:
    failed = sum(o in ("fail", "error") for o in outcomes)
    passed = outcomes.count("pass")
    if failed + passed == 0:
        return "skipped"
    return "pass" if failed == 0 else "fail" if passed == 0 else "flaky"


def _expected_run(legs: list[list[str]]) -> tuple[str, int, int, int]:
    """The documented rule: any failed leg fails the run, else any flaky leg makes it flaky."""
    kinds = {_leg_outcome(leg) for leg in legs}
    outcome = next(k for k in ("fail", "flaky", "pass", "skipped") if k in kinds)
    bad = any(next((o for o in leg if o != "skipped"), "pass") in ("fail", "error") for leg in legs)
    failed = sum(o in ("fail", "error") for leg in legs for o in leg)
    return outcome, int(bad), sum(map(len, legs)), failed


def _leg_xml(index: int, outcomes: list[str]) -> str:
    body = "".join(
        f'<testcase classname="a.B" name="t" time="0.{n}">'
        f"{_XML_OUTCOMES[outcome].format(n=100 * index + n)}</testcase>"
        for n, outcome in enumerate(outcomes)
    )
    return f'<?xml version="1.0"?>\n<testsuite name="leg{index}">{body}</testsuite>\n'


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(["pass", "fail", "error", "skipped"]), min_size=1, max_size=3),
        min_size=1,
        max_size=4,
    ).flatmap(lambda legs: st.tuples(st.just(legs), st.permutations(range(len(legs))))),
    st.booleans(),
)
def test_legs_of_a_run_combine_whatever_the_ingest_order(
    legs_and_order: tuple[list[list[str]], list[int]], one_call: bool
) -> None:
    """A test's attempts split into report files of one run: each file is one execution (its
    repeats are retries), and the run's outcome, bad flag and counts follow the documented
    rule in any ingest order, in one ingest or one per file."""
    legs, order = legs_and_order
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        paths = []
        for index, outcomes in enumerate(legs):
            paths.append(base / f"leg{index}.xml")
            paths[-1].write_text(_leg_xml(index, outcomes))
        stored = []
        for name, files in (("given", paths), ("shuffled", [paths[i] for i in order])):
            db = open_history(base / f"{name}.db")
            if one_call:
                ingest_reports(db, files, RunMeta(run_id="R", ts=TS))
            else:
                for path in files:
                    ingest_reports(db, [path], RunMeta(run_id="R", ts=TS))
            stored.append(rows(db, "SELECT outcome, bad, attempts, failed_attempts FROM test_runs"))
            db.conn.close()
    assert stored[0] == stored[1] == [_expected_run(legs)]


# ---- same-named tests of different files in separately ingested shards -----------------------


def _file_case(file: str, name: str, inner: str = "") -> str:
    return f'<testcase classname="parser" name="{name}" file="{file}" time="0.1">{inner}</testcase>'


def test_a_later_shard_moves_the_runs_plain_id_and_keeps_the_rollups_exact(
    db: sqlite_utils.Database, tmp_path: Path
) -> None:
    """The run is folded into the rollups before its second shard names a file sharing a test
    name: the stored attempts move to their file's id (failing there, as they did), the plain
    id leaves the run and the history, and the rollups are what a rebuild from the raw rows
    gives."""
    from flaketui.core.rollups import build as rollups

    first = report(
        tmp_path,
        "1.xml",
        _file_case("src/a.test.js", "x", "<failure message='boom 1'/>")
        + _file_case("src/a.test.js", "y"),
    )
    second = report(tmp_path, "2.xml", _file_case("src/b.test.js", "x"))
    earlier = report(tmp_path, "0.xml", _file_case("src/a.test.js", "y"))
    ingest_reports(db, [earlier], RunMeta(run_id="R0", ts=datetime(2026, 10, 30, tzinfo=UTC)))
    ingest_reports(db, [first], RunMeta(run_id="R", ts=TS))
    with transaction(db.conn):
        rollups.fold_pending(db.conn)
    assert rows(db, "SELECT count(*) FROM test_day_rollups WHERE test = ("
                "SELECT id FROM tests WHERE test_id = 'parser::x')") == [(1,)]  # fmt: skip
    ingest_reports(db, [second], RunMeta(run_id="R", ts=TS))
    assert rows(
        db,
        "SELECT t.test_id, x.attempt, x.outcome, x.origin FROM results x"
        " JOIN tests t ON t.id = x.test JOIN runs r ON r.id = x.run WHERE r.run_id = 'R'"
        " ORDER BY 1",
    ) == [
        ("parser::y", 1, "pass", "src/a.test.js"),
        ("src/a.test.js::parser::x", 1, "fail", "src/a.test.js"),
        ("src/b.test.js::parser::x", 1, "pass", "src/b.test.js"),
    ]
    assert rows(
        db, "SELECT t.test_id, tr.outcome FROM test_runs tr JOIN tests t ON t.id = tr.test"
        " WHERE tr.run = (SELECT id FROM runs WHERE run_id = 'R') ORDER BY 1"
    ) == [
        ("parser::y", "pass"),
        ("src/a.test.js::parser::x", "fail"),
        ("src/b.test.js::parser::x", "pass"),
    ]  # fmt: skip
    assert rows(db, "SELECT test_id, test_file FROM tests ORDER BY 1") == [
        ("parser::y", "src/a.test.js"),
        ("src/a.test.js::parser::x", "src/a.test.js"),
        ("src/b.test.js::parser::x", "src/b.test.js"),
    ]
    with transaction(db.conn):
        rollups.fold_pending(db.conn)
    tables = [
        name
        for (name,) in db.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND (name LIKE '%day%'"
            " OR name LIKE '%week%' OR name LIKE '%mixed%') ORDER BY name"
        )
    ]
    written = {t: rows(db, f"SELECT * FROM {t} ORDER BY 1, 2, 3") for t in tables}
    with db.conn:
        rollups.rebuild(db.conn)
    assert {t: rows(db, f"SELECT * FROM {t} ORDER BY 1, 2, 3") for t in tables} == written


def test_a_plain_id_of_an_unknown_file_stays_and_takes_the_later_shards_case(
    db: sqlite_utils.Database, tmp_path: Path
) -> None:
    """Attempts stored without a file (a report naming none, or a history from before files
    were stored) do not say whose they are: a later shard's case of that name joins them as a
    leg, as before."""
    first = report(tmp_path, "1.xml", tc("parser", "x", "<failure message='boom'/>"))
    second = report(tmp_path, "2.xml", _file_case("src/b.test.js", "x"))
    for path in (first, second):
        ingest_reports(db, [path], RunMeta(run_id="R", ts=TS))
    assert rows(
        db, "SELECT t.test_id, tr.outcome, tr.attempts FROM test_runs tr"
        " JOIN tests t ON t.id = tr.test"
    ) == [("parser::x", "fail", 2)]  # fmt: skip


def test_repeats_naming_their_file_or_not_are_numbered_in_document_order(
    db: sqlite_utils.Database, tmp_path: Path
) -> None:
    """A report repeating a test already in the run, once with its file and once without: the
    attempts are numbered as the report lists them, so its leg's first attempt is its first."""
    first = report(tmp_path, "1.xml", _file_case("src/a.test.js", "x"))
    second = report(
        tmp_path,
        "2.xml",
        _file_case("src/a.test.js", "x") + tc("parser", "x", "<failure message='boom'/>"),
    )
    for path in (first, second):
        ingest_reports(db, [path], RunMeta(run_id="R", ts=TS))
    assert rows(db, "SELECT attempt, outcome, origin FROM results ORDER BY attempt") == [
        (1, "pass", "src/a.test.js"),
        (2, "pass", "src/a.test.js"),
        (3, "fail", None),
    ]
    assert rows(db, "SELECT outcome, bad FROM test_runs") == [("flaky", 0)]
