"""The recorder's attempt assembly and batching, driven with hand-made reports and a fake writer."""

from __future__ import annotations

import sqlite3
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flaketui.pytest_plugin import recording as plugin_recording
from flaketui.pytest_plugin.recording import Recorder

BATCH = plugin_recording.FLUSH_EVERY_ATTEMPTS


class FakeRun:
    """Stands in for RunRecorder: remembers each batch; can fail its first append() calls."""

    def __init__(self, failures: int = 0) -> None:
        self.batches: list[list[tuple[str, list[str], list[str | None]]]] = []
        self.failures = failures
        self.finished = False

    def append(self, rows: Any) -> None:
        if self.failures:
            self.failures -= 1
            raise sqlite3.OperationalError("database is locked")
        # Grouped by test in order of first appearance, as the rows are stored.
        cases: dict[str, tuple[list[str], list[str | None]]] = {}
        for row in rows:
            outcomes, workers = cases.setdefault(row[0], ([], []))
            outcomes.append(row[1])
            workers.append(row[6] if len(row) > 6 else None)
        self.batches.append([(tid, outs, workers) for tid, (outs, workers) in cases.items()])

    def finish(self) -> None:
        self.finished = True

    def sizes(self) -> list[int]:
        return [sum(len(outcomes) for _, outcomes, _ in batch) for batch in self.batches]

    def outcomes_of(self, test_id: str) -> list[str]:
        return [
            o for batch in self.batches for tid, outs, _ in batch if tid == test_id for o in outs
        ]


