"""`flaketui pivot` through click's CliRunner: table and JSON, read-only, one-line errors."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli.commands import cli
from tests.connections import open_history

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from history_builder import HistoryBuilder

T0 = datetime(2026, 11, 1, 0, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
FAMILY = "tests/test_b.py::test_rollup"


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A family run 10 times at 1 worker (1 bad) and 10 times at 16 workers (6 bad)."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "history.db"
    db = open_history(path)
    hb = HistoryBuilder(db)
    for index in range(20):
        workers, bad = (1, index < 1) if index < 10 else (16, index < 16)
        run = hb.run(ts=T0 + index * HOUR, worker_count=workers)
        run.result(f"{FAMILY}[a]", ["fail", "pass"] if bad else ["pass"], worker_id="gw0")
        run.result(f"{FAMILY}[b]", ["pass"], worker_id="gw1" if workers > 1 else "gw0")
    db.conn.close()
    return path


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_table(history: Path) -> None:
    code, out = invoke("pivot", str(history), FAMILY, "--now", "2026-11-02T00:00:00Z")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == f"{FAMILY} (family of 2 params) as of 2026-11-02T00:00:00Z"
    assert lines[1] == "20 counted runs, 7 bad (first attempt failed)"
    # 1/10 and 6/10 with their Wilson intervals (hand-checked: 1.8%-40.4%, 31.3%-83.2%).
    assert "         1      10      1      10.0%  1.8% - 40.4%" in lines
    assert "        16      10      6      60.0%  31.3% - 83.2%" in lines
    assert "       gw0      20      7      35.0%  18.1% - 56.7%" in lines


def test_json(history: Path) -> None:
    code, out = invoke(
        "pivot", str(history), f"{FAMILY}[a]", "--now", "2026-11-02T00:00:00Z", "--format", "json"
    )
    assert code == 0, out
    data = json.loads(out)
    assert (data["kind"], data["runs"], data["bad_runs"]) == ("test", 20, 7)
    assert [(r["worker_count"], r["runs"], r["bad_runs"]) for r in data["by_worker_count"]] == [
        (1, 10, 1),
        (16, 10, 6),
    ]
    assert data["by_worker_count"][1]["wilson_low"] == pytest.approx(0.3127, abs=1e-4)


def test_unknown_test_and_read_only(history: Path) -> None:
    before = history.read_bytes()
    code, out = invoke("pivot", str(history), "nope", "--now", "2026-11-02T00:00:00Z")
    assert (code, out) == (1, "Error: no test or family named 'nope'\n")
    assert history.read_bytes() == before
    code, out = invoke("pivot", "missing.db", FAMILY)
    assert code == 1 and out.startswith("Error: missing.db: does not exist")


def test_a_partial_name_is_answered_with_what_contains_it(history: Path) -> None:
    short = FAMILY.split("::")[-1]
    code, out = invoke("pivot", str(history), short, "--now", "2026-11-02T00:00:00Z")
    assert code == 1
    assert out == f"Error: no test or family named {short!r}; did you mean {FAMILY!r}?\n"


def test_interrupted_runs_are_shown_for_the_tests_they_recorded(history: Path) -> None:
    """A killed session recorded [a] (failed), never [b]: it counts for [a] and the family."""
    db = open_history(history)
    killed = HistoryBuilder(db).run(ts=T0 + 21 * HOUR, finished=False, run_id="killed")
    killed.result(f"{FAMILY}[a]", ["fail"], worker_id="gw0")
    db.conn.close()
    now = ("--now", "2026-11-02T00:00:00Z")
    line = "1 interrupted run among them (scored for the tests it recorded)"
    code, out = invoke("pivot", str(history), FAMILY, *now)
    assert code == 0, out
    assert out.splitlines()[1:3] == ["21 counted runs, 8 bad (first attempt failed)", line]
    code, out = invoke("pivot", str(history), f"{FAMILY}[b]", *now)
    assert code == 0 and "interrupted" not in out, out
    for target, expected in ((f"{FAMILY}[a]", 1), (f"{FAMILY}[b]", 0), (FAMILY, 1)):
        for extra in ((), ("--by", "all")):
            code, out = invoke("pivot", str(history), target, *now, "--format", "json", *extra)
            assert code == 0, out
            assert json.loads(out)["interrupted_runs"] == expected, (target, extra)
    code, out = invoke("pivot", str(history), f"{FAMILY}[a]", *now, "--by", "worker_count")
    assert code == 0 and out.splitlines()[2] == line, out
