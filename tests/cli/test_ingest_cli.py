"""`flaketui ingest` through click's CliRunner: reports, metadata, bad input and --manifest."""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st

from flaketui.cli.commands import cli
from flaketui.core.ingest import manifest as manifest_module
from tests.connections import open_connection, open_history
from tests.core.junit_shards import file_shard

CI_PREFIXES = ("GITHUB_", "GITLAB", "CI_", "BUILDKITE", "CIRCLE", "JENKINS", "BUILD_", "GIT_")


@pytest.fixture(autouse=True)
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No CI variables, no git repository, no pyproject.toml: each test sets what it needs."""
    for name in list(os.environ):
        if name.startswith(CI_PREFIXES) or name in (
            "CI", "CIRCLECI", "BRANCH_NAME", "CHANGE_ID", "FLAKETUI_INCIDENT"
        ):  # fmt: skip
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def junit(path: Path, *cases: str, timestamp: str | None = None) -> Path:
    stamp = f' timestamp="{timestamp}"' if timestamp else ""
    path.write_text(
        f'<?xml version="1.0"?>\n<testsuite name="s"{stamp}>{"".join(cases)}</testsuite>\n'
    )
    return path


def case(name: str, outcome: str = "pass", cls: str = "pkg.Mod") -> str:
    inner = {"pass": "", "fail": '<failure message="boom"/>', "skip": "<skipped/>"}[outcome]
    return f'<testcase classname="{cls}" name="{name}" time="0.01">{inner}</testcase>'


def run(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, ["ingest", *map(str, args)], env=env)


def dump(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def query(db: Path, sql: str) -> list[tuple[object, ...]]:
    """sql's rows, read as a flaketui reader reads the history: opening it files the per-test
    rows of the runs `flaketui ingest` left waiting."""
    conn = open_connection(db, create=False)
    try:
        return [tuple(row) for row in conn.execute(sql)]
    finally:
        conn.close()


def test_ingest_one_report_prints_a_summary(tmp_path: Path) -> None:
    report = junit(tmp_path / "r.xml", case("a"), case("b", "fail"), case("a", "pass"))
    result = run(tmp_path / "h.db", report, "--no-detect")
    assert result.exit_code == 0, result.output
    assert result.output.count("\n") == 1
    assert "new run" in result.output and "3 results added" in result.output
    assert query(tmp_path / "h.db", "SELECT count(*) FROM tests") == [(2,)]


def test_a_report_given_twice_is_read_once_and_said_so(tmp_path: Path) -> None:
    report = junit(tmp_path / "r.xml", case("a"), case("b"))
    result = run(tmp_path / "h.db", report, report, "--run-id", "x")
    assert result.exit_code == 0, result.output
    assert result.output == (
        "run x (new run): 1 file ingested, 1 duplicate skipped, 2 results added, 2 tests in the"
        " run\n"
    )


def test_same_report_twice_changes_nothing(tmp_path: Path) -> None:
    db, report = tmp_path / "h.db", junit(tmp_path / "r.xml", case("a"), case("b", "fail"))
    assert run(db, report).exit_code == 0
    before = dump(db)
    again = run(db, report)
    assert again.exit_code == 0 and "1 already ingested" in again.output
    assert dump(db) == before
    assert run(db, report, "--run-id", "R1").exit_code == 0
    with_id = dump(db)
    assert run(db, report, "--run-id", "R1", "--suite", "changed").exit_code == 0
    assert dump(db) == with_id


def test_three_shards_with_one_run_id_form_one_run(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    shards = [junit(tmp_path / f"s{n}.xml", case(f"t{n}"), case("shared")) for n in range(3)]
    for shard in shards:
        assert run(db, shard, "--run-id", "build-7").exit_code == 0
    assert query(db, "SELECT run_id FROM runs") == [("build-7",)]
    assert query(db, "SELECT count(*) FROM test_runs") == [(4,)]
    assert query(db, "SELECT max(attempt) FROM results") == [(3,)]  # 'shared' ran in each shard
    settled = dump(db)
    for shard in shards:
        assert run(db, shard, "--run-id", "build-7").exit_code == 0
    assert dump(db) == settled


def test_shards_of_one_ci_job_share_the_run_from_ci_variables(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    env = {"GITLAB_CI": "true", "CI_PIPELINE_ID": "88", "CI_COMMIT_REF_NAME": "main"}
    for n in (1, 2):
        report = junit(tmp_path / f"s{n}.xml", case(f"t{n}"))
        result = run(db, report, env={**env, "CI_JOB_NAME": f"pytest {n}/2", "CI_JOB_ID": str(n)})
        assert result.exit_code == 0, result.output
    assert query(db, "SELECT run_id, branch_kind FROM runs") == [("gitlab-88-pytest", "main")]


@pytest.mark.parametrize(
    ("flag", "variable", "tag"),
    [
        (None, "  outage-7 ", "outage-7"),  # read with --no-detect too, blanks dropped
        ("flagged", "outage-7", "flagged"),  # the flag wins
        (None, "  ", None),  # set but blank, as CI variables often are: no incident
        (" ", "outage-7", "outage-7"),  # a blank flag names none either
        (None, None, None),
    ],
)
def test_the_incident_variable_tags_a_run_the_flags_leave_untagged(
    tmp_path: Path, flag: str | None, variable: str | None, tag: str | None
) -> None:
    db = tmp_path / "h.db"
    report = junit(tmp_path / "r.xml", case("a"), case("b", "fail"))
    flags = ["--no-detect", "--run-id", "R"] + (["--incident", flag] if flag is not None else [])
    env = {"FLAKETUI_INCIDENT": variable} if variable is not None else None
    result = run(db, report, *flags, env=env)
    assert result.exit_code == 0, result.output
    assert query(db, "SELECT incident FROM runs") == [(tag,)]
    assert query(db, "SELECT tag FROM incidents") == ([(tag,)] if tag else [])
    # The summary names the incident: a variable left set after the outage shows at once.
    assert (f"(new run, incident {tag})" in result.output) == (tag is not None), result.output
    assert "incident" not in result.output or tag is not None


def test_metadata_flags_are_stored(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    report = junit(tmp_path / "r.xml", case("test_a", cls="tests.test_x"))
    args = [
        "--run-id", "R", "--suite", "nightly", "--branch", "release/2", "--commit", "c0ffee",
        "--timestamp", "2026-10-01T08:30:00+02:00", "--worker-count", "8",
        "--changed-file", "src/a.py", "--changed-file", "./src/b.py", "--incident", "outage",
        "--runner-host", "box-1", "--ci-url", "https://ci/1", "--no-detect",
    ]  # fmt: skip
    result = run(db, report, *args)
    assert result.exit_code == 0, result.output
    assert query(
        db,
        "SELECT run_id, suite, branch, branch_kind, commit_sha, ts, worker_count, runner_host,"
        " ci_url, incident, source, finished FROM runs",
    ) == [
        (
            "R", "nightly", "release/2", "release", "c0ffee", "2026-10-01T06:30:00Z", 8, "box-1",
            "https://ci/1", "outage", "junit", 1,
        )
    ]  # fmt: skip
    assert query(db, "SELECT path FROM run_changed_files ORDER BY path") == [
        ("src/a.py",),
        ("src/b.py",),
    ]
    assert query(db, "SELECT tag, note FROM incidents") == [("outage", "tagged at ingest")]


def test_report_without_test_cases_is_a_note(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    open_history(db).conn.close()
    before = dump(db)
    result = run(db, junit(tmp_path / "empty.xml"))
    assert result.exit_code == 0
    assert "no test cases" in result.output and result.output.count("\n") == 1
    assert dump(db) == before


def test_report_without_test_cases_creates_no_history(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    result = run(db, junit(tmp_path / "empty.xml"))
    assert result.exit_code == 0 and "no test cases" in result.output
    assert sorted(path.name for path in tmp_path.iterdir()) == ["empty.xml"]


def _bad_input(tmp_path: Path, kind: str) -> tuple[list[str | Path], Path]:
    """Arguments for one kind of bad input, and the database path they use."""
    db = tmp_path / "h.db"
    good = junit(tmp_path / "good.xml", case("a"))
    if kind == "missing":
        return [db, tmp_path / "nope.xml"], db
    if kind == "directory":
        return [db, tmp_path], db
    if kind == "non-xml":
        (tmp_path / "x.xml").write_text("this is not xml\n")
        return [db, good, tmp_path / "x.xml"], db
    if kind == "truncated":
        many = "".join(case(f"t{n}") for n in range(3000))
        (tmp_path / "t.xml").write_text(f"<testsuite>{many}<testcase name='x'")
        return [db, tmp_path / "t.xml"], db
    if kind == "not-sqlite":
        (tmp_path / "notes.txt").write_text("hello\n")
        return [tmp_path / "notes.txt", good], tmp_path / "notes.txt"
    if kind == "db-is-directory":
        return [tmp_path, good], db
    if kind == "named-pipe":  # opening it would wait for a writer
        os.mkfifo(tmp_path / "fifo.xml")
        return [db, tmp_path / "fifo.xml"], db
    if kind == "pipe":  # as `<(cat good.xml)` gives it: the hash would empty it for the parser
        read, write = os.pipe()
        os.write(write, good.read_bytes())
        os.close(write)
        return [db, f"/dev/fd/{read}"], db
    if kind == "device":  # never ends
        return [db, "/dev/zero"], db
    if kind == "stdin":
        return [db, "-"], db
    flags = {
        "timestamp": ["--timestamp", "yesterday"],
        "branch-kind": ["--branch-kind", "feature"],
        "worker-count": ["--worker-count", "many"],
        "worker-count-zero": ["--worker-count", "0"],
        "nothing": [],
    }[kind]
    return ([db, good, *flags] if kind != "nothing" else [db]), db


@pytest.mark.parametrize(
    "kind",
    [
        "missing", "directory", "non-xml", "truncated", "not-sqlite", "db-is-directory",
        "named-pipe", "pipe", "device", "stdin",
        "timestamp", "branch-kind", "worker-count", "worker-count-zero", "nothing",
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_leaves_the_database_unchanged(tmp_path: Path, kind: str) -> None:
    junit(tmp_path / "seed.xml", case("seed"))
    assert run(tmp_path / "h.db", tmp_path / "seed.xml").exit_code == 0
    args, db = _bad_input(tmp_path, kind)
    before = db.read_bytes() if db.is_file() and db.suffix != ".db" else dump(tmp_path / "h.db")
    result = run(*args)
    assert result.exit_code != 0
    assert result.output.startswith("Error: ")
    assert result.output.count("\n") == 1, result.output
    assert "Traceback" not in result.output
    after = db.read_bytes() if db.is_file() and db.suffix != ".db" else dump(tmp_path / "h.db")
    assert after == before


def test_missing_report_does_not_create_the_database(tmp_path: Path) -> None:
    result = run(tmp_path / "new.db", tmp_path / "nope.xml")
    assert result.exit_code == 1 and "nope.xml" in result.output
    assert not (tmp_path / "new.db").exists()


def test_a_report_from_a_pipe_is_refused_naming_what_to_do(tmp_path: Path) -> None:
    read, write = os.pipe()
    os.write(write, junit(tmp_path / "good.xml", case("a")).read_bytes())
    os.close(write)
    try:
        result = run(tmp_path / "new.db", f"/dev/fd/{read}")
    finally:
        os.close(read)
    assert result.output == (
        f"Error: /dev/fd/{read}: not a regular file (a pipe or a device); a report is read"
        " twice, so write it to a file first\n"
    )
    assert not (tmp_path / "new.db").exists()


# ---- --manifest -------------------------------------------------------------------------------


def write_manifest(path: Path, entries: list[dict[str, object] | str]) -> Path:
    path.write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in entries))
    return path


@pytest.mark.parametrize("kind", ["pipe", "named-pipe", "device"])
def test_a_manifest_that_is_a_stream_is_refused_before_the_history_exists(
    tmp_path: Path, kind: str
) -> None:
    junit(tmp_path / "a.xml", case("a"))
    line = json.dumps({"file": "a.xml", "run_id": "one", "timestamp": "2026-08-02T00:00:00Z"})
    read = -1
    if kind == "pipe":  # `--manifest <(...)`: checked first, it would be empty when ingested
        read, write = os.pipe()
        os.write(write, f"{line}\n".encode())
        os.close(write)
        manifest = f"/dev/fd/{read}"
    elif kind == "named-pipe":  # opening it would wait for a writer
        os.mkfifo(tmp_path / "m.jsonl")
        manifest = str(tmp_path / "m.jsonl")
    else:  # never ends
        manifest = "/dev/zero"
    try:
        result = run(tmp_path / "h.db", "--manifest", manifest)
    finally:
        if read >= 0:
            os.close(read)
    assert result.exit_code == 1
    assert result.output == (
        f"Error: {manifest}: not a regular file (a pipe or a device); a manifest is read twice,"
        " so write it to a file first\n"
    )
    assert not (tmp_path / "h.db").exists()


def test_a_manifest_over_the_size_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(manifest_module, "MAX_MANIFEST_BYTES", 1024)
    junit(tmp_path / "a.xml", case("a"))
    line = {"file": "a.xml", "timestamp": "2026-08-02T00:00:00Z"}
    manifest = write_manifest(
        tmp_path / "m.jsonl", [{**line, "run_id": f"r{n}"} for n in range(20)]
    )
    assert manifest.stat().st_size > 1024
    result = run(tmp_path / "h.db", "--manifest", manifest)
    assert (
        result.output == f"Error: {manifest}: larger than 1 KiB; split it into several manifests\n"
    )
    assert not (tmp_path / "h.db").exists()


def test_a_folder_of_reports_is_refused_with_the_glob_to_give(tmp_path: Path) -> None:
    """A CI job's report folder (surefire-reports, test-results) names no report: one line
    says to name the reports in it, and no history is created."""
    reports = tmp_path / "surefire-reports"
    reports.mkdir()
    junit(reports / "TEST-a.xml", case("test_a"))
    db = tmp_path / "h.db"
    result = run(db, reports)
    assert result.exit_code == 1
    assert result.output == (
        f"Error: {reports}: is a directory, not a report file; name the reports in it"
        f" ({reports / '*.xml'})\n"
    )
    assert not db.exists()
    assert run(db, reports / "TEST-a.xml").exit_code == 0


def test_manifest_of_500_runs_lands_in_one_command_and_is_idempotent(tmp_path: Path) -> None:
    reports = tmp_path / "artifacts"
    reports.mkdir()
    entries: list[dict[str, object] | str] = []
    for n in range(500):
        junit(
            reports / f"r{n}.xml", case("test_a"), case("test_b", "fail" if n % 7 == 0 else "pass")
        )
        entries.append(
            {
                "file": f"artifacts/r{n}.xml",
                "run_id": f"run-{n}",
                "branch": "main",
                "timestamp": f"2026-09-{1 + n % 28:02d}T{n % 24:02d}:00:00Z",
            }
        )
    manifest = write_manifest(tmp_path / "runs.jsonl", entries)
    db = tmp_path / "h.db"
    result = run(db, "--manifest", manifest)
    assert result.exit_code == 0, result.output
    assert "500 runs landed with 1000 results" in result.output
    assert query(db, "SELECT count(*), count(DISTINCT branch_kind) FROM runs") == [(500, 1)]
    before = dump(db)
    again = run(db, "--manifest", manifest)
    assert again.exit_code == 0
    assert "0 runs landed" in again.output and "500 already present" in again.output
    assert dump(db) == before


def test_a_manifest_ignores_the_incident_variable_and_says_so(tmp_path: Path) -> None:
    junit(tmp_path / "a.xml", case("test_a"))
    junit(tmp_path / "b.xml", case("test_a", "fail"))
    entries: list[dict[str, object] | str] = [
        {"file": "a.xml", "run_id": "old", "timestamp": "2026-09-01T10:00:00Z"},
        {
            "file": "b.xml",
            "run_id": "down",
            "timestamp": "2026-09-02T10:00:00Z",
            "incident": "ci-outage",
        },
    ]
    manifest = write_manifest(tmp_path / "runs.jsonl", entries)
    db = tmp_path / "h.db"
    result = CliRunner().invoke(
        cli, ["ingest", str(db), "--manifest", str(manifest)], env={"FLAKETUI_INCIDENT": "now"}
    )
    assert result.exit_code == 0, result.output
    assert query(db, "SELECT run_id, incident FROM runs ORDER BY run_id") == [
        ("down", "ci-outage"),
        ("old", None),
    ]
    assert "FLAKETUI_INCIDENT is set but tags no manifest run" in result.stderr
    quiet = CliRunner().invoke(cli, ["ingest", str(db), "--manifest", str(manifest)])
    assert "FLAKETUI_INCIDENT" not in quiet.output


def test_manifest_refuses_bad_lines_by_number_and_lands_the_rest(tmp_path: Path) -> None:
    junit(tmp_path / "ok1.xml", case("a"))
    junit(tmp_path / "ok2.xml", case("b"), timestamp="2026-08-01T10:00:00")
    junit(tmp_path / "shard1.xml", case("c"))
    junit(tmp_path / "shard2.xml", case("d"))
    (tmp_path / "broken.xml").write_text("<testsuite><testcase name='x'>")
    (tmp_path / "sub").mkdir()
    junit(tmp_path / "sub" / "rel.xml", case("e"))
    ts = "2026-08-02T00:00:00Z"
    manifest = write_manifest(
        tmp_path / "m.jsonl",
        [
            {"file": "ok1.xml", "run_id": "one", "timestamp": ts, "changed_files": ["x.py"]},
            {"file": "missing.xml", "run_id": "two", "timestamp": ts},  # line 2
            {"file": "ok2.xml", "suite": "unit"},  # takes the report's timestamp
            {"file": "broken.xml", "run_id": "four", "timestamp": ts},  # line 4
            "",
            {"files": ["shard1.xml"], "run_id": "S", "timestamp": ts, "worker_count": 4},
            {"file": "shard2.xml", "run_id": "S"},
            {"file": "ok1.xml", "brnach": "main", "timestamp": ts},  # line 8: a typo
            "{not json",  # line 9
            {"file": "ok1.xml"},  # line 10: no timestamp anywhere
            {"file": "ok1.xml", "timestamp": "soon"},  # line 11
            {"file": "sub/rel.xml", "run_id": "rel", "timestamp": ts, "branch_kind": "x"},  # 12
            '{"file": ' + "[" * 100_000 + "]" * 100_000 + "}",  # line 13: nested too deeply
        ],
    )
    db = tmp_path / "h.db"
    result = run(db, "--manifest", manifest)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    refused = sorted(
        int(line.split(":")[0].split()[1])
        for line in result.output.splitlines()
        if line.startswith("line ")
    )
    assert refused == [2, 4, 8, 9, 10, 11, 12, 13]
    assert "line 13: not valid JSON (nested too deeply)" in result.output
    assert "missing.xml" in result.output and "broken.xml" in result.output
    assert "3 runs landed with 4 results" in result.output
    runs = query(db, "SELECT run_id, suite, ts, worker_count FROM runs ORDER BY id")
    assert runs[0] == ("one", "default", "2026-08-02T00:00:00Z", 1)
    assert runs[1][1:3] == ("unit", "2026-08-01T10:00:00Z")
    assert runs[2] == ("S", "default", "2026-08-02T00:00:00Z", 4)
    assert query(db, "SELECT count(*) FROM test_runs WHERE run = 3") == [(2,)]


def test_manifest_run_with_a_refused_shard_is_refused_whole(tmp_path: Path) -> None:
    junit(tmp_path / "a.xml", case("a"))
    manifest = write_manifest(
        tmp_path / "m.jsonl",
        [
            {"file": "a.xml", "run_id": "S", "timestamp": "2026-08-02T00:00:00Z"},
            {"file": "gone.xml", "run_id": "S"},
        ],
    )
    db = tmp_path / "h.db"
    result = run(db, "--manifest", manifest)
    assert result.exit_code == 1
    assert "line 1: run 'S' not ingested: its line 2 was refused" in result.output
    assert not db.exists()  # nothing landed: the history it would have created is not left


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--manifest", "nowhere.jsonl"], "no such manifest"),
        (["x.xml", "--manifest", "m.jsonl"], "not both"),
        (["--manifest", "m.jsonl", "--suite", "unit"], "come from the manifest"),
    ],
)
def test_manifest_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    result = run(tmp_path / "h.db", *args)
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and message in result.output


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda path: None, "no such manifest"),
        (lambda path: path.mkdir(), "is a directory, not a manifest"),
        (
            lambda path: path.write_bytes(b'{"file": "a.xml"}\n\xff\xfe{'),
            "runs.jsonl: not valid UTF-8 (byte 0xFF at offset 18); a manifest is JSON Lines",
        ),
    ],
    ids=["missing", "directory", "not-utf8"],
)
def test_a_manifest_that_cannot_be_read_creates_no_history(
    tmp_path: Path, make: Callable[[Path], None], message: str
) -> None:
    manifest = tmp_path / "runs.jsonl"
    make(manifest)
    db = tmp_path / "new.db"
    result = run(db, "--manifest", manifest)
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and message in result.output
    assert len(result.output.splitlines()) == 1
    # No history, nor its journal: the folder holds the manifest (when there is one) only.
    assert [path.name for path in tmp_path.iterdir() if path != manifest] == []


def test_same_test_name_in_two_jest_files_is_two_tests_not_a_flaky_one(tmp_path: Path) -> None:
    def report(day: int) -> Path:
        stamp = f"2026-11-{day:02d}T10:00:00"
        path = tmp_path / f"s{day}.xml"
        path.write_text(
            f'<testsuites name="jest tests"><testsuite name="src/a.test.js" timestamp="{stamp}">'
            '<testcase classname="parser handles empty input" name="parser handles empty input">'
            '<failure message="boom">Error: boom</failure></testcase></testsuite>'
            f'<testsuite name="src/b.test.js" timestamp="{stamp}">'
            '<testcase classname="parser handles empty input" name="parser handles empty input"/>'
            "</testsuite></testsuites>"
        )
        return path

    db = tmp_path / "h.db"
    runner = CliRunner()
    for day in range(10, 22):
        result = runner.invoke(cli, ["ingest", str(db), str(report(day)), "--no-detect"])
        assert result.exit_code == 0, result.output
        assert "2 results added, 2 tests in the run" in result.output
    rows = query(
        db,
        "SELECT t.test_id, tr.outcome, count(*) FROM test_runs tr JOIN tests t ON t.id = tr.test"
        " GROUP BY t.test_id, tr.outcome ORDER BY t.test_id",
    )
    assert rows == [
        ("src/a.test.js::parser handles empty input::parser handles empty input", "fail", 12),
        ("src/b.test.js::parser handles empty input::parser handles empty input", "pass", 12),
    ]


def shard(path: Path, *files: tuple[str, str, str]) -> Path:
    """A jest-junit shard report: (file, test name, outcome) per case, a suite per file."""
    suites = "".join(
        f'<testsuite name="{file}" timestamp="2026-11-10T10:00:00">'
        f'<testcase classname="parser" name="{name}">'
        + ('<failure message="boom">Error: boom</failure>' if outcome == "fail" else "")
        + "</testcase></testsuite>"
        for file, name, outcome in files
    )
    path.write_text(f'<testsuites name="jest tests">{suites}</testsuites>')
    return path


def run_tests(db: Path, run_id: str = "gh-77") -> list[tuple[object, ...]]:
    return query(
        db,
        "SELECT t.test_id, tr.outcome, tr.attempts FROM test_runs tr JOIN tests t ON t.id = tr.test"
        f" JOIN runs r ON r.id = tr.run WHERE r.run_id = '{run_id}' ORDER BY t.test_id",
    )


SHARDED = [
    ("parser::only in b", "pass", 1),
    ("src/a.test.js::parser::handles empty input", "fail", 1),
    ("src/b.test.js::parser::handles empty input", "pass", 1),
]


@pytest.mark.parametrize("how", ["one_command", "manifest"])
def test_same_test_name_in_files_of_two_shards_is_two_tests(tmp_path: Path, how: str) -> None:
    """Each shard's report holds one of the two files: no clash within either report, yet two
    tests of the run, prefixed as within one report. A name one file holds keeps its id."""
    one = shard(tmp_path / "shard1.xml", ("src/a.test.js", "handles empty input", "fail"))
    two = shard(
        tmp_path / "shard2.xml",
        ("src/b.test.js", "handles empty input", "pass"),
        ("src/b.test.js", "only in b", "pass"),
    )
    db = tmp_path / "h.db"
    if how == "one_command":
        result = run(db, one, two, "--run-id", "gh-77", "--no-detect")
    else:
        entries: list[dict[str, object] | str] = [
            {"file": path.name, "run_id": "gh-77"} for path in (one, two)
        ]
        result = run(db, "--manifest", write_manifest(tmp_path / "m.jsonl", entries))
    assert result.exit_code == 0, result.output
    assert run_tests(db) == SHARDED


def test_a_later_shard_of_a_name_the_run_holds_per_file_gets_its_file(tmp_path: Path) -> None:
    """A later ingest into the run: a name the run holds under file-prefixed ids is prefixed in
    the new shard too; names no other file shares keep their ids, and other runs are as they
    were."""
    db = tmp_path / "h.db"
    before = shard(tmp_path / "old.xml", ("src/b.test.js", "handles empty input", "pass"))
    assert run(db, before, "--run-id", "gh-70", "--no-detect").exit_code == 0
    one = shard(
        tmp_path / "shard1.xml",
        ("src/a.test.js", "handles empty input", "fail"),
        ("src/c.test.js", "handles empty input", "pass"),
    )
    two = shard(
        tmp_path / "shard2.xml",
        ("src/b.test.js", "handles empty input", "pass"),
        ("src/b.test.js", "only in b", "pass"),
    )
    for path in (one, two):
        result = run(db, path, "--run-id", "gh-77", "--no-detect")
        assert result.exit_code == 0, result.output
    assert run_tests(db) == [
        *SHARDED,
        ("src/c.test.js::parser::handles empty input", "pass", 1),
    ]
    assert run_tests(db, "gh-70") == [("parser::handles empty input", "pass", 1)]


@settings(max_examples=12, deadline=None)
@given(order=st.permutations([0, 1, 2]), one_command=st.booleans())
def test_shards_give_the_same_tests_in_any_order(order: list[int], one_command: bool) -> None:
    """Three shards sharing a name: the run's tests do not depend on the order the shards come
    in, in one ingest or in two (the first two shards, then the third)."""
    specs = [
        (("src/a.test.js", "x", "fail"), ("src/a.test.js", "y", "pass")),
        (("src/b.test.js", "x", "pass"),),
        (("src/c.test.js", "x", "pass"), ("src/c.test.js", "z", "fail")),
    ]
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        paths = [shard(tmp / f"shard{n}.xml", *specs[n]) for n in order]
        db = tmp / "h.db"
        meta = ["--run-id", "gh-77", "--no-detect"]
        if one_command:
            assert run(db, *paths, *meta).exit_code == 0
        else:
            assert run(db, *paths[:2], *meta).exit_code == 0
            assert run(db, paths[2], *meta).exit_code == 0
        assert run_tests(db) == [
            ("parser::y", "pass", 1),
            ("parser::z", "fail", 1),
            ("src/a.test.js::parser::x", "fail", 1),
            ("src/b.test.js::parser::x", "pass", 1),
            ("src/c.test.js::parser::x", "pass", 1),
        ]


@pytest.mark.parametrize("how", ["one_command", "one_per_command"])
def test_one_file_in_two_reports_of_a_run_stays_one_test(tmp_path: Path, how: str) -> None:
    """The same file in two reports of a run (matrix legs), a retry within one of them: one
    test with every attempt, its id unchanged."""
    first = tmp_path / "node18.xml"
    first.write_text(
        '<testsuites><testsuite name="src/a.test.js">'
        '<testcase classname="parser" name="x"><failure message="boom"/></testcase>'
        '<testcase classname="parser" name="x"/></testsuite></testsuites>'
    )
    second = shard(tmp_path / "node20.xml", ("src/a.test.js", "x", "pass"))
    db = tmp_path / "h.db"
    meta = ["--run-id", "gh-77", "--no-detect"]
    if how == "one_command":
        assert run(db, first, second, *meta).exit_code == 0
    else:
        assert run(db, first, *meta).exit_code == 0
        assert run(db, second, *meta).exit_code == 0
    assert run_tests(db) == [("parser::x", "flaky", 3)]


@pytest.mark.parametrize("how", ["one_command", "a_then_b", "b_then_a"])
def test_shards_ingested_by_separate_commands_keep_same_named_tests_apart(
    tmp_path: Path, how: str
) -> None:
    """Each shard job ingests its own report into the run: the first shard's case is stored
    under the plain id, and the second shard's same-named case of another file is another
    test, not a leg of it. Whatever order the shards come in, the run is what one ingest of
    both gives."""
    a = file_shard(tmp_path / "a.xml", ("src/a.test.js", "handles empty input", "fail"))
    b = file_shard(
        tmp_path / "b.xml",
        ("src/b.test.js", "handles empty input", "pass"),
        ("src/b.test.js", "only in b", "pass"),
    )
    db = tmp_path / "h.db"
    meta = ["--run-id", "gh-77", "--no-detect"]
    if how == "one_command":
        commands = [[a, b]]
    else:
        commands = [[a], [b]] if how == "a_then_b" else [[b], [a]]
    for paths in commands:
        result = run(db, *paths, *meta)
        assert result.exit_code == 0, result.output
    assert run_tests(db) == SHARDED
    assert query(db, "SELECT count(*) FROM tests") == [(3,)]


# Shards a and b of run R, and two later runs holding `parser::x` of one file each (under the
# plain id: no other file of their run shares it): (shard, run id, timestamp).
SEEN_REPORTS = [
    ((("src/a.test.js", "x", "fail"), ("src/a.test.js", "y", "pass")), "R", "2026-11-20T10:00:00Z"),
    ((("src/b.test.js", "x", "pass"),), "R", "2026-11-20T10:00:00Z"),
    ((("src/b.test.js", "x", "pass"),), "R2", "2026-11-22T10:00:00Z"),
    ((("src/a.test.js", "x", "fail"),), "R3", "2026-11-24T10:00:00Z"),
]
SEEN_FIRST = [
    ("parser::x", "2026-11-22T10:00:00Z"),
    ("parser::y", "2026-11-20T10:00:00Z"),
    ("src/a.test.js::parser::x", "2026-11-20T10:00:00Z"),
    ("src/b.test.js::parser::x", "2026-11-20T10:00:00Z"),
]
EARLIEST_RUN = (
    "SELECT t.test_id, min(tr.ts) FROM tests t JOIN test_runs tr ON tr.test = t.id"
    " GROUP BY t.id ORDER BY 1"
)


@settings(max_examples=24, deadline=None)
@given(order=st.permutations(range(len(SEEN_REPORTS))))
def test_a_test_is_seen_first_at_its_earliest_run_whatever_the_order_of_the_reports(
    order: list[int],
) -> None:
    """A test's first_seen is the time of the earliest run holding its attempts: the plain id
    whose attempts in the shards' run moved to their files' ids is seen first at the earliest
    later run holding it, even where that run came in between the shards, and each file's id
    at the shards' run, in any order of ingest."""
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        db = tmp / "h.db"
        for index in order:
            cases, run_id, ts = SEEN_REPORTS[index]
            report = file_shard(tmp / f"report{index}.xml", *cases)
            result = run(db, report, "--run-id", run_id, "--timestamp", ts, "--no-detect")
            assert result.exit_code == 0, result.output
        assert query(db, "SELECT test_id, first_seen FROM tests ORDER BY 1") == SEEN_FIRST
        assert query(db, EARLIEST_RUN) == SEEN_FIRST


