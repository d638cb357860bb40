"""`flaketui ingest` of CTRF JSON, .NET TRX and TAP: real files land with the right attempts,
formats are told apart by content (or given), bad files are refused in one line, nothing written.

The real files live in tests/corpus/ (their origins in tests/corpus/SOURCES.md).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from flaketui.cli.commands import cli
from flaketui.core.ingest.formats import sniff_format
from tests.connections import open_connection

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
CI_PREFIXES = ("GITHUB_", "GITLAB", "CI_", "BUILDKITE", "CIRCLE", "JENKINS", "BUILD_", "GIT_")

# file -> (format, tests, attempts by outcome, run timestamp taken from the report or None)
EXPECTED: dict[str, tuple[str, int, dict[str, int], str | None]] = {
    "ctrf/minimal.json": ("ctrf", 1, {"pass": 1}, "2021-01-01T00:00:00Z"),
    "ctrf/with-retries.json": ("ctrf", 2, {"pass": 2, "fail": 2}, "2021-01-01T00:00:00Z"),
    "ctrf/comprehensive.json": ("ctrf", 3, {"pass": 2, "fail": 2}, "2021-01-01T00:00:00Z"),
    "trx/dotnet-trx.trx": ("trx", 11, {"pass": 5, "fail": 5, "skipped": 1}, "2021-04-20T06:31:31Z"),
    "trx/dotnet-xunitv3.trx": ("trx", 4, {"pass": 1, "fail": 3}, "2025-06-22T14:17:11Z"),
    "trx/SilentNotes.trx": ("trx", 79, {"pass": 67, "skipped": 12}, "2021-04-20T19:20:34Z"),
    "tap/node-test-mjs.tap": ("tap", 2, {"fail": 2}, None),
    "tap/not-ok-todo.tap": ("tap", 4, {"pass": 3, "skipped": 1}, None),
    "tap/perl-test2-buffered.tap": ("tap", 9, {"pass": 8, "fail": 1}, None),
    "tap/simple_yaml.tap": ("tap", 5, {"pass": 5}, None),
    "tap/skipping-a-few.tap": ("tap", 5, {"pass": 1, "skipped": 4}, None),
    "tap/version-14.tap": ("tap", 5, {"pass": 5}, None),
}
NOW = "2026-11-01T00:00:00Z"


@pytest.fixture(autouse=True)
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No CI variables, no git repository, no pyproject.toml."""
    for name in list(os.environ):
        if name.startswith(CI_PREFIXES) or name in ("CI", "CIRCLECI", "BRANCH_NAME", "CHANGE_ID"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, ["ingest", *map(str, args), "--no-detect"])


def query(db: Path, sql: str) -> list[tuple[object, ...]]:
    """sql's rows, read as a flaketui reader reads the history: opening it files the per-test
    rows of the runs `flaketui ingest` left waiting."""
    conn = open_connection(db, create=False)
    try:
        return [tuple(row) for row in conn.execute(sql)]
    finally:
        conn.close()


def attempts_of(db: Path, test_id: str) -> list[str]:
    rows = query(
        db,
        "SELECT r.outcome FROM results r JOIN tests t ON t.id = r.test "
        f"WHERE t.test_id = '{test_id}' ORDER BY r.attempt",
    )
    return [str(outcome) for (outcome,) in rows]


