"""Benchmark moving around the app: how long each key takes to change the screen.

Usage: python bench/keys.py --results 1000000 --tests 50000 [--repeat 3] [--history PATH]

Both apps run under tmux on a terminal of SIZE; a key is sent with `tmux send-keys` and the pane
is captured every POLL_S until it differs from before the key: that latency is what a user
sees, capture delay included. The anchor is the framework's floor for the same moves: a bare
Textual app whose DataTable holds as many rows as the history has tests.
- flaketui, once the whole history has loaded (the tabs no longer say what is still being
  read, and the screen has been still for a second): row moves (Down) and pages (PageDown) in the
  ranked list, the All view (`4`, every test), row moves in it (all_move), a sort (`s`),
  opening a test's detail (Enter) and going back
  (Escape: back; Backspace: back_key);
- the bare table: Down and PageDown, and Escape and Backspace back to it from a screen pushed
  over it (Enter): a terminal's Escape is told from the start of a key's escape sequence only
  after a wait (Textual's ESCDELAY, 100 ms, looked at on its input thread's 100 ms tick),
  which any Textual app pays on that key; Backspace has no such wait.
Medians over --repeat rounds of each key class; `max_ms` is the worst single key. The last
line printed is one JSON object with move_ms, page_ms, view_ms, all_move_ms, sort_ms,
detail_ms, back_ms and back_key_ms (back to the 50 000-row list with Escape, Backspace),
bare_move_ms, bare_page_ms, bare_back_ms, bare_back_key_ms, move_ratio (= move_ms /
bare_move_ms), page_ratio, back_ratio, back_key_ratio and max_ms. Needs tmux.
A second flaketui session per round presses keys while the load's later steps are still read
(the complete report, lifecycle states and likely causes: seconds at 50 000 tests), when a
reading thread shares the interpreter with the UI: loading_move_ms and loading_back_key_ms
(Backspace back to the list), counting only keys after which the screen still said it was
reading (loading_keys). They are informational: the targets are for a loaded history.
In-process, each round also times (medians, and ratios to the same round's grouped scan of the
results, scan_s): family_changes_s, the verdict changes of the biggest family over the window
(the detail screen's Changes), and lifecycle_replay_s, the lifecycle replay of every tracked
test given the report (the list's lifecycle column). --core-only prints only these.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import NOW, emit, log

SIZE = (160, 48)
POLL_S = 0.005
STOP_S = 30  # for an app sent SIGTERM to end (it ends in well under a second)
TIMEOUT_S = 600.0  # loading a big history
LOADING_BACKS = 3  # backs to the list per round while the load goes on
KEY_TIMEOUT_S = 30.0  # one key (a key that changes nothing, e.g. Down on the last row, fails)
SESSION = f"flaketui-bench-keys-{os.getpid()}"
# Each run has its own tmux server: on a shared one, a run ending its last session stops the
# server while another run's new-session connects to it, and that start fails.
SERVER = ("-L", SESSION)
KEYS_SHOWN = "Filter"  # the key bar is up: the main screen is drawn
STILL_READING = "⏳ reading"  # beside the view tabs until the load's last step is in
DETAIL_SHOWN = "Verdict changes"  # a heading of the detail screen
BARE_TABLE = """
import sys
from textual.app import App
from textual.screen import Screen
from textual.widgets import DataTable, Static

class Detail(Screen):
    BINDINGS = [("escape", "app.pop_screen", "Back"), ("backspace", "app.pop_screen", "Back")]

    def compose(self):
        yield Static("the row's detail")

class BareTable(App):
    def compose(self):
        table = DataTable(cursor_type="row", zebra_stripes=True)
        table.add_columns("#", "test", "verdict", "damage", "runs")
        table.add_rows(
            (str(i), f"tests/pkg/test_mod.py::test_fn{i}", "healthy", "0.00", "19")
            for i in range(int(sys.argv[1]))
        )
        yield table

    def on_data_table_row_selected(self, event):
        self.push_screen(Detail())

