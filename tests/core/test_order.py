"""The order view: tests that ran before a test on its worker, bad runs against good runs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cause_history import NOW, ORDER_TEST, POLLUTER, build, random_test
from click.testing import CliRunner

from flaketui.cli.group import cli
from flaketui.core.config import Config
from flaketui.core.ingest.writer import RunRecorder
from flaketui.core.models import Attempt, CaseResult, RunMeta
from flaketui.core.scoring.order import latest_seed_replay, order_view, replay_args
from tests.connections import open_history

T0 = datetime(2026, 11, 1, tzinfo=UTC)
VICTIM = "tests/test_v.py::test_victim"
LEAKER = "tests/test_l.py::test_leaks"
BYSTANDER = "tests/test_b.py::test_between"
PROVIDER = "tests/test_p.py::test_sets_up"
SETUP = "tests/test_a.py::test_first"
WHEN = "2026-11-03T00:00:00Z"

# Each pattern: the serial order of one run, and whether the victim fails in it. The leaker
# breaks the victim; the bystander tends to run between them; the provider sets up what the
# victim needs, and it passes whenever the provider ran first; the setup test always runs first.
PATTERNS = [
    ([SETUP, LEAKER, BYSTANDER, VICTIM, PROVIDER], True),
    ([SETUP, LEAKER, BYSTANDER, VICTIM, PROVIDER], True),
    ([SETUP, BYSTANDER, PROVIDER, VICTIM, LEAKER], False),
    ([SETUP, PROVIDER, VICTIM, LEAKER, BYSTANDER], False),
]


def write_runs(path: Path, patterns: list[tuple[list[str], bool]], repeat: int) -> Path:
    db = open_history(path)
    number = 0
    for _ in range(repeat):
        for order, victim_fails in patterns:
            meta = RunMeta(
                run_id=f"run-{number:03d}",
                suite="unit",
                branch_kind="main",
                ts=T0 + timedelta(minutes=10 * number),
                worker_count=1,
                order_seed=f"randomly:{1000 + number}",
            )
            number += 1
            cases = []
            for position, test in enumerate(order, start=1):
                fails = test == VICTIM and victim_fails
                previous = order[position - 2] if position > 1 else None
                attempt = Attempt("fail" if fails else "pass", 10, None, None, previous, position)
                cases.append(CaseResult(test, test.split("::")[0], [attempt]))
            recorder = RunRecorder(db, meta)
            recorder.add(cases)
            recorder.finish()
    db.conn.close()
    return path


@pytest.fixture
def history(tmp_path: Path) -> Path:
    return write_runs(tmp_path / "history.db", PATTERNS, repeat=6)


def test_candidates_are_counted_over_bad_and_good_runs(history: Path) -> None:
    now = datetime(2026, 11, 3, tzinfo=UTC)
    view = order_view(open_history(history, readonly=True), VICTIM, now=now, config=Config())
    assert (view.runs, view.ordered_runs, view.bad_runs, view.good_runs) == (24, 24, 12, 12)
    assert view.always_before == [SETUP]  # the same in every run: not ranked
    by_id = {c.test_id: c for c in view.candidates}
    assert set(by_id) == {LEAKER, BYSTANDER, PROVIDER}
    leaker, bystander, provider = by_id[LEAKER], by_id[BYSTANDER], by_id[PROVIDER]
    assert view.candidates[0] is leaker
    assert (leaker.role, leaker.bad_before, leaker.good_before) == ("polluter", 12, 0)
    assert (leaker.rate_with, leaker.rate_without) == (1.0, 0.0)
    assert leaker.p_value < 1e-5 and leaker.explained_by is None and leaker.suspect
    # The bystander ran before it in every bad run and in half the good ones: significant on
    # its own, explained by the leaker (without the leaker before it, it changes nothing).
    assert (bystander.role, bystander.bad_before, bystander.good_before) == ("polluter", 12, 6)
    assert bystander.p_value <= 0.05
    assert bystander.explained_by == LEAKER
    assert not bystander.suspect
    # The provider ran before it only in good runs: what it depends on.
    assert (provider.role, provider.bad_before, provider.good_before) == ("dependency", 0, 12)
    assert view.candidates[-1] is bystander  # explained candidates come last


def test_a_history_without_order_has_no_candidates(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    db = open_history(path)
    for number in range(4):
        meta = RunMeta(run_id=f"r{number}", suite="unit", ts=T0 + timedelta(hours=number))
        recorder = RunRecorder(db, meta)
        recorder.add(
            [CaseResult(VICTIM, "tests/test_v.py", [Attempt("fail" if number else "pass")])]
        )
        recorder.finish()
    view = order_view(db, VICTIM, now=T0 + timedelta(days=1), config=Config())
    assert (view.runs, view.ordered_runs, view.candidates) == (4, 0, [])
    code, out = invoke("order", str(path), VICTIM, "--now", "2026-11-02T00:00:00Z")
    assert code == 0, out
    assert "no order recorded" in out


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("order") / "history.db", seed=3)


def test_the_polluter_of_a_generated_history_ranks_first(mixed: Path) -> None:
    view = order_view(open_history(mixed, readonly=True), ORDER_TEST, now=NOW, config=Config())
    top = view.candidates[0]
    assert (top.test_id, top.role, top.suspect) == (POLLUTER, "polluter", True)
    assert top.good_before == 0 and top.bad_before == view.bad_runs
    # Every other significant polluter is one the real polluter explains.
    others = [c for c in view.candidates[1:] if c.role == "polluter" and c.p_value <= 0.05]
    assert all(c.explained_by == POLLUTER for c in others)


@pytest.mark.parametrize("index", range(4))
def test_a_random_flake_has_no_unexplained_polluter(mixed: Path, index: int) -> None:
    view = order_view(
        open_history(mixed, readonly=True), random_test(index), now=NOW, config=Config()
    )
    assert view.candidates  # the order varied
    assert not [c for c in view.candidates if c.p_value <= 0.05 and c.explained_by is None]


# ---- the command --------------------------------------------------------------------------


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_table(history: Path) -> None:
    code, out = invoke("order", str(history), VICTIM, "--now", WHEN)
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == f"{VICTIM} (test) as of {WHEN}"
    assert lines[1] == "24 counted runs with their order recorded (of 24): 12 bad, 12 good"
    assert lines[2].startswith("1 test ran before it in every recorded run")
    assert lines[4].split() == [
        "ran", "before", "it", "in", "bad", "in", "good", "fails", "with", "/", "without",
        "p", "(BH)", "role",
    ]  # fmt: skip
    assert lines[5].split()[:6] == [LEAKER, "12/12", "0/12", "100%", "/", "0%"]
    assert lines[5].endswith("polluter, suspect")
    assert lines[-3].endswith("polluter, explained by test_leaks")
    assert lines[-3].startswith(BYSTANDER)
    assert lines[-1] == (
        "replay the order of run run-021, its latest bad run: "
        "pytest -p randomly --randomly-seed=1021"
    )


def test_json_and_limit(history: Path) -> None:
    code, out = invoke("order", str(history), VICTIM, "--now", WHEN, "--format", "json")
    assert code == 0, out
    data = json.loads(out)
    assert (data["ordered_runs"], data["bad_runs"], data["good_runs"]) == (24, 12, 12)
    assert data["always_before"] == [SETUP]
    assert [c["test_id"] for c in data["candidates"]] == [LEAKER, PROVIDER, BYSTANDER]
    first = data["candidates"][0]
    assert first["role"] == "polluter" and first["bad_before"] == 12 and first["good_before"] == 0
    assert first["suspect"] is True and first["explained_by"] is None
    assert data["candidates"][2]["explained_by"] == LEAKER
    assert data["more_candidates"] == 0
    assert data["replay"] == {
        "run_id": "run-021",
        "order_seed": "randomly:1021",
        "command": ["pytest", "-p", "randomly", "--randomly-seed=1021"],
    }
    code, out = invoke(
        "order", str(history), VICTIM, "--now", WHEN, "--format", "json", "--limit", "1"
    )
    data = json.loads(out)
    assert len(data["candidates"]) == 1 and data["more_candidates"] == 2
    code, out = invoke("order", str(history), VICTIM, "--now", WHEN, "--limit", "1")
    assert out.splitlines()[-3] == "... and 2 more candidates (--limit 0 lists all)"


def test_bad_input_is_one_line_and_nothing_is_written(history: Path) -> None:
    before = history.read_bytes()
    code, out = invoke("order", str(history), "nope", "--now", WHEN)
    assert (code, out) == (1, "Error: no test or family named 'nope'\n")
    code, out = invoke("order", str(history), VICTIM, "--limit", "-1")
    assert code == 1 and out.count("\n") == 1 and out.startswith("Error: Invalid value")
    assert history.read_bytes() == before


# ---- seed replay --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recorded", "args"),
    [
        ("randomly:42", ["-p", "randomly", "--randomly-seed=42"]),
        ("random-order:7", ["-p", "random_order", "--random-order-seed=7", "-p", "no:randomly"]),
        (
            "random-order:7:global",
            [
                "-p",
                "random_order",
                "--random-order-seed=7",
                "--random-order-bucket=global",
                "-p",
                "no:randomly",
            ],
        ),
        ("random-order:7:--evil", None),
        ("randomly:3:global", None),
        ("random-order:", None),  # a shuffle without a seed cannot be replayed
        ("randomly:--exec", None),  # data from CI never becomes an option
        ("shuffler:3", None),
        (None, None),
    ],
)
def test_replay_args(recorded: str | None, args: list[str] | None) -> None:
    assert replay_args(recorded) == args


def test_the_latest_bad_runs_seed_is_replayed(history: Path) -> None:
    now = datetime(2026, 11, 3, tzinfo=UTC)
    db = open_history(history, readonly=True)
    replay = latest_seed_replay(db, [VICTIM], now=now, config=Config())
    # 24 runs, 10 minutes apart; the victim last failed in run 21 (pattern 2 of the 6th round).
    assert replay is not None
    assert (replay.run_id, replay.order_seed) == ("run-021", "randomly:1021")
    assert replay.command() == ["pytest", "-p", "randomly", "--randomly-seed=1021"]
    assert order_view(db, VICTIM, now=now, config=Config()).replay == replay
    # A test that never failed has no bad run to replay.
    assert latest_seed_replay(db, [LEAKER], now=now, config=Config()) is None


def test_a_parallel_runs_replay_keeps_its_workers(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    db = open_history(path)
    for number, (seed, fails) in enumerate([("random-order:5", True), (None, True)]):
        meta = RunMeta(
            run_id=f"r{number}",
            suite="unit",
            ts=T0 + timedelta(hours=number),
            worker_count=4,
            order_seed=seed,
        )
        recorder = RunRecorder(db, meta)
        attempt = Attempt("fail" if fails else "pass", 5, None, "gw1", None, 1)
        recorder.add([CaseResult(VICTIM, "tests/test_v.py", [attempt])])
        recorder.finish()
    # The newest bad run recorded no seed: the newest one that did is replayed.
    replay = latest_seed_replay(db, [VICTIM], now=T0 + timedelta(days=1), config=Config())
    assert replay is not None and replay.run_id == "r0"
    assert replay.command() == [
        "pytest", "-p", "random_order", "--random-order-seed=5", "-p", "no:randomly", "-n", "4",
    ]  # fmt: skip
