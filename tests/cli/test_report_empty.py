"""An empty report says which counting rule set the window's runs aside."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli.commands import cli
from tests.connections import open_history
from tests.core.history_builder import HistoryBuilder, utc

T0 = utc(2026, 10, 1)
NOW = "2026-10-20T00:00:00Z"
TEST = "tests/test_a.py::test_one"


def history(path: Path, *, edited: int, incident: int, counted: int) -> Path:
    """Runs of one test: `edited` on commits that changed its file, `incident` tagged as an
    incident, `counted` plain ones."""
    db = open_history(path)
    hb = HistoryBuilder(db)
    day = 0
    for kind, count in (("edited", edited), ("incident", incident), ("counted", counted)):
        for _ in range(count):
            run = hb.run(
                ts=T0 + timedelta(days=day),
                changed_files=["tests/test_a.py"] if kind == "edited" else (),
                incident="outage-1" if kind == "incident" else None,
            )
            run.result(TEST, ["fail", "pass"] if day % 2 else ["pass"])
            day += 1
    db.conn.close()
    return path


def report(path: Path, *args: str) -> tuple[str, str]:
    result = CliRunner().invoke(cli, ["report", str(path), "--now", NOW, *args])
    assert result.exit_code == 0, result.output
    return result.stdout, result.stderr


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_every_run_on_a_commit_that_edited_the_test(tmp_path: Path, fmt: str) -> None:
    out, err = report(history(tmp_path / "h.db", edited=12, incident=0, counted=0), "--format", fmt)
    assert err.splitlines() == [
        "flaketui: none of the window's 12 test-runs counts: 12 ran on a commit that edited the "
        "test's file (runs on later commits that leave the file as it is will count)"
    ]
    assert "flaketui:" not in out  # stdout stays the report alone


def test_incidents_and_edits_are_both_named(tmp_path: Path) -> None:
    _out, err = report(history(tmp_path / "h.db", edited=3, incident=5, counted=0))
    assert err.strip() == (
        "flaketui: none of the window's 8 test-runs counts: 3 ran on a commit that edited the "
        "test's file; 5 belong to runs tagged as an incident (runs on later commits that leave "
        "the file as it is will count)"
    )


def test_no_note_when_a_test_is_listed_or_the_window_is_empty(tmp_path: Path) -> None:
    _out, err = report(history(tmp_path / "h.db", edited=3, incident=0, counted=12))
    assert err == ""
    # A window with no run at all is said by the table itself.
    out, err = report(tmp_path / "h.db", "--suite", "unit", "--now", "2026-09-01T00:00:00Z")
    assert "(no tests with counted runs in the window)" in out
    assert err == ""


def test_the_filters_apply_to_the_count(tmp_path: Path) -> None:
    _out, err = report(
        history(tmp_path / "h.db", edited=4, incident=0, counted=0), "--branch-kind", "main"
    )
    assert "4 test-runs" in err
    _out, err = report(tmp_path / "h.db", "--branch-kind", "main", "--suite", "unit")
    assert "4 test-runs" in err


@pytest.mark.parametrize(
    ("args", "note"),
    [
        (("--suite", "nosuch"), "no run of suite 'nosuch' in the history; its suites: 'unit'"),
        (("--branch-kind", "pr"), "no 'pr' run in the history; its branch kinds: 'main'"),
        (
            ("--suite", "unit", "--branch-kind", "release"),
            "no 'release' run in suite 'unit'; its branch kinds: 'main'",
        ),
    ],
)
@pytest.mark.parametrize("fmt", ["table", "json"])
def test_a_filter_no_run_has_is_named_with_the_values_there_are(
    tmp_path: Path, args: tuple[str, ...], note: str, fmt: str
) -> None:
    """Not an error (status 0, the empty report on stdout): the note on stderr says why."""
    out, err = report(
        history(tmp_path / "h.db", edited=0, incident=0, counted=12), *args, "--format", fmt
    )
    assert err == f"flaketui: {note}\n"
    assert "flaketui:" not in out


def test_a_history_without_runs_says_so(tmp_path: Path) -> None:
    _out, err = report(history(tmp_path / "h.db", edited=0, incident=0, counted=0), "--suite", "x")
    assert err == "flaketui: no run of suite 'x' in the history; it holds no run\n"
