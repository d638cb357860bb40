"""`flaketui diagnose` refuses what it cannot use in one line, before running anything, and
prints the verdict its experiments support."""

from __future__ import annotations

import json
import sys
import sysconfig
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import flaketui
from flaketui.cli.group import cli
from flaketui.core.config import load_config
from flaketui.core.diagnosis import sessions
from flaketui.core.diagnosis.experiments import Diagnoser
from flaketui.core.diagnosis.sessions import (
    DiagnoseError,
    PytestSessions,
    SessionResult,
    check_node_id,
)
from flaketui.core.history.store import history_file
from flaketui.core.ingest.writer import RunRecorder
from flaketui.core.models import Attempt, CaseResult, RunMeta
from tests.connections import connected, open_history
from tests.stopped_sessions import history_with_a_failure

VICTIM = "tests/test_a.py::test_one"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_a.py").write_text("def test_one():\n    pass\n")
    (tmp_path / "outside.py").write_text("def test_x():\n    pass\n")
    return root


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return history_with_a_failure(tmp_path / "history.db", VICTIM)


@pytest.fixture
def no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to start pytest fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(sessions.subprocess, "Popen", refuse)


HOSTILE = [
    "tests/test_a.py::test_one; rm -rf /",
    "tests/test_a.py::test_one && echo owned",
    "$(touch pwned)::test_one",
    "../outside.py::test_x",
    "tests/../../outside.py::test_x",
    "/etc/passwd::test_x",
    "-p::evil",
    "--basetemp=/::x",
    "tests/test_a.py::test_one\n--collect-only",
    "tests/test_a.py::test_one\x00",
    "tests/test_a.py",
    "tests/test_a.py::",
    "tests/test_a.py::1bad",
    "tests/test_a.py::test_one[a]::test_two",
    "tests/missing.py::test_one",
    "tests/test_a.txt::test_one",
]


@pytest.mark.usefixtures("no_process")
@pytest.mark.parametrize("test_id", HOSTILE)
def test_a_hostile_test_id_is_refused_in_one_line(repo: Path, db: Path, test_id: str) -> None:
    # After `--`, so that click hands even an option-like id to the command.
    result = CliRunner().invoke(cli, ["diagnose", "--repo", str(repo), str(db), "--", test_id])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    assert "Traceback" not in result.output
    assert sorted(p.name for p in repo.rglob("*")) == ["test_a.py", "tests"]


@given(st.text(max_size=60))
def test_only_plain_node_ids_of_files_in_the_repo_pass(text: str) -> None:
    root = Path(__file__).resolve().parents[2]
    try:
        checked = check_node_id(root, text)
    except DiagnoseError:
        return
    file = checked.split("::", 1)[0]
    assert (root / file).resolve().is_relative_to(root)
    assert not checked.startswith("-") and "\n" not in checked and "\x00" not in checked


def test_a_plain_node_id_with_params_is_accepted(repo: Path) -> None:
    assert (
        check_node_id(repo, "tests/test_a.py::test_one[a-b c]")
        == "tests/test_a.py::test_one[a-b c]"
    )


@pytest.mark.usefixtures("no_process")
def test_without_a_usable_repository_it_says_so_in_one_line(tmp_path: Path, db: Path) -> None:
    for repo in (tmp_path / "missing", tmp_path / "history.db"):
        result = CliRunner().invoke(cli, ["diagnose", str(db), VICTIM, "--repo", str(repo)])
        assert result.exit_code == 1
        assert result.output.count("\n") == 1 and "--repo" in result.output, result.output


@pytest.mark.usefixtures("no_process")
@pytest.mark.parametrize("minutes", ["nan", "inf", "1e999"])
def test_a_time_budget_that_is_no_finite_number_is_refused(
    repo: Path, db: Path, minutes: str
) -> None:
    # NaN passes the range check, compares false with every clock and would stop nothing.
    args = ["diagnose", str(db), VICTIM, "--repo", str(repo), "--minutes", minutes]
    shown = "nan" if minutes == "nan" else "inf"
    line = refused(CliRunner().invoke(cli, args), db)
    assert (
        line == f"Error: Invalid value for '--minutes': {shown} is not a finite number of minutes."
    )


