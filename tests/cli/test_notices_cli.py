"""`flaketui check` and the HTML report say what the ranking leaves out or counts in part.

A window without a run on the default branch (on-and-off failures are then no flake evidence),
suspected outages awaiting review and interrupted runs: the gate prints one line for each before
its findings, on the stream of its other lines, and its Markdown summary gives them under its
status; its exit status is the same with them or without. The table, Markdown and HTML reports
give them under their header, each once. The outage notice ends with the command that lists
the outages for review, for the history as it was named, to paste into a shell. The page is
also opened in a real browser by tests/browser/test_report_browser.py.
"""

from __future__ import annotations

import html
import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from markdown_it import MarkdownIt

from flaketui.cli.commands import cli
from tests.cli.test_report_default_branch_cli import NOW, STEADY, branch_history
from tests.cli.test_report_html import parse
from tests.connections import open_history
from tests.core.history_builder import HistoryBuilder, utc
from tests.core.test_outages import ingested_outage

NOTICE = (
    "No run of the window is on the default branch (main or master): bad runs between good "
    "ones are flake evidence only there, so a test failing on and off without retries is listed "
    "as healthy. Record each run's branch (flaketui ingest --branch, or the CI variables "
    "flaketui reads) or name the team's branch in default_branches."
)
PASSED = "check passed: nothing to fail on since before run r11"
EXPIRED = f"quarantine-expired: {STEADY} expired 2026-11-10T00:00:00Z"


def check(runner: CliRunner, db: Path | str, *args: str) -> Result:
    return runner.invoke(cli, ["check", str(db), "--now", NOW, *args], catch_exceptions=False)


def expired_skip_file(path: Path) -> Path:
    """A skip file whose one entry expired before NOW."""
    entry = {
        "added_by": "flaketui",
        "mode": "skip",
        "owner": "@team-core",
        "quarantined_at": "2026-11-01T00:00:00Z",
        "reason": "flaky",
        "expires": "2026-11-10T00:00:00Z",
    }
    doc = {"format": "flaketui-skip-file", "version": 1, "tests": {STEADY: entry}}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_check_without_default_branch_runs_says_so_and_still_passes(
    runner: CliRunner, tmp_path: Path
) -> None:
    db = branch_history(tmp_path, None)
    result = check(runner, db)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [NOTICE, PASSED]


def test_check_without_default_branch_runs_says_so_and_still_fails(
    runner: CliRunner, tmp_path: Path
) -> None:
    db = branch_history(tmp_path, "trunk")
    skip = expired_skip_file(tmp_path / "skip.json")
    result = check(runner, db, "--skip-file", str(skip))
    assert result.exit_code == 1, result.output
    assert result.output.splitlines() == [NOTICE, EXPIRED]


def test_the_summary_gives_the_notice_and_stdout_keeps_the_summary_alone(
    runner: CliRunner, tmp_path: Path
) -> None:
    db = branch_history(tmp_path, None)
    summary = tmp_path / "summary.md"
    result = check(runner, db, "--summary-file", str(summary))
    assert result.exit_code == 0, result.output
    lines = summary.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "### flaketui check passes"
    # A paragraph under the status line that renders as the very text `check` prints.
    assert html.unescape(MarkdownIt().render(lines[4])) == f"<p>⚠ {NOTICE}</p>\n"
    assert sum("default branch" in line for line in lines) == 1
    # With the summary on standard output, the notice goes where `check passed` goes.
    result = check(runner, db, "--summary-file", "-")
    assert result.exit_code == 0
    assert result.stderr.splitlines() == [NOTICE, PASSED]
    assert result.stdout.startswith("### flaketui check passes\n") and NOTICE not in result.stdout


def test_check_beside_default_branch_runs_says_nothing_of_it(
    runner: CliRunner, tmp_path: Path
) -> None:
    db = branch_history(tmp_path, "main")
    summary = tmp_path / "summary.md"
    result = check(runner, db, "--fail-on", "", "--summary-file", str(summary))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [PASSED]
    assert "⚠" not in summary.read_text(encoding="utf-8")


def test_check_names_suspected_outages_and_interrupted_runs(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, _tag = ingested_outage(tmp_path, monkeypatch)  # two unbranched runs, one an outage
    result = check(runner, db, "--now", "2026-11-02T00:00:00Z", "--fail-on", "")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[:2] == [
        NOTICE,
        "1 suspected outage excluded from scoring while it awaits review: its runs count for "
        "no test unless it is rejected; review it with "
        f"`flaketui incident list {shlex.quote(db)} --proposed --now 2026-11-02T00:00:00Z`",
    ]
    path = tmp_path / "interrupted.db"
    history = open_history(path)
    hb = HistoryBuilder(history)
    for day in range(4):
        run = hb.run(ts=utc(2026, 11, 1 + day), finished=day != 3, run_id=f"r{day}")
        run.result("tests/test_a.py::test_one", ["pass"])
    history.conn.close()
    result = check(runner, path, "--now", "2026-11-05T00:00:00Z")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "1 interrupted run: its recording never finished (a session killed by a timeout or "
        "Ctrl-C), so it counts only for the tests it recorded.",
        "check passed: nothing to fail on since before run r3",
    ]


