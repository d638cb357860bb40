"""What a ranking leaves out or counts in part, said in full wherever a team reads it.

One sentence per fact that applies, in the order a reader needs them: a window without a run
on the default branch (on-and-off failures are then no flake evidence, so the list may look
clean), suspected outages excluded from scoring while they await review, and interrupted runs,
which count only for the tests they recorded. `flaketui check` prints them and puts them in
its summary, and every report format but JSON and CSV gives them under its header (JSON
carries the same facts as fields). The app's notice line says the same in fewer words, to fit
80 columns.

Given the history as the user named it, the outage notice ends with the command that lists the
outages for review (`review_command`), ready to paste into a shell: the same one `flaketui
incident list` and `ingest` end with.

The sentences are plain text: each output escapes them as it escapes CI data (a configured
branch name and a history's path are the user's).
"""

from __future__ import annotations

import shlex

from flaketui.core.history.address import command_address
from flaketui.core.output.text import one_line
from flaketui.core.scoring.results import Report
from flaketui.core.words import either


def no_default_branch_notice(report: Report) -> str | None:
    """What the report says when the window has runs but none on the default branch: the
    verdicts that rest on it, and how to give runs their branch. None otherwise."""
    if not report.no_default_branch_runs:
        return None
    names = either([one_line(name) for name in report.config.get("default_branches", ())])
    return (
        f"No run of the window is on the default branch ({names or 'none is configured'}): "
        "bad runs between good ones are flake evidence only there, so a test failing on and "
        "off without retries is listed as healthy. Record each run's branch (flaketui ingest "
        "--branch, or the CI variables flaketui reads) or name the team's branch in "
        "default_branches."
    )


def review_command(history: str, now: str | None = None) -> str:
    """`flaketui incident list HISTORY --proposed [--now NOW]` between backticks, each word
    quoted for a shell: the command that lists the suspected outages of history (as the user
    named it; a URL without its password, then followed by how to give it) as of the same
    --now."""
    address, note = command_address(history)
    words = ["flaketui", "incident", "list", address, "--proposed"]
    if now is not None:
        words += ["--now", now]
    return f"`{shlex.join(words)}`" + (f" ({note})" if note else "")


def outages_notice(
    report: Report, history: str | None = None, now: str | None = None
) -> str | None:
    """The suspected outages of the window left out of its scores until reviewed, or None.
    With history (as the user named it) and the --now they gave, it ends with the command that
    lists them (`review_command`)."""
    count = len(report.proposed_incidents)
    if not count:
        return None
    one = count == 1
    if history is None:
        shows = f" (flaketui incident list --proposed shows {'it' if one else 'them'})."
    else:
        shows = f"; review {'it' if one else 'them'} with {review_command(history, now)}"
    if one:
        return (
            "1 suspected outage excluded from scoring while it awaits review: its runs count "
            f"for no test unless it is rejected{shows}"
        )
    return (
        f"{count} suspected outages excluded from scoring while they await review: their runs "
        f"count for no test unless rejected{shows}"
    )


def interrupted_notice(report: Report) -> str | None:
    """The window's runs whose recording never finished, counted in part, or None."""
    count = report.interrupted_runs
    if not count:
        return None
    if count == 1:
        return (
            "1 interrupted run: its recording never finished (a session killed by a timeout or "
            "Ctrl-C), so it counts only for the tests it recorded."
        )
    return (
        f"{count} interrupted runs: their recording never finished (sessions killed by a "
        "timeout or Ctrl-C), so they count only for the tests they recorded."
    )


def report_notices(report: Report, history: str | None = None, now: str | None = None) -> list[str]:
    """Every notice that applies to the report, one sentence each (none: an empty list). history
    and now: the history as the user named it and the --now they gave, for the command the
    outage notice ends with (without history, it names the command alone)."""
    found = (
        no_default_branch_notice(report),
        outages_notice(report, history, now),
        interrupted_notice(report),
    )
    return [notice for notice in found if notice is not None]