# Shards a and b of run E, whose commit changed src/b.test.js; a later run L of src/a.test.js
# changing src/b.test.js, and a run M of a case naming no file changing src/a.test.js (both
# under the plain id): (case, run id, timestamp, changed file).
FILE_REPORTS = [
    (("src/a.test.js", "x", "fail"), "E", "2026-11-20T10:00:00Z", "src/b.test.js"),
    (("src/b.test.js", "x", "fail"), "E", "2026-11-20T10:00:00Z", "src/b.test.js"),
    (("src/a.test.js", "x", "pass"), "L", "2026-11-22T10:00:00Z", "src/b.test.js"),
    (("", "x", "pass"), "M", "2026-11-24T10:00:00Z", "src/a.test.js"),
]
FILE_TESTS = [
    ("parser::x", "src/a.test.js"),
    ("src/a.test.js::parser::x", "src/a.test.js"),
    ("src/b.test.js::parser::x", "src/b.test.js"),
]
EDITED = [
    ("E", "src/a.test.js::parser::x", 0),
    ("E", "src/b.test.js::parser::x", 1),
    ("L", "parser::x", 0),
    ("M", "parser::x", 1),
]
EDITED_SQL = (
    "SELECT r.run_id, t.test_id, tr.edited FROM test_runs tr JOIN tests t ON t.id = tr.test"
    " JOIN runs r ON r.id = tr.run ORDER BY 1, 2"
)


