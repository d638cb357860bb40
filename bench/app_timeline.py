"""Diagnostics for bench/app.py: where the start-up of `flaketui open` goes, on a real terminal.

Usage: python bench/app_timeline.py --results 1000000 [--repeat 5] [--history PATH]

Runs the console script's entry (flaketui.cli.main, as `flaketui open HISTORY --now ...`) and
the bench's bare Textual app on a pseudo-terminal of bench/app.py's SIZE, with hooks that log
when each step happens, in seconds from spawn (medians of --repeat), wall and this process's
CPU: the early read forked, Textual's app imported, the main screen mounted, the ranking
computed by the forked reader and received, the rows shown, the first rank drawn. The table goes
to stderr; the last stdout line is one JSON object of the medians (wall seconds per event).
Nothing here changes what bench/app.py measures.
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

LOG_ENV = "FLAKETUI_TIMELINE_LOG"


def _mark(event: str) -> None:
    with open(os.environ[LOG_ENV], "a", encoding="utf-8") as log:
        log.write(json.dumps([time.perf_counter(), time.process_time(), event]) + "\n")


def _once(event: str) -> None:
    if event not in _seen:
        _seen.add(event)
        _mark(event)


_seen: set[str] = set()


def _hook_app() -> None:
    """Log the app's steps (patched in before the modules run, as the console script runs)."""
    import flaketui.tui.startup as startup

    def wrap(cls: Any, name: str, event: str) -> None:
        original = getattr(cls, name)

        def hooked(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            _once(event)
            return result

        setattr(cls, name, hooked)

    stages = startup.load_in_stages

    def staged(source: Any) -> Any:
        steps = stages(source)
        first = next(steps)
        _mark("reader: ranking computed (before pickling)")  # in the forked reader
        yield first
        yield from steps

    startup.load_in_stages = staged
    wrap(startup.Preload, "__init__", "early read forked")
    wrap(startup.Preload, "result", "ranking received")

    class Finder(importlib.abc.MetaPathFinder):
        """Hooks the UI in once flaketui.tui.app is imported (after the early read)."""

        def find_spec(self, name: str, path: Any, target: Any = None) -> ModuleSpec | None:
            if name != "flaketui.tui.app":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            loader: Any = spec.loader if spec is not None else None
            if loader is None:
                return spec
            run_module = loader.exec_module

            def exec_module(module: Any) -> None:
                run_module(module)
                _hook_ui()

            loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Finder())


def _hook_ui() -> None:
    _mark("Textual and the app imported")
    from flaketui.tui.screens.main import MainScreen
    from flaketui.tui.widgets.flake_table import FlakeTable

    _hook_driver()
    mount = MainScreen.on_mount

    def on_mount(self: MainScreen) -> Any:
        _once("main screen mounted")
        return mount(self)  # a coroutine when on_mount is async: Textual awaits it

    MainScreen.on_mount = on_mount  # type: ignore[method-assign]
    show = FlakeTable.show

    def shown(self: FlakeTable, *args: Any, **kwargs: Any) -> None:
        show(self, *args, **kwargs)
        if self.row_count:
            _once("rows shown")

    FlakeTable.show = shown  # type: ignore[method-assign]


def _hook_driver() -> None:
    from textual.drivers.linux_driver import LinuxDriver

    write = LinuxDriver.write
    marker = os.environ.get("FLAKETUI_TIMELINE_MARKER", "")

    def logged(self: LinuxDriver, data: str) -> None:
        # Logged before writing: the parent stops this process once it reads the marker.
        if len(data) > 100:
            _once("first screen written")
        if marker and marker in data:
            _once("marker written")
        write(self, data)

    LinuxDriver.write = logged  # type: ignore[method-assign]


BARE = """
import os, sys
sys.path.insert(0, {here!r})
import app_timeline as t
t._mark("started")
from textual.app import App
from textual.widgets import DataTable
t._mark("Textual and the app imported")
t._hook_driver()

class BareApp(App):
    def compose(self):
        table = DataTable()
        table.add_column("bare-app-ready")
        yield table

BareApp().run()
"""