def test_the_corpus_is_complete() -> None:
    files = {str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*") if p.suffix != ".md"}
    assert files - {"ctrf", "trx", "tap"} == set(EXPECTED)
    listed = (CORPUS / "SOURCES.md").read_text()
    for name in EXPECTED:
        assert Path(name).name in listed, name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_files_land(tmp_path: Path, name: str) -> None:
    fmt, tests, outcomes, stamp = EXPECTED[name]
    report = CORPUS / name
    assert sniff_format(report) == fmt
    db = tmp_path / "h.db"
    args = [] if stamp else ["--timestamp", NOW]
    result = run(db, report, "--run-id", "r1", *args)
    assert result.exit_code == 0, result.output
    assert query(db, "SELECT count(*) FROM tests") == [(tests,)]
    counted = Counter(str(o) for (o,) in query(db, "SELECT outcome FROM results"))
    assert dict(counted) == outcomes
    assert query(db, "SELECT ts FROM runs") == [(stamp or NOW,)]
    # The same file with its format given lands the same rows.
    again = tmp_path / "again.db"
    given = run(again, report, "--run-id", "r1", "--format", fmt, *args)
    assert given.exit_code == 0, given.output
    assert query(again, "SELECT count(*) FROM results") == [(sum(outcomes.values()),)]


def test_ctrf_retries_become_attempts(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    for name in ("with-retries.json", "comprehensive.json"):
        assert run(db, CORPUS / "ctrf" / name, "--run-id", name).exit_code == 0
    assert attempts_of(db, "flaky test") == ["fail", "fail", "pass"]
    checkout = "tests/checkout/checkout.test.js::Checkout::user can checkout"
    assert attempts_of(db, checkout) == ["fail", "pass"]
    assert query(
        db, f"SELECT outcome, attempts FROM test_runs tr JOIN tests t ON t.id = tr.test "
        f"WHERE t.test_id = '{checkout}'"
    ) == [("flaky", 2)]  # fmt: skip
    assert query(db, f"SELECT test_file FROM tests WHERE test_id = '{checkout}'") == [
        ("tests/checkout/checkout.test.js",)
    ]
    worker = query(
        db, f"SELECT DISTINCT worker_id FROM results r JOIN tests t ON t.id = r.test "
        f"WHERE t.test_id = '{checkout}'"
    )  # fmt: skip
    assert worker == [("worker-2",)]


def test_ctrf_retry_count_without_attempt_list(tmp_path: Path) -> None:
    report = tmp_path / "ctrf.json"
    tests = [
        {"name": "a", "status": "passed", "duration": 5, "retries": 2, "flaky": True},
        {"name": "b", "status": "failed", "duration": 5, "retries": 1, "message": "boom"},
        {"name": "c", "status": "passed", "duration": 5, "flaky": True},
        {"name": "d", "status": "other", "rawStatus": "timedOut", "duration": 5},
    ]
    report.write_text(json.dumps({"results": {"tool": {"name": "x"}, "tests": tests}}))
    db = tmp_path / "h.db"
    assert run(db, report, "--timestamp", NOW).exit_code == 0
    assert attempts_of(db, "a") == ["fail", "fail", "pass"]
    assert attempts_of(db, "b") == ["fail", "fail"]
    assert attempts_of(db, "c") == ["fail", "pass"]
    assert attempts_of(db, "d") == ["fail"]


def test_trx_repeated_results_become_attempts(tmp_path: Path) -> None:
    text = (CORPUS / "trx" / "dotnet-xunitv3.trx").read_text(encoding="utf-8-sig")
    start = text.index("<UnitTestResult ")
    end = text.index("</UnitTestResult>", start) + len("</UnitTestResult>")
    failed = text[start:end]
    retried = failed.replace('outcome="Failed"', 'outcome="Passed"')
    report = tmp_path / "retried.trx"
    report.write_text(text[:end] + retried + text[end:], encoding="utf-8")
    db = tmp_path / "h.db"
    assert run(db, report).exit_code == 0
    assert attempts_of(db, "DotnetTests.XUnitV3Tests.FixtureTests::Failing_Test") == [
        "fail",
        "pass",
    ]


def test_tap_repeated_descriptions_are_tests_not_retries(tmp_path: Path) -> None:
    report = tmp_path / "asserts.tap"
    report.write_text(
        "TAP version 14\n1..3\nnot ok 1 - db pool\n  ---\n  message: 'Timeout after 5s'\n"
        "  duration_ms: 5000.4\n  ...\nok 2 - db pool\n# Subtest: parser\n"
        "    ok 1 - should be equal\n    not ok 2 - should be equal\n    1..2\n"
        "not ok 3 - parser\n"
    )
    db = tmp_path / "h.db"
    for run_id in ("r1", "r2"):
        result = run(db, report, "--run-id", run_id, "--timestamp", NOW)
        assert result.exit_code == 0, result.output
    # Each test point is a test of its own with one attempt per run: none of them is flaky.
    assert sorted(
        query(
            db,
            "SELECT t.test_id, group_concat(tr.outcome), sum(tr.attempts) FROM test_runs tr"
            " JOIN tests t ON t.id = tr.test GROUP BY t.test_id",
        )
    ) == [
        ("db pool", "fail,fail", 2),
        ("db pool #2", "pass,pass", 2),
        ("parser > should be equal", "pass,pass", 2),
        ("parser > should be equal #2", "fail,fail", 2),
    ]
    assert attempts_of(db, "db pool #2") == ["pass", "pass"]  # one a run
    assert query(
        db, "SELECT r.message, r.duration_ms FROM results r JOIN tests t ON t.id = r.test "
        "WHERE t.test_id = 'db pool' AND r.attempt = 1"
    ) == [("Timeout after 5s", 5000), ("Timeout after 5s", 5000)]  # fmt: skip


def test_tap_ids_without_repeats_are_the_descriptions(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    report = CORPUS / "tap" / "perl-test2-buffered.tap"
    assert run(db, report, "--timestamp", NOW).exit_code == 0
    assert sorted(test_id for (test_id,) in query(db, "SELECT test_id FROM tests")) == [
        "empty",
        "my_streamy_test > subtest event A",
        "my_streamy_test > subtest event B",
        "my_streamy_test_plan > subtest event A",
        "my_streamy_test_plan > subtest event B",
        "my_test > subtest event A",
        "my_test > subtest event B",
        "my_test_plan > subtest event A",
        "my_test_plan > subtest event B",
    ]


@pytest.mark.parametrize(
    ("name", "content", "complaint"),
    [
        ("bad.json", '{"results": {"tests": [', "not valid JSON"),
        pytest.param(
            "deep.json",
            '{"results": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "nested too deeply",
            id="deep.json",
        ),
        ("shape.json", '{"results": {"summary": {}}}', "not a CTRF report"),
        ("noname.json", '{"results": {"tests": [{"status": "passed"}]}}', "no 'name'"),
        (
            "late.json",
            '{"results": {"tests": [{"name": "a", "status": "passed"},'
            ' {"name": "b", "status": "exploded"}]}}',
            "results.tests[1]: unknown status 'exploded'",
        ),
        ("cut.trx", '<?xml version="1.0"?>\n<TestRun><Results><UnitTestResult ', "cut.trx:"),
        (
            "bomb.trx",
            '<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;">]>\n'
            "<TestRun><Results/></TestRun>\n",
            "DTDs and entities are not allowed",
        ),
        ("latin1.tap", b"TAP version 13\nok 1 - caf\xe9\n", "not UTF-8"),
        ("empty.tap", b"", "empty file"),
    ],
)
def test_bad_files_are_refused_in_one_line(
    tmp_path: Path, name: str, content: str | bytes, complaint: str
) -> None:
    report = tmp_path / name
    if isinstance(content, bytes):
        report.write_bytes(content)
    else:
        report.write_text(content)
    db = tmp_path / "h.db"
    fmt = ["--format", "tap"] if name.endswith(".tap") else []
    result = run(db, report, "--timestamp", NOW, *fmt)
    assert result.exit_code == 1
    [line] = result.output.splitlines()
    assert line.startswith("Error: ") and str(report) in line and complaint in line, line
    assert "Traceback" not in result.output
    assert not db.exists() or query(db, "SELECT count(*) FROM results") == [(0,)]


def test_a_bad_file_after_good_ones_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    assert run(db, CORPUS / "tap" / "version-14.tap", "--run-id", "old", "--timestamp", NOW)
    before = query(db, "SELECT count(*) FROM results")
    bad = tmp_path / "bad.json"
    bad.write_text('{"results": {"tests": [{"name": "a", "status": "passed"}, 7]}}')
    result = run(db, CORPUS / "ctrf" / "minimal.json", bad, "--run-id", "new")
    assert result.exit_code == 1 and "results.tests[1]: not an object" in result.output
    assert query(db, "SELECT count(*) FROM results") == before
    assert query(db, "SELECT run_id FROM runs") == [("old",)]


def test_format_option_overrides_the_content(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    result = run(db, CORPUS / "ctrf" / "minimal.json", "--format", "junit", "--timestamp", NOW)
    assert result.exit_code == 1
    assert (
        "minimal.json:" in result.output and "a character XML does not allow here" in result.output
    )
    text_file = tmp_path / "notes.txt"
    text_file.write_text("hello\nworld\n")
    refused = run(db, text_file, "--format", "tap", "--timestamp", NOW)
    assert refused.exit_code == 1
    assert "not a TAP stream (no version, plan or test line)" in refused.output
    unknown = run(db, text_file, "--format", "xml")
    assert unknown.exit_code == 1 and "'xml' is not one of" in unknown.output


def test_manifest_reads_every_format(tmp_path: Path) -> None:
    manifest = tmp_path / "runs.jsonl"
    lines = [
        {"file": str(CORPUS / "ctrf" / "with-retries.json"), "run_id": "a"},
        {"file": str(CORPUS / "trx" / "dotnet-trx.trx"), "run_id": "b"},
        {"file": str(CORPUS / "tap" / "version-14.tap"), "run_id": "c", "timestamp": NOW},
        {"file": str(CORPUS / "tap" / "skipping-a-few.tap"), "timestamp": NOW, "format": "tap"},
        {"file": str(CORPUS / "tap" / "simple_yaml.tap"), "timestamp": NOW, "format": "yaml"},
        {"file": str(CORPUS / "tap" / "not-ok-todo.tap"), "run_id": "e", "format": "junit",
         "timestamp": NOW},
    ]  # fmt: skip
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    db = tmp_path / "h.db"
    result = CliRunner().invoke(cli, ["ingest", str(db), "--manifest", str(manifest)])
    assert result.exit_code == 1
    assert "4 runs landed" in result.output
    assert "line 5: 'format' must be one of junit, ctrf, trx, tap" in result.output
    assert (
        "line 6: " in result.output
        and "not-ok-todo.tap:1:2: a character XML does not allow here" in result.output
    )
    assert query(db, "SELECT count(*) FROM runs") == [(4,)]


def test_sniffing() -> None:
    assert sniff_format(CORPUS / "trx" / "dotnet-xunitv3.trx") == "trx"  # BOM, namespace
    assert sniff_format(CORPUS / "tap" / "not-ok-todo.tap") == "tap"  # leading comment
    assert sniff_format(CORPUS / "ctrf" / "minimal.json") == "ctrf"