def ingest_file_report(
    target: Path | str,
    tmp: Path,
    reports: list[tuple[tuple[str, str, str], str, str, str]],
    index: int,
) -> None:
    """`flaketui ingest` into target (a history or a server URL) of reports[index], a shard of
    one case (see file_shard) with its run id, timestamp and changed file."""
    shard_case, run_id, ts, changed = reports[index]
    report = file_shard(tmp / f"report{index}-{run_id}.xml", shard_case)
    result = run(
        target, report, "--run-id", run_id, "--timestamp", ts, "--changed-file", changed,
        "--no-detect",
    )  # fmt: skip
    assert result.exit_code == 0, result.output


@settings(max_examples=24, deadline=None)
@given(order=st.permutations(range(len(FILE_REPORTS))))
def test_a_test_has_its_own_file_whatever_the_order_of_the_reports(order: list[int]) -> None:
    """A file's id is that file's, not the file the plain id was first given, and the plain id
    whose attempts of a shard moved to the shard file's id has the file its other runs name:
    a run whose commit changed a test's file is edited for the test of that file alone, in
    any order of ingest."""
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        db = tmp / "h.db"
        for index in order:
            ingest_file_report(db, tmp, FILE_REPORTS, index)
        assert query(db, "SELECT test_id, test_file FROM tests ORDER BY 1") == FILE_TESTS
        assert query(db, EDITED_SQL) == EDITED


