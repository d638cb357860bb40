"""The first load: read before the UI exists, in a forked child or a thread, same results."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tui_history import NOW

from flaketui.core.errors import FlaketuiError
from flaketui.tui.gcpause import gc_paused
from flaketui.tui.loaders import load_extras, load_main
from flaketui.tui.startup import Preload, make_source

FORKED_RUN = """
import json, sys
from datetime import datetime
from flaketui.tui.startup import Preload, make_source
source = make_source(sys.argv[1], datetime.fromisoformat(sys.argv[2]), sys.argv[3])
preload = Preload(source)
out = {"forked": preload.forked}
try:
    data = preload.result()
    extras = preload.extras()
    out["ranking"] = [(t.test_id, t.verdict, t.scores.damage) for t in data.report.tests]
    out["first_groups"] = [len(data.report.families), len(data.report.signatures)]
    out["groups_loaded"] = data.groups_loaded
    complete = preload.complete()
    out["families"] = [g.key for g in complete.families]
    out["signatures"] = [g.key for g in complete.signatures]
    out["lifecycle"] = extras.lifecycle
    out["suites"] = extras.suites
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


def _forked(history: Path, tmp_path: Path, script: str = FORKED_RUN) -> dict[str, object]:
    """Run `script` in a fresh interpreter (a single thread: the preload forks) on history."""
    done = subprocess.run(
        [sys.executable, "-c", script, str(history), NOW.isoformat(), str(tmp_path / "q.json")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(sys.platform != "linux", reason="the forked preload is Linux-only")
def test_the_forked_preload_reads_what_a_direct_load_reads(history: Path, tmp_path: Path) -> None:
    forked = _forked(history, tmp_path)
    assert forked["forked"] is True
    source = make_source(history, NOW, tmp_path / "q.json")
    data = load_main(source, suite=None, branch_kind=None)
    extras = load_extras(source, data)
    assert forked["ranking"] == [[t.test_id, t.verdict, t.scores.damage] for t in data.report.tests]
    assert forked["lifecycle"] == extras.lifecycle and forked["suites"] == extras.suites == ["unit"]
    # The ranking came first, without groups; the complete report came next.
    assert forked["first_groups"] == [0, 0] and forked["groups_loaded"] is False
    assert forked["families"] == [g.key for g in data.report.families] != []
    assert forked["signatures"] == [g.key for g in data.report.signatures] != []


@pytest.mark.skipif(sys.platform != "linux", reason="the forked preload is Linux-only")
def test_a_forked_preload_reports_a_bad_history_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "history.db"
    bad.write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)  # the header, then garbage
    forked = _forked(bad, tmp_path)
    assert forked["forked"] is True
    assert str(forked["error"]).startswith("FlaketuiError: ")
    assert "Traceback" not in str(forked["error"])


def test_the_thread_preload_gives_the_ranking_and_extras(history: Path, tmp_path: Path) -> None:
    source = make_source(history, NOW, tmp_path / "q.json")
    preload = Preload(source, allow_fork=False)
    assert not preload.forked
    data = preload.result()
    extras = preload.extras()
    assert extras is not None and extras.suites == ["unit"]
    direct = load_main(source, suite=None, branch_kind=None).report
    assert [t.test_id for t in data.report.tests] == [t.test_id for t in direct.tests]
    assert not data.groups_loaded and data.report.families == []
    assert preload.complete() == direct


def test_the_thread_preload_raises_the_load_error(tmp_path: Path) -> None:
    bad = tmp_path / "history.db"
    bad.write_bytes(b"not a database")
    preload = Preload(make_source(bad, NOW, tmp_path / "q.json"), allow_fork=False)
    with pytest.raises(FlaketuiError, match="not a SQLite database"):
        preload.result()
    assert preload.extras() is None


def test_the_thread_preload_makes_the_later_steps_once_asked(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Made at once, the groups and the lifecycle would hold the GIL during the first paint.
    from flaketui.tui import startup

    made: list[int] = []
    resumed = threading.Event()  # the reader asked the stages for the step after the first
    real = startup.load_in_stages

    def stages(source: object) -> Iterator[object]:
        for step, value in enumerate(real(source)):  # type: ignore[arg-type]
            made.append(step)
            yield value
            resumed.set()

    monkeypatch.setattr(startup, "load_in_stages", stages)
    preload = Preload(make_source(history, NOW, tmp_path / "q.json"), allow_fork=False)
    preload.result()
    # A reader that did not wait to be asked would go on at once: give it half a second.
    assert not resumed.wait(0.5), "the later steps were made before they were asked for"
    assert made == [0]
    assert preload.complete() is not None and preload.extras() is not None
    assert made == [0, 1, 2]


ASKED_RUN = """
import json, sys, time
from datetime import datetime
from flaketui.tui.startup import Preload, make_source

def exited(pid):
    with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:  # unreaped: a zombie
        return stat.read().rsplit(")", 1)[1].split()[0] == "Z"

preload = Preload(make_source(sys.argv[1], datetime.fromisoformat(sys.argv[2]), sys.argv[3]))
preload.result()
# The forked reader exits once it has sent every step: still, nothing is unpickled until asked.
deadline = time.monotonic() + 30
while not exited(preload._child) and time.monotonic() < deadline:
    time.sleep(0.01)
sent = exited(preload._child)
before = preload._done[1].is_set()
complete = preload.complete() is not None and preload.extras() is not None
print(json.dumps({"forked": preload.forked, "sent": sent, "before": before, "complete": complete}))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the forked preload is Linux-only")
def test_the_forked_preload_unpickles_the_later_steps_once_asked(
    history: Path, tmp_path: Path
) -> None:
    out = _forked(history, tmp_path, ASKED_RUN)
    assert out == {"forked": True, "sent": True, "before": False, "complete": True}


def test_gc_is_paused_while_any_load_runs_and_restored_after() -> None:
    assert gc.isenabled()
    inside: list[bool] = []
    release = threading.Event()

    def other_load() -> None:
        with gc_paused():
            release.wait(5)

    worker = threading.Thread(target=other_load)
    with gc_paused():
        worker.start()
        inside.append(gc.isenabled())
    inside.append(gc.isenabled())  # the other load still runs
    release.set()
    worker.join()
    assert inside == [False, False]
    assert gc.isenabled()


def test_the_app_starts_without_the_heavy_optional_imports() -> None:
    # Plotting (detail), Markdown (help), the dialogs' forms (TextArea) and sqlite-utils
    # (pandas, numpy) load after the first screen, in workers: the start-up race is
    # against a bare Textual app.
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
        "assert len(stages) == 3 and stages[1].tests\n"
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


KILLED_APP = """
import os, signal, sys, time
from datetime import datetime
import flaketui.tui.loaders as loaders
from flaketui.tui.startup import Preload, make_source

IN_LIFECYCLE = sys.argv[3] + ".in-lifecycle"

def slow_lifecycle(*args, **kwargs):
    open(IN_LIFECYCLE, "w").close()
    time.sleep(60)  # a long lifecycle replay, in the forked reader
    return {}

loaders._lifecycle_states = slow_lifecycle
preload = Preload(make_source(sys.argv[1], datetime.fromisoformat(sys.argv[2]), sys.argv[3]))
preload.result()
preload.complete()
print(preload._child, flush=True)
deadline = time.monotonic() + 30
while not os.path.exists(IN_LIFECYCLE) and time.monotonic() < deadline:
    time.sleep(0.01)  # until the reader is in its lifecycle step
os.kill(os.getpid(), signal.SIGKILL)  # no atexit, no cleanup
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the forked preload is Linux-only")
def test_a_killed_app_takes_its_forked_reader_with_it(history: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", KILLED_APP, str(history), NOW.isoformat(), str(tmp_path / "q")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    child = int(done.stdout.strip().splitlines()[-1])
    assert (tmp_path / "q.in-lifecycle").exists()  # killed while its reader was replaying
    for _ in range(100):
        if not _running(child):
            break
        time.sleep(0.05)
    assert not _running(child)


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie is reaped by init)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_reader_pickles_the_report_as_field_values_and_gets_it_back(
    history: Path, tmp_path: Path
) -> None:
    import io

    from flaketui.core.scoring.results import GroupVerdict, Scores, TestVerdict
    from flaketui.tui import startup

    steps = list(startup.load_in_stages(make_source(history, NOW, tmp_path / "q.json")))
    for index, step in enumerate(steps):  # the ranking, the complete report, the extras
        out = io.BytesIO()
        startup._dump(("ok", step), out)
        assert out.getvalue().count(b"_rebuild") == (index < 2)  # the reducer, named once
        out.seek(0)
        assert startup._unpickle(out) == ("ok", step)
    assert all(startup.rebuilt_by_fields(cls) for cls in (Scores, TestVerdict, GroupVerdict))


def test_only_classes_whose_init_takes_every_field_are_rebuilt_from_them() -> None:
    import dataclasses

    from flaketui.tui.startup import rebuilt_by_fields

    @dataclasses.dataclass
    class Plain:
        a: int
        b: str

    @dataclasses.dataclass
    class Derived:
        a: int
        b: int = dataclasses.field(init=False)

        def __post_init__(self) -> None:
            self.b = self.a * 2

    @dataclasses.dataclass
    class KeywordOnly:
        a: int
        b: int = dataclasses.field(kw_only=True)

    assert rebuilt_by_fields(Plain)
    assert not rebuilt_by_fields(Derived) and not rebuilt_by_fields(KeywordOnly)
    assert not rebuilt_by_fields(dict)
