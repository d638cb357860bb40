"""Benchmark the app: start-up to the first ranked screen beside a bare Textual app.

Usage: python bench/app.py --results 1000000 [--repeat 3] [--seed 6] [--history PATH] [--editable]

The history is bench/generate.py's cached one for (results, seed), or --history. Medians of
--repeat interleaved rounds, each measured in a fresh Python process (start-up is what the target
compares: interpreter, imports, first paint; "about 1 s here" for the bare app), two ways:
- on a real pseudo-terminal of SIZE (in_terminal), the headline keys:
  - bare_app_s: spawn to the bare Textual app's empty DataTable header drawn on the terminal;
  - first_screen_s: spawn of the `flaketui open` console script to the rank-1 test drawn;
  - ratio: first_screen_s / bare_app_s;
- headless (App.run_test in a child process), the same race with a `headless_` prefix:
  - headless_bare_app_s, headless_first_screen_s and headless_ratio: spawn to the first frame
    Textual composes (App._display, which headless mode does not send) with the empty table,
    and with the ranked rows; the flaketui child takes the path `flaketui open` takes
    (make_source, the preload, then Textual and the app);
  - headless_settled_*: the same to the moment `pilot.pause()` returns, which waits until the
    whole process is idle by its CPU time: for flaketui that includes the rest of the load
    (groups, lifecycle) begun after the first screen, so it is not the first screen's time;
  - max_stall_ms: the worst lateness of a 10 ms timer in the headless flaketui child, from the
    list screen's mount (its first paint included) until everything is loaded (ranking,
    lifecycle states, every row added): the worst over the rounds, not the median.
Also, in this process (imports already paid, headless), warm_bare_app_s, warm_first_screen_s
and warm_ratio, the same race without start-up.
Which flaketui: by default a copy of the working tree's package compiled to bytecode, first on
PYTHONPATH of every child, as a wheel installed by pip is (the `flaketui` key says so). This
environment's editable install has no bytecode and sets PYTHONDONTWRITEBYTECODE, so each start
of it compiles flaketui from source (~65 ms), which no installed copy pays, while the bare app's
Textual is precompiled; `--editable` measures the editable install as it is (the console script).
The last line printed is one JSON object with these keys (and history, results, repeat, flaketui,
load); ratio, the headline figure BENCHMARKS.md reports, is the terminal one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

SIZE = (160, 48)
TICK_S = 0.010
TIMEOUT_S = 900.0
READY = "READY"


# ---- what runs in the measured processes ------------------------------------------------------


async def _bare(report: dict[str, float]) -> None:
    from textual.app import App, ComposeResult
    from textual.widgets import DataTable

    class BareApp(App[None]):
        """The framework's floor: an app showing an empty table."""

        def compose(self) -> ComposeResult:
            """One empty DataTable."""
            yield DataTable()

    app = BareApp()
    painted = _paint_clock(app, lambda: True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        report["settled"] = time.perf_counter()
    report["ready"] = painted.get("at", report["settled"])


def _paint_clock(app: Any, shows: Callable[[], bool]) -> dict[str, float]:
    """Time of the app's first frame drawn while `shows()` holds (headless: composed, not sent).

    Textual hands every frame to App._display, also in headless mode, where it is not written:
    this is when a terminal would receive the screen.
    """
    clock: dict[str, float] = {}
    display = app._display

    def timed_display(screen: Any, renderable: Any) -> None:
        if "at" not in clock and renderable is not None and shows():
            clock["at"] = time.perf_counter()
        display(screen, renderable)

    app._display = timed_display
    return clock


async def _flaketui(history: Path, skip_file: Path, report: dict[str, float]) -> None:
    from common import NOW

    # The order of the `flaketui` console script (flaketui.cli.main): collection paused until
    # the first screen is up, resolve, start the first load, then import the UI.
    from flaketui.tui import gcpause

    gcpause.pause_startup()
    from flaketui.tui.startup import Preload, make_source

    source = make_source(history, NOW, skip_file)
    preload = Preload(source)
    from flaketui.tui.app import FlaketuiApp
    from flaketui.tui.widgets.flake_table import FlakeTable

    app = FlaketuiApp(source, watch=False, preload=preload)

    def ranked() -> bool:
        if not app.main_screen.is_mounted or app.main_screen.data is None:
            return False
        table = app.main_screen.query_one(FlakeTable)
        return table.row_count > 0 or not _expects_rows(app.main_screen.data)

    painted = _paint_clock(app, ranked)
    worst = 0.0
    async with app.run_test(size=SIZE) as pilot:
        # Stalls count from the list screen's mount: before it, Textual is still building the
        # screen (compose, styles), as the bare app does too. No pilot.pause() here: it would
        # post a message to every widget on the first screen's path, which the bare app's
        # first frame never waits for.
        while not app.main_screen.is_mounted:
            await asyncio.sleep(0.005)
        last = time.perf_counter()

        def tick() -> None:
            nonlocal last, worst
            current = time.perf_counter()
            worst = max(worst, current - last - TICK_S)
            last = current

        app.set_interval(TICK_S, tick)
        table = app.main_screen.query_one(FlakeTable)
        screen = app.main_screen
        started = time.perf_counter()
        while screen.data is None or (table.row_count == 0 and _expects_rows(screen.data)):
            if time.perf_counter() - started > TIMEOUT_S:
                raise SystemExit("the first screen never appeared")
            await asyncio.sleep(0.005)
        await pilot.pause()
        report["settled"] = time.perf_counter()
        report["ready"] = painted.get("at", report["settled"])
        first = table.current_row
        report["first_row"] = first.cells[1] if first is not None else ""  # type: ignore[assignment]
        # Keep measuring stalls until the rest has loaded and every row is in the table.
        while screen.data is None or not screen.data.extras_loaded or _rows_pending(table):
            if time.perf_counter() - started > TIMEOUT_S:
                raise SystemExit("the lifecycle states never arrived")
            await asyncio.sleep(0.005)
        await pilot.pause()
        report["done"] = time.perf_counter()
    report["stall_s"] = worst


def _expects_rows(data: object) -> bool:
    return any(t.verdict == "flaky" for t in data.report.tests)  # type: ignore[attr-defined]


def _rows_pending(table: object) -> bool:
    return table.row_count < len(table.rows_by_key)  # type: ignore[attr-defined]


def child(kind: str, history: Path | None, skip_file: Path | None) -> None:
    """Run one measured app and print its timings as JSON (perf_counter is system-wide)."""
    report: dict[str, float] = {}
    if kind == "bare":
        asyncio.run(_bare(report))
    else:
        assert history is not None and skip_file is not None
        asyncio.run(_flaketui(history, skip_file, report))
    print(READY, json.dumps(report), flush=True)
    os._exit(0)  # teardown is not start-up


# ---- the parent --------------------------------------------------------------------------------


def cold(kind: str, history: Path, skip_file: Path, env: dict[str, str]) -> dict[str, float]:
    """Spawn a child, and return its spawn-to-ready time and its stall."""
    command = [sys.executable, __file__, "--child", kind]
    if kind == "app":
        command += ["--history", str(history), "--skip-file", str(skip_file)]
    spawned = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith(READY)), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"{kind} child failed:\n{done.stdout}\n{done.stderr}")
    report = json.loads(line[len(READY) :])
    return {
        "seconds": report["ready"] - spawned,
        "settled": report["settled"] - spawned,
        "stall_s": report.get("stall_s", 0.0),
        "first_row": report.get("first_row", ""),
    }