# Runs of `parser::x`, a test moved from src/a.test.js to src/b.test.js, each a report of its
# own: (case, run id, timestamp, changed file). R4 names no file; R6 is of the time of R5 and
# names src/a.test.js (a branch not yet rebased): at a tie the greater file is the test's.
MOVED_REPORTS = [
    (("src/a.test.js", "x", "fail"), "R1", "2026-11-01T10:00:00Z", "src/b.test.js"),
    (("src/a.test.js", "x", "fail"), "R2", "2026-11-03T10:00:00Z", "src/a.test.js"),
    (("src/b.test.js", "x", "pass"), "R3", "2026-11-05T10:00:00Z", "src/b.test.js"),
    (("", "x", "fail"), "R4", "2026-11-07T10:00:00Z", "src/b.test.js"),
    (("src/b.test.js", "x", "pass"), "R5", "2026-11-09T10:00:00Z", "src/a.test.js"),
    (("src/a.test.js", "x", "pass"), "R6", "2026-11-09T10:00:00Z", "src/a.test.js"),
]


def moved_expected(indexes: list[int]) -> tuple[str | None, list[tuple[object, ...]]]:
    """The file of `parser::x` after the reports of indexes (that of the latest run naming
    one, the greater file at a tie) and each run's edited flag against it."""
    named = [
        (MOVED_REPORTS[i][2], MOVED_REPORTS[i][0][0]) for i in indexes if MOVED_REPORTS[i][0][0]
    ]
    test_file = max(named)[1] if named else None
    edited = sorted(
        (MOVED_REPORTS[i][1], "parser::x", int(MOVED_REPORTS[i][3] == test_file)) for i in indexes
    )
    return test_file, edited


