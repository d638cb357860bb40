"""`flaketui check`: every reason and exit status, the one-line findings, the Markdown summary.

The summary is compared with tests/cli/expected/check_summary.md; run pytest with
`--snapshot-update` to rewrite it after an intended change, and review the diff.
"""

from __future__ import annotations

import html
import json
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from flaketui.cli.commands import cli
from flaketui.core.output.check import md_text, one_line
from tests.connections import open_history
from tests.core.history_builder import HistoryBuilder, utc

T0 = utc(2026, 10, 1)
NOW = "2026-10-31T00:00:00Z"
OLD_FLAKY = "tests/test_a.py::test_old"
NEW_FLAKY = "tests/test_b.py::test_new[<script>alert(1)</script>]"
BROKEN = "tests/test_c.py::test_broken"
HEALTHY = "tests/test_d.py::test_ok"
GONE = "tests/test_e.py::test_deleted"
HOSTILE_MESSAGE = "Timeout <img src=x onerror=alert(1)> after 5s | **bold** [link](http://x)"
EXPECTED = Path(__file__).parent / "expected" / "check_summary.md"


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # no pyproject.toml or skip file above: defaults
    monkeypatch.delenv("FLAKETUI_SKIP_FILE", raising=False)
    # Who quarantines (git's user.name and user.email) is CI data too.
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text("[user]\n\tname = Mallory <b>bold</b>\n\temail = m@example.org\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    return CliRunner()


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """30 daily main runs r00..r29: one old flaky test, one flaky from r20, a regression at r25."""
    path = tmp_path / "history.db"
    db = open_history(path)
    hb = HistoryBuilder(db)
    for day in range(30):
        run = hb.run(ts=T0 + timedelta(days=day), commit=f"c{day:02d}", run_id=f"r{day:02d}")
        run.result(OLD_FLAKY, ["fail", "pass"] if day % 3 == 0 else ["pass"])
        flaky_now = day >= 20 and day % 2 == 0
        run.result(NEW_FLAKY, ["fail", "pass"] if flaky_now else ["pass"], message=HOSTILE_MESSAGE)
        run.result(BROKEN, ["fail"] if day >= 25 else ["pass"], message="assert 4 == 5")
        run.result(HEALTHY, ["pass"])
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.conn.close()
    return path


def invoke(runner: CliRunner, history: Path, *args: str) -> Result:
    return runner.invoke(cli, ["check", str(history), *args], catch_exceptions=False)


def expired_skip_file(path: Path, owner: str = "@team-gone") -> Path:
    """A skip file with two entries that expired before NOW and one that has not."""
    entry = {
        "added_by": "flaketui",
        "mode": "skip",
        "owner": "@team-core",
        "quarantined_at": "2026-09-01T00:00:00Z",
        "reason": "flaky",
    }
    doc = {
        "format": "flaketui-skip-file",
        "version": 1,
        "tests": {
            OLD_FLAKY: {**entry, "expires": "2026-10-01T00:00:00Z"},
            HEALTHY: {**entry, "expires": "2026-12-01T00:00:00Z"},
            GONE: {**entry, "owner": owner, "expires": "2026-10-02T00:00:00Z"},
        },
    }
    path.write_text(json.dumps(doc))
    return path


def test_every_reason_fails_with_one_line_each(
    runner: CliRunner, history: Path, tmp_path: Path
) -> None:
    skip = expired_skip_file(tmp_path / "skip.json")
    result = invoke(runner, history, "--now", NOW, "--since", "r19", "--skip-file", str(skip))
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "new-flaky",
        "regression",
        "quarantine-expired",
        "quarantine-expired",
    ]
    assert lines[0].startswith(f"new-flaky: {NEW_FLAKY} (damage ")
    assert "5 flaky runs of 30 on main" in lines[0]
    assert lines[1].startswith(f"regression: {BROKEN} since c25: bad on main")
    assert lines[2] == f"quarantine-expired: {OLD_FLAKY} expired 2026-10-01T00:00:00Z"
    assert lines[3] == f"quarantine-expired: {GONE} expired 2026-10-02T00:00:00Z"


