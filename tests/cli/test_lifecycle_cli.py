"""`flaketui lifecycle`: dry run, --apply, JSON output and the gating exit status bits."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from flaketui.cli.commands import cli
from tests.connections import open_history
from tests.core.history_builder import PATTERN_ATTEMPTS, HistoryBuilder, utc

T0 = utc(2026, 1, 1)
FLAKY = "tests/test_a.py::test_a"
BROKEN = "tests/test_r.py::test_r"
STEADY = "tests/test_s.py::test_s"
NOW = "2026-02-10T23:00:00Z"  # day 40


def build(path: Path, *, broken: bool = False, flaky: str = FLAKY) -> None:
    """A flaky test (quarantined by the lifecycle on day 35), a steady one, maybe a regression."""
    hb = HistoryBuilder(open_history(path))
    for day in range(41):
        for index, letter in enumerate("PP" if day < 20 else "RRP"):
            hb.run(ts=T0 + timedelta(days=day, hours=6 + index)).result(
                flaky, PATTERN_ATTEMPTS[letter]
            )
        hb.run(ts=T0 + timedelta(days=day, hours=12)).result(STEADY, ["pass"])
        if broken:
            outcome = ["pass"] if day < 20 else ["fail", "fail"]
            hb.run(ts=T0 + timedelta(days=day, hours=13)).result(BROKEN, outcome)


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLAKETUI_SKIP_FILE", raising=False)
    return tmp_path


def invoke(work: Path, *args: str) -> Result:
    skip = str(work / "skip.json")
    return CliRunner().invoke(cli, ["lifecycle", str(work / "h.db"), "--skip-file", skip, *args])


def audit(work: Path) -> list[tuple[str, str, str]]:
    db = open_history(work / "h.db")
    rows = db.conn.execute("SELECT action, test_id, source FROM audit_log ORDER BY id")
    return [(str(a), str(t), str(s)) for a, t, s in rows]


def write_skip(work: Path, tests: dict[str, dict[str, str]]) -> None:
    doc = {"format": "flaketui-skip-file", "version": 1, "tests": tests}
    (work / "skip.json").write_text(json.dumps(doc))


def test_dry_run_prints_transitions_and_writes_nothing(work: Path) -> None:
    build(work / "h.db")
    write_skip(work, {})  # named with --skip-file, so it must exist
    before = (work / "skip.json").read_bytes()
    result = invoke(work, "--now", NOW)
    assert result.exit_code == 0, result.output
    assert "Would apply as of 2026-02-10T23:00:00Z: 3 transitions\n" in result.output
    assert "\nStates: 1 test in a lifecycle state\n" in result.output
    lines = result.output.splitlines()
    assert any(FLAKY in line and "warning" in line and "quarantined" in line for line in lines)
    assert any("2026-02-05" in line and "7 days in warning" in line for line in lines)
    assert "Gate:\n  ok" in result.output
    assert audit(work) == []
    assert (work / "skip.json").read_bytes() == before


def test_the_tables_put_the_test_last_so_a_long_id_widens_no_column(work: Path) -> None:
    long_id = "tests/" + "deep/" * 30 + "test_a.py::test_a"
    build(work / "h.db", flaky=long_id)
    write_skip(work, {})
    result = invoke(work, "--now", NOW)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1].split() == ["from", "to", "day", "reason", "test"]
    states = lines.index("States: 1 test in a lifecycle state")
    assert lines[states + 1].split() == ["state", "since", "score", "note", "test"]
    rows = [line for line in lines if long_id in line]
    assert len(rows) == 4  # three transitions, one state
    for row in rows:
        # The columns before the id fit an 80-column terminal, under their headings.
        assert row.endswith(long_id) and row.index(long_id) < 80
        heading = lines[1] if row in lines[2:states] else lines[states + 1]
        assert heading.index("test") == row.index(long_id)


def test_apply_writes_then_a_second_apply_writes_nothing(work: Path) -> None:
    build(work / "h.db")
    result = invoke(work, "--now", NOW, "--apply", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["applied"] is True
    assert [(t["from"], t["to"], t["day"]) for t in doc["transitions"]] == [
        ("none", "watching", "2026-01-23"),
        ("watching", "warning", "2026-01-29"),
        ("warning", "quarantined", "2026-02-05"),
    ]
    assert doc["effects"]["quarantined"] == [FLAKY]
    assert [s["state"] for s in doc["states"]] == ["quarantined"]
    skip = json.loads((work / "skip.json").read_text())
    assert skip["tests"][FLAKY]["mode"] == "skip"
    assert audit(work) == [
        ("lifecycle:none->watching", FLAKY, "lifecycle"),
        ("lifecycle:watching->warning", FLAKY, "lifecycle"),
        ("quarantine", FLAKY, "lifecycle"),
        ("lifecycle:warning->quarantined", FLAKY, "lifecycle"),
    ]
    again = invoke(work, "--now", NOW, "--apply")
    assert again.exit_code == 0, again.output
    assert "Applied as of 2026-02-10T23:00:00Z: 0 transitions\n" in again.output
    assert len(audit(work)) == 4
    listed = invoke(work, "--now", NOW, "--all")
    assert "Transitions as of" in listed.output and "(pending)" not in listed.output


def test_an_automatic_quarantine_takes_its_owner_from_the_codeowners_beside_the_history(
    work: Path,
) -> None:
    # No git repository: the owner comes from the CODEOWNERS beside the history, as in `report`.
    build(work / "h.db")
    (work / "CODEOWNERS").write_text("tests/test_a.py @team-a\n")
    result = invoke(work, "--now", NOW, "--apply")
    assert result.exit_code == 0, result.output
    skip = json.loads((work / "skip.json").read_text())
    assert skip["tests"][FLAKY]["owner"] == "@team-a"


def test_new_regressions_exit_4_until_applied(work: Path) -> None:
    build(work / "h.db", broken=True)
    write_skip(work, {})
    result = invoke(work, "--now", NOW, "--format", "json")
    assert result.exit_code == 4
    doc = json.loads(result.output)
    assert [r["test_id"] for r in doc["gate"]["new_regressions"]] == [BROKEN]
    assert doc["gate"]["exit_code"] == 4
    assert all(t["test_id"] != BROKEN for t in doc["transitions"])
    # The nightly --apply reports it once and acknowledges it.
    applied = invoke(work, "--now", NOW, "--apply")
    assert applied.exit_code == 4
    assert f"new regression: {BROKEN}" in applied.output
    assert ("regression-noted", BROKEN, "lifecycle") in audit(work)
    assert invoke(work, "--now", NOW).exit_code == 0


def test_expired_entries_exit_8(work: Path) -> None:
    build(work / "h.db")
    write_skip(work, {STEADY: {"expires": "2026-02-01T00:00:00Z"}})
    result = invoke(work, "--now", NOW)
    assert result.exit_code == 8
    assert f"expired entry: {STEADY} (expired 2026-02-01T00:00:00Z)" in result.output


def test_entries_matching_no_test_exit_16(work: Path) -> None:
    build(work / "h.db")
    write_skip(work, {"tests/test_gone.py::test_gone": {}, STEADY: {}})
    result = invoke(work, "--now", NOW)
    assert result.exit_code == 16
    assert "entry matching no test: tests/test_gone.py::test_gone" in result.output
    assert f"entry matching no test: {STEADY}" not in result.output


def test_bits_combine_and_no_gate_exits_0(work: Path) -> None:
    build(work / "h.db", broken=True)
    write_skip(
        work,
        {
            STEADY: {"expires": "2026-02-01T00:00:00Z"},
            "tests/test_gone.py::test_gone": {},
        },
    )
    assert invoke(work, "--now", NOW).exit_code == 4 | 8 | 16
    quiet = invoke(work, "--now", NOW, "--no-gate", "--format", "json")
    assert quiet.exit_code == 0
    assert json.loads(quiet.output)["gate"]["exit_code"] == 0


def test_help_documents_the_exit_status() -> None:
    result = CliRunner().invoke(cli, ["lifecycle", "--help"])
    assert result.exit_code == 0
    for text in ("--apply", "--no-gate", "new regressions", "expired", "matching no test"):
        assert text in result.output
    assert " 4 " in result.output and " 8 " in result.output and " 16 " in result.output


def test_bad_input_is_one_line(work: Path) -> None:
    build(work / "h.db")
    result = invoke(work, "--now", "yesterday")
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and "Traceback" not in result.output
    (work / "skip.json").write_text('{"format": "flaketui-skip-file", broken')
    result = invoke(work, "--now", NOW)
    assert result.exit_code == 1
    assert "skip.json" in result.output and "not valid JSON" in result.output


def test_apply_refuses_a_read_only_skip_file_before_writing_anything(work: Path) -> None:
    build(work / "h.db")
    write_skip(work, {})
    skip = work / "skip.json"
    skip.chmod(0o444)  # no write bit for anyone: read-only, even to root
    data = skip.read_bytes()
    result = invoke(work, "--now", NOW, "--apply")
    assert result.exit_code == 1, result.output
    assert result.output == f"Error: {skip} is read-only; make it writable to change it\n"
    assert skip.read_bytes() == data
    assert [p.name for p in work.glob("*skip.json*")] == ["skip.json"]  # no lock, no temp file
    assert audit(work) == []  # not the transitions before the quarantine either


def nightly_summary(work: Path, now: str) -> str:
    """The nightly workflow of docs/ci.md: apply the lifecycle, then summarise the last day."""
    applied = invoke(work, "--now", now, "--apply", "--no-gate")
    assert applied.exit_code == 0, applied.output
    summary = work / "lifecycle-summary.md"
    result = CliRunner().invoke(
        cli,
        [
            "check",
            str(work / "h.db"),
            "--now",
            now,
            "--since",
            "1d",
            "--fail-on",
            "",
            "--summary-file",
            str(summary),
            "--skip-file",
            str(work / "skip.json"),
        ],
    )
    assert result.exit_code == 0, result.output
    return summary.read_text()


def test_the_nightly_summary_lists_what_each_apply_wrote_days_after_its_transition(
    work: Path,
) -> None:
    """The first apply quarantines a test whose clock ran out five days before; the next, after
    missed nights, releases it on a clean run four days old: each summary of the last day names
    the change it wrote, dated the decision."""
    build(work / "h.db")
    summary = nightly_summary(work, NOW)
    assert "- Added (1):\n" in summary
    assert f"{FLAKY} by " in summary.replace("\\_", "_")
    assert "on 2026-02-05T23:59:59Z: lifecycle: 7 days in warning" in summary
    assert "- Released: none." in summary

    hb = HistoryBuilder(open_history(work / "h.db"))
    for day in range(41, 45):  # clean from day 40's last run on: the tenth on day 43
        for hour in (6, 7, 8):
            run = hb.run(ts=T0 + timedelta(days=day, hours=hour), run_id=f"clean-{day}-{hour}")
            run.result(FLAKY, ["pass"])
    later = "2026-02-17T23:00:00Z"  # day 47
    summary = nightly_summary(work, later)
    assert "- Added: none." in summary
    assert "- Released (1):\n" in summary
    assert "on 2026-02-13T08:00:00Z: lifecycle: 10 consecutive clean runs" in summary
    assert FLAKY not in json.loads((work / "skip.json").read_text())["tests"]
    # Run again the same night: nothing new was written in the last day but what it wrote.
    assert "- Released (1):\n" in nightly_summary(work, later)


def person(work: Path, command: str, *args: str) -> None:
    skip = str(work / "skip.json")
    line = [command, str(work / "h.db"), FLAKY, "--skip-file", skip, "--now", NOW, *args]
    result = CliRunner().invoke(cli, line)
    assert result.exit_code == 0, result.output


def test_a_caught_up_quarantine_keeps_the_entry_a_person_wrote(work: Path) -> None:
    # The lifecycle would have quarantined the test days ago; a person did it since, in their
    # own words: their mode, reason and ticket stay.
    build(work / "h.db")
    person(
        work, "quarantine", "--reason", "tracked in JIRA-7", "--ticket", "JIRA-7", "--mode", "run"
    )
    before = json.loads((work / "skip.json").read_text())["tests"][FLAKY]
    result = invoke(work, "--now", NOW, "--apply", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert ("warning", "quarantined") in [(t["from"], t["to"]) for t in doc["transitions"]]
    assert [s["state"] for s in doc["states"]] == ["quarantined"]
    assert json.loads((work / "skip.json").read_text())["tests"][FLAKY] == before


def test_a_caught_up_quarantine_leaves_out_a_test_a_person_released(work: Path) -> None:
    # A person quarantined and released the test since the lifecycle's quarantine was due:
    # the replay ends released, and so does the skip file.
    build(work / "h.db")
    person(work, "quarantine", "--reason", "try it")
    person(work, "release", "--reason", "fixed")
    result = invoke(work, "--now", NOW, "--apply", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert ("warning", "quarantined") in [(t["from"], t["to"]) for t in doc["transitions"]]
    assert "quarantined" not in [s["state"] for s in doc["states"]]
    assert doc["effects"]["quarantined"] == []
    assert json.loads((work / "skip.json").read_text())["tests"] == {}


def test_a_codeowners_that_is_not_utf8_stops_an_apply_before_any_transition(work: Path) -> None:
    build(work / "h.db")
    (work / "CODEOWNERS").write_bytes(b"tests/test_a.py @\xe9quipe\n")
    result = invoke(work, "--now", NOW, "--apply")
    assert result.exit_code == 1, result.output
    assert result.output == (
        f"Error: {work / 'CODEOWNERS'}: not valid UTF-8 (byte 0xE9 at offset 17); "
        "a CODEOWNERS file is UTF-8 text\n"
    )
    assert audit(work) == []
    assert not (work / "skip.json").exists()