def checked_without_a_process(self: PytestSessions) -> None:
    """check_interpreter for an interpreter without pytest-xdist, asking no process."""
    self.checked, self.has_xdist = True, False


@pytest.mark.usefixtures("no_process")
def test_a_time_budget_that_ends_before_any_session_is_no_verdict(
    repo: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 1e-9 minutes (60 ns) are gone before any session could start: nothing was tried,
    # so no verdict (not "not-reproducible: did not fail here in 0 sessions").
    monkeypatch.setattr(PytestSessions, "check_interpreter", checked_without_a_process)
    args = ["diagnose", str(db), VICTIM, "--repo", str(repo), "--minutes", "1e-9"]
    for fmt in ("text", "json"):
        line = refused(CliRunner().invoke(cli, [*args, "--format", fmt]), db)
        assert line == (
            f"Error: {VICTIM}: the time budget of 1e-09 minutes ran out before any session "
            "finished; nothing was stored"
        )


@pytest.mark.usefixtures("no_process")
def test_a_diagnose_cancelled_before_any_session_ended_is_no_verdict(
    repo: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(PytestSessions, "check_interpreter", checked_without_a_process)
    cancel = threading.Event()
    cancel.set()
    with history_file(db, create=False) as history:
        diagnoser = Diagnoser(
            history,
            PytestSessions(repo),
            runs=2,
            minutes=None,
            config=load_config(repo),
            now=datetime(2026, 11, 2, tzinfo=UTC),
            cancel=cancel,
        )
        with pytest.raises(DiagnoseError) as refusal:
            diagnoser.diagnose(VICTIM)
    assert refusal.value.message == (
        f"{VICTIM}: cancelled before any session finished; nothing was stored"
    )
    assert diagnose_runs(db) == 0


@pytest.mark.usefixtures("no_process")
@pytest.mark.parametrize("typed", ["tests/test_aa.py::test_one", "tests/test_a.py::test_onne"])
def test_a_mistyped_test_id_is_refused_with_the_close_ones_as_pivot_does(
    repo: Path, db: Path, typed: str
) -> None:
    result = CliRunner().invoke(cli, ["diagnose", str(db), typed, "--repo", str(repo)])
    assert result.exit_code == 1
    assert result.output == f"Error: no test or family named {typed!r}; did you mean {VICTIM!r}?\n"
    pivot = CliRunner().invoke(cli, ["pivot", str(db), typed])
    assert (pivot.exit_code, pivot.output) == (1, result.output)


@pytest.mark.usefixtures("no_process")
def test_a_test_the_history_does_not_hold_is_refused(repo: Path, tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    history = open_history(path)
    RunRecorder(history, RunMeta(run_id="r", ts=datetime(2026, 11, 1, tzinfo=UTC))).add(
        [CaseResult("tests/test_b.py::x", "tests/test_b.py", [Attempt("pass")])]
    )
    history.conn.close()
    result = CliRunner().invoke(cli, ["diagnose", str(path), VICTIM, "--repo", str(repo)])
    assert result.exit_code == 1
    assert "no test or family named" in result.output


def test_a_test_that_passes_here_is_replayed_in_its_recorded_order(
    repo: Path, tmp_path: Path
) -> None:
    path = tmp_path / "seeded.db"
    history = open_history(path)
    for number, (seed, outcome) in enumerate([("randomly:31337", "fail"), (None, "pass")]):
        meta = RunMeta(
            run_id=f"ci-{number}", ts=datetime(2026, 11, 1, number, tzinfo=UTC), order_seed=seed
        )
        recorder = RunRecorder(history, meta)
        recorder.add([CaseResult(VICTIM, "tests/test_a.py", [Attempt(outcome, 5, "boom")])])
        recorder.finish()
    history.conn.close()
    args = ["diagnose", str(path), VICTIM, "--repo", str(repo), "--runs", "2"]
    result = CliRunner().invoke(cli, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert found["label"] == "not-reproducible"
    replay = ["pytest", "-p", "randomly", "--randomly-seed=31337"]
    assert (found["replay"], found["replay_run"]) == (replay, "ci-0")
    assert found["command"] == replay


STEPS = [f"tests/test_steps.py::test_s{n}" for n in range(1, 5)]


def test_failing_every_time_after_its_predecessors_is_order_dependent(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The test fails only after the four steps in their recorded order, which no shuffle of
    # the random orders repeats: 3/3 after its predecessors, 0/4 in random orders, 0/4 alone.
    (repo / "tests" / "test_steps.py").write_text(
        "".join(f"def test_s{n}():\n    pass\n\n" for n in range(1, 5))
    )
    path = tmp_path / "ordered.db"
    history = open_history(path)
    recorder = RunRecorder(history, RunMeta(run_id="ci", ts=datetime(2026, 11, 1, tzinfo=UTC)))
    recorder.add(
        [
            CaseResult(
                test,
                test.split("::")[0],
                [Attempt("fail" if test == VICTIM else "pass", 5, None, "gw0", None, position)],
            )
            for position, test in enumerate([*STEPS, VICTIM], start=1)
        ]
    )
    recorder.finish()
    history.conn.close()

    def run(self: PytestSessions, node_ids: list[str], **kwargs: object) -> SessionResult:
        failed = node_ids == [*STEPS, VICTIM]
        outcomes = {test: "fail" if test == VICTIM and failed else "pass" for test in node_ids}
        return SessionResult([], list(node_ids), outcomes)

    def without_xdist(self: PytestSessions) -> None:
        self.has_xdist = False

    monkeypatch.setattr(PytestSessions, "check_interpreter", without_xdist)
    monkeypatch.setattr(PytestSessions, "run", run)
    args = ["diagnose", str(path), VICTIM, "--repo", str(repo), "--runs", "4"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"{VICTIM}: order-dependent"
    assert lines[1] == (
        "  fails after the tests that ran before it: failed 3/3 after its predecessors in "
        "their recorded order against 0/4 alone; no single polluter was isolated"
    )
    assert lines[2:5] == [
        "  alone: failed 0/4",
        "  after predecessors: failed 3/3",
        "  random orders: failed 0/4",
    ]
    assert lines[6] == f"  reproduce: pytest {' '.join(STEPS)} {VICTIM} -p no:randomly"


# Interpreters that lack part of what a session needs: the packages of this one, but for some,
# on the path of a wrapper script that starts this interpreter without its site-packages.
WORKTREE = Path(flaketui.__file__).resolve().parents[1]


def interpreter(directory: Path, without: tuple[str, ...], flaketui_path: bool = True) -> str:
    site = directory / "site-packages"
    site.mkdir(parents=True)
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.endswith(".pth") and not entry.name.lower().startswith(without):
            (site / entry.name).symlink_to(entry)
    path = f"{WORKTREE}:{site}" if flaketui_path else str(site)
    wrapper = directory / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={path} exec {sys.executable} -S "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


@pytest.fixture(scope="module")
def without_xdist(tmp_path_factory: pytest.TempPathFactory) -> str:
    return interpreter(tmp_path_factory.mktemp("no-xdist"), ("xdist", "pytest_xdist"))


def diagnose_runs(path: Path) -> int:
    with connected(path) as conn:
        found = conn.execute("SELECT count(*) FROM runs WHERE source = 'diagnose'").fetchone()
    return int(found[0])


def refused(result: object, db: Path) -> str:
    """The one error line of a diagnose that ran nothing it could count, and stored nothing."""
    assert result.exit_code == 1, result.output  # type: ignore[attr-defined]
    lines = result.output.splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1 and lines[0].startswith("Error: "), lines
    assert diagnose_runs(db) == 0
    return str(lines[0])


def test_an_interpreter_without_pytest_is_refused_in_one_line(
    repo: Path, db: Path, tmp_path: Path
) -> None:
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n')
    wrapper.chmod(0o755)
    args = ["diagnose", str(db), VICTIM, "--repo", str(repo), "--runs", "2"]
    line = refused(CliRunner().invoke(cli, [*args, "--python", str(wrapper)]), db)
    assert line == f"Error: {wrapper}: no pytest there (No module named 'pytest')"


def test_an_interpreter_without_the_plugin_is_refused_in_one_line(
    repo: Path, db: Path, tmp_path: Path
) -> None:
    python = interpreter(tmp_path, ("pytest_flaketui",), flaketui_path=False)
    args = ["diagnose", str(db), VICTIM, "--repo", str(repo), "--runs", "2"]
    line = refused(CliRunner().invoke(cli, [*args, "--python", python]), db)
    assert line.startswith(f"Error: {python}: flaketui's pytest plugin is not installed there")


def test_a_test_that_pytest_does_not_collect_is_refused_in_one_line(
    repo: Path, tmp_path: Path
) -> None:
    path = tmp_path / "renamed.db"
    history = open_history(path)
    recorder = RunRecorder(history, RunMeta(run_id="r1", ts=datetime(2026, 11, 1, tzinfo=UTC)))
    gone = "tests/test_a.py::test_renamed"
    recorder.add([CaseResult(gone, "tests/test_a.py", [Attempt("fail", 5, "boom")])])
    recorder.finish()
    history.conn.close()
    args = ["diagnose", str(path), gone, "--repo", str(repo), "--runs", "2"]
    line = refused(CliRunner().invoke(cli, [*args, "--python", sys.executable]), path)
    assert line.startswith(
        f"Error: {gone} did not run with {sys.executable} -m pytest: pytest exit status 4: "
        f"not found: {repo}/tests/test_a.py::test_renamed"
    ), line


def test_without_xdist_the_worker_experiment_is_left_out_not_counted(
    repo: Path, tmp_path: Path, without_xdist: str
) -> None:
    path = tmp_path / "parallel.db"
    history = open_history(path)
    for number in range(4):
        meta = RunMeta(
            run_id=f"ci-{number}", ts=datetime(2026, 11, 1, number, tzinfo=UTC), worker_count=4
        )
        recorder = RunRecorder(history, meta)
        outcome = "fail" if number % 2 else "pass"
        recorder.add([CaseResult(VICTIM, "tests/test_a.py", [Attempt(outcome, 5, "boom")])])
        recorder.finish()
    history.conn.close()
    args = ["diagnose", str(path), VICTIM, "--repo", str(repo), "--runs", "2"]
    result = CliRunner().invoke(cli, [*args, "--python", without_xdist])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1:3] == [
        "  did not fail here in 2 sessions: look at what differs from CI",
        "  alone: failed 0/2",
    ]
    assert f"  skipped workers: pytest-xdist is not installed for {without_xdist}" in lines
    assert not any(line.startswith(("  1 worker:", "  4 workers:")) for line in lines), lines
    assert diagnose_runs(path) == 2


def test_sessions_that_did_not_run_the_test_are_not_passes(
    repo: Path, tmp_path: Path, without_xdist: str
) -> None:
    # The recorded predecessor's file no longer imports: every session with it collects
    # nothing, so the test ran only alone.
    (repo / "tests" / "test_broken.py").write_text("import nope\n\n\ndef test_x():\n    pass\n")
    path = tmp_path / "broken.db"
    history = open_history(path)
    recorder = RunRecorder(history, RunMeta(run_id="ci", ts=datetime(2026, 11, 1, tzinfo=UTC)))
    recorder.add(
        [
            CaseResult(test, test.split("::")[0], [Attempt(outcome, 5, None, "gw0", None, n)])
            for n, (test, outcome) in enumerate(
                [("tests/test_broken.py::test_x", "pass"), (VICTIM, "fail")], start=1
            )
        ]
    )
    recorder.finish()
    history.conn.close()
    args = ["diagnose", str(path), VICTIM, "--repo", str(repo), "--runs", "2"]
    result = CliRunner().invoke(cli, [*args, "--python", without_xdist])
    assert result.exit_code == 0, result.output
    reason = (
        "pytest exit status 4: error collecting tests/test_broken.py: "
        "ModuleNotFoundError: No module named 'nope'"
    )
    assert result.output.splitlines()[:5] == [
        f"{VICTIM}: not-reproducible",
        "  did not fail here in 2 sessions (5 more did not run it): look at what differs from CI",
        "  alone: failed 0/2",
        f"  after predecessors: the test did not run in 3 sessions: {reason}",
        f"  random orders: the test did not run in 2 sessions: {reason}",
    ]
    with connected(path) as conn:
        stored = conn.execute(
            "SELECT a.outcome FROM results a JOIN tests t ON t.id = a.test "
            "JOIN runs r ON r.id = a.run WHERE r.source = 'diagnose' AND t.test_id = ?",
            (VICTIM,),
        ).fetchall()
    assert stored == [("pass",), ("pass",)]  # the sessions alone, and only those