BARE_IN_TERMINAL = """
from textual.app import App
from textual.widgets import DataTable

class BareApp(App):
    def compose(self):
        table = DataTable()
        table.add_column("bare-app-ready")  # a header only: the table stays empty
        yield table

BareApp().run()
"""


def in_terminal(
    command: list[str], marker: str, cwd: Path, env: dict[str, str] | None = None
) -> float:
    """Spawn `command` on a pseudo-terminal of SIZE; seconds until `marker` is drawn."""
    import fcntl
    import pty
    import select
    import signal
    import struct
    import termios

    spawned = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child: size the terminal, then become the app
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
        os.chdir(cwd)
        os.execve(command[0], command, {**(env or os.environ), "TERM": "xterm-256color"})
    seen = b""
    needle = marker.encode("utf-8")
    try:
        while time.perf_counter() - spawned < TIMEOUT_S:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if not ready:
                continue
            try:
                seen += os.read(fd, 1 << 16)
            except OSError:
                break
            if needle in seen:
                return time.perf_counter() - spawned
            seen = seen[-4096:]
        raise SystemExit(f"{command[0]}: never drew {marker!r}:\n{seen[-2000:]!r}")
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)


# What the console script runs (pip's entry-point script, minus its argv[0] clean-up).
CONSOLE_SCRIPT = (
    "import sys; from flaketui.cli import main; sys.argv[0] = 'flaketui'; sys.exit(main())"
)