def test_flaky_before_the_point_is_not_new(runner: CliRunner, history: Path) -> None:
    # Both tests had flaky runs by r21: neither is new since then.
    result = invoke(runner, history, "--now", NOW, "--since", "r21", "--fail-on", "new-flaky")
    assert result.exit_code == 0, result.output
    assert result.output == "check passed: nothing to fail on since run r21\n"


def test_since_a_duration(runner: CliRunner, history: Path) -> None:
    result = invoke(runner, history, "--now", NOW, "--since", "12d", "--fail-on", "new-flaky")
    assert result.exit_code == 1
    assert [line.split(" (")[0] for line in result.output.splitlines()] == [
        f"new-flaky: {NEW_FLAKY}"
    ]


def test_default_point_is_just_before_the_newest_run(runner: CliRunner, history: Path) -> None:
    # The newest run (r29) made nothing newly flaky; the regression is still open.
    result = invoke(runner, history, "--now", NOW)
    assert result.exit_code == 1
    assert [line.split(":")[0] for line in result.output.splitlines()] == ["regression"]


def test_regression_reason_alone(runner: CliRunner, history: Path, tmp_path: Path) -> None:
    skip = expired_skip_file(tmp_path / "skip.json")
    result = invoke(
        runner,
        history,
        *("--now", NOW, "--since", "r19", "--skip-file", str(skip), "--fail-on", "regression"),
    )
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        f"regression: {BROKEN} since c25: bad on main for the last 5 runs (last good c24)"
    ]


def test_confirmed_regression_leaves_out_a_suspected_one(runner: CliRunner, history: Path) -> None:
    # As of r25 the broken test has one bad main run: a regression, suspected (too short a
    # streak to be sure of). `regression` fails on it, `confirmed-regression` does not.
    at_r25 = ("--now", "2026-10-26T12:00:00Z", "--since", "r24")
    suspected = invoke(runner, history, *at_r25, "--fail-on", "regression")
    assert suspected.exit_code == 1, suspected.output
    assert suspected.output.splitlines() == [
        f"regression: {BROKEN} since c25: bad on main for the last 1 run (last good c24), "
        "too few to be sure"
    ]
    passed = invoke(runner, history, *at_r25, "--fail-on", "confirmed-regression")
    assert passed.exit_code == 0, passed.output
    # Once the streak is long enough, it fails both ways with the same line; naming both
    # reasons is `regression` (one line per test).
    lines = [
        invoke(runner, history, "--now", NOW, "--fail-on", reasons).output
        for reasons in ("regression", "confirmed-regression", "confirmed-regression,regression")
    ]
    assert lines[0].startswith(f"regression: {BROKEN} since c25: bad on main for the last 5")
    assert lines == [lines[0]] * 3
    both = invoke(runner, history, *at_r25, "--fail-on", "confirmed-regression,regression")
    assert both.output == suspected.output


def test_expired_quarantine_reason_alone(runner: CliRunner, history: Path, tmp_path: Path) -> None:
    skip = expired_skip_file(tmp_path / "skip.json")
    args = ("--now", NOW, "--skip-file", str(skip), "--fail-on", "quarantine-expired")
    result = invoke(runner, history, *args)
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        f"quarantine-expired: {OLD_FLAKY} expired 2026-10-01T00:00:00Z",
        f"quarantine-expired: {GONE} expired 2026-10-02T00:00:00Z",
    ]
    # Before the entry expired, the same check passes.
    early = ("--now", "2026-09-30T00:00:00Z", "--skip-file", str(skip))
    passed = invoke(runner, history, *early, "--fail-on", "quarantine-expired")
    assert passed.exit_code == 0, passed.output


def test_passes_when_nothing_holds(runner: CliRunner, history: Path) -> None:
    # As of r15: no regression yet, nothing new since r10 (the old test was already flaky).
    result = invoke(runner, history, "--now", "2026-10-16T00:00:00Z", "--since", "r10")
    assert result.exit_code == 0, result.output
    assert result.output == "check passed: nothing to fail on since run r10\n"