def ingest_moved(db: Path, tmp: Path, index: int) -> None:
    ingest_file_report(db, tmp, MOVED_REPORTS, index)


@settings(max_examples=40, deadline=None)
@given(order=st.permutations(range(len(MOVED_REPORTS))), upto=st.integers(1, len(MOVED_REPORTS)))
def test_a_moved_test_has_the_file_of_its_latest_run_naming_one_in_any_order(
    order: list[int], upto: int
) -> None:
    """A test whose id does not hold its file, moved to another file, has the file its latest
    run names (a run naming none changes nothing), whatever order the reports come in (a
    backfill of older reports after newer ones included): its runs are edited by what their
    commits changed in that file, after every report and at the end."""
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        db = tmp / "h.db"
        for done, index in enumerate(order[:upto], 1):
            ingest_moved(db, tmp, index)
            test_file, edited = moved_expected(order[:done])
            assert query(db, "SELECT test_id, test_file FROM tests") == [("parser::x", test_file)]
            assert query(db, EDITED_SQL) == edited


def test_a_case_naming_its_file_through_its_suite_gives_the_test_that_file(
    tmp_path: Path,
) -> None:
    """A case whose suite names the file (mocha's reporter puts `file` on the suite) gives its
    test that file, and the runs whose commit changed it are edited; a karma describe block
    (parentSuites) names no file."""
    db = tmp_path / "h.db"
    for run_id, ts, changed, path in (
        ("R1", "2026-11-01T10:00:00Z", "test/b.spec.js", "test/a.spec.js"),
        ("R2", "2026-11-02T10:00:00Z", "test/a.spec.js", "test/b.spec.js"),
    ):
        report = tmp_path / f"{run_id}.xml"
        report.write_text(
            f'<testsuites><testsuite name="Root Suite" file="{path}">'
            '<testcase classname="parser" name="x"/></testsuite><testsuite name="Chrome">'
            '<testcase classname="browser" name="y" parentSuites="About"/></testsuite>'
            "</testsuites>"
        )
        result = run(
            db, report, "--run-id", run_id, "--timestamp", ts, "--changed-file", changed,
            "--no-detect",
        )  # fmt: skip
        assert result.exit_code == 0, result.output
    assert query(db, "SELECT test_id, test_file FROM tests ORDER BY 1") == [
        ("browser::y", None),
        ("parser::x", "test/b.spec.js"),
    ]
    assert query(db, EDITED_SQL) == [
        ("R1", "browser::y", 0),
        ("R1", "parser::x", 1),
        ("R2", "browser::y", 0),
        ("R2", "parser::x", 0),
    ]