def child_app(argv: list[str]) -> None:
    """The hooked `flaketui` process."""
    _mark("started")
    _hook_app()
    sys.argv = ["flaketui", *argv]
    from flaketui.cli import main

    main()


def run(command: list[str], marker: str, log: Path, cwd: Path) -> dict[str, tuple[float, float]]:
    """Spawn on a terminal until `marker` is drawn; each event's (wall, CPU) from spawn."""
    from app import in_terminal

    log.write_text("")
    os.environ[LOG_ENV] = str(log)
    os.environ["FLAKETUI_TIMELINE_MARKER"] = marker
    spawned = time.perf_counter()
    total = in_terminal(command, marker, cwd)
    events: dict[str, tuple[float, float]] = {}
    for line in log.read_text().splitlines():
        wall, cpu, event = json.loads(line)
        events.setdefault(event, (wall - spawned, cpu))
    events["drawn (what bench/app.py times)"] = (total, float("nan"))  # measured outside
    return events


def main() -> int:
    """Print the medians of both timelines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--results", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--history", type=Path)
    parser.add_argument("--child-app", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_app is not None:
        child_app(args.child_app)
        return 0
    from common import NOW

    if args.history is None:
        from generate import ensure_history

        args.history = ensure_history(args.results, args.seed)
    history = args.history.resolve()
    with tempfile.TemporaryDirectory(prefix="flaketui-timeline-") as tmp:
        log = Path(tmp) / "log.jsonl"
        skip = Path(tmp) / "quarantine.json"
        marker = _rank_one(history, NOW, skip)
        here = str(Path(__file__).resolve().parent)
        app_cmd = [sys.executable, __file__, "--child-app", "open", str(history)]
        app_cmd += ["--now", NOW.strftime("%Y-%m-%dT%H:%M:%SZ"), "--skip-file", str(skip)]
        bare_cmd = [sys.executable, "-c", BARE.format(here=here)]
        rounds: dict[str, list[dict[str, tuple[float, float]]]] = {"bare": [], "app": []}
        for _ in range(args.repeat):
            rounds["bare"].append(run(bare_cmd, "bare-app-ready", log, Path(tmp)))
            rounds["app"].append(run(app_cmd, marker, log, Path(tmp)))
    print(
        f"load {os.getloadavg()[0]:.2f}; medians of {args.repeat}; seconds from spawn",
        file=sys.stderr,
    )
    summary: dict[str, Any] = {"history": str(history), "repeat": args.repeat}
    for kind, runs in rounds.items():
        print(f"{kind}:", file=sys.stderr)
        started = [r["started"][1] for r in runs if "started" in r]
        summary[kind] = {}
        for event in runs[0]:
            walls = [r[event][0] for r in runs if event in r]
            cpus = [r[event][1] - s for r, s in zip(runs, started, strict=False) if event in r]
            cpu = statistics.median(cpus) if cpus else float("nan")
            # No CPU figure for the parent's own timing, nor for the reader (another process).
            shown = cpu == cpu and not event.startswith("reader:")
            cpu_text = f"   cpu {cpu:6.3f}" if shown else ""
            print(f"  {statistics.median(walls):6.3f}  {event}{cpu_text}", file=sys.stderr)
            summary[kind][event] = round(statistics.median(walls), 3)
    summary["load"] = os.getloadavg()[0]
    print(json.dumps(summary))
    return 0


def _rank_one(history: Path, now: object, skip: Path) -> str:
    """The rank-1 test as the list draws it (what bench/app.py waits for)."""
    from flaketui.tui.loaders import load_main
    from flaketui.tui.startup import make_source
    from flaketui.tui.viewmodel import short_id

    data = load_main(make_source(history, now, skip), suite=None, branch_kind=None)  # type: ignore[arg-type]
    flaky = [t for t in data.report.tests if t.verdict == "flaky"]
    return short_id(flaky[0].test_id).lstrip("…") if flaky else "owners:"


if __name__ == "__main__":
    sys.exit(main())
