"""Pushes at once against a real server, each on its own connection and thread, stopped at
chosen points of the push and let go in a chosen order: the interleavings CI jobs pushing
together produce, made deterministic. A push is only ever waited on until it stops at a point,
ends, or waits on a lock another transaction holds (pg_locks), with a bound."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from flaketui.cli import cli
from tests.connections import connected, sqlite_connect
from tests.core.junit_shards import file_shard

BOUND_S = 60  # a push neither stopping, ending nor waiting on a lock by then is a failure
# A push can stop right after each of these returns (_file_test: its first move of attempts;
# _merge_clashes: a merge's moves found, before any row lands; _move_shared: its moves done).
POINTS = ("_merge_clashes", "_push_tests", "_move_shared", "_file_test", "_settle", "_take_files")


def invoke(*args: object) -> None:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == 0, result.output


class Pusher(threading.Thread):
    """A push (`work`, calling push_history) on a thread of its own, stopping right after each
    of `stops` (names of POINTS) until let go."""

    def __init__(self, work: Callable[[], object], stops: tuple[str, ...] = ()) -> None:
        super().__init__(daemon=True)
        self.work = work
        self.go = {point: threading.Event() for point in stops}
        self.stopped = threading.Event()  # set while stopped at a point
        self.done = threading.Event()
        self.pushing = threading.Event()  # set once push_history has its connection's pid
        self.pid = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # kept for the test to report
            self.error = exc
        finally:
            self.pushing.set()
            self.done.set()

    def reached(self, point: str) -> None:
        go = self.go.get(point)
        if go is not None and not go.is_set():
            self.stopped.set()
            assert go.wait(BOUND_S), f"never let go after {point}"
            self.stopped.clear()

    def let_go(self, point: str | None = None) -> None:
        """Let it go on past point (past every point when None)."""
        self.stopped.clear()
        for name, go in self.go.items():
            if point in (None, name):
                go.set()


def pushing(url: str, history: Path, *, append: bool = True) -> Callable[[], object]:
    """The push of a history file on a connection of its own (an ingest's or the plugin's
    staging history with append, a merge's without)."""

    def work() -> object:
        from flaketui.core.history.pg import push
        from flaketui.core.history.pg.connect import connect
        from flaketui.core.history.store import open_history

        pg = connect(url)
        try:
            with closing(open_history(history, create=False)) as db:  # in the pushing thread
                return push.push_history(pg, db.conn, append=append)
        finally:
            pg.close()

    return work


def _waiting(monitor: Any, pid: int) -> bool:
    row = monitor.execute(
        "SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted", (pid,)
    ).fetchone()
    return int(row[0]) > 0


def advance(monitor: Any, pusher: Pusher) -> str:
    """Wait until the pusher stops at a point ("stopped"), ends ("done") or waits on a lock
    ("waiting")."""
    deadline = time.monotonic() + BOUND_S
    assert pusher.pushing.wait(BOUND_S)
    while not pusher.done.wait(0.01):
        if pusher.stopped.is_set():
            return "stopped"
        if _waiting(monitor, pusher.pid):
            return "waiting"
        assert time.monotonic() < deadline, "a push neither stopped, ended nor waited"
    return "done"


@pytest.fixture
def stops(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Let each Pusher stop right after the push's steps named in POINTS; a Pusher knows its
    connection's pid once push_history starts. Every push is let go at the end, so a failed
    test leaves none stopped."""
    from flaketui.core.history.pg import push
    from flaketui.core.ingest import server

    whole = push.push_history
    started: list[Pusher] = []

    def push_history(pg: Any, *args: Any, **kwargs: Any) -> object:
        thread = threading.current_thread()
        if isinstance(thread, Pusher):
            started.append(thread)
            thread.pid = int(pg.info.backend_pid)
            thread.pushing.set()
        return whole(pg, *args, **kwargs)

    monkeypatch.setattr(push, "push_history", push_history)
    monkeypatch.setattr(server, "push_history", push_history)

    def stopping(name: str) -> Callable[..., object]:
        step = getattr(push, name)

        def wrapped(*args: object, **kwargs: object) -> object:
            result = step(*args, **kwargs)
            thread = threading.current_thread()
            if isinstance(thread, Pusher):
                thread.reached(name)
            return result

        return wrapped

    for name in POINTS:
        monkeypatch.setattr(push, name, stopping(name))
    yield
    for pusher in started:
        pusher.let_go()
    for pusher in started:
        pusher.join(BOUND_S)


@pytest.fixture
def monitor(pg_url: str) -> Iterator[Any]:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn


def finish(monitor: Any, *pushers: Pusher) -> None:
    """Let every push go on until all have ended; each must have landed."""
    for pusher in pushers:
        pusher.let_go()
    for pusher in pushers:
        assert advance(monitor, pusher) in ("done", "waiting")
    for pusher in pushers:
        pusher.join(BOUND_S)
        assert not pusher.is_alive()
    errors = [repr(p.error) for p in pushers if p.error is not None]
    assert not errors, errors


def race(monitor: Any, first: Pusher, second: Pusher, *states: str) -> None:
    """`first` runs until it stops at its point, then `second` until it is in one of `states`
    (stopped at its own point, waiting on a lock `first` holds, or done); then `first` goes
    on, and both must land (finish)."""
    first.start()
    assert advance(monitor, first) == "stopped"
    second.start()
    state = advance(monitor, second)
    assert state in states, state
    first.let_go()
    assert advance(monitor, first) in ("done", "waiting")
    finish(monitor, second, first)


def staged(tmp_path: Path, name: str, run_id: str, ts: str, *cases: tuple[str, str]) -> Path:
    """A history file of one run whose cases (file, test name) pass."""
    history = tmp_path / f"{name}.db"
    report = file_shard(tmp_path / f"{name}.xml", *((f, n, "pass") for f, n in cases))
    invoke("ingest", history, report, "--run-id", run_id, "--timestamp", ts, "--no-detect")
    return history


def server_rows(url: str, sql: str) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return [tuple(row) for row in conn.execute(sql).fetchall()]


TESTS = "SELECT test_id, test_file, first_seen FROM tests ORDER BY 1"
OLD, NEW, OTHER = "src/old.test.js", "src/new.test.js", "src/other.test.js"
# x seen first at R0, y at R1; push A moves both to NEW at a later run; push B, a backfill of
# an earlier run, teaches y an earlier first sighting and names x of a third file.
PLAN = {
    "r0": ("R0", "2026-11-01T10:00:00Z", (OLD, "x")),
    "r1": ("R1", "2026-11-05T10:00:00Z", (OLD, "y")),
    "a": ("RA", "2026-11-06T10:00:00Z", (NEW, "x"), (NEW, "y")),
    "b": ("RB", "2026-11-03T10:00:00Z", (OTHER, "x"), (OLD, "y")),
}
# Other writers' later runs moving x and y to a fourth file.
MOVED = "src/moved.test.js"
MOVES = {
    "moves_y": ("RY", "2026-11-07T10:00:00Z", (MOVED, "y")),
    "moves_x": ("RX", "2026-11-08T10:00:00Z", (MOVED, "x")),
}


def _histories(tmp_path: Path, plan: dict[str, tuple[Any, ...]]) -> dict[str, Path]:
    return {name: staged(tmp_path, name, *spec) for name, spec in plan.items()}


def _expected(tmp_path: Path, histories: dict[str, Path]) -> list[tuple[object, ...]]:
    """The tests of a history file merging the same runs."""
    local = tmp_path / "local.db"
    for history in histories.values():
        invoke("merge", local, history)
    return [tuple(row) for row in sqlite_connect(local).execute(TESTS)]


def test_two_pushes_each_taking_a_file_the_other_holds_both_land(
    pg_url: str, tmp_path: Path, stops: None, monitor: Any
) -> None:
    """Push A moves x and y to another file; push B, started once A holds its tests, holds y
    (it teaches y an earlier first sighting) and names x of a third file. Each then takes the
    files of its tests' latest runs: both land (no deadlock aborts either), and the server's
    tests are a history file's given the same runs."""
    histories = _histories(tmp_path, PLAN)
    for name in ("r0", "r1"):
        invoke("merge", pg_url, histories[name])
    a = Pusher(pushing(pg_url, histories["a"]), stops=("_push_tests",))
    b = Pusher(pushing(pg_url, histories["b"]), stops=("_push_tests",))
    race(monitor, a, b, "stopped", "waiting")
    expected = _expected(tmp_path, histories)
    assert [row[:2] for row in expected] == [("parser::x", NEW), ("parser::y", NEW)]
    assert server_rows(pg_url, TESTS) == expected


def test_pushes_whose_tests_other_writers_move_meanwhile_both_land(
    pg_url: str, tmp_path: Path, stops: None, monitor: Any
) -> None:
    """As above, with x and y of one file in push A's history (A holds neither), and other
    writers moving y before B starts and x after: A finds both moved when it takes its tests'
    files, B finds x moved. Both land, and every test has the file of its latest run naming
    one, as a history file given the same runs has."""
    plan = {**PLAN, "a": ("RA", "2026-11-06T10:00:00Z", (OLD, "x"), (OLD, "y")), **MOVES}
    histories = _histories(tmp_path, plan)
    for name in ("r0", "r1"):
        invoke("merge", pg_url, histories[name])
    a = Pusher(pushing(pg_url, histories["a"]), stops=("_push_tests",))
    b = Pusher(pushing(pg_url, histories["b"]), stops=("_push_tests",))
    moves = {name: Pusher(pushing(pg_url, histories[name])) for name in MOVES}
    a.start()
    assert advance(monitor, a) == "stopped"
    moves["moves_y"].start()
    assert advance(monitor, moves["moves_y"]) in ("done", "waiting")
    b.start()
    assert advance(monitor, b) in ("stopped", "waiting")
    moves["moves_x"].start()
    assert advance(monitor, moves["moves_x"]) in ("done", "waiting")
    a.let_go()
    assert advance(monitor, a) in ("done", "waiting")
    finish(monitor, b, a, *moves.values())
    expected = _expected(tmp_path, histories)
    assert [row[:2] for row in expected] == [("parser::x", MOVED), ("parser::y", MOVED)]
    assert server_rows(pg_url, TESTS) == expected


def test_a_push_holds_from_the_start_the_tests_it_names_of_another_file(
    pg_url: str, tmp_path: Path, stops: None, monitor: Any
) -> None:
    """Push A names x and y of another file than the server's: once it has inserted its tests
    it holds both rows, taken in one pass in id order, before any attempt of its lands."""
    import psycopg

    histories = _histories(tmp_path, PLAN)
    for name in ("r0", "r1"):
        invoke("merge", pg_url, histories[name])
    a = Pusher(pushing(pg_url, histories["a"]), stops=("_push_tests",))
    a.start()
    assert advance(monitor, a) == "stopped"
    for test_id in ("parser::x", "parser::y"):
        with pytest.raises(psycopg.errors.LockNotAvailable), monitor.transaction():
            monitor.execute(
                "SELECT 1 FROM tests WHERE test_id = %s FOR NO KEY UPDATE NOWAIT", (test_id,)
            )
    finish(monitor, a)


def test_a_test_another_push_holds_takes_the_file_of_its_latest_run_all_the_same(
    pg_url: str, tmp_path: Path, stops: None, monitor: Any
) -> None:
    """Push A's latest run names y of the file the server held when A started; another
    writer's earlier run moves y to another file meanwhile, and push B (a backfill teaching y
    an earlier first sighting) holds y and has read y's runs before A's landed. A leaves y to
    B, and once B is done y takes the file of A's run all the same."""
    plan = {
        "r1": PLAN["r1"],
        "a": ("RA", "2026-11-09T10:00:00Z", (OLD, "y")),
        "moves_y": MOVES["moves_y"],
        "b": ("RB", "2026-11-03T10:00:00Z", (OLD, "y")),
    }
    histories = _histories(tmp_path, plan)
    invoke("merge", pg_url, histories["r1"])
    a = Pusher(pushing(pg_url, histories["a"]), stops=("_push_tests",))
    b = Pusher(pushing(pg_url, histories["b"]), stops=("_take_files",))
    moves_y = Pusher(pushing(pg_url, histories["moves_y"]))
    a.start()
    assert advance(monitor, a) == "stopped"
    moves_y.start()
    assert advance(monitor, moves_y) == "done"
    b.start()
    assert advance(monitor, b) == "stopped"  # y's file taken from the runs before A's
    a.let_go()
    assert advance(monitor, a) in ("done", "waiting")
    finish(monitor, b, a)
    expected = _expected(tmp_path, histories)
    assert [row[:2] for row in expected] == [("parser::y", OLD)]
    assert server_rows(pg_url, TESTS) == expected


def test_a_plain_id_two_pushes_leave_without_attempts_is_removed(
    pg_url: str, tmp_path: Path, stops: None, monitor: Any
) -> None:
    """The server holds x of file c under the plain id in run R1, and x of files c and b under
    their files' ids in run R2. A merge of a history holding R2's x of file c under the plain
    id (its attempts go to the file's id) holds x's row; meanwhile an ingest of R1's shard of
    file b moves R1's attempts to their file's id and would remove x, which no attempt names
    any more, but the merge holds it, and the merge still sees R1's attempts under x. Both
    land and x is removed: the server holds what a history file given the same reports
    holds."""
    from flaketui.core.ingest.server import ingest_to_server
    from flaketui.core.models import RunMeta
    from flaketui.core.timeutil import parse_iso

    at = "2026-11-02T10:00:00Z"  # one time: neither push teaches a test its first sighting
    shards = {
        (run_id, name): file_shard(
            tmp_path / f"{run_id}{name}.xml", (f"src/{name}.test.js", "x", "pass")
        )
        for run_id, name in (("R1", "c"), ("R2", "c"), ("R2", "b"), ("R1", "b"))
    }
    local, history = tmp_path / "local.db", tmp_path / "r2c.db"
    meta = ["--timestamp", at, "--no-detect"]
    for (run_id, name), shard in shards.items():
        invoke("ingest", local, shard, "--run-id", run_id, *meta)
        if (run_id, name) != ("R1", "b"):
            invoke("ingest", pg_url, shard, "--run-id", run_id, *meta)
    invoke("ingest", history, shards[("R2", "c")], "--run-id", "R2", *meta)
    invoke("merge", local, history)
    merge = Pusher(pushing(pg_url, history, append=False), stops=("_push_tests",))
    shard = [shards[("R1", "b")]]
    ingest = Pusher(
        lambda: ingest_to_server(pg_url, shard, RunMeta(run_id="R1", ts=parse_iso(at))),
        stops=("_settle",),
    )
    merge.start()
    assert advance(monitor, merge) == "stopped"  # it holds x
    ingest.start()
    assert advance(monitor, ingest) in ("stopped", "waiting")  # x left without attempts
    merge.let_go()
    assert advance(monitor, merge) in ("done", "waiting")
    finish(monitor, ingest, merge)
    expected = sqlite_connect(local).execute(TESTS).fetchall()
    assert [row[0] for row in expected] == ["src/b.test.js::parser::x", "src/c.test.js::parser::x"]
    assert server_rows(pg_url, TESTS) == expected


def shard_push(url: str, run_id: str, at: str, shard: Path) -> Callable[[], object]:
    """The push of an ingest of a shard into a run the server holds."""
    from flaketui.core.ingest.server import ingest_to_server
    from flaketui.core.models import RunMeta
    from flaketui.core.timeutil import parse_iso

    return lambda: ingest_to_server(url, [shard], RunMeta(run_id=run_id, ts=parse_iso(at)))


def _shards(
    tmp_path: Path, plan: dict[str, tuple[str, str, tuple[tuple[str, str], ...]]]
) -> dict[str, tuple[str, str, Path]]:
    """Each named shard's (run id, time, report) of cases (file, test name) that pass."""
    return {
        name: (run_id, at, file_shard(tmp_path / f"{name}.xml", *((f, n, "pass") for f, n in c)))
        for name, (run_id, at, c) in plan.items()
    }


def _ingested(tmp_path: Path, shards: dict[str, tuple[str, str, Path]]) -> list[tuple[object, ...]]:
    """The tests of a history file ingesting the shards in their order."""
    local = tmp_path / "local.db"
    for run_id, at, report in shards.values():
        invoke("ingest", local, report, "--run-id", run_id, "--timestamp", at, "--no-detect")
    return [tuple(row) for row in sqlite_connect(local).execute(TESTS)]


def _js(name: str) -> str:
    return f"src/{name}.test.js"


def test_two_moves_each_settling_a_plain_id_the_other_holds_both_land(
    pg_url: str, tmp_path: Path, stops: None, monitor: Any
) -> None:
    """Push A, a shard of run RA naming x of file b, moves RA's x of file c to c's id, and
    names y of another file than the server's; push B, a shard of run RB naming y of file h,
    moves RB's y of file g to g's id, and names x of another file. Each then settles the plain
    id it moved from, the one the other names of another file: both land (no deadlock aborts
    either), and the server's tests are a history file's given the same reports."""
    shards = _shards(
        tmp_path,
        {
            "ra": ("RA", "2026-11-01T10:00:00Z", ((_js("c"), "x"),)),
            "rb": ("RB", "2026-11-02T10:00:00Z", ((_js("g"), "y"),)),
            "a": ("RA", "2026-11-01T10:00:00Z", ((_js("b"), "x"), (_js("d"), "y"))),
            "b": ("RB", "2026-11-02T10:00:00Z", ((_js("e"), "x"), (_js("h"), "y"))),
        },
    )
    for name in ("ra", "rb"):
        run_id, at, report = shards[name]
        invoke("ingest", pg_url, report, "--run-id", run_id, "--timestamp", at, "--no-detect")
    a = Pusher(shard_push(pg_url, *shards["a"]), stops=("_push_tests",))
    b = Pusher(shard_push(pg_url, *shards["b"]))
    race(monitor, a, b, "waiting")
    expected = _ingested(tmp_path, shards)
    assert [row[0] for row in expected if "::parser::" in str(row[0])] == [
        f"{_js(f)}::parser::{n}" for f, n in (("b", "x"), ("c", "x"), ("g", "y"), ("h", "y"))
    ]
    assert server_rows(pg_url, TESTS) == expected


def test_two_moves_creating_the_same_file_ids_in_crossing_orders_both_land(
    pg_url: str, tmp_path: Path, stops: None, monitor: Any
) -> None:
    """Push A, a shard of run RA naming x and y of file b, moves RA's x of file c and y of
    file a to their files' ids, x first; push B, a shard of run RB, names x of file c and y of
    file a, so it creates both of those ids as well, in id order (y's first). Started once A
    has moved x, B waits for A's row of x; A then creates y's: both land (no deadlock aborts
    either), and the server's tests are a history file's given the same reports."""
    shards = _shards(
        tmp_path,
        {
            "ra": ("RA", "2026-11-01T10:00:00Z", ((_js("c"), "x"), (_js("a"), "y"))),
            "rb": ("RB", "2026-11-02T10:00:00Z", ((_js("z"), "x"), (_js("z"), "y"))),
            "a": ("RA", "2026-11-01T10:00:00Z", ((_js("b"), "x"), (_js("b"), "y"))),
            "b": ("RB", "2026-11-02T10:00:00Z", ((_js("c"), "x"), (_js("a"), "y"))),
        },
    )
    for name in ("ra", "rb"):
        run_id, at, report = shards[name]
        invoke("ingest", pg_url, report, "--run-id", run_id, "--timestamp", at, "--no-detect")
    a = Pusher(shard_push(pg_url, *shards["a"]), stops=("_push_tests", "_file_test"))
    b = Pusher(shard_push(pg_url, *shards["b"]))
    a.start()
    assert advance(monitor, a) == "stopped"
    a.let_go("_push_tests")
    assert advance(monitor, a) == "stopped"  # RA's x moved to c's id
    b.start()
    assert advance(monitor, b) == "waiting"
    a.let_go()
    assert advance(monitor, a) in ("done", "waiting")
    finish(monitor, b, a)
    expected = _ingested(tmp_path, shards)
    assert [row[0] for row in expected] == [
        f"{_js(f)}::parser::{n}"
        for f, n in (("a", "y"), ("b", "x"), ("b", "y"), ("c", "x"), ("z", "x"), ("z", "y"))
    ]
    assert server_rows(pg_url, TESTS) == expected


def test_a_plain_id_a_push_holds_without_attempts_is_removed_once_it_is_done(
    pg_url: str, tmp_path: Path, stops: None, monitor: Any
) -> None:
    """A merge of a history holding x with no attempt holds x's row; meanwhile a shard of run
    R1 moves R1's attempts of x to their file's id and leaves x without attempts. It skips the
    row the merge holds, and removes it once the merge is done: the server holds what a
    history file given the same reports and history holds."""
    shards = _shards(
        tmp_path,
        {
            "r1": ("R1", "2026-11-01T10:00:00Z", ((_js("c"), "x"),)),
            "moves": ("R1", "2026-11-01T10:00:00Z", ((_js("b"), "x"),)),
        },
    )
    history = staged(tmp_path, "idle", "RH", "2026-11-03T10:00:00Z", (_js("w"), "w"))
    with connected(history) as conn:
        conn.execute(
            "INSERT INTO tests (test_id, parent, test_file, first_seen)"
            " VALUES ('parser::x', 'parser', ?, '2026-11-03T10:00:00Z')",
            (_js("c"),),
        )
    run_id, at, report = shards["r1"]
    invoke("ingest", pg_url, report, "--run-id", run_id, "--timestamp", at, "--no-detect")
    merge = Pusher(pushing(pg_url, history, append=False), stops=("_push_tests",))
    moves = Pusher(shard_push(pg_url, *shards["moves"]))
    merge.start()
    assert advance(monitor, merge) == "stopped"  # it holds x
    moves.start()
    assert advance(monitor, moves) == "waiting"  # committed, removing x once the merge is done
    assert server_rows(pg_url, "SELECT count(*) FROM results") == [(2,)]
    merge.let_go()
    finish(monitor, merge, moves)
    local = tmp_path / "local.db"  # the merge, then the move
    for name in ("r1", "merge", "moves"):
        if name == "merge":
            invoke("merge", local, history)
            continue
        run_id, at, report = shards[name]
        invoke("ingest", local, report, "--run-id", run_id, "--timestamp", at, "--no-detect")
    expected = sqlite_connect(local).execute(TESTS).fetchall()
    assert "parser::x" not in [row[0] for row in expected]
    assert server_rows(pg_url, TESTS) == expected


def test_a_plain_id_moved_from_that_another_push_holds_is_settled_after_commit(
    pg_url: str, tmp_path: Path, monitor: Any
) -> None:
    """A plain id moved from that the push did not take as it started, held by another
    transaction, is not waited for: it is settled (here its file, that of its latest run)
    once the push has committed and the holder is done."""
    import psycopg

    from flaketui.core.history.pg import push

    histories = _histories(tmp_path, {"r0": PLAN["r0"]})
    invoke("merge", pg_url, histories["r0"])
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE tests SET test_file = 'src/stale.test.js'")
        (pk,) = conn.execute("SELECT id FROM tests").fetchone()
    left = {int(pk): "2026-11-01T10:00:00Z"}
    with psycopg.connect(pg_url) as pg:
        pg.execute("SET lock_timeout = '10s'")  # a push waiting for the holder fails, bounded
        with monitor.transaction():
            monitor.execute("SELECT 1 FROM tests WHERE id = %s FOR NO KEY UPDATE", (pk,))
            with pg.transaction():
                assert push._settle(pg, left) == ([], left)  # not waited for
        push._after_others(pg, {}, [], left)
    assert [row[:2] for row in server_rows(pg_url, TESTS)] == [("parser::x", OLD)]


def test_a_push_whose_tidying_fails_after_its_commit_still_lands(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows a push leaves to others are tidied after it has committed: a connection lost
    then is no failed push (the plugin would keep the run as unsent and record it twice, an
    ingest would tell to retry). The push returns, says what it left untidy, and the run is
    on the server once."""
    import psycopg

    from flaketui.core.history.pg import push

    histories = _histories(tmp_path, {"r1": PLAN["r1"], "a": PLAN["a"]})
    invoke("merge", pg_url, histories["r1"])

    def lost(pg: Any, *left: Any) -> None:
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(push, "_after_others", lost)
    summary = pushing(pg_url, histories["a"])()
    assert isinstance(summary, push.PushSummary)
    assert summary.runs_added == 1 and summary.results_added == 2
    runs = server_rows(pg_url, "SELECT run_id FROM runs ORDER BY 1")
    assert runs == [("R1",), ("RA",)]


def _short_lock_timeout(url: str) -> str:
    """The server's URL for connections that wait 100 ms at most for a lock."""
    return f"{url}?options=-c%20lock_timeout%3D100ms"


def _plain_id_left(tmp_path: Path, url: str) -> dict[str, list[str]]:
    """The server holds run R1's x of file c under the plain id; by command, what follows the
    server's URL to bring R1's x of file b, moving R1's attempts of x to c's id and leaving x
    without attempts."""
    at = "2026-11-02T10:00:00Z"
    meta = ["--run-id", "R1", "--timestamp", at, "--no-detect"]
    on_c = file_shard(tmp_path / "c.xml", (_js("c"), "x", "pass"))
    on_b = file_shard(tmp_path / "b.xml", (_js("b"), "x", "pass"))
    invoke("ingest", url, on_c, *meta)
    history = tmp_path / "b.db"
    invoke("ingest", history, on_b, *meta)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(f'{{"file": "{on_b}", "run_id": "R1", "timestamp": "{at}"}}\n')
    return {
        "merge": [str(history)],
        "ingest": [str(on_b), *meta],
        "ingest --manifest": ["--manifest", str(manifest)],
    }


@pytest.mark.parametrize("command", ["merge", "ingest", "ingest --manifest"])
def test_a_push_says_which_tests_it_left_untidy_after_its_commit(
    pg_url: str, tmp_path: Path, monitor: Any, command: str
) -> None:
    """A push leaving a plain id without attempts finds another writer holding its row and
    leaves its removal to after its commit; waiting for the holder there runs out of the
    connection's lock_timeout. The command lands the run all the same, and says in one more
    line what it left and that a later push tidies it."""
    rest = _plain_id_left(tmp_path, pg_url)[command]
    with monitor.transaction():
        monitor.execute("SELECT 1 FROM tests WHERE test_id = 'parser::x' FOR KEY SHARE")
        result = CliRunner().invoke(cli, [command.split()[0], _short_lock_timeout(pg_url), *rest])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == (
        "1 test another writer held was left untidy (an older file, or no attempts):"
        " a later push of it tidies it"
    )
    assert server_rows(pg_url, RESULTS) == [
        ("R1", f"{_js(n)}::parser::x", 1, "pass", _js(n)) for n in ("b", "c")
    ]
    assert "parser::x" in [row[0] for row in server_rows(pg_url, TESTS)]


def test_a_push_counts_the_tests_it_left_untidy_after_its_commit(
    pg_url: str, tmp_path: Path, monitor: Any
) -> None:
    """As above, through push_history: the summary counts the plain id left. A later push of
    the same history, once the holder is done, removes it and counts none."""
    from flaketui.core.history.pg.push import PushSummary

    _plain_id_left(tmp_path, pg_url)
    url = _short_lock_timeout(pg_url)
    with monitor.transaction():
        monitor.execute("SELECT 1 FROM tests WHERE test_id = 'parser::x' FOR KEY SHARE")
        summary = pushing(url, tmp_path / "b.db", append=False)()
    assert isinstance(summary, PushSummary)
    assert (summary.results_added, summary.left_untidy) == (1, 1)
    again = pushing(url, tmp_path / "b.db", append=False)()
    assert isinstance(again, PushSummary)
    assert (again.results_added, again.left_untidy) == (0, 0)
    assert "parser::x" not in [row[0] for row in server_rows(pg_url, TESTS)]


RESULTS = (
    "SELECT r.run_id, t.test_id, x.attempt, x.outcome, x.origin FROM results AS x"
    " JOIN runs AS r ON r.id = x.run JOIN tests AS t ON t.id = x.test ORDER BY 1, 2, 3"
)


def _rows(history: Path) -> tuple[list[tuple[object, ...]], ...]:
    """A history file's tests and results, as _on_server reads the server's."""
    conn = sqlite_connect(history)
    return tuple([tuple(row) for row in conn.execute(sql)] for sql in (TESTS, RESULTS))


def _merged(tmp_path: Path, *histories: Path) -> tuple[list[tuple[object, ...]], ...]:
    """The tests and results of a history file merging the histories in their order."""
    local = tmp_path / "local.db"
    for history in histories:
        invoke("merge", local, history)
    return _rows(local)


def _on_server(url: str) -> tuple[list[tuple[object, ...]], ...]:
    return server_rows(url, TESTS), server_rows(url, RESULTS)


@pytest.mark.parametrize("first", ["a", "b"])
def test_two_merges_of_shards_of_one_run_both_land_with_a_test_per_file(
    pg_url: str, tmp_path: Path, stops: None, monitor: Any, first: str
) -> None:
    """The server holds run R's x of file c under the plain id; two merges at once bring
    histories each holding another shard of R, x of file a and x of file b. The first holds
    R's lock once its moves are found; the second waits for it, then finds its own against
    the first's rows. In either order both land, and the server holds a test per file, as a
    history file merging the same histories does."""
    at = "2026-11-02T10:00:00Z"
    base = staged(tmp_path, "c", "R", at, (_js("c"), "x"))
    histories = {name: staged(tmp_path, name, "R", at, (_js(name), "x")) for name in ("a", "b")}
    invoke("merge", pg_url, base)
    second = "b" if first == "a" else "a"
    one = Pusher(pushing(pg_url, histories[first], append=False), stops=("_merge_clashes",))
    two = Pusher(pushing(pg_url, histories[second], append=False))
    race(monitor, one, two, "waiting")  # R's lock
    tests, results = _merged(tmp_path, base, histories[first], histories[second])
    assert [row[0] for row in tests] == [f"{_js(n)}::parser::x" for n in ("a", "b", "c")]
    assert _on_server(pg_url) == (tests, results)


@pytest.mark.parametrize("held", [True, False], ids=["run-held", "run-new"])
@pytest.mark.parametrize("first", ["merge", "ingest"])
def test_a_merge_and_an_ingest_of_shards_of_one_run_both_land(
    pg_url: str, tmp_path: Path, stops: None, monitor: Any, first: str, held: bool
) -> None:
    """A merge of a history holding run R's shard of x of file a and y of file e, and an
    ingest into R of a shard naming them the other way (x of e, y of a) go at once, with the
    server holding R's x of file c and y of file f under their plain ids, or no R at all. The
    ingest reads the run before the merge lands, or the merge finds its moves before the
    ingest's land. In either order both land, and the server holds a test per file, as a
    history file given the same history and report does."""
    at = "2026-11-02T10:00:00Z"
    base = staged(tmp_path, "base", "R", at, (_js("c"), "x"), (_js("f"), "y"))
    history = staged(tmp_path, "merged", "R", at, (_js("a"), "x"), (_js("e"), "y"))
    shard = file_shard(tmp_path / "shard.xml", (_js("e"), "x", "pass"), (_js("a"), "y", "pass"))
    if held:
        invoke("merge", pg_url, base)
    merge = Pusher(pushing(pg_url, history, append=False), stops=("_move_shared",))
    ingest = Pusher(shard_push(pg_url, "R", at, shard), stops=("_push_tests",))
    one, two = (merge, ingest) if first == "merge" else (ingest, merge)
    race(monitor, one, two, "waiting")  # R's lock
    local = tmp_path / "local.db"
    if held:
        invoke("merge", local, base)
    for name in (first, "ingest" if first == "merge" else "merge"):
        if name == "merge":
            invoke("merge", local, history)
        else:
            invoke("ingest", local, shard, "--run-id", "R", "--timestamp", at, "--no-detect")
    tests, results = _rows(local)
    files = ("a", "c", "e", "f") if held else ("a", "e")
    assert [row[0] for row in tests] == [
        f"{_js(f)}::parser::{n}"
        for f, n in (("a", "x"), ("a", "y"), ("c", "x"), ("e", "x"), ("e", "y"), ("f", "y"))
        if f in files
    ]
    assert _on_server(pg_url) == (tests, results)


@pytest.mark.parametrize("kind", ["merge", "ingest"])
@pytest.mark.parametrize("stop", ["_merge_clashes", "_push_tests", "_move_shared"])
def test_a_merge_and_a_push_each_moving_a_plain_id_the_other_names_of_another_file_land(
    pg_url: str, tmp_path: Path, stops: None, monitor: Any, stop: str, kind: str
) -> None:
    """Merge A brings run RA's x of file b, where the server's RA holds x of file c, so it
    moves RA's x to c's id, and names y of another file than the server's; push B (a merge of
    a history, or an ingest of a shard) brings run RB's y of file h, where the server's RB
    holds y of file g, and names x of another file. Each settles the plain id it moved from,
    the one the other names of another file. B, started once A has found its moves, lands
    first; started once A holds its rows, B waits for A. Both land (no deadlock aborts
    either), and the server holds what a history file given the same histories and reports
    holds."""
    plan = {
        "ra": ("RA", "2026-11-01T10:00:00Z", (_js("c"), "x")),
        "rb": ("RB", "2026-11-02T10:00:00Z", (_js("g"), "y")),
        "a": ("RA", "2026-11-01T10:00:00Z", (_js("b"), "x"), (_js("d"), "y")),
        "b": ("RB", "2026-11-02T10:00:00Z", (_js("e"), "x"), (_js("h"), "y")),
    }
    histories = _histories(tmp_path, plan)
    for name in ("ra", "rb"):
        invoke("merge", pg_url, histories[name])
    shard = file_shard(tmp_path / "shard.xml", (_js("e"), "x", "pass"), (_js("h"), "y", "pass"))
    a = Pusher(pushing(pg_url, histories["a"], append=False), stops=(stop,))
    if kind == "merge":
        b = Pusher(pushing(pg_url, histories["b"], append=False))
    else:
        b = Pusher(shard_push(pg_url, "RB", plan["b"][1], shard))
    race(monitor, a, b, "done" if stop == "_merge_clashes" else "waiting")
    local = tmp_path / "local.db"  # B's run, then A's, as the server took them
    for name in ("ra", "rb", "b", "a"):
        if name == "b" and kind == "ingest":
            invoke("ingest", local, shard, "--run-id", "RB", "--timestamp", plan["b"][1],
                   "--no-detect")  # fmt: skip
        else:
            invoke("merge", local, histories[name])
    tests, results = _rows(local)
    assert [row[0] for row in tests if "::parser::" in str(row[0])] == [
        f"{_js(f)}::parser::{n}" for f, n in (("b", "x"), ("c", "x"), ("g", "y"), ("h", "y"))
    ]
    assert _on_server(pg_url) == (tests, results)


def test_two_ingests_of_the_first_shards_of_a_run_number_attempts_per_file(
    pg_url: str, tmp_path: Path, stops: None, monitor: Any
) -> None:
    """Two shards of a run the server lacks, naming x of file a and x of file b, are ingested
    at once: both read the run before either landed, so each keeps x under its plain id. The
    second to land moves the first's attempts to a's id and lands its own under b's, each
    attempt 1, as a history file ingesting both shards numbers them."""
    at = "2026-11-02T10:00:00Z"
    shards = _shards(
        tmp_path,
        {"a": ("R", at, ((_js("a"), "x"),)), "b": ("R", at, ((_js("b"), "x"),))},
    )
    a = Pusher(shard_push(pg_url, *shards["a"]), stops=("_push_tests",))
    b = Pusher(shard_push(pg_url, *shards["b"]))
    race(monitor, a, b, "waiting")  # R's lock, the run read without A's shard
    tests = _ingested(tmp_path, shards)
    assert [row[0] for row in tests] == [f"{_js(n)}::parser::x" for n in ("a", "b")]
    assert _on_server(pg_url) == (tests, _rows(tmp_path / "local.db")[1])


def _blocked_by(monitor: Any, pusher: Pusher, *holders: int) -> None:
    """Wait until the push waits on the locks of exactly the backends `holders`."""
    deadline = time.monotonic() + BOUND_S
    while not pusher.done.wait(0.01):
        blocking = monitor.execute("SELECT pg_blocking_pids(%s)", (pusher.pid,)).fetchone()[0]
        if sorted(blocking) == sorted(holders):
            return
        assert time.monotonic() < deadline, f"never waited on {holders} alone"
    raise AssertionError(f"ended before it waited on {holders}: {pusher.error!r}")


def test_a_push_whose_test_another_removes_before_it_holds_it_takes_it_again_in_order(
    pg_url: str, tmp_path: Path, stops: None, monitor: Any
) -> None:
    """Push A names x of another file than the server's (its first pass takes x), and y and z,
    whose rows it holds once inserted. Another writer's tidying removes y, a test no attempt
    names, while A waits to hold it; A then waits on z, held by another tidying. Push B,
    started meanwhile, inserts y again and waits for x, which A holds. Once z is let go, A
    finds y gone: it lets go of the rows it took and takes them again, y's new row with them,
    in id order. B takes x meanwhile: both land (no deadlock aborts either), and the server's
    tests are a history file's given the same runs."""
    import psycopg

    from flaketui.core.history.pg.connect import connect

    y_file, z_file = _js("y"), _js("z")
    plan = {
        "r0": ("R0", "2026-11-01T10:00:00Z", (OLD, "x"), (z_file, "z")),
        "a": ("RA", "2026-11-06T10:00:00Z", (NEW, "x"), (y_file, "y"), (z_file, "z")),
        "b": ("RB", "2026-11-07T10:00:00Z", (OTHER, "x"), (y_file, "y")),
    }
    histories = _histories(tmp_path, plan)
    connect(pg_url).close()  # the server's schema
    with psycopg.connect(pg_url) as conn:  # y first, left without attempts: the lowest id
        conn.execute(
            "INSERT INTO tests (test_id, parent, test_file, first_seen)"
            " VALUES ('parser::y', 'parser', %s, '2026-11-01T10:00:00Z')",
            (y_file,),
        )
    invoke("merge", pg_url, histories["r0"])
    a = Pusher(pushing(pg_url, histories["a"]))
    b = Pusher(pushing(pg_url, histories["b"]))
    with (
        psycopg.connect(pg_url) as removes_y,
        psycopg.connect(pg_url) as holds_z,
    ):
        # What the tidying after another push's commit does (_after_others): each holds one
        # row FOR UPDATE, and removes it when no attempt names it.
        holds_z.execute("SELECT 1 FROM tests WHERE test_id = 'parser::z' FOR UPDATE")
        removes_y.execute("SELECT 1 FROM tests WHERE test_id = 'parser::y' FOR UPDATE")
        a.start()
        assert advance(monitor, a) == "waiting"
        _blocked_by(monitor, a, removes_y.info.backend_pid)
        removes_y.execute("DELETE FROM tests WHERE test_id = 'parser::y'")
        removes_y.commit()
        _blocked_by(monitor, a, holds_z.info.backend_pid)
        b.start()
        assert advance(monitor, b) == "waiting"
        _blocked_by(monitor, b, a.pid)  # x, y inserted again
        holds_z.commit()
        finish(monitor, a, b)
    expected = _expected(tmp_path, histories)
    assert [row[:2] for row in expected] == [
        ("parser::x", OTHER),
        ("parser::y", y_file),
        ("parser::z", z_file),
    ]
    assert server_rows(pg_url, TESTS) == expected


def test_the_line_of_tests_left_untidy_speaks_of_several_as_them() -> None:
    from flaketui.core.history.pg.push import untidy_line

    assert untidy_line(3) == (
        "3 tests another writer held were left untidy (an older file, or no attempts):"
        " a later push of them tidies them"
    )