def karma_shard(path: Path, *blocks: str) -> Path:
    """A karma report of one case, `adds` in the browser suite, per describe block
    (parentSuites): the reporter names no file."""
    cases = "".join(
        f'<testcase classname="Chrome_120" name="adds" parentSuites="{block}"/>' for block in blocks
    )
    path.write_text(f'<testsuites><testsuite name="Chrome 120">{cases}</testsuite></testsuites>')
    return path


KARMA_SHARDS = (("R1", "Calculator"), ("R2", "Calculator"), ("R2", "Cart"))


def ingest_karma(target: Path | str, tmp: Path, order: tuple[int, ...]) -> None:
    """`flaketui ingest` into target of KARMA_SHARDS in `order`, one command each: run R1
    holds `adds` of one describe block, R2 two shards whose blocks share the name."""
    for index in order:
        run_id, block = KARMA_SHARDS[index]
        report = karma_shard(tmp / f"karma{index}.xml", block)
        ts = "2026-11-01T10:00:00Z" if run_id == "R1" else "2026-11-02T10:00:00Z"
        result = run(target, report, "--run-id", run_id, "--timestamp", ts, "--no-detect")
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize("order", [(0, 1, 2), (0, 2, 1), (1, 2, 0)])
def test_a_karma_describe_block_is_no_tests_file_after_a_shard_move(
    tmp_path: Path, order: tuple[int, ...]
) -> None:
    """Describe blocks sharing a test name across a run's shards make a test per block
    (``<block>::<id>``) and move the run's attempts of the plain id there; neither those
    tests nor the plain id left with another run's attempts take a block for their file."""
    db = tmp_path / "h.db"
    ingest_karma(db, tmp_path, order)
    assert query(db, "SELECT test_id, test_file FROM tests ORDER BY 1") == [
        ("Calculator::Chrome_120::adds", None),
        ("Cart::Chrome_120::adds", None),
        ("Chrome_120::adds", None),
    ]


