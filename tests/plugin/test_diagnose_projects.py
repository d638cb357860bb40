"""Recorded by the plugin, diagnosed in the repository: four projects, four causes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from recording_helpers import PLUGIN_ARGS

from flaketui.cli.group import cli
from flaketui.core.config import Config
from flaketui.core.scoring.causes import analyse
from flaketui.core.timeutil import utc_now
from tests.connections import open_history

pytestmark = pytest.mark.usefixtures("recording_env")

RUNS = "4"  # sessions per experiment: enough for these deterministic causes

POLLUTER = {
    "state.py": 'value = "clean"\n',
    "test_a.py": (
        "import state\n\n"
        "def test_sets_global():\n    state.value = 'dirty'\n\n"
        "def test_other_a():\n    pass\n"
    ),
    "test_b.py": (
        "import state\n\n"
        "def test_reads_global():\n    assert state.value == 'clean'\n\n"
        "def test_other_b():\n    pass\n"
    ),
}

# Fails in every third session, whatever else happens: the counter lives outside the project.
COUNTER = """
import os
from pathlib import Path

def next_count():
    path = Path(os.environ["FLAKY_COUNTER"])
    count = int(path.read_text()) if path.exists() else 0
    path.write_text(str(count + 1))
    return count
"""
RANDOM = {
    "counter.py": COUNTER,
    "test_coin.py": (
        "from counter import next_count\n\n"
        "def test_coin():\n    assert next_count() % 3 != 1\n\n"
        "def test_steady():\n    pass\n"
    ),
}

WORKERS = {
    "test_pool.py": (
        "import os\nimport pytest\n\n"
        "@pytest.fixture\ndef pool():\n"
        "    if int(os.environ.get('PYTEST_XDIST_WORKER_COUNT', '1')) >= 2:\n"
        "        raise RuntimeError('pool exhausted')\n"
        "    return object()\n\n"
        "def test_uses_pool(pool):\n    assert pool\n\n"
        "def test_plain():\n    pass\n"
    ),
}

# Every third session the export is too slow for its timeout (pytest-timeout fails it).
SLOW = {
    "counter.py": COUNTER,
    "test_export.py": (
        "import time\nimport pytest\nfrom counter import next_count\n\n"
        "@pytest.mark.timeout(0.5)\ndef test_big_export():\n"
        "    time.sleep(0.7 if next_count() % 3 == 1 else 0.02)\n\n"
        "def test_small():\n    pass\n"
    ),
}


def _project(pytester: pytest.Pytester, files: dict[str, str]) -> None:
    pytester.makeini("[pytest]\n")  # the project is its own rootdir: node ids as in CI
    for name, text in files.items():
        (pytester.path / name).write_text(text)


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _record(
    pytester: pytest.Pytester, db: Path, sessions: list[list[str]], *, fresh: bool = False
) -> None:
    for args in sessions:
        # Serial sessions in process unless `fresh` (pytester restores sys.modules and sys.path
        # after each): a fresh process per session, as in CI, pays for what pytest imports on
        # a session's first failure.
        run = pytester.runpytest_subprocess if "-n" in args or fresh else pytester.runpytest
        run(
            # One argument: pytest takes a separate option value that names an existing file
            # for a path when it looks for the rootdir.
            *PLUGIN_ARGS,
            "-p",
            "no:cacheprovider",
            f"--flaketui-db={db}",
            *args,
        )


def _diagnose(pytester: pytest.Pytester, db: Path, test_id: str) -> dict[str, object]:
    before = _files(pytester.path)
    result = CliRunner().invoke(
        cli,
        ["diagnose", str(db), test_id, "--repo", str(pytester.path), "--runs", RUNS,
         "--format", "json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert _files(pytester.path) == before, "diagnose left files in the repository"
    return json.loads(result.output)  # type: ignore[no-any-return]


def _top_suspect(db: Path, test_id: str) -> tuple[str, str] | None:
    analysis = analyse(open_history(db, readonly=True), test_id, now=utc_now(), config=Config())
    return (
        None
        if not analysis.suspects
        else (analysis.suspects[0].dimension, analysis.suspects[0].value)
    )


def test_a_polluting_global_is_order_dependent_and_its_polluter_found(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _project(pytester, POLLUTER)
    db = tmp_path_factory.mktemp("h") / "history.db"
    _record(
        pytester,
        db,
        [
            [
                "-p",
                "random_order.plugin",
                "--random-order-bucket=global",
                f"--random-order-seed={n}",
            ]
            for n in range(14)
        ],
    )
    assert _top_suspect(db, "test_b.py::test_reads_global") == (
        "predecessor",
        "test_a.py::test_sets_global",
    )
    found = _diagnose(pytester, db, "test_b.py::test_reads_global")
    assert found["label"] == "order-dependent"
    assert found["polluter"] == "test_a.py::test_sets_global"
    assert found["command"][:3] == [
        "pytest",
        "test_a.py::test_sets_global",
        "test_b.py::test_reads_global",
    ]
    # The latest bad run's seed is replayed, and replaying it makes the test fail again.
    replay = found["replay"]
    assert isinstance(replay, list)
    assert replay[:3] == ["pytest", "-p", "random_order"]
    assert "--random-order-bucket=global" in replay
    again = pytester.runpytest(*replay[1:], "-p", "no:cacheprovider")
    again.assert_outcomes(passed=3, failed=1)
    assert "FAILED test_b.py::test_reads_global" in again.stdout.str()
    # The experiments are in the history under their own source, and scoring ignores them.
    conn = open_history(db, readonly=True).conn
    stored = conn.execute("SELECT count(*) FROM runs WHERE source = 'diagnose'").fetchone()[0]
    assert stored == found["stored_runs"] > 0


def test_a_random_failure_is_non_deterministic_with_its_rate(
    pytester: pytest.Pytester,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _project(pytester, RANDOM)
    monkeypatch.setenv("FLAKY_COUNTER", str(tmp_path_factory.mktemp("c") / "count"))
    db = tmp_path_factory.mktemp("h") / "history.db"
    # Enough sessions, each in its own process, for a false suspect to reach significance: a
    # failing attempt takes longer than a passing one (pytest imports what it needs to report
    # the failure, then formats it), which is no cause.
    _record(pytester, db, [[] for _ in range(24)], fresh=True)
    assert _top_suspect(db, "test_coin.py::test_coin") is None
    found = _diagnose(pytester, db, "test_coin.py::test_coin")
    assert found["label"] == "non-deterministic"
    assert 0 < found["rate"] < 1
    assert found["rate_low"] <= found["rate"] <= found["rate_high"]


def test_a_worker_count_dependent_fixture_is_concurrency_dependent(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _project(pytester, WORKERS)
    db = tmp_path_factory.mktemp("h") / "history.db"
    _record(pytester, db, [["-n", "2"] if n % 2 else [] for n in range(10)])
    assert _top_suspect(db, "test_pool.py::test_uses_pool") == ("worker_count", "2")
    found = _diagnose(pytester, db, "test_pool.py::test_uses_pool")
    assert found["label"] == "concurrency-dependent"
    assert "-n" in found["command"]


def test_a_slow_test_near_its_timeout_is_blamed_on_its_duration(
    pytester: pytest.Pytester,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _project(pytester, SLOW)
    monkeypatch.setenv("FLAKY_COUNTER", str(tmp_path_factory.mktemp("c") / "count"))
    monkeypatch.setenv("PYTEST_PLUGINS", "pytest_timeout")
    db = tmp_path_factory.mktemp("h") / "history.db"
    _record(pytester, db, [[] for _ in range(12)])
    assert _top_suspect(db, "test_export.py::test_big_export") == ("duration", "near timeout")
    found = _diagnose(pytester, db, "test_export.py::test_big_export")
    assert found["label"] == "non-deterministic"
    assert "of a 0.5 s timeout" in found["summary"]