def _full(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A journal row with all its fields, as the journal reads it: null past a short row's end."""
    return row + (None,) * (10 - len(row))


def _done(recorder: Recorder) -> list[tuple[str, Any]]:
    """The recorder's queued journal rows as (test id, attempt with named fields)."""
    return [
        (
            row[0],
            SimpleNamespace(
                outcome=row[1], duration_ms=row[2], position=row[3], predecessor=row[4],
                timeout_ms=row[5], worker_id=row[6], message=row[7],
            ),
        )
        for row in map(_full, recorder.done)
    ]  # fmt: skip


def _recorder(run: FakeRun) -> Recorder:
    config: Any = SimpleNamespace(pluginmanager=SimpleNamespace(getplugin=lambda name: None))
    recorder = Recorder(config, conn=None, settings=None, meta=None)  # type: ignore[arg-type]
    recorder.run = run  # type: ignore[assignment]
    return recorder


def _report(
    nodeid: str, when: str, outcome: str = "passed", longrepr: str | None = None, **extra: Any
) -> pytest.TestReport:
    # Outcome "rerun" and phase "???" are outside TestReport's annotations but do occur.
    make: Any = pytest.TestReport
    report: pytest.TestReport = make(
        nodeid, (nodeid, 0, nodeid), {}, outcome, longrepr, when, duration=0.01, **extra
    )
    return report


def _attempt(recorder: Recorder, nodeid: str, call: str = "passed", **extra: Any) -> None:
    longrepr = "boom" if call in ("failed", "rerun") else None
    recorder.pytest_runtest_logreport(_report(nodeid, "setup", **extra))
    recorder.pytest_runtest_logreport(_report(nodeid, "call", call, longrepr, **extra))
    recorder.pytest_runtest_logreport(_report(nodeid, "teardown", **extra))


@pytest.fixture
def no_timed_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches are cut by size only, so the test does not depend on the clock."""
    monkeypatch.setattr(plugin_recording, "FLUSH_EVERY_SECONDS", float("inf"))


@pytest.mark.usefixtures("no_timed_flush")
def test_batches_are_cut_at_flush_every_attempts_and_the_rest_written_at_the_end() -> None:
    run = FakeRun()
    recorder = _recorder(run)
    for n in range(2 * BATCH + 50):
        _attempt(recorder, f"test_m.py::test_{n}")
    assert run.sizes() == [BATCH, BATCH]
    recorder.pytest_sessionfinish(session=Any, exitstatus=0)  # type: ignore[arg-type]
    assert run.sizes() == [BATCH, BATCH, 50]
    assert run.finished


@pytest.mark.usefixtures("no_timed_flush")
def test_attempts_of_one_test_continue_across_batches() -> None:
    run = FakeRun()
    recorder = _recorder(run)
    for n in range(BATCH - 1):
        _attempt(recorder, f"test_m.py::test_{n}")
    for call in ("rerun", "rerun", "passed"):
        _attempt(recorder, "test_m.py::test_flaky", call)
    recorder.pytest_sessionfinish(session=Any, exitstatus=1)  # type: ignore[arg-type]
    assert run.sizes() == [BATCH, 2]
    assert run.outcomes_of("test_m.py::test_flaky") == ["fail", "fail", "pass"]
    assert run.batches[1] == [("test_m.py::test_flaky", ["fail", "pass"], [None, None])]


@pytest.mark.usefixtures("no_timed_flush")
def test_a_locked_history_warns_once_and_is_retried_at_the_end(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = FakeRun(failures=1)
    recorder = _recorder(run)
    for n in range(2 * BATCH + 50):
        _attempt(recorder, f"test_m.py::test_{n}")
    assert run.batches == []  # the failed batch is kept, later batches wait for the end
    recorder.pytest_sessionfinish(session=Any, exitstatus=0)  # type: ignore[arg-type]
    assert run.sizes() == [2 * BATCH + 50]
    assert run.finished
    assert capsys.readouterr().err.count("flaketui: cannot write to the history") == 1


@pytest.mark.usefixtures("no_timed_flush")
def test_a_history_locked_for_good_never_fails_the_session_nor_looks_finished(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = FakeRun(failures=10**6)
    recorder = _recorder(run)
    for n in range(2 * BATCH + 50):
        _attempt(recorder, f"test_m.py::test_{n}")
    recorder.pytest_sessionfinish(session=Any, exitstatus=0)  # type: ignore[arg-type]
    assert run.batches == []
    assert not run.finished
    warned, ended = capsys.readouterr().err.splitlines()
    assert warned.endswith("(database is locked); retrying at the end of the session")
    # The retry's end is said too: the warning alone promised it.
    assert ended == (
        f"flaketui: cannot write to the history (database is locked); "
        f"{2 * BATCH + 50} attempts not recorded"
    )


@pytest.mark.usefixtures("no_timed_flush")
def test_a_write_failing_at_the_session_end_promises_no_retry(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = FakeRun(failures=1)
    recorder = _recorder(run)
    for n in range(3):
        _attempt(recorder, f"test_m.py::test_{n}")
    recorder.pytest_sessionfinish(session=Any, exitstatus=0)  # type: ignore[arg-type]
    assert run.batches == []
    assert not run.finished
    assert capsys.readouterr().err.splitlines() == [
        "flaketui: cannot write to the history (database is locked); 3 attempts not recorded"
    ]


def test_subtest_reports_are_not_attempts() -> None:
    # Shaped like pytest-subtests' and pytest 9's subtest reports (TestReport is final to mypy).
    subtest_report: Any = type("SubtestReport", (pytest.TestReport,), {})
    run = FakeRun()
    recorder = _recorder(run)
    recorder.pytest_runtest_logreport(_report("test_m.py::test_sub", "setup"))
    sub = subtest_report(
        "test_m.py::test_sub", ("test_m.py", 0, "x"), {}, "failed", "sub failed", "call"
    )
    recorder.pytest_runtest_logreport(sub)
    recorder.pytest_runtest_logreport(_report("test_m.py::test_sub", "call"))
    recorder.pytest_runtest_logreport(_report("test_m.py::test_sub", "teardown"))
    recorder.pytest_sessionfinish(session=Any, exitstatus=0)  # type: ignore[arg-type]
    assert run.outcomes_of("test_m.py::test_sub") == ["pass"]


@pytest.mark.usefixtures("no_timed_flush")
def test_a_crashed_xdist_worker_is_an_error_attempt_on_that_worker() -> None:
    run = FakeRun()
    recorder = _recorder(run)
    recorder.pytest_runtest_logreport(_report("test_m.py::test_oom", "setup", worker_id="gw1"))
    crash = _report("test_m.py::test_oom", "???", "rerun", "worker 'gw1' crashed")
    crash.node = SimpleNamespace(gateway=SimpleNamespace(id="gw1"))  # type: ignore[attr-defined]
    recorder.pytest_runtest_logreport(crash)
    _attempt(recorder, "test_m.py::test_oom", worker_id="gw0")
    recorder.pytest_sessionfinish(session=Any, exitstatus=0)  # type: ignore[arg-type]
    [batch] = run.batches
    assert batch == [("test_m.py::test_oom", ["error", "pass"], ["gw1", "gw0"])]


@pytest.mark.usefixtures("no_timed_flush")
def test_interleaved_workers_running_the_same_test_keep_their_attempts_apart() -> None:
    run = FakeRun()
    recorder = _recorder(run)
    for when in ("setup", "call", "teardown"):
        fail = when == "call"
        recorder.pytest_runtest_logreport(
            _report("test_m.py::t", when, "failed" if fail else "passed", "x", worker_id="gw0")
        )
        recorder.pytest_runtest_logreport(_report("test_m.py::t", when, worker_id="gw1"))
    recorder.pytest_sessionfinish(session=Any, exitstatus=1)  # type: ignore[arg-type]
    assert run.batches == [[("test_m.py::t", ["fail", "pass"], ["gw0", "gw1"])]]


@pytest.mark.parametrize("exitstatus", [2, 3])
def test_an_interrupted_session_is_flushed_but_not_finished(exitstatus: int) -> None:
    run = FakeRun()
    recorder = _recorder(run)
    _attempt(recorder, "test_m.py::test_done")
    recorder.pytest_runtest_logreport(_report("test_m.py::test_cut", "setup"))
    recorder.pytest_sessionfinish(session=Any, exitstatus=exitstatus)  # type: ignore[arg-type]
    assert run.batches == [[("test_m.py::test_done", ["pass"], [None])]]
    assert not run.finished


@pytest.mark.usefixtures("no_timed_flush")
def test_a_teardown_error_after_a_pass_is_an_error_with_the_stamped_duration() -> None:
    run = FakeRun()
    recorder = _recorder(run)
    stamp = {plugin_recording.ATTEMPT_ATTR: (None, "test_m.py::before", 7, 30_000)}
    recorder.pytest_runtest_logreport(_report("test_m.py::t", "setup", **stamp))
    recorder.pytest_runtest_logreport(_report("test_m.py::t", "call", **stamp))
    ended = {plugin_recording.ATTEMPT_ATTR: (30_400_000, "test_m.py::before", 7, 30_000)}
    recorder.pytest_runtest_logreport(_report("test_m.py::t", "teardown", "failed", "bad", **ended))
    assert [a.outcome for _, a in _done(recorder)] == ["error"]
    # The tracker's elapsed time, not the reports' own durations (0.01 s each).
    assert [a.duration_ms for _, a in _done(recorder)] == [30]
    assert [a.message for _, a in _done(recorder)] == ["bad"]
    assert [(a.predecessor, a.position, a.timeout_ms) for _, a in _done(recorder)] == [
        ("test_m.py::before", 7, 30_000)
    ]


@pytest.mark.usefixtures("no_timed_flush")
def test_a_crashed_attempt_has_no_duration_rather_than_zero() -> None:
    run = FakeRun()
    recorder = _recorder(run)
    recorder.pytest_runtest_logreport(_report("test_m.py::t", "setup"))
    recorder.pytest_runtest_logreport(_report("test_m.py::t", "???", "failed", "worker crashed"))
    assert [(a.outcome, a.duration_ms) for _, a in _done(recorder)] == [("error", None)]


@pytest.mark.parametrize(
    ("elapsed_ns", "expected"),
    [(None, None), (-5, None), (0, 0), (1_499_999, 1), (8 * 24 * 3600 * 10**9, None)],
)
def test_implausible_durations_are_refused(elapsed_ns: int | None, expected: int | None) -> None:
    assert plugin_recording.plausible_duration_ms(elapsed_ns) == expected


class FakeClock:
    """time.monotonic for the recorder, moved by hand (and by each write of a SlowRun)."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


class SlowRun(FakeRun):
    """A writer whose every batch takes `cost` seconds of the fake clock."""

    def __init__(self, clock: FakeClock, cost: float) -> None:
        super().__init__()
        self.clock = clock
        self.cost = cost

    def append(self, rows: Any) -> None:
        super().append(rows)
        self.clock.now += self.cost


@pytest.mark.parametrize(
    ("cost", "interval"),
    [(0.001, plugin_recording.FLUSH_EVERY_SECONDS), (0.1, 5.0), (5.0, 10.0)],
    ids=["fast-writes-every-second", "slow-writes-space-out", "capped"],
)
def test_time_triggered_batches_space_out_when_writing_is_slow(
    monkeypatch: pytest.MonkeyPatch, cost: float, interval: float
) -> None:
    clock = FakeClock()
    monkeypatch.setattr(plugin_recording, "time", clock)
    run = SlowRun(clock, cost)
    recorder = _recorder(run)
    clock.now += plugin_recording.FLUSH_EVERY_SECONDS
    _attempt(recorder, "test_m.py::test_first")  # due by time: written, taking `cost`
    assert run.sizes() == [1]
    clock.now += interval - 0.01
    _attempt(recorder, "test_m.py::test_early")
    assert run.sizes() == [1]  # not yet: the interval grew with the write's cost
    clock.now += 0.02
    _attempt(recorder, "test_m.py::test_due")
    assert run.sizes() == [1, 2]


def _interact(recorder: Recorder, report: pytest.TestReport, exc_type: str) -> None:
    call: Any = SimpleNamespace(when=report.when, excinfo=SimpleNamespace(typename=exc_type))
    recorder.pytest_exception_interact(SimpleNamespace(), call, report)


@pytest.mark.usefixtures("no_timed_flush")
def test_exception_types_follow_their_phase_when_reports_are_logged_after_the_attempt() -> None:
    # pytest-rerunfailures makes an attempt's three reports (pytest_exception_interact runs for
    # each failed one), then logs them; pytest drops "AssertionError: " from a bare assert's
    # crash line, so the type noted on the report is used.
    run = FakeRun()
    recorder = _recorder(run)
    recorder.clock.current = "test_m.py::t"  # an attempt this process runs
    crash: Any = SimpleNamespace(reprcrash=SimpleNamespace(message="assert 1 == 2"))
    for call_type, teardown_type in (("AssertionError", None), (None, "OSError")):
        phases = [("setup", None), ("call", call_type), ("teardown", teardown_type)]
        reports = []
        for when, exc_type in phases:
            failed = exc_type is not None
            outcome = "rerun" if failed and when == "call" else "failed" if failed else "passed"
            report = _report("test_m.py::t", when, outcome, crash if failed else None)
            if exc_type is not None:
                _interact(recorder, report, exc_type)
            reports.append(report)
        for report in reports:
            recorder.pytest_runtest_logreport(report)
    messages = [str(a.message).splitlines()[0] for _, a in _done(recorder)]
    assert messages == ["AssertionError: assert 1 == 2", "OSError: assert 1 == 2"]


@pytest.mark.usefixtures("no_timed_flush")
def test_a_failed_teardown_waits_for_its_exception_type_then_closes() -> None:
    # Without rerunfailures pytest logs a failed phase's report, then calls
    # pytest_exception_interact: a failed call's type is there when the teardown closes the
    # attempt; a failed teardown keeps its attempt open until the type arrives.
    run = FakeRun()
    recorder = _recorder(run)
    crash: Any = SimpleNamespace(reprcrash=SimpleNamespace(message="assert 1 == 2"))
    for name, failing in (("test_m.py::a", "call"), ("test_m.py::b", "teardown")):
        recorder.clock.current = name
        for when in ("setup", "call", "teardown"):
            failed = when == failing
            report = _report(
                name, when, "failed" if failed else "passed", crash if failed else None
            )
            recorder.pytest_runtest_logreport(report)
            if failed:
                waiting = [n for n, _ in _done(recorder)] == ["test_m.py::a"] and when == "teardown"
                assert waiting == (name == "test_m.py::b")
                _interact(recorder, report, "AssertionError" if when == "call" else "OSError")
    assert [(n, a.outcome, str(a.message).splitlines()[0]) for n, a in _done(recorder)] == [
        ("test_m.py::a", "fail", "AssertionError: assert 1 == 2"),
        ("test_m.py::b", "error", "OSError: assert 1 == 2"),
    ]
    assert recorder.open_attempts == {}


class RowRun(FakeRun):
    """A FakeRun keeping the journal rows themselves, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[Any, ...]] = []

    def append(self, rows: Any) -> None:
        self.rows.extend(rows)


# One attempt of a serial session: the test, then each phase's outcome ("xpass": a passing call
# with wasxfail; None: that phase and the later ones are never logged, as when a session dies
# or a plugin swallows a report), and whether pytest_exception_interact follows a failed phase.
_PHASE = st.sampled_from(["passed", "passed", "passed", "failed", "skipped", None])
_ATTEMPT = st.tuples(
    st.sampled_from(["test_m.py::a", "test_m.py::b", "test_m.py::c[1]"]),
    _PHASE,
    st.sampled_from(["passed", "passed", "failed", "skipped", "xpass", None]),
    _PHASE,
    st.booleans(),
)


def _serial_session(attempts: list[Any], *, clean_path: bool) -> list[tuple[Any, ...]]:
    """Drive a serial session's hooks (the setup hook, then the phases' reports) and return its
    journal rows; clean_path=False keeps every attempt on the general path."""
    ticks = iter(range(0, 10**12, 1_234_567))
    recorder = _recorder(RowRun())
    recorder.distributed = False
    crash: Any = SimpleNamespace(reprcrash=SimpleNamespace(message="boom"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plugin_recording, "_CLOCK", (lambda: next(ticks),))
        patch.setattr(plugin_recording, "FLUSH_EVERY_SECONDS", float("inf"))
        recorder.flush_interval = float("inf")
        for nodeid, *phases, interact in attempts:
            item: Any = SimpleNamespace(nodeid=nodeid)
            recorder.pytest_runtest_setup(item)
            if not clean_path:
                recorder.clean = False
            for when, outcome in zip(("setup", "call", "teardown"), phases, strict=True):
                if outcome is None:
                    break
                extra = {"wasxfail": "known"} if outcome == "xpass" else {}
                outcome = "passed" if outcome == "xpass" else outcome
                longrepr = crash if outcome == "failed" else None
                report = _report(nodeid, when, outcome, longrepr, **extra)
                recorder.pytest_runtest_logreport(report)
                if outcome == "failed" and interact:
                    _interact(recorder, report, "OSError")
        recorder.pytest_sessionfinish(session=Any, exitstatus=1)  # type: ignore[arg-type]
    run: Any = recorder.run
    return [_full(row) for row in run.rows]


@settings(max_examples=300, deadline=None)
@given(st.lists(_ATTEMPT, max_size=12))
def test_clean_attempts_are_recorded_as_the_general_path_records_them(attempts: list[Any]) -> None:
    # Attempts whose every phase passes skip the general bookkeeping: the rows (outcome,
    # message, duration, predecessor, position, order) must be the same either way.
    assert _serial_session(attempts, clean_path=True) == _serial_session(attempts, clean_path=False)


def test_a_clean_attempt_whose_teardown_never_comes_is_still_recorded() -> None:
    rows = _serial_session(
        [("test_m.py::a", "passed", "passed", None, False)] * 2
        + [("test_m.py::b", "passed", "passed", "passed", False)],
        clean_path=True,
    )
    # Both attempts of a (no teardown, so no elapsed time nor place: a crash's facts) and b's:
    # a's first ends where its second starts, its second when the session ends.
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        ("test_m.py::a", "pass", None, None),
        ("test_m.py::b", "pass", 1, 3),
        ("test_m.py::a", "pass", None, None),
    ]