BareTable().run()
"""


def tmux(*args: str) -> str:
    """Run one tmux command; its output."""
    return subprocess.run(
        ["tmux", *SERVER, *args], check=True, capture_output=True, text=True
    ).stdout


def pane() -> str:
    """What the terminal shows now, colours included."""
    return tmux("capture-pane", "-p", "-e", "-t", SESSION)  # -e: a moved highlight counts


def wait_for(needle: str, *, absent: tuple[str, ...] = ()) -> None:
    """Until `needle` is on screen and none of `absent` is."""
    started = time.perf_counter()
    while time.perf_counter() - started < TIMEOUT_S:
        text = pane()
        if needle in text and not any(word in text for word in absent):
            return
        time.sleep(0.05)
    raise SystemExit(f"never saw {needle!r}:\n{pane()}")


def settle(quiet_s: float = 1.0) -> None:
    """Until the screen has not changed for `quiet_s` (background loading and filling done)."""
    last, since = pane(), time.perf_counter()
    started = since
    while time.perf_counter() - since < quiet_s:
        if time.perf_counter() - started > TIMEOUT_S:
            raise SystemExit("the screen never settled")
        time.sleep(0.1)
        now = pane()
        if now != last:
            last, since = now, time.perf_counter()


def key_ms(key: str) -> float:
    """Send one key; milliseconds until the screen changes."""
    before = pane()
    sent = time.perf_counter()
    tmux("send-keys", "-t", SESSION, key)
    while time.perf_counter() - sent < KEY_TIMEOUT_S:
        if pane() != before:
            return (time.perf_counter() - sent) * 1000
        time.sleep(POLL_S)
    raise SystemExit(f"{key} never changed the screen (is the list long enough to move in?)")


def start(command: list[str], cwd: Path) -> None:
    """Run `command` in a new detached tmux session of SIZE."""
    if _has_session():
        end_session()
    shell = " ".join(_quote(part) for part in command)
    width, height = str(SIZE[0]), str(SIZE[1])
    # A placeholder first: a tmux server started without a terminal (under pytest, in CI) may
    # give the window 80 x 24; the command starts once the window has its size.
    tmux("new-session", "-d", "-s", SESSION, "-x", width, "-y", height, "sleep 3600")
    tmux("set-option", "-t", SESSION, "window-size", "manual")
    tmux("resize-window", "-t", SESSION, "-x", width, "-y", height)
    tmux("respawn-pane", "-k", "-t", SESSION, "-c", str(cwd), shell)


def end_session() -> None:
    """Kill the session and end what it ran. Under nohup (as CI runs) the hang-up tmux sends
    is ignored and the app would outlive its terminal, so the pane's process group is also sent
    SIGTERM, and SIGKILL if it is still there STOP_S later."""
    leader = int(tmux("display-message", "-p", "-t", SESSION, "#{pane_pid}").strip() or 0)
    tmux("kill-session", "-t", SESSION)
    if not leader:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(leader, sig)
        deadline = time.monotonic() + STOP_S
        while time.monotonic() < deadline:
            try:
                os.killpg(leader, 0)
            except ProcessLookupError:
                return
            time.sleep(POLL_S)


def fit() -> None:
    """Resize the window away from SIZE and back once the app has drawn its first screen.

    An app that read the terminal's size before the pane had SIZE, and missed the resize
    that followed while it was starting, draws at 80 x 24 in the corner of the window (under
    load the window can be 160 x 48 and the app's screen 80 x 24). The two resizes reach it
    while it is listening, and it reads SIZE from the terminal again. Keys are timed only
    after the screen settles.
    """
    width, height = SIZE
    tmux("resize-window", "-t", SESSION, "-x", str(width - 1), "-y", str(height))
    tmux("resize-window", "-t", SESSION, "-x", str(width), "-y", str(height))


def stop_server() -> None:
    """Stop this run's tmux server and whatever its sessions still run (none when it ended)."""
    subprocess.run(["tmux", *SERVER, "kill-server"], capture_output=True)


def _has_session() -> bool:
    found = subprocess.run(["tmux", *SERVER, "has-session", "-t", SESSION], capture_output=True)
    return found.returncode == 0


def _quote(part: str) -> str:
    return "'" + part.replace("'", "'\\''") + "'"


def flaketui_round(history: Path, tmp: Path, moves: int, pages: int) -> dict[str, list[float]]:
    """One session of flaketui: every key class once or more, after the load has finished."""
    exe = str(Path(sys.executable).with_name("flaketui"))
    now = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    start([exe, "open", str(history), "--now", now, "--skip-file", str(tmp / "q.json")], tmp)
    # The ranking is in, and the rest (groups, lifecycle states, likely causes): the tabs no
    # longer say what is still being read.
    wait_for(KEYS_SHOWN, absent=("reading", "loading"))
    fit()
    settle()
    out: dict[str, list[float]] = {}
    out["move"] = [key_ms("Down") for _ in range(moves)]  # the ranked (flaky) list
    out["page"] = [key_ms("PageDown") for _ in range(pages)]
    out["view"] = [key_ms("4")]  # All: every test of the history
    settle()
    # Its rows are built in a worker, then shown at once (cells drawn as rows come into view).
    out["all_move"] = [key_ms("Down") for _ in range(moves)]
    out["sort"] = [key_ms("s")]
    settle()
    out["detail"] = [key_ms("Enter")]
    settle()
    out.update(back_both_ways())
    end_session()
    return out


def back_both_ways() -> dict[str, list[float]]:
    """From a pushed screen: back with Escape (back), then in again and back with Backspace
    (back_key)."""
    out = {"back": [key_ms("Escape")]}
    settle()
    key_ms("Enter")
    settle()
    out["back_key"] = [key_ms("BSpace")]
    return out


def loading_round(history: Path, tmp: Path, moves: int, backs: int) -> dict[str, list[float]]:
    """One session of flaketui, its keys pressed while the load's later steps are still read
    (the first seconds of a big history): row moves, and back to the list with Backspace.
    A key counts only when the screen still says it is reading after it."""
    exe = str(Path(sys.executable).with_name("flaketui"))
    now = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    start([exe, "open", str(history), "--now", now, "--skip-file", str(tmp / "q.json")], tmp)
    wait_for(KEYS_SHOWN, absent=("loading",))
    fit()
    out: dict[str, list[float]] = {"loading_move": [], "loading_back_key": []}
    for _ in range(moves):
        took = key_ms("Down")
        if STILL_READING in pane():
            out["loading_move"].append(took)
    for _ in range(backs):
        key_ms("Enter")
        wait_for(DETAIL_SHOWN)
        took = key_ms("BSpace")
        wait_for(KEYS_SHOWN, absent=(DETAIL_SHOWN,))
        if STILL_READING in pane():
            out["loading_back_key"].append(took)
    end_session()
    return out


def bare_round(rows: int, tmp: Path, moves: int, pages: int) -> dict[str, list[float]]:
    """One session of the bare table: row moves and pages."""
    start([sys.executable, "-c", BARE_TABLE, str(rows)], tmp)
    wait_for("test_fn0")
    fit()
    settle()
    out = {"move": [key_ms("Down") for _ in range(moves)]}
    out["page"] = [key_ms("PageDown") for _ in range(pages)]
    key_ms("Enter")
    settle()
    out.update(back_both_ways())
    end_session()
    return out


def count(history: Path, table: str) -> int:
    """Rows of `table` in the history."""
    conn = sqlite3.connect(f"{history.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


BIGGEST_FAMILY = """
SELECT parent FROM tests WHERE test_id <> parent
GROUP BY parent ORDER BY count(*) DESC, parent LIMIT 1"""


def core_round(history: Path) -> dict[str, float]:
    """In-process costs behind two of the app's screens, and the grouped-scan anchor:
    the biggest family's verdict changes over the window (its detail screen's Changes) and the
    lifecycle replay of every tracked test given the report (the list's lifecycle column)."""
    from common import timed

    from flaketui.core.config import Config
    from flaketui.core.history.store import open_history
    from flaketui.core.quarantine.lifecycle import derive
    from flaketui.core.scoring.report import build_report
    from flaketui.core.scoring.series import verdict_changes

    db = open_history(history, create=False, readonly=True)
    try:
        config = Config()
        (family,) = db.conn.execute(BIGGEST_FAMILY).fetchone()
        scan_s = timed(
            lambda: db.conn.execute("SELECT test, count(*) FROM results GROUP BY test").fetchall()
        )[0]
        changes_s = timed(
            lambda: verdict_changes(
                db, family, now=NOW, days=int(config.window_days), config=config
            )
        )[0]
        report = build_report(db, now=NOW, config=config)
        replay_s = timed(lambda: derive(db, now=NOW, config=config, report=report))[0]
    finally:
        db.conn.close()
    return {"scan": scan_s, "family_changes": changes_s, "lifecycle_replay": replay_s}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the JSON summary last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--results", type=int, default=1_000_000)
    parser.add_argument("--tests", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--history", type=Path)
    parser.add_argument("--moves", type=int, default=10, help="Down keys per list and round")
    parser.add_argument("--pages", type=int, default=5, help="PageDown keys per round")
    parser.add_argument(
        "--core-only", action="store_true", help="only the in-process figures (no tmux)"
    )
    args = parser.parse_args(argv)
    if shutil.which("tmux") is None and not args.core_only:
        raise SystemExit("bench/keys.py needs tmux")
    if args.history is None:
        from generate import ensure_history

        args.history = ensure_history(args.results, args.seed, tests=args.tests)
    history = args.history.resolve()
    tests = count(history, "tests")
    app: dict[str, list[float]] = {}
    bare: dict[str, list[float]] = {}
    core: dict[str, list[float]] = {}
    loading: dict[str, list[float]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="flaketui-bench-keys-") as tmp_name,
        contextlib.ExitStack() as cleanup,
    ):
        cleanup.callback(stop_server)  # a round that fails leaves no app running
        tmp = Path(tmp_name)
        for round_no in range(args.repeat):
            for kind, seconds in core_round(history).items():
                core.setdefault(kind, []).append(seconds)
            if not args.core_only:
                for kind, found in flaketui_round(history, tmp, args.moves, args.pages).items():
                    app.setdefault(kind, []).extend(found)
                for kind, found in loading_round(history, tmp, args.moves, LOADING_BACKS).items():
                    loading.setdefault(kind, []).extend(found)
                for kind, found in bare_round(tests, tmp, args.moves, args.pages).items():
                    bare.setdefault(kind, []).extend(found)
            log(
                f"keys: round {round_no + 1}/{args.repeat} done (family changes"
                f" {core['family_changes'][-1]:.3f}s, lifecycle replay"
                f" {core['lifecycle_replay'][-1]:.3f}s, scan {core['scan'][-1]:.3f}s)"
            )

    def med(values: list[float]) -> float:
        return round(statistics.median(values), 1)

    def ratio(kind: str) -> float:  # per round against that round's scan, then the median
        return round(
            statistics.median(a / b for a, b in zip(core[kind], core["scan"], strict=True)), 3
        )

    summary = {
        "history": str(history),
        "results": count(history, "results"),
        "tests": tests,
        "repeat": args.repeat,
        "load": os.getloadavg()[0],
        "scan_s": round(statistics.median(core["scan"]), 3),
        "family_changes_s": round(statistics.median(core["family_changes"]), 3),
        "family_changes_scan_ratio": ratio("family_changes"),
        "lifecycle_replay_s": round(statistics.median(core["lifecycle_replay"]), 3),
        "lifecycle_replay_scan_ratio": ratio("lifecycle_replay"),
    }
    if args.core_only:
        emit(summary)
        return 0
    summary = {
        **summary,
        **{f"{kind}_ms": med(values) for kind, values in app.items()},
        "bare_move_ms": med(bare["move"]),
        "bare_page_ms": med(bare["page"]),
        "bare_back_ms": med(bare["back"]),
        "bare_back_key_ms": med(bare["back_key"]),
        "move_ratio": round(med(app["move"]) / med(bare["move"]), 2),
        "page_ratio": round(med(app["page"]) / med(bare["page"]), 2),
        "back_ratio": round(med(app["back"]) / med(bare["back"]), 2),
        "back_key_ratio": round(med(app["back_key"]) / med(bare["back_key"]), 2),
        "max_ms": round(max(max(values) for values in app.values()), 1),
        # While the load's later steps are read (informational: no target); keys counted.
        **{f"{kind}_ms": med(values) if values else None for kind, values in loading.items()},
        "loading_keys": sum(len(values) for values in loading.values()),
    }
    emit(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
