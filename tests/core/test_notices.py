"""The notices of a report: one sentence per fact that applies, in one order, counted in words;
given the history, the outage notice ends with the command that lists them, quoted for a
shell."""

from __future__ import annotations

import shlex
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from flaketui.core.history.address import PASSWORD_LEFT_OUT
from flaketui.core.output.notices import report_notices
from flaketui.core.scoring.results import Report


def _report(no_default_branch: bool, outages: int, interrupted: int) -> Report:
    return Report(
        now=datetime(2026, 11, 20, tzinfo=UTC),
        window_days=90,
        config={"default_branches": ["main", "master", "trunk"]},
        tests=[],
        families=[],
        signatures=[],
        proposed_incidents=[{"tag": f"outage-{n}"} for n in range(outages)],
        interrupted_runs=interrupted,
        no_default_branch_runs=no_default_branch,
    )


@given(st.booleans(), st.integers(0, 3), st.integers(0, 3))
def test_one_sentence_per_fact_that_applies(
    no_default_branch: bool, outages: int, interrupted: int
) -> None:
    notices = report_notices(_report(no_default_branch, outages, interrupted))
    expected = []
    if no_default_branch:
        expected.append("No run of the window is on the default branch (main, master or trunk)")
    if outages:
        expected.append(f"{outages} suspected outage{'s' if outages > 1 else ''} excluded")
    if interrupted:
        expected.append(f"{interrupted} interrupted run{'s' if interrupted > 1 else ''}:")
    assert len(notices) == len(expected)
    for notice, start in zip(notices, expected, strict=True):
        assert notice.startswith(start) and notice.endswith(".") and "\n" not in notice
    if outages:
        they = "it awaits" if outages == 1 else "they await"
        assert f"while {they} review" in " ".join(notices)
    if interrupted:
        they = "it counts" if interrupted == 1 else "they count"
        assert f"so {they} only for the tests" in " ".join(notices)


def test_no_default_branch_configured_is_said() -> None:
    report = _report(True, 0, 0)
    report.config = {"default_branches": []}
    [notice] = report_notices(report)
    assert notice.startswith("No run of the window is on the default branch (none is configured)")


@given(
    history=st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1),
    now=st.none() | st.just("2026-11-20T00:00:00Z"),
    outages=st.integers(1, 3),
)
def test_the_outage_notice_ends_with_its_command_for_a_shell(
    history: str, now: str | None, outages: int
) -> None:
    [notice] = report_notices(_report(False, outages, 0), history, now)
    assert notice.endswith("`") and "\n" not in notice
    command = notice[notice.index(" with `") + len(" with `") : -1]
    expected = ["flaketui", "incident", "list", history, "--proposed"]
    assert shlex.split(command) == expected + (["--now", now] if now else [])


def test_the_outage_notice_names_a_server_without_its_password() -> None:
    [notice] = report_notices(_report(False, 2, 0), "postgresql://ci:s3cret@db/flaky")
    assert notice.endswith(
        "review them with `flaketui incident list postgresql://ci@db/flaky --proposed` "
        f"({PASSWORD_LEFT_OUT})"
    )
    assert "s3cret" not in notice
