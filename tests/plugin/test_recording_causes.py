"""The recorder keeps what cause analysis needs: real durations, order, worker, timeout, seed."""

from __future__ import annotations

import platform
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from recording_helpers import PLUGIN_ARGS, query

pytestmark = pytest.mark.usefixtures("recording_env")

# The first test leaves every clock function frozen-and-jumping in every module that imported
# one, the way a time-freezing library left active does: pytest's own durations go wild after.
CLOCK_LEAK_SUITE = """
import itertools
import sys
import time

def test_a_leaks_a_jumping_clock():
    real = {time.perf_counter, time.perf_counter_ns, time.time, time.monotonic}
    ticks = itertools.count(0, 10**11)
    fake = lambda: float(next(ticks))
    for module in list(sys.modules.values()):
        for name, value in list(vars(module).items() if hasattr(module, "__dict__") else []):
            try:
                if value in real:
                    setattr(module, name, fake)
            except TypeError:
                pass

def test_b():
    pass

def test_c():
    pass
"""


def _db(pytester: pytest.Pytester) -> Path:
    return pytester.path / "history.db"


def test_durations_survive_a_leaked_clock_and_order_is_recorded(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_clock=CLOCK_LEAK_SUITE)
    junit = pytester.path / "junit.xml"
    pytester.runpytest_subprocess(
        *PLUGIN_ARGS, "--flaketui-db", str(_db(pytester)), f"--junitxml={junit}"
    ).assert_outcomes(passed=3)
    # pytest's own clock was bent: its report says some test took years ...
    times = [float(case.get("time", "0")) for case in ET.parse(junit).iter("testcase")]
    assert max(times) > 365 * 24 * 3600
    # ... while the recorded durations stay plausible, and the order is kept.
    rows = query(
        _db(pytester),
        "SELECT t.test_id, r.duration_ms, p.test_id, r.position, r.worker_id FROM results r"
        " JOIN tests t ON t.id = r.test LEFT JOIN tests p ON p.id = r.predecessor"
        " ORDER BY r.position",
    )
    assert [(row[0], row[2], row[3], row[4]) for row in rows] == [
        ("test_clock.py::test_a_leaks_a_jumping_clock", None, 1, None),
        ("test_clock.py::test_b", "test_clock.py::test_a_leaks_a_jumping_clock", 2, None),
        ("test_clock.py::test_c", "test_clock.py::test_b", 3, None),
    ]
    assert all(row[1] is not None and 0 <= row[1] < 60_000 for row in rows)


def test_the_run_records_its_environment(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_one():\n    pass\n")
    pytester.runpytest(*PLUGIN_ARGS, "--flaketui-db", str(_db(pytester))).assert_outcomes(passed=1)
    [(os_name, python, plat, seed)] = query(
        _db(pytester), "SELECT os, python, platform, order_seed FROM runs"
    )
    assert os_name == platform.system()
    assert python == platform.python_version()
    assert plat.startswith(sys.platform)
    assert seed is None  # nothing shuffled the order


def test_xdist_workers_send_their_order_to_the_controller(pytester: pytest.Pytester) -> None:
    body = "\n".join(f"def test_{n}():\n    pass\n" for n in range(6))
    pytester.makepyfile(test_a=body, test_b=body)
    pytester.runpytest_subprocess(
        *PLUGIN_ARGS, "--flaketui-db", str(_db(pytester)), "-n", "2", "--dist", "loadfile"
    ).assert_outcomes(passed=12)
    rows = query(
        _db(pytester),
        "SELECT r.worker_id, r.position, t.test_id, p.test_id, r.duration_ms FROM results r"
        " JOIN tests t ON t.id = r.test LEFT JOIN tests p ON p.id = r.predecessor"
        " ORDER BY r.worker_id, r.position",
    )
    by_worker: dict[str, list[tuple[int, str, str | None]]] = {}
    for worker, position, test, before, duration in rows:
        assert duration is not None
        by_worker.setdefault(worker, []).append((position, test, before))
    assert set(by_worker) == {"gw0", "gw1"}
    for chain in by_worker.values():
        assert [position for position, _, _ in chain] == list(range(1, len(chain) + 1))
        # Each attempt's predecessor is the test before it on the same worker.
        assert [before for _, _, before in chain] == [None] + [test for _, test, _ in chain[:-1]]


@pytest.mark.parametrize(
    ("ini", "args"),
    [
        ("", ()),
        ("timeout_func_only = true\n", ()),  # the timer is set before the call, not the setup
        ("", ("-n", "2")),  # set on the workers, sent on the reports
    ],
    ids=["serial", "func-only", "xdist"],
)
def test_the_timeout_in_force_is_recorded(
    pytester: pytest.Pytester, ini: str, args: tuple[str, ...]
) -> None:
    pytester.makeini(f"[pytest]\ntimeout = 5\n{ini}")
    pytester.makepyfile(
        "import pytest\n\n"
        "def test_default():\n    pass\n\n"
        "@pytest.mark.timeout(30)\ndef test_marked():\n    pass\n\n"
        "@pytest.mark.timeout(0)\ndef test_none():\n    pass\n"
    )
    pytester.runpytest_subprocess(
        *PLUGIN_ARGS, "-p", "pytest_timeout", "--flaketui-db", str(_db(pytester)), *args
    ).assert_outcomes(passed=3)
    rows = dict(
        query(
            _db(pytester),
            "SELECT t.test_id, r.timeout_ms FROM results r JOIN tests t ON t.id = r.test",
        )
    )
    assert rows == {
        "test_the_timeout_in_force_is_recorded.py::test_default": 5_000,
        "test_the_timeout_in_force_is_recorded.py::test_marked": 30_000,
        "test_the_timeout_in_force_is_recorded.py::test_none": None,
    }


def test_without_pytest_timeout_no_timeout_is_recorded(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_one():\n    pass\n")
    pytester.runpytest(*PLUGIN_ARGS, "--flaketui-db", str(_db(pytester))).assert_outcomes(passed=1)
    assert query(_db(pytester), "SELECT timeout_ms FROM results") == [(None,)]


def test_a_random_order_seed_is_recorded(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    pytester.runpytest(
        *PLUGIN_ARGS,
        "-p",
        "random_order.plugin",
        "--random-order-seed=4242",
        "--flaketui-db",
        str(_db(pytester)),
    ).assert_outcomes(passed=2)
    assert query(_db(pytester), "SELECT order_seed FROM runs") == [("random-order:4242",)]


def test_a_random_order_bucket_other_than_the_default_is_recorded(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    pytester.runpytest(
        *PLUGIN_ARGS,
        "-p",
        "random_order.plugin",
        "--random-order-seed=77",
        "--random-order-bucket=global",
        "--flaketui-db",
        str(_db(pytester)),
    ).assert_outcomes(passed=2)
    assert query(_db(pytester), "SELECT order_seed FROM runs") == [("random-order:77:global",)]
