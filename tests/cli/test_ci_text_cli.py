"""Commands show text from CI (test ids, messages, workers, branches) inert: control and
bidirectional formatting characters as escapes, in every human-readable output and error."""

from __future__ import annotations

import unicodedata
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli.commands import cli
from tests.connections import open_history
from tests.core.history_builder import HistoryBuilder, utc

T0 = utc(2026, 10, 1)
NOW = "2026-11-01T00:00:00Z"
# An OSC sequence that sets the terminal's title, a carriage return that would write over the
# start of the line, and a right-to-left override.
ODD = "tests/test_odd.py::test_x\x1b]0;PWNED\x07y\rz\u202eevil"
ODD_SHOWN = "tests/test_odd.py::test_x\\x1b]0;PWNED\\x07y\\rz\\u202eevil"
WORKERS = ("gw0\x1b[31m", "gw1\u2066")
MESSAGE = "AssertionError: \x1b[2J cleared \u202e reversed"
BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def hostile_history(path: Path) -> Path:
    """A flaky test whose id, message and worker ids hold escape sequences and a right-to-left
    override, beside a steady test, over 30 days on main."""
    db = open_history(path)
    hb = HistoryBuilder(db)
    for day in range(30):
        run = hb.run(ts=T0 + timedelta(days=day), worker_count=2, branch="main\x1b[5m")
        outcomes = ["fail", "pass"] if day % 3 == 0 else ["pass"]
        run.result(ODD, outcomes, message=MESSAGE, worker_id=WORKERS[day % 2])
        run.result("tests/test_ok.py::test_ok", ["pass"])
    db.conn.close()
    return path


def inert(output: str) -> list[str]:
    """The characters of `output` that would act on a terminal or reorder the text."""
    return [c for c in output if (unicodedata.category(c) == "Cc" and c != "\n") or c in BIDI]


@pytest.mark.parametrize(
    "args",
    [
        ["changes", "{db}", ODD],
        ["pivot", "{db}", ODD],
        ["pivot", "{db}", ODD, "--by", "worker_id"],
        ["pivot", "{db}", ODD, "--by", "all"],
        ["order", "{db}", ODD],
        ["lifecycle", "{db}"],
        ["report", "{db}"],
        ["check", "{db}"],
        ["quarantine", "{db}", ODD, "--reason", "flaky"],
    ],
    ids=lambda args: "-".join(a for a in args if a != "{db}" and a != ODD),
)
def test_a_command_shows_ci_text_inert(runner: CliRunner, tmp_path: Path, args: list[str]) -> None:
    db = str(hostile_history(tmp_path / "h.db"))
    result = runner.invoke(cli, [db if a == "{db}" else a for a in args] + ["--now", NOW])
    assert result.exit_code in (0, 1), result.output
    assert not inert(result.output), repr(result.output)
    if args[0] != "check":
        assert ODD_SHOWN in result.output


def test_release_and_a_refusal_name_the_id_inert(runner: CliRunner, tmp_path: Path) -> None:
    db = str(hostile_history(tmp_path / "h.db"))
    quarantined = runner.invoke(cli, ["quarantine", db, ODD, "--reason", "flaky", "--now", NOW])
    assert quarantined.exit_code == 0, quarantined.output
    released = runner.invoke(cli, ["release", db, ODD, "--reason", "fixed", "--now", NOW])
    assert released.exit_code == 0, released.output
    assert f"released: {ODD_SHOWN}" in released.output and not inert(released.output)
    refused = runner.invoke(cli, ["changes", db, ODD + "x", "--now", NOW])
    assert refused.exit_code == 1
    assert ODD_SHOWN in refused.output and not inert(refused.output)