def test_the_html_report_warns_under_its_header(runner: CliRunner, tmp_path: Path) -> None:
    db = branch_history(tmp_path, None)
    raw = runner.invoke(cli, ["report", str(db), "--now", NOW, "--format", "html"]).output
    header = parse(raw[raw.index("<header>") : raw.index("</header>")])
    notes = [attrs for tag, attrs in header.tags if tag == "p" and attrs.get("class") == "notice"]
    assert len(notes) == 1 and notes[0].get("role") == "note"
    assert f"⚠ {NOTICE}" in "".join(header.text)


def test_the_html_notice_shows_a_configured_branch_as_text(
    runner: CliRunner, tmp_path: Path
) -> None:
    db = branch_history(tmp_path, "develop")
    hostile = "<img src=x onerror=alert(1)>"
    Path("pyproject.toml").write_text(
        f"[tool.flaketui]\ndefault_branches = ['{hostile}']\n", encoding="utf-8"
    )
    raw = runner.invoke(cli, ["report", str(db), "--now", NOW, "--format", "html"]).output
    page = parse(raw)
    assert "img" not in [tag for tag, _attrs in page.tags]
    assert f"on the default branch ({hostile}): bad runs" in "".join(page.text)


def test_the_html_report_beside_default_branch_runs_warns_of_nothing(
    runner: CliRunner, tmp_path: Path
) -> None:
    db = branch_history(tmp_path, "main")
    raw = runner.invoke(cli, ["report", str(db), "--now", NOW, "--format", "html"]).output
    page = parse(raw)
    assert not [attrs for tag, attrs in page.tags if attrs.get("class") == "notice"]
    assert "⚠" not in "".join(page.text)


OUTAGE_NOW = "2026-11-02T00:00:00Z"
REVIEW = re.compile(r"review it with `([^`]*)`")


def _outages_and_an_interrupted_run(folder: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A history of unbranched runs in folder: a suspected outage awaiting review, and an
    interrupted run after it."""
    db, _tag = ingested_outage(folder, monkeypatch)
    history = open_history(db, create=False)
    run = HistoryBuilder(history).run(
        ts=utc(2026, 11, 1, 11), branch_kind="pr", finished=False, run_id="r3"
    )
    run.result("tests/test_c.py::test_0", ["pass"])
    history.conn.close()
    return db


def _as_read(fmt: str, output: str) -> str:
    """The text a reader sees of an output: Markdown and HTML rendered."""
    if fmt == "markdown":
        return html.unescape(re.sub(r"<[^>]+>", "", MarkdownIt().render(output)))
    if fmt == "html":
        return "".join(parse(output).text)
    return output


@pytest.mark.parametrize("fmt", ["check", "table", "markdown", "html"])
def test_the_outage_notice_ends_with_a_command_to_paste(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    folder = tmp_path / "ci runs"
    folder.mkdir()
    db, tag = ingested_outage(folder, monkeypatch)
    if fmt == "check":
        args = ["check", db, "--now", OUTAGE_NOW, "--fail-on", ""]
    else:
        args = ["report", db, "--now", OUTAGE_NOW, "--format", fmt]
    result = runner.invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    said = _as_read(fmt, result.output)
    [command] = REVIEW.findall(said)
    if fmt in ("check", "table"):
        [line] = [line for line in said.splitlines() if "suspected outage" in line]
        assert line.endswith(f"`{command}`")
    words = shlex.split(command)
    assert words == ["flaketui", "incident", "list", db, "--proposed", "--now", OUTAGE_NOW]
    shown = runner.invoke(cli, words[1:])
    assert shown.exit_code == 0 and f"OUTAGE {tag}:" in shown.output, shown.output


def test_the_table_and_markdown_reports_give_each_notice_once(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _outages_and_an_interrupted_run(tmp_path, monkeypatch)
    notices = [
        NOTICE,
        "1 suspected outage excluded from scoring while it awaits review: its runs count for "
        "no test unless it is rejected; review it with "
        f"`flaketui incident list {shlex.quote(db)} --proposed --now {OUTAGE_NOW}`",
        "1 interrupted run: its recording never finished (a session killed by a timeout or "
        "Ctrl-C), so it counts only for the tests it recorded.",
    ]
    base = ["report", db, "--now", OUTAGE_NOW]
    table = runner.invoke(cli, base, catch_exceptions=False).output.splitlines()
    assert table[1:5] == [*notices, ""]
    markdown = runner.invoke(cli, [*base, "--format", "markdown"], catch_exceptions=False).output
    paragraphs = [
        html.unescape(re.sub(r"<[^>]+>", "", found))
        for found in re.findall(r"<p>(.*?)</p>", MarkdownIt().render(markdown))
    ]
    assert paragraphs == [f"⚠ {notice}" for notice in notices]
    for said in (table, markdown.splitlines()):
        # The header says none of it again.
        assert said[0].startswith(("flaketui report as of", "### flaketui report as of"))
        text = "\n".join(said)
        assert text.count("interrupted run") == text.count("suspected outage") == 1
        assert text.count("default branch") == 1