FILES = ("src/a.test.js", "src/b.test.js", "src/c.test.js", "")  # "": the case names none
CASE = st.tuples(
    st.sampled_from(FILES), st.sampled_from(("x", "y")), st.sampled_from(("pass", "fail"))
)


@settings(max_examples=60, deadline=None)
@given(
    shards=st.lists(st.lists(CASE, min_size=1, max_size=3), min_size=2, max_size=4), data=st.data()
)
def test_a_runs_shards_give_its_tests_whatever_the_commands_and_their_order(
    shards: list[list[tuple[str, str, str]]], data: st.DataObject
) -> None:
    """Shards of one run (a file in one shard or several, a name in one file or several, a
    case repeated in a shard as a retry, a case naming no file), ingested in any order and
    split into any number of commands: the run's tests and outcomes are those one ingest of
    every shard gives, and a case's name is prefixed with its file exactly where files of the
    run share it."""
    order = data.draw(st.permutations(range(len(shards))), label="order")
    cuts = data.draw(st.lists(st.booleans(), min_size=len(shards) - 1, max_size=len(shards) - 1))
    files_of: dict[str, set[str]] = {}
    for shard_cases in shards:
        for file, name, _ in shard_cases:
            files_of.setdefault(name, set()).update([file] if file else [])
    expected = sorted(
        {
            f"{file}::parser::{name}" if file and len(files_of[name]) > 1 else f"parser::{name}"
            for shard_cases in shards
            for file, name, _ in shard_cases
        }
    )
    meta = ["--run-id", "gh-77", "--no-detect"]
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        paths = []
        for number, shard_cases in enumerate(shards):
            paths.append(file_shard(tmp / f"shard{number}.xml", *shard_cases))
            with paths[-1].open("a") as fh:
                fh.write(f"<!-- shard {number} -->\n")  # each shard its own report file
        together = tmp / "together.db"
        assert run(together, *paths, *meta).exit_code == 0
        commands: list[list[Path]] = [[paths[order[0]]]]
        for cut, index in zip(cuts, order[1:], strict=True):
            if cut:
                commands.append([])
            commands[-1].append(paths[index])
        split = tmp / "split.db"
        for command in commands:
            result = run(split, *command, *meta)
            assert result.exit_code == 0, result.output
        outcomes = (
            "SELECT t.test_id, tr.outcome, tr.bad, tr.attempts, tr.failed_attempts"
            " FROM test_runs tr JOIN tests t ON t.id = tr.test ORDER BY t.test_id"
        )
        assert query(split, outcomes) == query(together, outcomes)
        assert [row[0] for row in query(together, outcomes)] == expected
        assert query(split, "SELECT test_id FROM tests ORDER BY 1") == [(i,) for i in expected]


# ---- one test in several report files of a run ------------------------------------------------


@pytest.mark.parametrize("order", [("py311", "py312"), ("py312", "py311")])
@pytest.mark.parametrize("how", ["one_per_command", "one_command", "manifest"])
def test_a_leg_failing_outright_fails_the_run_in_any_order(
    tmp_path: Path, order: tuple[str, str], how: str
) -> None:
    """Matrix legs of one job share a run id: the test ran once per leg, not twice in a row, so
    a leg failing fails the run; it is neither flaky nor healthy, whichever leg came first."""
    legs = {
        "py311": junit(tmp_path / "py311.xml", case("test_x", "fail", cls="pkg.Cls")),
        "py312": junit(tmp_path / "py312.xml", case("test_x", cls="pkg.Cls")),
    }
    files = [legs[name] for name in order]
    db = tmp_path / "m.db"
    meta = ["--run-id", "gh-510", "--timestamp", "2026-11-10T10:00:00Z", "--no-detect"]
    if how == "one_per_command":
        for path in files:
            assert run(db, path, *meta).exit_code == 0
    elif how == "one_command":
        assert run(db, *files, *meta).exit_code == 0
    else:
        entries: list[dict[str, object] | str] = [
            {"file": path.name, "run_id": "gh-510", "timestamp": "2026-11-10T10:00:00Z"}
            for path in files
        ]
        assert run(db, "--manifest", write_manifest(tmp_path / "m.jsonl", entries)).exit_code == 0
    assert query(db, "SELECT outcome, bad, attempts, failed_attempts FROM test_runs") == [
        ("fail", 1, 2, 1)
    ]


# ---- a report added to a run must agree with its metadata ------------------------------------

SHARD_1 = [
    *("--run-id", "N1", "--suite", "nightly", "--branch", "main"),
    *("--timestamp", "2026-11-01T02:00:00Z", "--worker-count", "16", "--no-detect"),
]


def test_a_shard_with_other_metadata_is_refused_naming_the_fields(tmp_path: Path) -> None:
    db = tmp_path / "meta.db"
    assert run(db, junit(tmp_path / "s1.xml", case("a")), *SHARD_1).exit_code == 0
    before = dump(db)
    shard2 = junit(tmp_path / "s2.xml", case("b"))
    other = "--suite unit --branch feat/x --timestamp 2026-11-02T02:00:00Z --worker-count 4"
    result = run(db, shard2, "--run-id", "N1", *other.split(), "--no-detect")
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "Error: run 'N1' is stored with other metadata: suite 'nightly', not 'unit'; branch"
        " 'main', not 'feat/x'; timestamp 2026-11-01T02:00:00Z, not 2026-11-02T02:00:00Z;"
        " worker count 16, not 4 (give the run's own, or another run id)"
    ]
    assert dump(db) == before
    # What one side leaves unknown is no disagreement; the same values agree.
    assert run(db, shard2, "--run-id", "N1", "--no-detect").exit_code == 0
    third = junit(tmp_path / "s3.xml", case("c"))
    assert run(db, third, *SHARD_1).exit_code == 0
    assert query(db, "SELECT suite, branch, worker_count FROM runs") == [("nightly", "main", 16)]


