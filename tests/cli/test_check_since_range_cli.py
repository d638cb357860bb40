"""`flaketui check --since`: a duration too long, or a run after the time checked, is a usage
error (status 2), as a --since naming no run is."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from hypothesis import example, given
from hypothesis import strategies as st

from flaketui.cli.commands import cli
from flaketui.core.timeutil import MAX_DAYS
from tests.cli.test_time_ranges_cli import (
    NOW,
    SLOW,
    assert_no_traceback,
    assert_refused,
    history,
    runner,
)

__all__ = ["history", "runner"]  # the fixtures


@SLOW
@given(
    digits=st.one_of(st.integers(min_value=0, max_value=10**30).map(str), st.just("9" * 5000)),
    unit=st.sampled_from("smhdw"),
    now=st.sampled_from(["1970-01-01T00:00:00Z", NOW, "9000-12-31T23:59:59Z"]),
)
@example(digits=str(MAX_DAYS), unit="d", now="1970-01-01T00:00:00Z")
@example(digits=str(MAX_DAYS + 1), unit="d", now=NOW)
@example(digits="99999999", unit="d", now=NOW)
def test_check_since_any_duration(
    runner: CliRunner, history: Path, digits: str, unit: str, now: str
) -> None:
    seconds = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}[unit]
    argv = ["check", str(history), "--now", now, "--since", f"{digits}{unit}", "--fail-on", ""]
    result = runner.invoke(cli, argv)
    if len(digits) < 20 and int(digits) * seconds <= MAX_DAYS * 86400:
        assert_no_traceback(result)
        assert result.exit_code == 0, result.output
    else:
        assert_refused(result, 2, "--since", f"longer than {MAX_DAYS} days")


def test_check_since_a_run_after_now_is_a_usage_error(runner: CliRunner, history: Path) -> None:
    argv = ["check", str(history), "--now", "2026-11-05T00:00:00Z", "--since", "r7"]
    assert_refused(
        runner.invoke(cli, argv), 2, "'r7'", "2026-11-08T00:00:00Z", "after", "2026-11-05"
    )


def test_check_since_a_run_at_now_is_accepted(runner: CliRunner, history: Path) -> None:
    argv = ["check", str(history), "--now", "2026-11-08T00:00:00Z", "--since", "r7"]
    result = runner.invoke(cli, [*argv, "--fail-on", ""])
    assert result.exit_code == 0, result.output
    assert "since run r7" in result.output
