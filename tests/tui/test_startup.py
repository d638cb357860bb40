"""The first load: the ranking first from one read, the rest after; the first screen's imports."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tui_history import NOW

from flaketui.core.errors import FlaketuiError
from flaketui.tui import startup
from flaketui.tui.loaders import load_causes, load_extras, load_in_stages, load_main
from flaketui.tui.startup import StagedRead, make_source

SAFETY_S = 60


def test_the_staged_load_reads_what_a_direct_load_reads(history: Path, tmp_path: Path) -> None:
    source = make_source(history, NOW, tmp_path / "q.json")
    first, complete, extras, with_causes = load_in_stages(source)
    data = load_main(source, suite=None, branch_kind=None)
    direct_extras = load_extras(source, data)
    ranking = [(t.test_id, t.verdict, t.scores.damage) for t in first.report.tests]  # type: ignore[union-attr]
    assert ranking == [(t.test_id, t.verdict, t.scores.damage) for t in data.report.tests]
    # The ranking came first, without groups; the complete report came next.
    assert not first.groups_loaded and first.report.families == []  # type: ignore[union-attr]
    assert complete == data.report
    assert [g.key for g in data.report.families] != []
    assert extras == direct_extras and direct_extras.suites == ["unit"]
    # Last, the same report with the likely causes of its flaky tests (only theirs).
    assert with_causes == load_causes(source, data.report)
    assert [t.test_id for t in with_causes.tests] == [t.test_id for t in data.report.tests]  # type: ignore[union-attr]
    assert all(not t.causes for t in with_causes.tests if t.verdict != "flaky")  # type: ignore[union-attr]


def test_the_staged_read_hands_over_each_step_and_reads_the_next_once_asked(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The app asks for a step once it has painted the one before: a step read meanwhile would
    # take the interpreter from that paint.
    steps: list[str] = []
    pulled = [threading.Event() for _ in range(4)]  # the reader asked the stages for step i

    def recorded(source: Any, apart: Any = None) -> Iterator[object]:
        stages = load_in_stages(source, apart)
        for index, step in enumerate(("first", "complete", "extras", "causes")):
            pulled[index].set()
            value = next(stages)
            steps.append(step)
            yield value

    monkeypatch.setattr(startup, "load_in_stages", recorded)
    source = make_source(history, NOW, tmp_path / "q.json")
    read = StagedRead(source)
    first = read.first()
    assert [t.test_id for t in first.report.tests] == [
        t.test_id for t in load_main(source, suite=None, branch_kind=None).report.tests
    ]
    # A reader that did not wait to be asked would go on at once: give it half a second.
    assert not pulled[1].wait(0.5), "the complete report was read before it was asked for"
    assert read.complete().families != []
    assert not pulled[2].wait(0.5), "the lifecycle states were read before they were asked for"
    assert steps == ["first", "complete"]
    assert read.extras().suites == ["unit"]
    assert not pulled[3].wait(0.5), "the causes were read before they were asked for"
    assert [t.test_id for t in read.causes().tests] == [t.test_id for t in first.report.tests]
    read.stop()
    read.thread.join(SAFETY_S)
    assert steps == ["first", "complete", "extras", "causes"] and not read.thread.is_alive()


def test_a_stopped_read_reads_no_further(history: Path, tmp_path: Path) -> None:
    read = StagedRead(make_source(history, NOW, tmp_path / "q.json"))
    read.first()
    read.stop()
    read.thread.join(SAFETY_S)
    assert not read.thread.is_alive()
    with pytest.raises(FlaketuiError, match="not read to the end"):
        read.complete()


def test_the_staged_read_raises_the_load_error_for_every_step(tmp_path: Path) -> None:
    bad = tmp_path / "history.db"
    bad.write_bytes(b"not a database")
    read = StagedRead(make_source(bad, NOW, tmp_path / "q.json"))
    with pytest.raises(FlaketuiError, match="not a SQLite database"):
        read.first()
    with pytest.raises(FlaketuiError, match="not a SQLite database"):
        read.extras()


def test_the_app_starts_without_the_heavy_optional_imports() -> None:
    # Plotting (detail), Markdown (help), the dialogs' forms (TextArea) and sqlite-utils
    # (pandas, numpy) load after the first screen, in workers: the start-up race is against a
    # bare Textual app.
    probe = (
        "import sys, flaketui.tui.startup, flaketui.tui.app\n"
        "heavy = ('textual_plotext', 'plotext', 'markdown_it', 'sqlite_utils', 'pandas', 'numpy',\n"
        "  'flaketui.tui.screens.quarantine_modal', 'flaketui.tui.screens.export_modal',\n"
        "  'textual.widgets._text_area')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_reading_a_history_imports_neither_sqlite_utils_nor_pandas(history: Path) -> None:
    # sqlite-utils imports pandas and numpy when installed (0.1-1 s): the app's reads, which
    # only query the connection, must not pay for it before the first screen.
    probe = (
        "import sys\n"
        "from flaketui.tui.loaders import load_in_stages\n"
        "from flaketui.tui.startup import make_source\n"
        "stages = list(load_in_stages(make_source(sys.argv[1])))\n"
        "assert len(stages) == 4 and stages[1].tests\n"
        "print(sorted(m for m in ('sqlite_utils', 'pandas', 'numpy') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(history)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.strip() == "[]"