def test_empty_fail_on_never_fails(runner: CliRunner, history: Path) -> None:
    result = invoke(runner, history, "--now", NOW, "--since", "r00", "--fail-on", "")
    assert result.exit_code == 0, result.output


def test_damage_ceiling(runner: CliRunner, history: Path) -> None:
    low = invoke(runner, history, "--now", NOW, "--fail-on", "", "--max-damage", "0.01")
    assert low.exit_code == 1
    [line] = low.output.splitlines()
    assert line.startswith("damage: the flaky tests block ")
    assert line.endswith("merges a week, above the ceiling of 0.01")
    high = invoke(runner, history, "--now", NOW, "--fail-on", "", "--max-damage", "1000")
    assert high.exit_code == 0, high.output


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (("--fail-on", "regression,bogus"), "unknown reason 'bogus'"),
        (("--since", "no-such-run"), "no run with that id in the history"),
        (("--since", "7 fortnights"), "no run with that id in the history"),
        (("--max-damage", "-1"), "--max-damage"),
        # NaN passes a range check and then fails nothing: a ceiling no damage is above.
        (("--max-damage", "nan"), "'--max-damage': nan is not a finite number."),
        (("--max-damage", "1e999"), "'--max-damage': inf is not a finite number."),
        (("--now", "yesterday"), "not an ISO 8601 timestamp"),
    ],
)
def test_usage_errors_exit_2(
    runner: CliRunner, history: Path, args: tuple[str, ...], complaint: str
) -> None:
    result = invoke(runner, history, *args)
    assert result.exit_code == 2, result.output
    assert complaint in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (("--summary-file", "{dir}"), "{dir}: is a directory, not a summary file"),
        (("--codeowners", "{dir}"), "{dir}: is a directory, not a CODEOWNERS file"),
        (("--codeowners", "{dir}/absent"), "{dir}/absent: does not exist"),
        (("--skip-file", "{dir}"), "{dir}: is a directory, not a skip file"),
    ],
)
def test_a_file_it_cannot_use_is_an_error_exit_1(
    runner: CliRunner, history: Path, tmp_path: Path, args: tuple[str, ...], complaint: str
) -> None:
    """Status 2 is for a wrong value; a file that cannot be read or written is an error."""
    result = invoke(runner, history, "--now", NOW, *(a.format(dir=tmp_path) for a in args))
    assert result.exit_code == 1, result.output
    assert result.output == f"Error: {complaint.format(dir=tmp_path)}\n"


def test_missing_history_is_one_line_exit_1(runner: CliRunner, tmp_path: Path) -> None:
    result = invoke(runner, tmp_path / "absent.db")
    assert result.exit_code == 1
    [line] = result.output.splitlines()
    assert line.startswith("Error: ") and "absent.db" in line
    assert not (tmp_path / "absent.db").exists()


def summary_for(runner: CliRunner, history: Path, tmp_path: Path) -> str:
    """The summary of a check with a quarantine added and one released since r19."""
    skip = expired_skip_file(tmp_path / "skip.json", owner="<img src=x onerror=alert(1)>")
    quarantined = runner.invoke(
        cli,
        [
            *("quarantine", str(history), OLD_FLAKY, "--reason", "<script>x()</script> flaky"),
            *("--skip-file", str(skip), "--now", "2026-10-25T00:00:00Z", "--expires", "3"),
            "--update",  # its expired entry
        ],
    )
    assert quarantined.exit_code == 0, quarantined.output
    released = runner.invoke(
        cli,
        [
            *("release", str(history), HEALTHY, "--reason", "fixed in c22"),
            *("--skip-file", str(skip), "--now", "2026-10-26T00:00:00Z"),
        ],
    )
    assert released.exit_code == 0, released.output
    summary = tmp_path / "summary.md"
    result = invoke(
        runner,
        history,
        *("--now", NOW, "--since", "r19", "--skip-file", str(skip)),
        *("--summary-file", str(summary), "--max-damage", "0.5"),
    )
    assert result.exit_code == 1
    return summary.read_text()


