"""diagnose's order-dependence decision: each group of sessions after other tests against alone;
a session that did not run the test is neither a pass nor a failure."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flaketui.core.diagnosis.experiments import Experiment, order_evidence
from flaketui.core.diagnosis.sessions import SessionResult
from flaketui.core.scoring.statistics import fisher_exact

RECORDED = "after its predecessors in their recorded order"
SHUFFLED = "in random orders with tests before it"


def experiments(
    alone: tuple[int, int],
    after: tuple[int, int] | None = None,
    serial: tuple[int, int] | None = None,
    random: tuple[int, int, int, int] | None = None,
) -> dict[str, Experiment]:
    """Experiments from (failed, sessions) counts; random is (failed, sessions, failed with
    tests before it, sessions with tests before it)."""
    found = {"alone": Experiment("alone", alone[1], alone[0])}
    if after is not None:
        found["after"] = Experiment("after predecessors", after[1], after[0])
    if serial is not None:
        found["serial"] = Experiment("1 worker", serial[1], serial[0])
    if random is not None:
        failed, sessions, preceded_failed, preceded = random
        found["random"] = Experiment(
            "random orders", sessions, failed, preceded=preceded, preceded_failed=preceded_failed
        )
    return found


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        # 3/3 after its predecessors, 0/4 in random orders, 0/4 alone: the random orders do
        # not dilute the recorded order (pooled, 3/7 against 0/4 has p = 0.2).
        ({"after": (3, 3), "random": (0, 4, 0, 3)}, (RECORDED, 3, 3)),
        ({"after": (3, 3), "random": (0, 4, 0, 4)}, (RECORDED, 3, 3)),
        # At one worker the same tests run in the same order: one group with the above.
        ({"after": (3, 3), "serial": (4, 4), "random": (0, 4, 0, 4)}, (RECORDED, 7, 7)),
        ({"after": (3, 3), "serial": (4, 4), "random": (3, 4, 3, 4)}, (RECORDED, 7, 7)),
        # The shuffles show it when the recorded order does not.
        ({"after": (1, 3), "random": (4, 4, 4, 4)}, (SHUFFLED, 4, 4)),
        # A failure in a shuffle that ran it first is no failure after other tests.
        ({"after": (1, 3), "random": (4, 6, 2, 2)}, None),
        ({"after": (0, 3), "random": (2, 4, 0, 2)}, None),
        # Too few failures, or not significantly more than alone.
        ({"after": (1, 3), "random": (1, 4, 1, 4)}, None),
        ({"after": (2, 3), "random": (0, 4, 0, 4)}, None),
        ({"after": (0, 3), "random": (0, 4, 0, 4)}, None),
    ],
)
def test_each_group_is_compared_with_the_sessions_alone(
    groups: dict[str, tuple[int, ...]], expected: tuple[str, int, int] | None
) -> None:
    found = order_evidence(experiments((0, 4), **groups))  # type: ignore[arg-type]
    assert (None if found is None else (found.name, found.failed, found.sessions)) == expected


@pytest.mark.parametrize(
    ("alone", "after", "order_dependent"),
    [
        ((0, 4), (3, 3), True),  # p = 1/35
        ((0, 3), (3, 3), False),  # p = 2/20: as likely all alone
        ((0, 2), (3, 3), False),  # p = 1/10
        ((0, 10), (2, 3), True),  # p = 3/78
        ((1, 4), (3, 3), False),
        ((3, 4), (3, 3), False),
        ((4, 4), (3, 3), False),  # as often alone (and that is fails-every-time)
    ],
)
def test_the_recorded_order_against_alone(
    alone: tuple[int, int], after: tuple[int, int], order_dependent: bool
) -> None:
    assert (order_evidence(experiments(alone, after=after)) is not None) is order_dependent


def test_without_sessions_alone_nothing_is_order_dependent() -> None:
    assert order_evidence(experiments((0, 0), after=(3, 3))) is None
    assert order_evidence({"after": Experiment("after predecessors", 3, 3)}) is None


counts = st.integers(0, 30).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n)))
shuffles = st.integers(0, 30).flatmap(
    lambda n: st.integers(0, n).flatmap(
        lambda p: st.tuples(st.integers(0, p), st.integers(0, n - p)).map(
            lambda f: (f[0] + f[1], n, f[0], p)
        )
    )
)


@given(alone=counts, after=counts, serial=counts, random=shuffles)
def test_random_orders_never_take_away_what_the_recorded_order_shows(
    alone: tuple[int, int],
    after: tuple[int, int],
    serial: tuple[int, int],
    random: tuple[int, int, int, int],
) -> None:
    recorded = order_evidence(experiments(alone, after=after, serial=serial))
    every = order_evidence(experiments(alone, after=after, serial=serial, random=random))
    if recorded is not None:
        assert every is not None and every.name == RECORDED


@given(alone=counts, after=counts, serial=counts, random=shuffles)
def test_a_group_counts_only_with_two_failures_more_often_than_alone_and_significant(
    alone: tuple[int, int],
    after: tuple[int, int],
    serial: tuple[int, int],
    random: tuple[int, int, int, int],
) -> None:
    found = order_evidence(experiments(alone, after=after, serial=serial, random=random))
    if found is None:
        return
    if found.name == RECORDED:
        assert (found.failed, found.sessions) == (after[0] + serial[0], after[1] + serial[1])
    else:
        assert (found.failed, found.sessions) == (random[2], random[3])
    assert found.failed >= 2
    assert found.failed / found.sessions > alone[0] / alone[1]
    assert fisher_exact(found.failed, found.sessions, *alone) <= 0.05


TEST = "tests/test_a.py::test_one"


@pytest.mark.parametrize(
    ("session", "reason"),
    [
        (SessionResult([], [TEST], {TEST: "pass"}), None),
        (SessionResult([], [TEST], {TEST: "fail"}, exit_code=1), None),
        (SessionResult([], [TEST], {f"{TEST}[a]": "skipped", f"{TEST}[b]": "pass"}), None),
        (SessionResult([], [TEST], {TEST: "skipped"}), "the test was skipped"),
        (
            SessionResult([], [TEST], exit_code=-9, timed_out=600.0),
            "pytest did not finish within 600 s",
        ),
        (SessionResult([], [TEST], exit_code=-9), "pytest was killed by signal 9"),
        (SessionResult([], [TEST], exit_code=5), "pytest exit status 5: no tests collected"),
        (
            SessionResult([], [TEST], {"tests/test_a.py::test_two": "pass"}),
            "pytest exit status 0: the test was not among those pytest ran",
        ),
        (
            SessionResult(
                [],
                [TEST],
                exit_code=4,
                output="ERROR: usage: pytest [options]\npytest: error: unrecognized arguments: "
                "-n\n  inifile: None\n",
            ),
            "pytest exit status 4: unrecognized arguments: -n",
        ),
    ],
)
def test_a_session_without_a_result_for_the_test_says_why(
    session: SessionResult, reason: str | None
) -> None:
    assert session.not_run(TEST) == reason
    experiment = Experiment("alone")
    assert experiment.tally(session, TEST) == (None if reason else session.failed(TEST))
    assert (experiment.sessions, experiment.not_run) == ((0, 1) if reason else (1, 0))
    assert experiment.not_run_reason == (reason or "")
