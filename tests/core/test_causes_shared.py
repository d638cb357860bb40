"""A big cause analysis shared with a child process: the same suspects, or this process's own."""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from flaketui.cli.commands import cli
from flaketui.core.config import Config
from flaketui.core.history.store import history_file
from flaketui.core.scoring import causes, causes_apart
from flaketui.core.scoring.causes import attach_causes, cause_targets, find_causes, target_rows
from flaketui.core.scoring.causes_apart import ChildFailed, find_causes_shared
from flaketui.core.scoring.report import build_report
from tests.connections import connected

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "history.db"
SAMPLE_NOW = datetime(2026, 11, 30, 18, tzinfo=UTC)


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    if not SAMPLE.exists():
        pytest.skip("sample_data/history.db is not built yet")
    target = tmp_path / "history.db"
    shutil.copyfile(SAMPLE, target)
    return target


def _spy(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[list[str]]:
    """The target keys of each call of module.name (whose second argument is the targets)."""
    called: list[list[str]] = []
    real = getattr(module, name)

    def spied(first: Any, targets: list[Any], **kwargs: Any) -> Any:
        called.append([key for _, key, _ in targets])
        return real(first, targets, **kwargs)

    monkeypatch.setattr(module, name, spied)
    return called


@pytest.fixture
def shared(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every analysis shared, as on a big history with two cores; the keys each child got."""
    monkeypatch.setattr(causes_apart, "SHARE_MIN_ROWS", 1)
    monkeypatch.setattr(causes_apart, "_cores", lambda: 2)
    return _spy(monkeypatch, causes_apart, "find_causes_apart")


def _analysis(path: Path) -> tuple[Any, list[Any], list[int]]:
    with history_file(path, create=False, readonly=True) as db:
        report = build_report(db, now=SAMPLE_NOW)
    targets = cause_targets(report)
    return report, targets, target_rows(report, targets)


def test_a_shared_analysis_finds_what_one_process_finds(
    copy: Path, shared: list[list[str]]
) -> None:
    report, targets, rows = _analysis(copy)
    with history_file(copy, create=False, readonly=True) as db:
        alone = find_causes(db, targets, now=report.now, config=Config())
        together = find_causes_shared(db, copy, targets, rows, now=report.now, config=Config())
        attached = attach_causes(db, report, Config(), shared_from=copy)
        assert attached == attach_causes(db, report, Config())
    assert together == alone and any(together.values())
    # The child took the targets after about half the test-runs, this process the first ones.
    theirs = shared[0]
    assert 0 < len(theirs) < len(targets)
    assert theirs == [key for _, key, _ in targets[len(targets) - len(theirs) :]]
    mine = sum(rows[: len(targets) - len(theirs)])
    assert mine <= sum(rows) / 2 or len(targets) - len(theirs) == 1


def test_a_small_analysis_or_one_core_stays_in_this_process(
    copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    children: list[object] = []
    monkeypatch.setattr(causes_apart, "find_causes_apart", lambda *a, **k: children.append(a))
    report, targets, rows = _analysis(copy)
    assert sum(rows) < causes_apart.SHARE_MIN_ROWS  # the sample's analysis is small
    with history_file(copy, create=False, readonly=True) as db:
        find_causes_shared(db, copy, targets, rows, now=report.now, config=Config())
        monkeypatch.setattr(causes_apart, "SHARE_MIN_ROWS", 1)
        monkeypatch.setattr(causes_apart, "_cores", lambda: 1)
        find_causes_shared(db, copy, targets, rows, now=report.now, config=Config())
    assert children == []


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize(
    "failure",
    [ChildFailed("the cause analysis ended without an answer"), OSError("no more processes")],
)
def test_a_child_without_an_answer_leaves_its_targets_to_this_process(
    copy: Path, shared: list[list[str]], monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    """Whatever keeps the child from answering, this process answers for it, and nothing
    escapes from the thread that waited for it."""

    def failing(path: Path, targets: list[Any], **kwargs: Any) -> Any:
        shared.append([key for _, key, _ in targets])
        raise failure

    monkeypatch.setattr(causes_apart, "find_causes_apart", failing)
    report, targets, rows = _analysis(copy)
    with history_file(copy, create=False, readonly=True) as db:
        alone = find_causes(db, targets, now=report.now, config=Config())
        assert find_causes_shared(db, copy, targets, rows, now=report.now, config=Config()) == alone
    assert shared, "no child was asked"


def test_a_write_meanwhile_has_this_process_analyse_the_childs_targets(
    copy: Path, shared: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another connection's commit while the child reads: its answer may come from another
    state of the history than this process's, so this process analyses its targets itself."""
    answered: list[object] = []
    real = causes_apart.find_causes_apart

    def written_meanwhile(path: Path, targets: list[Any], **kwargs: Any) -> Any:
        answer = real(path, targets, **kwargs)
        answered.append(answer)
        with connected(path) as other:
            other.execute("INSERT INTO meta (key, value) VALUES ('written', 'meanwhile')")
        return answer

    monkeypatch.setattr(causes_apart, "find_causes_apart", written_meanwhile)
    in_process = causes.find_causes
    analysed = _spy(monkeypatch, causes, "find_causes")
    report, targets, rows = _analysis(copy)
    with history_file(copy, create=False, readonly=True) as db:
        found = find_causes_shared(db, copy, targets, rows, now=report.now, config=Config())
        assert found == in_process(db, targets, now=report.now, config=Config())
    assert answered, "no child answered"
    theirs = [key for kind, key, _ in targets if (kind, key) in answered[0]]
    assert len(analysed) == 2 and analysed[1] == theirs  # this process's, then the child's


def test_report_shares_a_big_analysis_and_prints_the_same(
    copy: Path, shared: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    now = ["--now", "2026-11-30T18:00:00Z", "--format", "json"]
    together = runner.invoke(cli, ["report", str(copy), *now])
    assert together.exit_code == 0, together.output
    assert shared, "the report asked no child"
    monkeypatch.setattr(causes_apart, "SHARE_MIN_ROWS", 10**12)
    alone = runner.invoke(cli, ["report", str(copy), *now])
    assert alone.exit_code == 0 and together.output == alone.output
    assert len(shared) == 1


def test_no_child_is_left_when_this_process_stops_midway(
    copy: Path, shared: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An analysis cut short in this process (an error, Ctrl-C) kills its child."""
    children: list[subprocess.Popen[bytes]] = []
    running = threading.Event()
    started = causes_apart.Apart.started

    def noted(self: Any, child: subprocess.Popen[bytes]) -> None:
        children.append(child)
        started(self, child)
        running.set()

    monkeypatch.setattr(causes_apart.Apart, "started", noted)

    def broken(db: Any, targets: list[Any], **kwargs: Any) -> Any:
        assert running.wait(60)  # the child is running before this process fails
        raise KeyboardInterrupt

    monkeypatch.setattr(causes, "find_causes", broken)
    report, targets, rows = _analysis(copy)
    # Enough targets for the child to be still at work when it is stopped.
    targets, rows = targets * 300, rows * 300
    with (
        history_file(copy, create=False, readonly=True) as db,
        pytest.raises(KeyboardInterrupt),
    ):
        find_causes_shared(db, copy, targets, rows, now=report.now, config=Config())
    assert children and children[0].returncode == -signal.SIGKILL
