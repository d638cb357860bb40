"""`flaketui merge` through click's CliRunner."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from flaketui.cli.commands import cli
from tests.connections import sqlite_connect
from tests.core.junit_shards import file_shard
from tests.core.test_outages import ingested_outage


def ingest(db: Path, report: Path, run_id: str) -> None:
    result = CliRunner().invoke(
        cli, ["ingest", str(db), str(report), "--run-id", run_id, "--no-detect"]
    )
    assert result.exit_code == 0, result.output


def merge(*paths: Path) -> Result:
    return CliRunner().invoke(cli, ["merge", *map(str, paths)])


def dump(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


@pytest.fixture
def sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    monkeypatch.chdir(tmp_path)
    paths = []
    for n in range(2):
        report = tmp_path / f"r{n}.xml"
        report.write_text(
            f'<testsuite><testcase classname="m.C" name="t{n}"/>'
            f'<testcase classname="m.C" name="shared"><failure message="E {n}"/></testcase>'
            "</testsuite>"
        )
        ingest(tmp_path / f"job{n}.db", report, f"run-{n}")
        paths.append(tmp_path / f"job{n}.db")
    return paths


def test_merge_gathers_histories_and_is_idempotent(tmp_path: Path, sources: list[Path]) -> None:
    desk = tmp_path / "desk.db"
    first = merge(desk, *sources)
    assert first.exit_code == 0, first.output
    assert "2 runs added" in first.output and first.output.count("\n") == 1
    once = dump(desk)
    second = merge(desk, *sources)
    assert second.exit_code == 0 and "0 runs added" in second.output
    assert dump(desk) == once
    conn = sqlite_connect(desk)
    assert conn.execute("SELECT count(*) FROM tests").fetchone() == (3,)
    assert conn.execute("SELECT count(*) FROM signatures").fetchone() == (1,)


def test_a_new_file_takes_the_first_source_whole_and_merges_the_rest(
    tmp_path: Path, sources: list[Path]
) -> None:
    """Into a missing file the first source is copied (SQLite's backup), the others merged:
    the same history and the same summary as merging both into a blank history."""
    from tests.connections import open_history

    open_history(tmp_path / "blank.db").conn.close()
    blank = merge(tmp_path / "blank.db", *sources)
    new = merge(tmp_path / "new.db", *sources)
    assert new.exit_code == 0, new.output
    assert new.output == blank.output
    assert new.output.startswith("merged 2 histories: 2 runs added, 0 extended")
    # The same statements (a copy into a blank history makes its indexes in another order).
    assert sorted(dump(tmp_path / "new.db")) == sorted(dump(tmp_path / "blank.db"))
    assert not list(tmp_path.glob(".new.db*"))


def test_a_source_given_twice_is_merged_and_counted_once(
    tmp_path: Path, sources: list[Path]
) -> None:
    desk = tmp_path / "desk.db"
    (tmp_path / "link.db").symlink_to(sources[0])
    result = merge(desk, sources[0], sources[1], Path("job0.db"), tmp_path / "link.db")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("merged 2 histories: 2 runs added"), result.output


@pytest.mark.parametrize("kind", ["missing", "not-sqlite", "directory", "self"])
def test_bad_source_is_one_line_and_changes_nothing(
    tmp_path: Path, sources: list[Path], kind: str
) -> None:
    desk = tmp_path / "desk.db"
    assert merge(desk, sources[0]).exit_code == 0
    before = dump(desk)
    bad = {"missing": tmp_path / "gone.db", "not-sqlite": tmp_path / "r0.xml",
           "directory": tmp_path, "self": desk}[kind]  # fmt: skip
    result = merge(desk, sources[1], bad)
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and result.output.count("\n") == 1
    assert dump(desk) == before


def test_bad_source_does_not_create_dest(tmp_path: Path, sources: list[Path]) -> None:
    result = merge(tmp_path / "new.db", tmp_path / "gone.db")
    assert result.exit_code == 1
    assert result.output == f"Error: {tmp_path / 'gone.db'}: no such history to merge\n"
    assert not (tmp_path / "new.db").exists()


NOW = "2026-11-02T00:00:00Z"
VICTIM = "tests/test_c.py::test_0"  # failed in the outage's run, passed in the next


def runs_of(db: Path, test_id: str) -> int:
    """How many runs the report counts for a test."""
    result = CliRunner().invoke(cli, ["report", str(db), "--now", NOW, "--format", "json"])
    assert result.exit_code == 0, result.output
    return next(t["runs"] for t in json.loads(result.output)["tests"] if t["test_id"] == test_id)


def review_of(db: Path, tag: str) -> str:
    """The outage's state as `incident list` and the report read it."""
    listed = CliRunner().invoke(cli, ["incident", "list", str(db), "--now", NOW])
    assert listed.exit_code == 0, listed.output
    out = listed.output
    if f"{tag}: 1 run, suspected outage " in out:
        assert "1 suspected outage excluded from scoring" in out and runs_of(db, VICTIM) == 1
        return "proposed"
    assert "no proposed incidents" in out, out
    if f"{tag}: 1 run, outage " in out:
        assert runs_of(db, VICTIM) == 1
        return "accepted"
    assert tag not in out and runs_of(db, VICTIM) == 2
    return "rejected"


@pytest.fixture
def outage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A history whose ingest proposed an outage (6 of 10 tests failed in r1), and its tag."""
    db, tag = ingested_outage(tmp_path, monkeypatch)
    return Path(db), tag


def review(db: Path, verb: str, tag: str) -> None:
    result = CliRunner().invoke(cli, ["incident", verb, str(db), tag])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("decision", ["reject", "accept", None])
@pytest.mark.parametrize("into", ["a new history", "one awaiting review"])
def test_an_outage_review_survives_a_merge(
    tmp_path: Path, outage: tuple[Path, str], decision: str | None, into: str
) -> None:
    db, tag = outage
    dest = tmp_path / "dest.db"
    if into == "one awaiting review":  # the same runs, the same outage proposed
        shutil.copy(db, dest)
    if decision is not None:
        review(db, decision, tag)
    state = review_of(db, tag)
    result = merge(dest, db)
    assert result.exit_code == 0, result.output
    assert review_of(dest, tag) == state
    # Merging again, or back, changes nothing.
    once = dump(dest)
    assert merge(dest, db).exit_code == 0 and dump(dest) == once
    assert merge(db, dest).exit_code == 0 and review_of(db, tag) == state


def test_histories_that_decided_otherwise_keep_their_decision(
    tmp_path: Path, outage: tuple[Path, str]
) -> None:
    db, tag = outage
    other = tmp_path / "other.db"
    shutil.copy(db, other)
    review(db, "reject", tag)
    review(other, "accept", tag)
    result = merge(other, db)
    assert result.exit_code == 0, result.output
    assert (
        f"outage {tag}: decided otherwise in a merged history; kept as decided here"
        in result.output.splitlines()
    )
    assert review_of(other, tag) == "accepted"
    assert merge(db, other).exit_code == 0
    assert review_of(db, tag) == "rejected"


def test_a_merged_window_incident_tags_the_runs_it_covers(
    tmp_path: Path, outage: tuple[Path, str]
) -> None:
    """An incident added in one history tags the same runs in the history it merges into."""
    db, tag = outage
    review(db, "reject", tag)
    other = tmp_path / "other.db"
    shutil.copy(db, other)
    result = CliRunner().invoke(
        cli, ["incident", "add", str(db), "maint", "--from", "2026-11-01T10:00:00Z",
              "--to", "2026-11-01T10:00:00Z"],
    )  # fmt: skip
    assert result.exit_code == 0 and "tagged 1 run" in result.output, result.output
    assert merge(other, db).exit_code == 0
    listed = CliRunner().invoke(cli, ["incident", "list", str(other), "--now", NOW])
    assert "maint: 1 run, window 2026-11-01T10:00:00Z .. 2026-11-01T10:00:00Z" in listed.output
    assert runs_of(other, VICTIM) == 1


# ---- shards of one run published as separate histories ---------------------------------------


def stored_runs(db: Path) -> dict[str, list[tuple[object, ...]]]:
    """What a history holds of its runs' tests, by test id (row ids differ between histories),
    and whether its rollups are what a rebuild from the raw rows gives."""
    from flaketui.core.history.store import transaction
    from flaketui.core.rollups import build as rollups
    from tests.connections import open_history

    history = open_history(db)
    conn = history.conn
    try:
        with transaction(conn):
            rollups.fold_pending(conn)
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND (name LIKE '%day%'"
                " OR name LIKE '%week%' OR name LIKE '%mixed%') ORDER BY name"
            )
        ]

        def rollup_rows() -> dict[str, list[tuple[object, ...]]]:
            # A rebuild may anchor the decay weights elsewhere: equal to 9 places.
            return {
                t: [
                    tuple(round(v, 9) if isinstance(v, float) else v for v in row)
                    for row in conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2, 3")
                ]
                for t in tables
            }

        written = rollup_rows()
        with transaction(conn):
            rollups.rebuild(conn)
        assert rollup_rows() == written
        return {
            # A plain id a later run holds again is seen first at that run, however it came.
            "tests": conn.execute(
                "SELECT test_id, test_file, first_seen FROM tests ORDER BY 1"
            ).fetchall(),
            "test_runs": conn.execute(
                "SELECT r.run_id, t.test_id, x.outcome, x.bad, x.attempts, x.failed_attempts"
                " FROM test_runs x JOIN tests t ON t.id = x.test JOIN runs r ON r.id = x.run"
                " ORDER BY 1, 2"
            ).fetchall(),
            "results": conn.execute(
                "SELECT r.run_id, t.test_id, x.attempt, x.outcome, x.origin FROM results x"
                " JOIN tests t ON t.id = x.test JOIN runs r ON r.id = x.run ORDER BY 1, 2, 3"
            ).fetchall(),
        }
    finally:
        conn.close()


@pytest.mark.parametrize("how", ["a_into_b", "b_into_a", "both_into_new"])
def test_shards_of_a_run_in_separate_histories_merge_as_one_ingest_of_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Each shard job of a run publishes its own history, where the shard's case is stored
    under the plain id (no clash within it). Merged, the run holds a test per file, as one
    history ingesting both shards does, whichever way the merge goes; the plain id stays
    where another run holds it, and merging again changes nothing."""
    monkeypatch.chdir(tmp_path)
    ts = "2026-11-30T10:00:00"
    a = file_shard(
        tmp_path / "a.xml",
        ("src/a.test.js", "x", "fail"),
        ("src/a.test.js", "y", "pass"),
        timestamp=ts,
    )
    b = file_shard(
        tmp_path / "b.xml",
        ("src/b.test.js", "x", "pass"),
        ("src/b.test.js", "z", "pass"),
        timestamp=ts,
    )
    later = file_shard(
        tmp_path / "later.xml", ("src/b.test.js", "x", "pass"), timestamp="2026-12-01T10:00:00"
    )
    together = tmp_path / "together.db"
    for report, run_id in ((a, "R"), (b, "R"), (later, "R2")):
        ingest(together, report, run_id)
    history_a, history_b = tmp_path / "a.db", tmp_path / "b.db"
    ingest(history_a, a, "R")
    ingest(history_b, b, "R")
    ingest(history_b, later, "R2")
    if how == "a_into_b":
        dest, merged = history_b, [history_a]
    elif how == "b_into_a":
        dest, merged = history_a, [history_b]
    else:
        dest, merged = tmp_path / "desk.db", [history_a, history_b]
    result = merge(dest, *merged)
    assert result.exit_code == 0, result.output
    expected = stored_runs(together)
    assert [row[:2] for row in expected["test_runs"]] == [
        ("R", "parser::y"),
        ("R", "parser::z"),
        ("R", "src/a.test.js::parser::x"),
        ("R", "src/b.test.js::parser::x"),
        ("R2", "parser::x"),
    ]
    assert stored_runs(dest) == expected
    once = dump(dest)
    assert merge(dest, *merged).exit_code == 0
    assert dump(dest) == once


# Shards a and b of run E, whose commit changed src/b.test.js; a later run L of src/a.test.js
# changing src/b.test.js, and a run M of a case naming no file changing src/a.test.js:
# (case, run id, timestamp, changed file), as tests/cli/test_ingest_cli.py ingests them.
FILE_REPORTS = {
    "Ea": (("src/a.test.js", "x", "fail"), "E", "2026-11-20T10:00:00Z", "src/b.test.js"),
    "Eb": (("src/b.test.js", "x", "fail"), "E", "2026-11-20T10:00:00Z", "src/b.test.js"),
    "L": (("src/a.test.js", "x", "pass"), "L", "2026-11-22T10:00:00Z", "src/b.test.js"),
    "M": (("", "x", "pass"), "M", "2026-11-24T10:00:00Z", "src/a.test.js"),
}


def _merge_ways(first: Path, second: Path, new: Path) -> dict[str, tuple[Path, list[Path]]]:
    """Each way of merging two histories, by name: DEST and the SRC histories merged into it."""
    return {
        "second_into_first": (first, [second]),
        "first_into_second": (second, [first]),
        "both_into_new": (new, [first, second]),
        "both_into_new_reversed": (new, [second, first]),
    }


@pytest.mark.parametrize(
    "how", ["second_into_first", "first_into_second", "both_into_new", "both_into_new_reversed"]
)
def test_merged_shards_give_each_test_its_own_file_and_edited_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A history holding the later run of file a and shard b of an earlier run, merged with one
    holding shard a and a run naming no file: each file's id has its file, the plain id the
    file of the runs it still holds, and a run is edited for the test whose file its commit
    changed, as in one history ingesting every report, whichever way the merge goes."""
    monkeypatch.chdir(tmp_path)

    def ingest_all(db: Path, *names: str) -> None:
        for name in names:
            shard_case, run_id, ts, changed = FILE_REPORTS[name]
            report = file_shard(tmp_path / f"{name}.xml", shard_case)
            result = CliRunner().invoke(cli, [
                "ingest", str(db), str(report), "--run-id", run_id, "--timestamp", ts,
                "--changed-file", changed, "--no-detect",
            ])  # fmt: skip
            assert result.exit_code == 0, result.output

    together, first, second = (tmp_path / f"{n}.db" for n in ("together", "first", "second"))
    ingest_all(together, "L", "Eb", "Ea", "M")
    ingest_all(first, "L", "Eb")
    ingest_all(second, "Ea", "M")
    dest, merged = _merge_ways(first, second, tmp_path / "desk.db")[how]
    result = merge(dest, *merged)
    assert result.exit_code == 0, result.output
    edited = (
        "SELECT r.run_id, t.test_id, tr.edited FROM test_runs tr JOIN tests t ON t.id = tr.test"
        " JOIN runs r ON r.id = tr.run ORDER BY 1, 2"
    )
    expected = stored_runs(together)
    assert [row[:2] for row in expected["tests"]] == [
        ("parser::x", "src/a.test.js"),
        ("src/a.test.js::parser::x", "src/a.test.js"),
        ("src/b.test.js::parser::x", "src/b.test.js"),
    ]
    assert stored_runs(dest) == expected
    conn = sqlite3.connect(dest)
    try:
        assert conn.execute(edited).fetchall() == [
            ("E", "src/a.test.js::parser::x", 0),
            ("E", "src/b.test.js::parser::x", 1),
            ("L", "parser::x", 0),
            ("M", "parser::x", 1),
        ]
    finally:
        conn.close()


@pytest.mark.parametrize(
    "how", ["second_into_first", "first_into_second", "both_into_new", "both_into_new_reversed"]
)
def test_a_moved_test_has_the_file_of_its_latest_run_whichever_history_holds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A history holding the runs of a test before it moved to another file, merged with one
    holding those after, either way: the test has the file its latest run names and its runs
    are edited against that file, as in one history ingesting every report."""
    from tests.cli.test_ingest_cli import EDITED_SQL, MOVED_REPORTS, ingest_moved, moved_expected

    monkeypatch.chdir(tmp_path)
    first, second = tmp_path / "first.db", tmp_path / "second.db"
    for index in (0, 1, 3, 5):  # src/a.test.js, and a run naming no file
        ingest_moved(first, tmp_path, index)
    for index in (2, 4):  # src/b.test.js
        ingest_moved(second, tmp_path, index)
    dest, merged = _merge_ways(first, second, tmp_path / "desk.db")[how]
    result = merge(dest, *merged)
    assert result.exit_code == 0, result.output
    test_file, edited = moved_expected(list(range(len(MOVED_REPORTS))))
    assert test_file == "src/b.test.js"
    conn = sqlite3.connect(dest)
    try:
        assert conn.execute("SELECT test_id, test_file FROM tests").fetchall() == [
            ("parser::x", test_file)
        ]
        assert conn.execute(EDITED_SQL).fetchall() == edited
    finally:
        conn.close()