def terminal_round(
    history: Path, skip_file: Path, marker: str, cwd: Path, env: dict[str, str], editable: bool
) -> tuple[float, float]:
    """Bare app, then `flaketui open HISTORY` (the console script), each on a real terminal."""
    from common import NOW

    bare = in_terminal([sys.executable, "-c", BARE_IN_TERMINAL], "bare-app-ready", cwd, env)
    if editable:
        launcher = [str(Path(sys.executable).with_name("flaketui"))]
    else:
        launcher = [sys.executable, "-c", CONSOLE_SCRIPT]
    command = [*launcher, "open", str(history), "--now", NOW.strftime("%Y-%m-%dT%H:%M:%SZ")]
    first = in_terminal([*command, "--skip-file", str(skip_file)], marker, cwd, env)
    return bare, first


def warm(kind: str, history: Path, skip_file: Path) -> float:
    """The same race in this process, with every import already paid."""
    report: dict[str, float] = {}
    started = time.perf_counter()
    if kind == "bare":
        asyncio.run(_bare(report))
    else:
        asyncio.run(_flaketui(history, skip_file, report))
    return report["ready"] - started


def count_results(history: Path) -> int:
    """Result rows in the history."""
    conn = sqlite3.connect(f"{history.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM results").fetchone()[0])
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the JSON summary last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--results", type=int, default=100_000, help="results to generate")
    parser.add_argument("--seed", type=int, default=6, help="generator seed")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (medians)")
    parser.add_argument("--history", type=Path, help="use this history instead")
    parser.add_argument(
        "--editable",
        action="store_true",
        help="run this environment's editable install as is (no bytecode) instead of a copy",
    )
    parser.add_argument("--child", choices=("bare", "app"), help=argparse.SUPPRESS)
    parser.add_argument("--skip-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.history, args.skip_file)
        return 0
    if args.history is None:
        from generate import ensure_history

        args.history = ensure_history(args.results, args.seed)
    history = args.history.resolve()
    with tempfile.TemporaryDirectory(prefix="flaketui-bench-") as tmp:
        skip_file = Path(tmp) / "quarantine.json"
        env = dict(os.environ)
        if not args.editable:
            from common import install_copy

            site = Path(tmp) / "site"
            install_copy(site)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
        bare: list[float] = []
        first: list[float] = []
        bare_settled: list[float] = []
        first_settled: list[float] = []
        stalls: list[float] = []
        term_bare: list[float] = []
        term_first: list[float] = []
        for _ in range(args.repeat):
            measured_bare = cold("bare", history, skip_file, env)
            bare.append(measured_bare["seconds"])
            bare_settled.append(measured_bare["settled"])
            measured = cold("app", history, skip_file, env)
            first.append(measured["seconds"])
            first_settled.append(measured["settled"])
            stalls.append(measured["stall_s"])
            print(
                f"headless: bare {bare[-1]:.3f} s  first screen {first[-1]:.3f} s  "
                f"stall {stalls[-1] * 1000:.1f} ms",
                file=sys.stderr,
            )
            marker = str(measured["first_row"]).lstrip("…")  # the rank-1 test as drawn
            one_bare, one_first = terminal_round(
                history, skip_file, marker, Path(tmp), env, args.editable
            )
            term_bare.append(one_bare)
            term_first.append(one_first)
            print(
                f"terminal: bare {one_bare:.3f} s  first screen {one_first:.3f} s",
                file=sys.stderr,
            )
        warm("bare", history, skip_file)  # pay the imports once, unmeasured
        warm("app", history, skip_file)
        warm_bare = [warm("bare", history, skip_file) for _ in range(args.repeat)]
        warm_first = [warm("app", history, skip_file) for _ in range(args.repeat)]
    print(
        f"warm: bare {statistics.median(warm_bare):.3f} s  "
        f"first screen {statistics.median(warm_first):.3f} s",
        file=sys.stderr,
    )
    median = statistics.median
    summary = {
        "history": str(history),
        "results": count_results(history),
        "repeat": args.repeat,
        "flaketui": "editable install" if args.editable else "installed copy with bytecode",
        "load": os.getloadavg()[0],
        "warm_bare_app_s": round(median(warm_bare), 3),
        "warm_first_screen_s": round(median(warm_first), 3),
        "warm_ratio": round(median(warm_first) / median(warm_bare), 2),
        "headless_bare_app_s": round(median(bare), 3),
        "headless_first_screen_s": round(median(first), 3),
        "headless_ratio": round(median(first) / median(bare), 2),
        "headless_settled_bare_app_s": round(median(bare_settled), 3),
        "headless_settled_first_screen_s": round(median(first_settled), 3),
        "headless_settled_ratio": round(median(first_settled) / median(bare_settled), 2),
        "first_screen_s": round(median(term_first), 3),
        "bare_app_s": round(median(term_bare), 3),
        "ratio": round(median(term_first) / median(term_bare), 2),
        "max_stall_ms": round(max(stalls) * 1000, 1),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
