"""Commands show text from CI (test ids, messages, workers, branches) inert: control and
bidirectional formatting characters as escapes, in every human-readable output and error."""

from __future__ import annotations

import json
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


# A test id and an incident tag holding a line break, as a parametrized test's id may.
NL_FLAKY = "tests/test_nl.py::test_x[a\nb]"
NL_BROKEN = "tests/test_nl.py::test_y[a\nb]"
NL_GONE = "tests/test_gone.py::test_z[a\nb]"
NL_TAG = "ci\ndown"
NL_WORKER = "gw\n0"


def shown(text: str) -> str:
    return text.replace("\n", "\\n")


def line_break_history(path: Path) -> Path:
    """NL_FLAKY flaky on main from day 10 to day 40 (on worker NL_WORKER), clean after;
    NL_BROKEN broken from day 30."""
    db = open_history(path)
    hb = HistoryBuilder(db)
    for day in range(61):
        run = hb.run(ts=T0 + timedelta(days=day), worker_count=2)
        outcomes = ["fail", "pass"] if 10 <= day <= 40 and day % 2 else ["pass"]
        run.result(NL_FLAKY, outcomes, worker_id=NL_WORKER)
        run.result(NL_BROKEN, ["fail", "fail"] if day >= 30 else ["pass"])
    db.conn.close()
    return path


def day(number: int) -> str:
    return (T0 + timedelta(days=number, hours=12)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_each_message_naming_an_id_with_a_line_break_is_one_line(
    runner: CliRunner, tmp_path: Path
) -> None:
    db = str(line_break_history(tmp_path / "h.db"))
    skip = str(tmp_path / "skip.json")
    # A person quarantines NL_FLAKY on day 41: the clean runs after it release it, and the
    # lifecycle keeps the person's entry, for the person to release.
    outputs = {}
    for name, args in {
        "quarantine": ["quarantine", db, NL_FLAKY, "--reason", "flaky", "--now", day(41)],
        "quarantine --force": [
            *("quarantine", db, NL_GONE, "--reason", "gone", "--force", "--expires", "1"),
            *("--now", day(42)),
        ],
        "lifecycle --apply": ["lifecycle", db, "--apply", "--now", day(60)],
        "release": ["release", db, NL_FLAKY, "--now", day(60)],
        "changes": ["changes", db, NL_FLAKY, "--now", day(60)],
        "pivot": ["pivot", db, NL_FLAKY, "--now", day(60)],
        "pivot --by": ["pivot", db, NL_FLAKY, "--by", "all", "--now", day(60)],
        "order": ["order", db, NL_FLAKY, "--now", day(60)],
    }.items():
        writes = args[0] in ("quarantine", "lifecycle", "release")
        result = runner.invoke(cli, [*args, "--skip-file", skip] if writes else args)
        assert result.exit_code in (0, 28), f"{name}: {result.output}"
        outputs[name] = result.output
    quarantined = f"quarantined (skip, until 2026-12-11T12:00:00Z): {shown(NL_FLAKY)}\n"
    assert quarantined in outputs["quarantine"]
    assert f": {shown(NL_GONE)}\n" in outputs["quarantine --force"]
    lifecycle = outputs["lifecycle --apply"]
    assert f"use flaketui release):\n  {shown(NL_FLAKY)}\n" in lifecycle
    assert f"  new regression: {shown(NL_BROKEN)} (bad on main" in lifecycle
    assert f"  expired entry: {shown(NL_GONE)} (expired 2026-11-13T12:00:00Z)\n" in lifecycle
    assert f"  entry matching no test: {shown(NL_GONE)}\n" in lifecycle
    assert f"released: {shown(NL_FLAKY)}\n" in outputs["release"]
    for name in ("changes", "pivot", "pivot --by", "order"):
        assert outputs[name].startswith(f"{shown(NL_FLAKY)}"), outputs[name]
    # A worker id in a table's cell is escaped before its column is measured.
    assert f"\n     {shown(NL_WORKER)}      61     15" in outputs["pivot"]
    assert f"\n{shown(NL_WORKER)}          61     15" in outputs["pivot --by"]
    for name, output in outputs.items():
        assert "[a\n" not in output and "gw\n" not in output, f"{name}: {output}"
    # The skip file holds the id as it is (NL_FLAKY released, NL_GONE expired).
    assert list(json.loads(Path(skip).read_text())["tests"]) == [NL_GONE]


def test_an_incident_tag_or_note_with_a_line_break_is_shown_on_its_line(
    runner: CliRunner, tmp_path: Path
) -> None:
    db = str(line_break_history(tmp_path / "h.db"))
    window = ["--from", day(1), "--to", day(2)]
    added = runner.invoke(cli, ["incident", "add", db, NL_TAG, *window, "--note", "a\nnote"])
    assert added.exit_code == 0, added.output
    assert added.output.startswith(f"incident {shown(NL_TAG)} ({day(1)} .. {day(2)}): tagged")
    listed = runner.invoke(cli, ["incident", "list", db, "--now", day(60)])
    assert listed.output.startswith(f"{shown(NL_TAG)}: 1 run, window"), listed.output
    assert "(a\\nnote)\n" in listed.output
    removed = runner.invoke(cli, ["incident", "remove", db, NL_TAG])
    assert removed.output == f"incident {shown(NL_TAG)} removed: 1 run counts again\n"