def test_manifest_lines_of_one_run_must_agree(tmp_path: Path) -> None:
    for name in ("a", "b", "c", "d"):
        junit(tmp_path / f"{name}.xml", case(name))
    stamp = "2026-11-01T02:00:00Z"
    entries: list[dict[str, object] | str] = [
        {"run_id": "M1", "file": "a.xml", "suite": "nightly", "timestamp": stamp,
         "worker_count": 16},
        {"run_id": "M1", "file": "b.xml", "suite": "unit", "branch": "feat/x",
         "timestamp": "2026-11-02T02:00:00Z", "worker_count": 4},
        {"run_id": "M2", "file": "c.xml", "suite": "unit", "timestamp": stamp},
        {"run_id": "M2", "file": "d.xml", "branch": "main"},
    ]  # fmt: skip
    db = tmp_path / "h.db"
    result = run(db, "--manifest", write_manifest(tmp_path / "m.jsonl", entries))
    assert result.exit_code == 1
    assert result.output.splitlines()[1:] == [
        "line 1: run 'M1' not ingested: its line 2 was refused",
        "line 2: run 'M1': its earlier lines give suite 'nightly', not 'unit'; timestamp"
        " 2026-11-01T02:00:00Z, not 2026-11-02T02:00:00Z; worker count 16, not 4",
    ]
    assert query(db, "SELECT run_id, suite, branch FROM runs") == [("M2", "unit", "main")]
    # A line adding to a stored run is held to that run's metadata too.
    later: list[dict[str, object] | str] = [
        {"run_id": "M2", "file": "a.xml", "suite": "nightly", "timestamp": stamp},
        {"run_id": "M3", "file": "b.xml", "timestamp": stamp},
    ]
    result = run(db, "--manifest", write_manifest(tmp_path / "later.jsonl", later))
    assert result.exit_code == 1
    assert result.output.splitlines()[1:] == [
        "line 1: run 'M2' is stored with other metadata: suite 'unit', not 'nightly' (give the"
        " run's own, or another run id)"
    ]
    assert query(db, "SELECT run_id FROM runs ORDER BY 1") == [("M2",), ("M3",)]


# ---- a report in another encoding than UTF-8 -------------------------------------------------

LATIN = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="<&\"'"),
    min_size=1,
    max_size=12,
).filter(lambda name: not _is_utf8(name.encode("latin-1")) and name.strip() == name)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@settings(max_examples=25, deadline=None)
@given(name=LATIN, declared=st.sampled_from([None, "UTF-8"]))
def test_a_report_in_latin_1_without_saying_so_is_named_not_utf8(
    name: str, declared: str | None
) -> None:
    head = "" if declared is None else f'<?xml version="1.0" encoding="{declared}"?>\n'
    body = f'<testsuite name="s"><testcase classname="c" name="{name}"/></testsuite>\n'
    try:
        name.encode("latin-1").decode("utf-8")
    except UnicodeDecodeError as bad:
        first = bad.object[bad.start]
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "r.xml"
        report.write_bytes((head + body).encode("latin-1"))
        result = run(Path(folder) / "h.db", report, "--no-detect")
        assert result.exit_code == 1
        [line] = result.output.splitlines()
        assert f": not valid UTF-8 (byte 0x{first:02X}); a report in another encoding" in line
        assert 'encoding="windows-1252"' in line
        assert not (Path(folder) / "h.db").exists()
        # Declared, it reads.
        report.write_bytes(
            ('<?xml version="1.0" encoding="ISO-8859-1"?>\n' + body).encode("latin-1")
        )
        assert run(Path(folder) / "h.db", report, "--no-detect").exit_code == 0
        assert query(Path(folder) / "h.db", "SELECT test_id FROM tests") == [(f"c::{name}",)]


def test_an_unescaped_character_keeps_its_own_reason(tmp_path: Path) -> None:
    report = tmp_path / "r.xml"
    report.write_text('<testsuite name="s"><testcase classname="c" name="a<b"/></testsuite>\n')
    result = run(tmp_path / "h.db", report, "--no-detect")
    assert result.exit_code == 1
    assert "an unescaped < or & in an attribute or text?" in result.output


def test_a_manifest_whose_every_line_is_refused_creates_no_history(tmp_path: Path) -> None:
    manifest = write_manifest(
        tmp_path / "runs.jsonl", [{"run_id": "r1"}, {"file": "nowhere.xml", "run_id": "r2"}]
    )
    result = run(tmp_path / "new.db", "--manifest", manifest)
    assert result.exit_code == 1
    assert "0 runs landed" in result.output and "2 lines refused" in result.output
    assert sorted(path.name for path in tmp_path.iterdir()) == ["runs.jsonl"]


def test_an_existing_history_stays_when_nothing_lands(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    open_history(db).conn.close()
    manifest = write_manifest(tmp_path / "runs.jsonl", [{"run_id": "r1"}])
    assert run(db, "--manifest", manifest).exit_code == 1
    assert run(db, junit(tmp_path / "empty.xml")).exit_code == 0
    assert db.exists()


def test_a_history_ingested_without_branches_flags_no_test_pr_only(tmp_path: Path) -> None:
    # No CI and no git repository: no branch is recorded, so no run is on the default branch.
    db = tmp_path / "h.db"
    for day in range(1, 13):
        stamp = f"2026-10-{day:02d}T10:00:00"
        outcome = "fail" if day % 3 == 0 else "pass"
        report = junit(tmp_path / f"r{day}.xml", case("a"), case("b", outcome), timestamp=stamp)
        assert run(db, report).exit_code == 0
    assert query(db, "SELECT DISTINCT branch, branch_kind FROM runs") == [(None, "pr")]
    result = CliRunner().invoke(
        cli, ["report", str(db), "--now", "2026-10-20T00:00:00Z", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    tests = {t["test_id"]: t for t in json.loads(result.stdout)["tests"]}
    assert [t["test_id"] for t in tests.values() if t["failed_runs"]] == ["pkg.Mod::b"]
    assert [t["test_id"] for t in tests.values() if "pr-only" in t["flags"]] == []
