"""The likely causes worked out in a child process: the same answer, and no child left over."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from flaketui.core.config import Config
from flaketui.core.scoring import causes_apart
from flaketui.core.scoring.causes import (
    CauseTarget,
    attach_causes,
    cause_rows,
    cause_targets,
    find_causes,
    with_causes,
)
from flaketui.core.scoring.causes_apart import Apart, ChildFailed, find_causes_apart
from flaketui.core.scoring.report import build_report
from flaketui.core.scoring.results import Report
from flaketui.tui.history_access import reading
from flaketui.tui.loaders import Source, load_in_stages
from flaketui.tui.startup import StagedRead

SAMPLE_NOW = datetime(2026, 11, 30, 18, tzinfo=UTC)


@pytest.fixture
def copy(sample_history: Path, tmp_path: Path) -> Path:
    target = tmp_path / "history.db"
    shutil.copyfile(sample_history, target)
    return target


def _report_and_targets(path: Path) -> tuple[Report, list[CauseTarget]]:
    with reading(path) as db:
        report = build_report(db, now=SAMPLE_NOW)
    return report, cause_targets(report)


def test_a_child_finds_what_the_reading_thread_finds(copy: Path) -> None:
    report, targets = _report_and_targets(copy)
    assert {kind for kind, _, _ in targets} == {"test", "family", "cofailure"}
    with reading(copy) as db:
        here = find_causes(db, targets, now=report.now, config=Config())
        whole = attach_causes(db, report, Config())
    apart = Apart()
    there = find_causes_apart(copy, targets, now=report.now, config=Config(), started=apart.started)
    assert there == here and any(there.values())
    assert with_causes(report, there) == whole
    # Every member's counted runs: the sample's analysis is far below a child's threshold.
    assert 0 < cause_rows(report, targets) < causes_apart.CHILD_MIN_ROWS


def test_a_big_analysis_goes_to_a_child_and_gives_the_same_report(
    copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = Source(copy, copy.with_name("quarantine.json"), requested_now=SAMPLE_NOW)
    in_thread = list(load_in_stages(source))[-1]
    monkeypatch.setattr(causes_apart, "CHILD_MIN_ROWS", 1)
    children: list[subprocess.Popen[bytes]] = []
    monkeypatch.setattr(Apart, "started", lambda self, child: children.append(child))
    in_child = list(load_in_stages(source, Apart()))[-1]
    assert len(children) == 1 and children[0].returncode == 0
    assert in_child == in_thread


def test_a_stopped_load_starts_no_analysis_and_kills_a_running_one(copy: Path) -> None:
    report, targets = _report_and_targets(copy)
    apart = Apart()
    apart.stop()
    with pytest.raises(ChildFailed):  # killed as it started: no answer
        find_causes_apart(copy, targets, now=report.now, config=Config(), started=apart.started)
    running = Apart()
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    running.started(child)
    running.stop()
    assert child.wait(timeout=30) != 0
    assert child.stdin is not None
    child.stdin.close()


def test_the_child_leaves_when_its_parent_goes(copy: Path) -> None:
    """A parent that dies (or closes the pipe) mid-analysis leaves no child computing on."""
    report, targets = _report_and_targets(copy)
    request = json.dumps(
        {
            "path": str(copy),
            "targets": targets * 2000,
            "now": report.now.isoformat(),
            "config": Config().as_dict(),
        }
    ).encode()
    child = subprocess.Popen(
        [sys.executable, "-m", "flaketui.core.scoring.causes_apart"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(len(request).to_bytes(causes_apart.LENGTH_BYTES, "big") + request)
    child.stdin.close()
    assert child.stdout.read() == b""  # no answer: it left before the analysis ended
    assert child.wait(timeout=60) != 0
    child.stdout.close()


def test_stopping_a_staged_read_stops_its_child(copy: Path) -> None:
    read = StagedRead(Source(copy, copy.with_name("quarantine.json"), requested_now=SAMPLE_NOW))
    read.stop()
    assert read.apart.stopped
    read.thread.join(timeout=30)
    assert not read.thread.is_alive()


def test_a_flaketui_folder_where_the_app_runs_does_not_stand_in_for_the_child(
    copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    impostor = tmp_path / "work" / "flaketui" / "core" / "scoring"
    impostor.mkdir(parents=True)
    for package in (impostor.parent.parent, impostor.parent, impostor):
        (package / "__init__.py").write_text("")
    (impostor / "causes_apart.py").write_text("raise SystemExit(3)\n")
    monkeypatch.chdir(tmp_path / "work")
    report, targets = _report_and_targets(copy)
    with reading(copy) as db:
        here = find_causes(db, targets, now=report.now, config=Config())
    assert find_causes_apart(copy, targets, now=report.now, config=Config()) == here


def test_a_stopped_load_falls_back_on_nothing(copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A replaced load's child is killed as it starts, and nobody works out its causes."""
    from flaketui.core.errors import FlaketuiError

    monkeypatch.setattr(causes_apart, "CHILD_MIN_ROWS", 1)
    apart = Apart()
    apart.stop()
    stages = load_in_stages(
        Source(copy, copy.with_name("quarantine.json"), requested_now=SAMPLE_NOW), apart
    )
    for _ in range(3):
        next(stages)
    with pytest.raises(FlaketuiError, match="not read to the end"):
        next(stages)
