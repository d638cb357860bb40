"""Times and counts out of the range flaketui computes with: one-line errors.

A timestamp is refused outside years 1970 to 9000 (flaketui.core.timeutil.EARLIEST and
LATEST), a worker count above MAX_WORKER_COUNT; inside the range every entry point computes
without a traceback.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flaketui.cli.commands import cli
from flaketui.core.models import MAX_WORKER_COUNT
from flaketui.core.timeutil import EARLIEST, LATEST, parse_iso, to_iso
from tests.connections import open_history
from tests.core.history_builder import HistoryBuilder, utc

REPORTS = Path(__file__).parents[2] / "sample_data" / "reports"
REPORT = REPORTS / "main-unit.xml"
T0 = utc(2026, 11, 1)
NOW = "2026-11-30T18:00:00Z"
SLOW = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# Any datetime Python can spell, with an offset, biased towards the edges of the range.
moments = st.one_of(
    st.sampled_from(
        [
            datetime(1, 1, 1),
            datetime(9999, 12, 31, 23, 59, 59),
            EARLIEST.replace(tzinfo=None),
            LATEST.replace(tzinfo=None),
            (EARLIEST - timedelta(seconds=1)).replace(tzinfo=None),
            (LATEST + timedelta(seconds=1)).replace(tzinfo=None),
        ]
    ),
    st.datetimes(),
)
offsets = st.sampled_from([UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-12))])
timestamps = st.builds(lambda m, tz: m.replace(tzinfo=tz).isoformat(), moments, offsets)


def in_range(text: str) -> bool:
    try:
        moment = datetime.fromisoformat(text).astimezone(UTC)
    except OverflowError:
        return False
    return EARLIEST <= moment <= LATEST


def assert_refused(result: Result, status: int, *words: str) -> None:
    """Refused with one line and `status`, never a traceback."""
    assert result.exit_code == status, result.output
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), result.exception
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    for word in words:
        assert word in lines[0]


def assert_no_traceback(result: Result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("FLAKETUI_SKIP_FILE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return CliRunner()


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """Ten daily main runs r0..r9, the last one on 2026-11-10; a flaky test and a steady one."""
    path = tmp_path / "history.db"
    db = open_history(path)
    hb = HistoryBuilder(db)
    for day in range(10):
        run = hb.run(ts=T0 + timedelta(days=day), commit=f"c{day}", run_id=f"r{day}")
        run.result("tests/test_a.py::test_flaky", ["fail", "pass"] if day % 3 else ["pass"])
        run.result("tests/test_a.py::test_ok", ["pass"])
    db.close()
    return path


# --now, across the commands that take it (check takes it as a usage error: status 2).
NOW_COMMANDS = [
    (["report", "{db}"], 1),
    (["check", "{db}"], 2),
    (["pivot", "{db}", "tests/test_a.py::test_flaky"], 1),
    (["order", "{db}", "tests/test_a.py::test_flaky"], 1),
    (["changes", "{db}", "tests/test_a.py::test_flaky"], 1),
    (["lifecycle", "{db}"], 1),
    (["export", "{db}", "--format", "deselect"], 1),
    (["incident", "list", "{db}"], 1),
]


@pytest.mark.parametrize("text", ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"])
@pytest.mark.parametrize(("args", "status"), NOW_COMMANDS)
def test_now_out_of_range_is_one_line(
    runner: CliRunner, history: Path, args: list[str], status: int, text: str
) -> None:
    argv = [arg.format(db=history) for arg in args] + ["--now", text]
    assert_refused(runner.invoke(cli, argv), status, "out of range", repr(text), "1970", "9000")


@pytest.mark.parametrize("text", ["1970-01-01T00:00:00Z", "9000-12-31T23:59:59Z"])
@pytest.mark.parametrize(("args", "_status"), NOW_COMMANDS)
def test_now_at_the_edges_of_the_range_computes(
    runner: CliRunner, history: Path, args: list[str], _status: int, text: str
) -> None:
    argv = [arg.format(db=history) for arg in args] + ["--now", text]
    result = runner.invoke(cli, argv)
    assert_no_traceback(result)
    assert result.exit_code == 0, result.output


def test_quarantine_now_out_of_range_writes_nothing(
    runner: CliRunner, history: Path, tmp_path: Path
) -> None:
    skip = tmp_path / "skip.json"
    argv = ["quarantine", str(history), "tests/test_a.py::test_flaky", "--reason", "x"]
    argv += ["--skip-file", str(skip), "--now", "0001-01-01T00:00:00Z"]
    assert_refused(runner.invoke(cli, argv), 1, "out of range")
    assert not skip.exists()


@SLOW
@given(text=timestamps)
def test_report_now_any_timestamp(runner: CliRunner, history: Path, text: str) -> None:
    result = runner.invoke(cli, ["report", str(history), "--now", text])
    if in_range(text):
        assert_no_traceback(result)
        assert result.exit_code == 0, result.output
    else:
        assert_refused(result, 1, "out of range")


@SLOW
@given(text=timestamps)
def test_check_now_any_timestamp(runner: CliRunner, history: Path, text: str) -> None:
    result = runner.invoke(cli, ["check", str(history), "--now", text, "--fail-on", ""])
    if in_range(text):
        assert_no_traceback(result)
        assert result.exit_code == 0, result.output
    else:
        assert_refused(result, 2, "out of range")


@SLOW
@given(text=timestamps)
def test_ingest_timestamp_any_timestamp(runner: CliRunner, tmp_path: Path, text: str) -> None:
    db = tmp_path / "ingest.db"
    db.unlink(missing_ok=True)
    argv = ["ingest", str(db), str(REPORT), "--timestamp", text, "--no-detect"]
    result = runner.invoke(cli, argv)
    if in_range(text):
        assert_no_traceback(result)
        assert result.exit_code == 0, result.output
    else:
        assert_refused(result, 1, "out of range")
        assert not db.exists()  # refused before the history is opened


@pytest.mark.parametrize("count", [str(MAX_WORKER_COUNT + 1), "99999999999999999999999"])
def test_ingest_worker_count_too_large(runner: CliRunner, tmp_path: Path, count: str) -> None:
    db = tmp_path / "ingest.db"
    argv = ["ingest", str(db), str(REPORT), "--worker-count", count, "--no-detect"]
    assert_refused(runner.invoke(cli, argv), 1, "--worker-count", str(MAX_WORKER_COUNT))
    assert not db.exists()


def test_ingest_worker_count_largest(runner: CliRunner, tmp_path: Path) -> None:
    db = tmp_path / "ingest.db"
    argv = ["ingest", str(db), str(REPORT), "--worker-count", str(MAX_WORKER_COUNT)]
    result = runner.invoke(cli, [*argv, "--no-detect", "--timestamp", NOW])
    assert result.exit_code == 0, result.output


def _line(run_id: str, **extra: object) -> str:
    return json.dumps({"file": str(REPORT), "run_id": run_id, "timestamp": NOW, **extra})


def _runs(db: Path) -> list[str]:
    conn = open_history(db)
    try:
        return [str(row[0]) for row in conn.conn.execute("SELECT run_id FROM runs ORDER BY id")]
    finally:
        conn.close()


@SLOW
@given(
    bad=st.one_of(
        timestamps.filter(lambda text: not in_range(text)).map(lambda t: {"timestamp": t}),
        st.integers(min_value=MAX_WORKER_COUNT + 1, max_value=10**40).map(
            lambda n: {"worker_count": n}
        ),
    )
)
def test_manifest_bad_line_is_refused_and_the_others_land(
    runner: CliRunner, tmp_path: Path, bad: dict[str, object]
) -> None:
    db = tmp_path / "backfill.db"
    db.unlink(missing_ok=True)
    manifest = tmp_path / "runs.jsonl"
    manifest.write_text("\n".join([_line("one"), _line("bad", **bad), _line("two")]) + "\n")
    result = runner.invoke(cli, ["ingest", str(db), "--manifest", str(manifest)])
    assert_no_traceback(result)
    assert result.exit_code == 1, result.output
    assert "2 runs landed" in result.output
    refused = [line for line in result.output.splitlines() if line.startswith("line ")]
    assert len(refused) == 1 and refused[0].startswith("line 2: "), result.output
    assert _runs(db) == ["one", "two"]


@given(text=timestamps)
def test_parse_iso_accepts_the_range_and_refuses_the_rest(text: str) -> None:
    if in_range(text):
        moment = parse_iso(text)
        assert parse_iso(to_iso(moment)) == moment.replace(microsecond=0)
    else:
        with pytest.raises(Exception, match="out of range"):
            parse_iso(text)


def test_an_expiry_is_only_compared_so_any_year_reads() -> None:
    never = parse_iso("9999-12-31T00:00:00Z", bounded=False)
    assert to_iso(never) == "9999-12-31T00:00:00Z"


def test_to_iso_keeps_four_digit_years() -> None:
    assert to_iso(datetime(1, 1, 1, tzinfo=UTC)) == "0001-01-01T00:00:00Z"


FLAKY = "tests/test_a.py::test_flaky"


@pytest.mark.parametrize(
    ("argv", "status", "words"),
    [
        (["quarantine", "{db}", FLAKY, "--reason", "r", "--expires", "3651"], 1, ["--expires"]),
        (["quarantine", "{db}", FLAKY, "--reason", "r", "--expires", "9" * 30], 1, ["--expires"]),
        (["changes", "{db}", FLAKY, "--days", "36501"], 1, ["--days"]),
        (["changes", "{db}", FLAKY, "--days", "9" * 30], 1, ["--days"]),
        (["prune", "{db}", "--older-than", "36501"], 1, ["at most 36500"]),
        (["prune", "{db}", "--older-than", "1e300"], 1, ["at most 36500"]),
        (["prune", "{db}", "--older-than", "inf"], 1, ["at most 36500"]),
        (["prune", "{db}", "--older-than", "nan"], 1, ["at most 36500"]),
    ],
)
def test_day_counts_too_large_are_one_line(
    runner: CliRunner,
    history: Path,
    tmp_path: Path,
    argv: list[str],
    status: int,
    words: list[str],
) -> None:
    before = history.read_bytes()
    skip = tmp_path / "skip.json"
    args = [arg.format(db=history) for arg in argv]
    if args[0] == "quarantine":
        args += ["--skip-file", str(skip), "--now", NOW]
    assert_refused(runner.invoke(cli, args), status, *words)
    assert history.read_bytes() == before and not skip.exists()


def test_day_counts_at_their_limit_compute(runner: CliRunner, history: Path) -> None:
    result = runner.invoke(cli, ["changes", str(history), FLAKY, "--days", "36500", "--now", NOW])
    assert_no_traceback(result)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("window_days", "99999999999"),
        ("window_days", "0"),
        ("half_life_days", "0.0"),
        ("half_life_days", "inf"),
        ("half_life_days", "nan"),
        ("grace_days", "-1"),
        ("removal_days", "36501"),
        ("skip_expiry_days", "3651"),
    ],
)
def test_day_settings_out_of_range_are_one_line(
    runner: CliRunner, history: Path, setting: str, value: str
) -> None:
    Path("pyproject.toml").write_text(f"[tool.flaketui]\n{setting} = {value}\n")
    result = runner.invoke(cli, ["report", str(history), "--now", NOW])
    assert_refused(result, 1, f"[tool.flaketui] {setting} must be a number of days")


def test_day_settings_at_their_limits_compute(runner: CliRunner, history: Path) -> None:
    Path("pyproject.toml").write_text(
        "[tool.flaketui]\nwindow_days = 36500\ngrace_days = 0\nskip_expiry_days = 3650\n"
    )
    result = runner.invoke(cli, ["report", str(history), "--now", NOW])
    assert_no_traceback(result)
    assert result.exit_code == 0, result.output
