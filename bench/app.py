"""Benchmark the app: start-up to the first ranked screen beside a bare Textual app.

Usage: python bench/app.py --results 1000000 [--repeat 3] [--seed 6] [--history PATH] [--editable]
       [--against SMALLER_HISTORY] [--after-ingest 3]

The history is bench/generate.py's cached one for (results, seed), or --history. Each round runs
two conditions, interleaved: on the machine as it is ("idle"), and while one other CPU-bound
process runs ("busy": the bench starts a process that spins on one core, and stops it after).
In each condition, every measured app is a fresh process:
- on a real pseudo-terminal of SIZE:
  - bare_app_s: spawn to a bare Textual app's empty DataTable header drawn on the terminal;
  - first_screen_s: spawn of the `flaketui open` console script to the rank-1 test drawn,
    with the ranking its last opening kept in the app's cache (the usual case: the round's
    headless run opened the same history just before);
  - ratio: first_screen_s / bare_app_s (medians over the rounds);
  - cold_first_screen_s, cold_ratio: the same with an empty cache directory (nothing kept:
    the first opening of a history, the ranking made before the first paint);
  - with --against SMALLER: against_first_screen_s, SMALLER's first screen in the same round,
    and size_ratio = first_screen_s / against_first_screen_s (a 10 M history against 1 M);
  - after_ingest_first_screen_s: the history as a CI job leaves it for a developer who
    opened it before: `--after-ingest N` (3) `flaketui ingest` commands later, each a new run
    of every test whose per-test rows wait for the next fold, with the ranking of an opening
    before them kept; after_ingest_ratio = it / bare_app_s (the app folds the runs after
    showing the kept ranking);
  - after_ingest_cold_first_screen_s: the same with nothing kept, so the rank-1 test drawn is
    the new ranking's and the fold is paid before it; after_ingest_cold_ratio = it /
    cold_first_screen_s (the same history without those runs); --after-ingest 0: neither;
- headless (App.run_test), max_stall_ms: the worst lateness of a 10 ms timer in the app, from
  the list screen's mount (its first paint included) until everything is loaded (the ranking,
  then the groups, the lifecycle states and the likely causes; the other screens' imports come
  within it): the worst over the rounds, not the median; after_ingest_max_stall_ms, the same
  on a copy of the history the ingests left (the fold in the reading thread included).
The busy condition's figures carry a `busy_` prefix. Which flaketui: by default a copy of the
working tree's package compiled to bytecode, first on PYTHONPATH of every child, as a wheel
installed by pip is (the `flaketui` key says so); `--editable` measures the editable install
as it is, through its console script. The last line printed is one JSON object with these keys
(and history, results, repeat, flaketui, load).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

SIZE = (160, 48)
TICK_S = 0.010
TIMEOUT_S = 900.0
READY = "READY"
CONDITIONS = ("idle", "busy")

# The other CPU-bound process of the busy condition: it spins until it is stopped.
SPINNER = "while True: pass"


# ---- what runs in the measured process --------------------------------------------------------


async def _stalls(history: Path, skip_file: Path, report: dict[str, object]) -> None:
    """Run the app headless on `history`; record its worst timer lateness and its rank-1 test."""
    from common import NOW

    # In the order of `flaketui open`: the history starts being read, then the UI is imported.
    from flaketui.tui.startup import StagedRead, make_source

    source = make_source(history, NOW, skip_file)
    first_read = StagedRead(source, kept=True)
    from flaketui.tui.app import FlaketuiApp
    from flaketui.tui.widgets.flake_table import FlakeTable

    app = FlaketuiApp(source, watch=False, first_read=first_read)
    worst = 0.0
    async with app.run_test(size=SIZE):
        screen = app.main_screen
        while not screen.is_mounted:
            await asyncio.sleep(0.005)
        last = time.perf_counter()

        def tick() -> None:
            nonlocal last, worst
            current = time.perf_counter()
            worst = max(worst, current - last - TICK_S)
            last = current

        app.set_interval(TICK_S, tick)
        started = time.perf_counter()
        table = screen.query_one(FlakeTable)
        while screen.data is None or not (screen.data.extras_loaded and screen.data.causes_loaded):
            if time.perf_counter() - started > TIMEOUT_S:
                raise SystemExit("the history never finished loading")
            await asyncio.sleep(0.005)
        first = table.current_row
        report["first_row"] = first.cells[1] if first is not None else ""
        await asyncio.sleep(5 * TICK_S)  # the last rows' paint, within the window
    report["stall_s"] = worst


def child(history: Path, skip_file: Path) -> None:
    """Run one measured app headless and print its figures as JSON."""
    report: dict[str, object] = {}
    asyncio.run(_stalls(history, skip_file, report))
    print(READY, json.dumps(report), flush=True)
    os._exit(0)  # teardown is not start-up


# ---- the parent --------------------------------------------------------------------------------


def headless(history: Path, skip_file: Path, env: dict[str, str]) -> dict[str, object]:
    """Spawn the headless child; its stall and the rank-1 test as it draws it."""
    command = [sys.executable, __file__, "--child", "--history", str(history)]
    command += ["--skip-file", str(skip_file)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith(READY)), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"headless child failed:\n{done.stdout}\n{done.stderr}")
    report: dict[str, object] = json.loads(line[len(READY) :])
    return report


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
    """Spawn `command` on a pseudo-terminal of SIZE; seconds until `marker` is drawn.

    subprocess starts it (fork and exec in C), not pty.fork: the bench also runs inside test
    processes that run threads, where a fork that runs Python before its exec may deadlock.
    """
    import fcntl
    import select
    import struct
    import subprocess
    import termios

    spawned = time.perf_counter()
    fd, terminal = os.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
    try:
        child = subprocess.Popen(
            command,
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            cwd=cwd,
            env={**(env or os.environ), "TERM": "xterm-256color"},
            start_new_session=True,
        )
    finally:
        os.close(terminal)
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
        child.kill()
        child.wait()
        os.close(fd)


# What the console script runs (pip's entry-point script, minus its argv[0] clean-up).
CONSOLE_SCRIPT = (
    "import sys; from flaketui.cli import main; sys.argv[0] = 'flaketui'; sys.exit(main())"
)


def open_command(history: Path, skip_file: Path, editable: bool) -> list[str]:
    """`flaketui open HISTORY --now NOW --skip-file SKIP_FILE`, as the console script runs it."""
    from common import NOW

    if editable:
        launcher = [str(Path(sys.executable).with_name("flaketui"))]
    else:
        launcher = [sys.executable, "-c", CONSOLE_SCRIPT]
    command = [*launcher, "open", str(history), "--now", NOW.strftime("%Y-%m-%dT%H:%M:%SZ")]
    return [*command, "--skip-file", str(skip_file)]


def terminal_round(
    history: Path, skip_file: Path, marker: str, cwd: Path, env: dict[str, str], editable: bool
) -> tuple[float, float, float]:
    """Bare app, then `flaketui open HISTORY` (the console script) with the ranking its last
    opening kept, then without any (an empty cache directory), each on a real terminal."""
    bare = in_terminal([sys.executable, "-c", BARE_IN_TERMINAL], "bare-app-ready", cwd, env)
    command = open_command(history, skip_file, editable)
    first = in_terminal(command, marker, cwd, env)
    with tempfile.TemporaryDirectory(prefix="flaketui-bench-cold-") as empty:
        cold = in_terminal(command, marker, cwd, {**env, "XDG_CACHE_HOME": empty})
    return bare, first, cold


@contextlib.contextmanager
def condition(name: str) -> Iterator[subprocess.Popen[bytes] | None]:
    """Run the block as it is ("idle"), or beside one spinning process ("busy", yielded)."""
    if name != "busy":
        yield None
        return
    spinner = subprocess.Popen([sys.executable, "-c", SPINNER])
    try:
        yield spinner
    finally:
        spinner.kill()
        spinner.wait()


@contextlib.contextmanager
def after_ingest(
    history: Path, runs: int, skip_file: Path, env: dict[str, str]
) -> Iterator[tuple[Path, Path, Path, str]]:
    """Three copies of `history`, each `runs` `flaketui ingest` commands later (every test of
    it run again, a few failing; each run left waiting for its fold, as the command leaves
    it), and a test id: `kept`, opened once before the ingests (headless, so that the app's
    cache keeps its ranking, whose rank-1 test is the id), `cold`, and `probed` for the
    headless child, which folds its copy as it opens it. Nothing here is timed."""
    from common import NOW
    from ingest import history_report, ingest_commands

    with tempfile.TemporaryDirectory(prefix="flaketui-bench-ingested-") as tmp:
        root = Path(tmp)
        report = root / "run.xml"
        history_report(history, report)
        kept, cold, probed = root / "kept.db", root / "cold.db", root / "probed.db"
        shutil.copyfile(history, kept)
        top = str(headless(kept, skip_file, env)["first_row"]).lstrip("…")
        # A minute apart after the history's newest run, as a CI job adds them, before NOW
        # (the app's "now" here).
        start = newest_run(history) + timedelta(minutes=1)
        if start + timedelta(minutes=runs) > NOW:
            raise SystemExit(f"{history}: its newest run leaves no room for {runs} runs")
        ingest_commands(kept, report, runs, 0, root, env=env, start=start)
        if any(Path(f"{kept}{tail}").exists() for tail in ("-wal", "-journal")):
            raise SystemExit(f"{kept}: the ingests left a journal beside it")
        for copy in (cold, probed):
            shutil.copyfile(kept, copy)
        yield kept, cold, probed, top


def newest_run(history: Path) -> datetime:
    """The time of the history's newest run."""
    conn = sqlite3.connect(f"{history.resolve().as_uri()}?mode=ro", uri=True)
    try:
        newest = str(conn.execute("SELECT max(ts) FROM runs").fetchone()[0])
    finally:
        conn.close()
    return datetime.fromisoformat(newest)


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
    parser.add_argument(
        "--against",
        type=Path,
        help="also open this (smaller) history in each round: size_ratio = first screen of the"
        " measured history / first screen of this one",
    )
    parser.add_argument(
        "--after-ingest",
        type=int,
        default=3,
        metavar="N",
        help="also open a copy N `flaketui ingest` runs later, their rows waiting (0: no)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--skip-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.history, args.skip_file)
        return 0
    if args.history is None:
        from generate import ensure_history

        args.history = ensure_history(args.results, args.seed)
    history = args.history.resolve()
    bare: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    first: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    cold: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    against: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    stalls: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    ingested: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    ingested_cold: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    ingested_stalls: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    with tempfile.TemporaryDirectory(prefix="flaketui-bench-") as tmp:
        skip_file = Path(tmp) / "quarantine.json"
        # The app's cache (the ranking kept between openings) is the bench's own; the headless
        # child of each round opens the history first, which keeps its ranking there.
        env = {**os.environ, "XDG_CACHE_HOME": str(Path(tmp) / "cache")}
        if not args.editable:
            from common import install_copy

            site = Path(tmp) / "site"
            install_copy(site)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
        for _ in range(args.repeat):
            for name in CONDITIONS:
                with condition(name):
                    measured = headless(history, skip_file, env)
                    stalls[name].append(float(measured["stall_s"]))  # type: ignore[arg-type]
                    marker = str(measured["first_row"]).lstrip("…")  # the rank-1 test as drawn
                    one_bare, one_first, one_cold = terminal_round(
                        history, skip_file, marker, Path(tmp), env, args.editable
                    )
                    if args.against is not None:
                        anchor = args.against.resolve()
                        seen = headless(anchor, skip_file, env)  # keeps its ranking too
                        against[name].append(
                            in_terminal(
                                open_command(anchor, skip_file, args.editable),
                                str(seen["first_row"]).lstrip("…"),
                                Path(tmp),
                                env,
                            )
                        )
                if args.after_ingest > 0:
                    with (
                        after_ingest(history, args.after_ingest, skip_file, env) as copies,
                        condition(name),
                        tempfile.TemporaryDirectory(prefix="flaketui-bench-cold-") as empty,
                    ):
                        kept, cold_copy, probed, kept_top = copies
                        seen = headless(probed, skip_file, env)
                        ingested[name].append(
                            in_terminal(
                                open_command(kept, skip_file, args.editable),
                                kept_top,
                                Path(tmp),
                                env,
                            )
                        )
                        ingested_cold[name].append(
                            in_terminal(
                                open_command(cold_copy, skip_file, args.editable),
                                str(seen["first_row"]).lstrip("…"),
                                Path(tmp),
                                {**env, "XDG_CACHE_HOME": empty},
                            )
                        )
                    ingested_stalls[name].append(float(seen["stall_s"]))  # type: ignore[arg-type]
                    log_after = (
                        f"  after ingests: {ingested[name][-1]:.3f} s"
                        f" (nothing kept: {ingested_cold[name][-1]:.3f} s)"
                    )
                else:
                    log_after = ""
                bare[name].append(one_bare)
                first[name].append(one_first)
                cold[name].append(one_cold)
                print(
                    f"{name}: bare {one_bare:.3f} s  first screen {one_first:.3f} s  "
                    f"(nothing kept: {one_cold:.3f} s)  stall {stalls[name][-1] * 1000:.1f} ms"
                    f"{log_after}",
                    file=sys.stderr,
                )
    median = statistics.median
    summary: dict[str, object] = {
        "history": str(history),
        "results": count_results(history),
        "repeat": args.repeat,
        "flaketui": "editable install" if args.editable else "installed copy with bytecode",
        "load": os.getloadavg()[0],
    }
    for name in CONDITIONS:
        prefix = "" if name == "idle" else f"{name}_"
        summary[f"{prefix}bare_app_s"] = round(median(bare[name]), 3)
        summary[f"{prefix}first_screen_s"] = round(median(first[name]), 3)
        summary[f"{prefix}ratio"] = round(median(first[name]) / median(bare[name]), 2)
        summary[f"{prefix}max_stall_ms"] = round(max(stalls[name]) * 1000, 1)
        summary[f"{prefix}cold_first_screen_s"] = round(median(cold[name]), 3)
        summary[f"{prefix}cold_ratio"] = round(median(cold[name]) / median(bare[name]), 2)
        if ingested[name]:
            summary[f"{prefix}after_ingest_first_screen_s"] = round(median(ingested[name]), 3)
            summary[f"{prefix}after_ingest_ratio"] = round(
                median(ingested[name]) / median(bare[name]), 2
            )
            summary[f"{prefix}after_ingest_cold_first_screen_s"] = round(
                median(ingested_cold[name]), 3
            )
            summary[f"{prefix}after_ingest_cold_ratio"] = round(
                median(ingested_cold[name]) / median(cold[name]), 2
            )
            summary[f"{prefix}after_ingest_max_stall_ms"] = round(
                max(ingested_stalls[name]) * 1000, 1
            )
        if against[name]:
            summary[f"{prefix}against_first_screen_s"] = round(median(against[name]), 3)
            summary[f"{prefix}size_ratio"] = round(median(first[name]) / median(against[name]), 2)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