def test_summary_matches_its_snapshot(
    runner: CliRunner, history: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    summary = summary_for(runner, history, tmp_path)
    if request.config.getoption("--snapshot-update", default=False):
        EXPECTED.parent.mkdir(exist_ok=True)
        EXPECTED.write_text(summary)
    assert summary == EXPECTED.read_text()


def test_summary_counts_days_and_regressions_as_words(runner: CliRunner, tmp_path: Path) -> None:
    # A window of 1 day is "1 day", two regressions are "2 regressions".
    Path("pyproject.toml").write_text("[tool.flaketui]\nwindow_days = 1\n")
    path = tmp_path / "broken.db"
    db = open_history(path)
    hb = HistoryBuilder(db)
    for hour in range(12):
        run = hb.run(ts=T0 + timedelta(hours=hour), commit=f"c{hour:02d}", run_id=f"r{hour:02d}")
        for test in (BROKEN, GONE):
            run.result(test, ["fail"] if hour >= 4 else ["pass"], message="assert 4 == 5")
    db.conn.close()
    result = invoke(runner, path, "--now", "2026-10-01T12:00:00Z", "--summary-file", "-")
    assert result.exit_code == 1
    assert "; window 1 day: 0 flaky, 2 regressions, 0 insufficient, 0 healthy." in result.output


def test_summary_shows_ci_data_as_text(runner: CliRunner, history: Path, tmp_path: Path) -> None:
    summary = summary_for(runner, history, tmp_path)
    assert "<" not in summary and ">" not in summary.replace("\n>", "")
    rendered = MarkdownIt("commonmark").enable("table").render(summary)
    for tag in ("<script", "<img", "<a ", "<strong", "<b>"):
        assert tag not in rendered
    # The hostile strings are still there for a reader, as text.
    assert "test_new[&lt;script&gt;alert(1)&lt;/script&gt;]" in rendered
    assert "&lt;img src=x onerror=alert(1)&gt;" in rendered
    assert "**bold** [link](" in rendered
    assert "Mallory &lt;b&gt;bold&lt;/b&gt; &lt;m@example.org&gt;" in rendered


def test_md_text_escapes_markup() -> None:
    assert md_text("a|b") == "a\\|b"
    assert md_text("<b>x</b>") == "&lt;b&gt;x&lt;/b&gt;"
    assert md_text("line1\nline2\x1b[31m") == "line1\\\\nline2\\\\x1b\\[31m"
    assert md_text(None) == "-"


@given(st.text(max_size=60))
def test_md_text_renders_as_the_same_text(text: str) -> None:
    # Whatever CI sends, the rendered paragraph holds exactly that text, flattened to one line.
    markdown = MarkdownIt("commonmark").enable("table")
    rendered = markdown.render(f"x {md_text(text)} y")
    assert html.unescape(rendered) == f"<p>x {one_line(text) or '-'} y</p>\n"
    # In a table cell it stays in its cell.
    row = markdown.render(f"| a | b |\n|---|---|\n| {md_text(text)} | z |\n")
    assert "<td>z</td>" in row


@pytest.mark.parametrize("before", ["", "## Tests\n", "## Tests\n12 passed"])
def test_the_step_summary_is_appended_to_and_any_other_file_replaced(
    runner: CliRunner,
    history: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    before: str,
) -> None:
    step = tmp_path / "step_summary.md"
    other = tmp_path / "other.md"
    for path in (step, other):
        path.write_text(before)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    for path in (step, other):
        result = invoke(runner, history, "--now", NOW, "--summary-file", str(path))
        assert result.exit_code in (0, 1), result.output
    alone = other.read_text()
    assert alone.startswith("### flaketui check")  # replaced: nothing of before is left
    # What the step wrote before stays, then a blank line, then the same summary.
    separator = "" if not before else ("\n" if before.endswith("\n") else "\n\n")
    assert step.read_text() == before + separator + alone


def test_a_step_summary_that_cannot_be_written_is_one_line(
    runner: CliRunner, history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    step = tmp_path / "missing-folder" / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    result = runner.invoke(cli, ["check", str(history), "--now", NOW, "--summary-file", str(step)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"Error: {step}: cannot write (No such file or directory)"
    ]
