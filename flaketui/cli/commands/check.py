"""`flaketui check`: a CI gate on what changed since a point, with a Markdown summary."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import click

from flaketui.cli import cli
from flaketui.cli.commands.quarantine import SKIP_FILE_READ_OPTION, read_skip_for
from flaketui.cli.echo import echo_line
from flaketui.cli.history_address import READ_ADDRESS, local_history, shown
from flaketui.cli.options import CODEOWNERS_OPTION
from flaketui.cli.outputs import STDOUT, OutputPath, output_file, refuse_reading_into
from flaketui.cli.params import FiniteFloatRange
from flaketui.core.atomic import write_atomically
from flaketui.core.errors import FlaketuiError
from flaketui.core.history.store import history_file
from flaketui.core.output.check import (
    DEFAULT_REASONS,
    SinceError,
    check,
    parse_fail_on,
    render_summary,
)
from flaketui.core.owners import locate_codeowners
from flaketui.core.timeutil import parse_iso

EXIT_CODES = """\b
Exit status: 0 when no enabled reason holds; 1 when one does (one line per finding on stdout:
new-flaky, regression, quarantine-expired, damage) or on an error of a file (a history, skip
file or CODEOWNERS file that is missing, a directory or unreadable; a CODEOWNERS file that is
not UTF-8; a summary file that cannot be written); 2 on a usage error (an unknown option or
reason, a --now that is not a timestamp of the years 1970 to 9000, a negative --max-damage, a
--since naming no run or a run after --now, a --since duration longer than 36500 days).
Before the findings, a line for each thing the ranking leaves out or counts in part (no run on
the default branch, suspected outages awaiting review, interrupted runs): it never changes the
status.
"""


def _fail_on(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[str, ...]:
    try:
        return parse_fail_on(value)
    except FlaketuiError as exc:
        raise click.BadParameter(exc.message) from None


def _now(_ctx: click.Context, _param: click.Parameter, value: str | None) -> datetime | None:
    try:
        return None if value is None else parse_iso(value)
    except FlaketuiError as exc:
        raise click.BadParameter(exc.message) from None


@cli.command("check", epilog=EXIT_CODES)
@click.argument("db", type=READ_ADDRESS)
@click.option("--now", metavar="ISO", callback=_now, help="Judge as of this time (default: now).")
@click.option(
    "--since",
    metavar="RUN_ID|DURATION",
    help="Compare with the history as of this run, or this long ago (30m, 12h, 7d, 2w); "
    "default: just before the newest run.",
)
@click.option(
    "--fail-on",
    "fail_on",
    metavar="REASONS",
    default=",".join(DEFAULT_REASONS),
    show_default=True,
    callback=_fail_on,
    help="Comma-separated reasons that fail the check (empty: none): new-flaky, regression, "
    "confirmed-regression (regressions but the suspected ones, too short a bad streak on main "
    "to be sure of), quarantine-expired.",
)
@click.option(
    "--max-damage",
    type=FiniteFloatRange(min=0),
    metavar="X",
    help="Also fail when the flaky tests together block more than X merges a week.",
)
@click.option(
    "--summary-file",
    type=OutputPath(what="summary file"),
    metavar="PATH",
    help="Write a Markdown summary there, passing or failing (replacing the file; appended to "
    "when PATH is $GITHUB_STEP_SUMMARY, as every command of a step adds to it; `-`: standard "
    "output, the findings then going to standard error).",
)
@SKIP_FILE_READ_OPTION
@CODEOWNERS_OPTION
@click.pass_context
def check_command(
    ctx: click.Context,
    db: Path | str,
    now: datetime | None,
    since: str | None,
    fail_on: tuple[str, ...],
    max_damage: float | None,
    summary_file: Path | str | None,
    skip_file: str | None,
    codeowners: Path | None,
) -> None:
    """Fail a CI job on new flaky tests, open regressions or expired quarantines in DB.
    DB may be a postgresql:// URL: its replica in the cache directory is synced and read.
    """
    skip_path, skip, config = read_skip_for(skip_file)
    refuse_reading_into(
        output_file(summary_file),
        "--summary-file",
        history=db,
        skip_file=skip_path,
        codeowners=codeowners,
    )
    address = shown(db)  # as the user named it, for the commands the notices suggest
    db = local_history(db)
    try:
        with history_file(db, create=False, readonly=True) as history:
            result = check(
                history,
                now=now,
                since=since,
                config=config,
                skip=skip,
                fail_on=fail_on,
                max_damage=max_damage,
                repo_root=locate_codeowners(db, explicit=codeowners),
                history=address,
            )
    except SinceError as exc:
        raise click.BadParameter(exc.message, param_hint="'--since'") from None
    # With the summary on standard output, the lines that follow it go to standard error.
    to_stdout = summary_file == STDOUT
    if to_stdout:
        click.echo(render_summary(result), nl=False)
    elif isinstance(summary_file, Path):
        write_summary(summary_file, render_summary(result))
    # What the ranking leaves out or counts in part comes first: it qualifies what follows.
    for notice in result.notices:
        echo_line(notice, err=to_stdout)
    for _reason, line in result.failures:
        echo_line(line, err=to_stdout)
    if result.failed:
        ctx.exit(1)
    echo_line(f"check passed: nothing to fail on since {result.since_label}", err=to_stdout)


def write_summary(path: Path, text: str) -> None:
    """Write the Markdown summary to path: appended when path is the file GITHUB_STEP_SUMMARY
    names (GitHub shows one summary per step, gathered from everything its commands append),
    else the file is replaced atomically."""
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY", "").strip()
    if not step_summary or path.resolve() != Path(step_summary).resolve():
        write_atomically(path, text.encode())
        return
    data = text.encode()
    try:
        with path.open("a+b") as fh:
            if fh.tell():
                # After what the step wrote before: a blank line, so the heading starts a block.
                fh.seek(-1, os.SEEK_END)
                data = (b"\n" if fh.read(1) == b"\n" else b"\n\n") + data
            fh.write(data)
    except OSError as exc:
        raise FlaketuiError(f"{path}: cannot write ({exc.strerror})") from None
