"""The recording plugin writes one row per attempt, from the xdist controller only, in batches."""

from __future__ import annotations

import importlib
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from recording_helpers import PLUGIN_ARGS, attempts, outcomes, query, runs

from tests.history_damage import damage

pytestmark = pytest.mark.usefixtures("recording_env")

OUTCOMES_SUITE = """
import pytest

@pytest.fixture
def broken_setup():
    raise RuntimeError("setup exploded")

@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("teardown exploded")

def test_pass():
    pass

def test_fail():
    assert 1 == 2

def test_setup_error(broken_setup):
    pass

def test_teardown_error(broken_teardown):
    pass

def test_skip_call():
    pytest.skip("not today")

@pytest.mark.skip(reason="marked")
def test_skip_marker():
    pass

@pytest.mark.xfail(reason="known")
def test_xfail():
    assert False

@pytest.mark.xfail(reason="known")
def test_xpass():
    pass

@pytest.mark.xfail(reason="known", strict=True)
def test_xpass_strict():
    pass

class TestGroup:
    @pytest.mark.parametrize("n", [1, 2])
    def test_param(self, n):
        assert n
"""

# Fails on its first two attempts, passes on the third (the counter survives across processes).
RERUN_SUITE = """
from pathlib import Path
import pytest

COUNTER = Path(__file__).with_name("counter.txt")

@pytest.fixture
def broken():
    raise RuntimeError("no database")

def test_flaky():
    runs = int(COUNTER.read_text()) if COUNTER.exists() else 0
    COUNTER.write_text(str(runs + 1))
    assert runs >= 2, "not yet"

def test_always_fails():
    assert False, "always"

def test_setup_always_errors(broken):
    pass

def test_steady():
    pass
"""

# Each test notes the xdist worker it ran on, to compare with what the controller recorded.
WORKER_SUITE = """
import os
from pathlib import Path
import pytest

WHERE = Path(__file__).with_name("where")

@pytest.mark.parametrize("n", range(8))
def test_spread(n):
    WHERE.mkdir(exist_ok=True)
    (WHERE / str(n)).write_text(os.environ["PYTEST_XDIST_WORKER"])
"""

# test_d waits until a, b and c are in the history's journal, then SIGKILLs the process writing it
# (the xdist controller, or the session itself). KILLED_CONFTEST has each finished test
# written at once, in a batch of its own.
KILLED_CONFTEST = """
from flaketui.pytest_plugin import recording

recording.FLUSH_EVERY_ATTEMPTS = 1
"""
KILLED_SUITE = """
import os
import signal
import sqlite3
import time
from pathlib import Path

DB = Path(__file__).with_name("history.db")

def test_a():
    pass

def test_b():
    pass

def test_c():
    pass

def _recorded():
    try:
        conn = sqlite3.connect(DB)
        try:
            rows = conn.execute(  # written, not stored yet
                "SELECT json_extract(e.value, '$[0]') FROM attempt_journal, json_each(attempts) e"
            )
            return {test_id.rsplit("::", 1)[1] for (test_id,) in rows}
        finally:
            conn.close()
    except sqlite3.Error:
        return set()

def test_d():
    deadline = time.monotonic() + 30
    while not {"test_a", "test_b", "test_c"} <= _recorded() and time.monotonic() < deadline:
        time.sleep(0.05)
    writer = os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()
    os.kill(writer, signal.SIGKILL)
    os._exit(0)

def test_e():
    pass
"""


def _db(pytester: pytest.Pytester) -> Path:
    return pytester.path / "history.db"


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """An in-process session recording into history.db."""
    return pytester.runpytest(*PLUGIN_ARGS, "--flaketui-db", str(_db(pytester)), *args)


def _run_subprocess(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A subprocess session recording into history.db (xdist and killed sessions need one)."""
    return pytester.runpytest_subprocess(
        *PLUGIN_ARGS, "--flaketui-db", str(_db(pytester)), *args, timeout=120
    )


def test_serial_session_records_each_outcome(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_outcomes=OUTCOMES_SUITE)
    result = _run(pytester)
    result.assert_outcomes(passed=4, failed=2, errors=2, skipped=2, xfailed=1, xpassed=1)
    db = _db(pytester)
    assert outcomes(db) == {
        "test_outcomes.py::test_pass": ["pass"],
        "test_outcomes.py::test_fail": ["fail"],
        "test_outcomes.py::test_setup_error": ["error"],
        "test_outcomes.py::test_teardown_error": ["error"],
        "test_outcomes.py::test_skip_call": ["skipped"],
        "test_outcomes.py::test_skip_marker": ["skipped"],
        "test_outcomes.py::test_xfail": ["skipped"],
        "test_outcomes.py::test_xpass": ["skipped"],
        "test_outcomes.py::test_xpass_strict": ["fail"],
        "test_outcomes.py::TestGroup::test_param[1]": ["pass"],
        "test_outcomes.py::TestGroup::test_param[2]": ["pass"],
    }
    assert {row[2] for rows in attempts(db).values() for row in rows} == {None}
    [(run_id, suite, worker_count, source, finished)] = runs(db)
    assert (suite, worker_count, source, finished) == ("default", 1, "pytest", 1)
    assert len(str(run_id)) == 32  # a fresh uuid4: each local session is its own run
    files = query(db, "SELECT DISTINCT test_file FROM tests")
    assert files == [("test_outcomes.py",)]
    parents = dict(query(db, "SELECT test_id, parent FROM tests"))
    assert parents["test_outcomes.py::TestGroup::test_param[2]"] == (
        "test_outcomes.py::TestGroup::test_param"
    )


def test_failure_messages_lead_with_exception_type(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_outcomes=OUTCOMES_SUITE)
    _run(pytester)
    messages = dict(
        query(
            _db(pytester),
            "SELECT t.test_id, r.message FROM results r JOIN tests t ON t.id = r.test",
        )
    )
    fail = str(messages["test_outcomes.py::test_fail"])
    assert fail.splitlines()[0] == "AssertionError: assert 1 == 2"
    assert "def test_fail():" in fail  # pytest's long report follows the crash line
    setup = str(messages["test_outcomes.py::test_setup_error"])
    assert setup.startswith("RuntimeError: setup exploded")
    teardown = str(messages["test_outcomes.py::test_teardown_error"])
    assert teardown.startswith("RuntimeError: teardown exploded")
    assert messages["test_outcomes.py::test_pass"] is None
    assert messages["test_outcomes.py::test_skip_call"] is None
    signed = query(
        _db(pytester),
        "SELECT count(*) FROM results WHERE outcome IN ('fail', 'error') AND signature IS NULL",
    )
    assert signed == [(0,)]
    durations = query(_db(pytester), "SELECT count(*) FROM results WHERE duration_ms IS NULL")
    assert durations == [(0,)]


def test_each_session_is_a_new_run_and_suite_is_recorded(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one="def test_ok():\n    pass\n")
    _run(pytester).assert_outcomes(passed=1)
    _run(pytester, "--flaketui-suite", "nightly").assert_outcomes(passed=1)
    recorded = runs(_db(pytester))
    assert [row[1] for row in recorded] == ["default", "nightly"]
    assert recorded[0][0] != recorded[1][0]
    assert [row[4] for row in recorded] == [1, 1]
    per_run = query(
        _db(pytester),
        "SELECT ru.run_id, r.attempt, r.outcome FROM results r JOIN runs ru ON ru.id = r.run"
        " ORDER BY ru.id",
    )
    assert per_run == [(recorded[0][0], 1, "pass"), (recorded[1][0], 1, "pass")]


def test_a_run_recorded_during_an_outage_is_tagged_and_says_so(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_one="def test_down():\n    assert False\n")
    said = "flaketui: recorded this run as part of incident {}, which scoring leaves out"
    monkeypatch.setenv("FLAKETUI_INCIDENT", "ci-outage ")
    tagged = _run(pytester, "-q")  # said where -q hides pytest's header
    tagged.assert_outcomes(failed=1)
    tagged.stdout.fnmatch_lines([said.format("ci-outage")])
    flagged = _run(pytester, "--flaketui-incident", "db-failover")  # the option wins
    flagged.stdout.fnmatch_lines([said.format("db-failover")])
    monkeypatch.setenv("FLAKETUI_INCIDENT", "")  # set but empty, as CI variables often are
    untagged = _run(pytester)
    untagged.assert_outcomes(failed=1)
    untagged.stdout.no_fnmatch_line(said.format("*"))
    assert query(_db(pytester), "SELECT incident FROM runs ORDER BY id") == [
        ("ci-outage",),
        ("db-failover",),
        (None,),
    ]
    assert query(_db(pytester), "SELECT tag FROM incidents ORDER BY id") == [
        ("ci-outage",),
        ("db-failover",),
    ]


def test_ini_options_record_relative_to_the_ini_file(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\nflaketui_db = data/ci.db\nflaketui_suite = smoke\n")
    (pytester.path / "data").mkdir()
    pytester.makepyfile(test_one="def test_ok():\n    pass\n")
    monkeypatch.chdir(pytester.mkdir("elsewhere"))
    pytester.runpytest(*PLUGIN_ARGS, str(pytester.path)).assert_outcomes(passed=1)
    db = pytester.path / "data" / "ci.db"
    assert [row[1] for row in runs(db)] == ["smoke"]
    assert outcomes(db) == {"test_one.py::test_ok": ["pass"]}


def test_the_documented_ini_example_records_into_the_history_it_names(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/pytest-plugin.md's ini block, copied as it stands: a comment after a value would
    be part of the value, and the history would land in a file named after the comment."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "pytest-plugin.md").read_text()
    block = re.search(r"```ini\n(.*?)```", page, re.DOTALL)
    assert block is not None
    pytester.makeini(block.group(1))
    pytester.makepyfile(test_one="def test_ok():\n    pass\n")
    monkeypatch.chdir(pytester.mkdir("elsewhere"))
    pytester.runpytest(*PLUGIN_ARGS, str(pytester.path)).assert_outcomes(passed=1)
    assert sorted(path.name for path in pytester.path.glob("*.db*")) == ["history.db"]
    assert [row[1] for row in runs(pytester.path / "history.db")] == ["unit"]


def test_a_history_outside_given_as_a_separate_word_is_refused(
    pytester: pytest.Pytester,
) -> None:
    # pytest would take the word for a test path and move its rootdir to a common parent,
    # renaming every test and hiding the project's config: refused before anything is written.
    pytester.makepyfile(test_one="def test_ok():\n    pass\n")
    outside = pytester.path.parent / f"{pytester.path.name}-ci" / "h.db"
    outside.parent.mkdir()
    refused = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--flaketui-db", str(outside))
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([f"*flaketui: write --flaketui-db={outside} (with '=')*"])
    assert "Traceback" not in refused.stderr.str()
    assert not outside.exists()
    # With '=' pytest reads one word: both recordings (the second into an existing file, which
    # is when pytest would misread it) name the test from the project's own rootdir.
    for _ in range(2):
        pytester.runpytest_subprocess(*PLUGIN_ARGS, f"--flaketui-db={outside}").assert_outcomes(
            passed=1
        )
    assert outcomes(outside) == {"test_one.py::test_ok": ["pass", "pass"]}
    again = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--flaketui-db", str(outside))
    assert again.ret == pytest.ExitCode.USAGE_ERROR
    assert len(runs(outside)) == 2


@pytest.mark.parametrize(
    ("words", "addopts", "misread"),
    [
        (["--flaketui-db", "history.db"], "", None),  # in the directory pytest starts in
        (["--flaketui-db", "./history.db", "-q"], "", None),
        (["--flaketui-db", "../ci/history.db"], "", "../ci/history.db"),
        (["--flaketui-db", "sub/history.db"], "", "sub/history.db"),
        (["--flaketui-db=../ci/history.db"], "", None),  # one word
        (["--flaketui-db", "postgresql://ci@db:5432/flaky"], "", None),
        (["-q"], "--flaketui-db /tmp/elsewhere/h.db", "/tmp/elsewhere/h.db"),
        (["--flaketui-suite", "../x"], "", None),
    ],
)
def test_which_history_words_pytest_would_misread(
    words: list[str],
    addopts: str,
    misread: str | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flaketui.pytest_plugin.recording import misread_history_word

    monkeypatch.setenv("PYTEST_ADDOPTS", addopts)
    assert misread_history_word(words, tmp_path) == misread


def test_inactive_without_the_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one="def test_ok():\n    pass\n")
    before = set(pytester.path.iterdir())
    pytester.runpytest(*PLUGIN_ARGS, "--flaketui-suite", "x").assert_outcomes(passed=1)
    created = {p.name for p in set(pytester.path.iterdir()) - before}
    assert not any(name.endswith((".db", ".db-wal", ".db-shm")) for name in created)
    config = pytester.parseconfigure(*PLUGIN_ARGS)
    assert config.pluginmanager.get_plugin("flaketui-recorder") is None


def test_option_registers_the_recorder(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure(*PLUGIN_ARGS, "--flaketui-db", str(_db(pytester)))
    assert config.pluginmanager.get_plugin("flaketui-recorder") is not None


def test_git_runs_while_the_recorder_opens_the_history(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The modules the recorder imports, as sys.modules holds them: an earlier pytester run may
    # have imported them first and dropped them since, leaving its copy on the package.
    store = importlib.import_module("flaketui.core.history.store")
    runmeta = importlib.import_module("flaketui.core.ingest.runmeta")

    events: list[str] = []

    class Probe(runmeta.GitProbe):
        def __init__(self, cwd: Path) -> None:
            events.append("git started")
            super().__init__(cwd)

        def result(self) -> tuple[str | None, str | None, list[str]]:
            events.append("git read")
            return super().result()

    def opening(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        events.append("history opened")
        return open_connection(*args, **kwargs)

    open_connection = store.open_connection
    monkeypatch.setattr(runmeta, "GitProbe", Probe)
    monkeypatch.setattr(store, "open_connection", opening)
    config = pytester.parseconfigure(*PLUGIN_ARGS, "--flaketui-db", str(_db(pytester)))
    assert config.pluginmanager.get_plugin("flaketui-recorder") is not None
    assert events == ["git started", "history opened", "git read"]


def test_an_xdist_worker_only_annotates_and_never_opens_the_history(
    pytester: pytest.Pytester,
) -> None:
    from flaketui.pytest_plugin.recording import register_recorder

    config = pytester.parseconfig(*PLUGIN_ARGS, "--flaketui-db", str(_db(pytester)))
    config.workerinput = {"workerid": "gw0"}  # type: ignore[attr-defined]
    register_recorder(config)
    assert config.pluginmanager.get_plugin("flaketui-recorder") is None
    assert config.pluginmanager.get_plugin("flaketui-exception-type") is not None
    assert not _db(pytester).exists()


def test_reruns_record_every_attempt_in_order(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_reruns=RERUN_SUITE)
    result = _run(pytester, "--reruns", "2")
    assert result.parseoutcomes() == {"passed": 2, "failed": 1, "errors": 1, "rerun": 6}
    db = _db(pytester)
    assert outcomes(db) == {
        "test_reruns.py::test_flaky": ["fail", "fail", "pass"],
        "test_reruns.py::test_always_fails": ["fail", "fail", "fail"],
        "test_reruns.py::test_setup_always_errors": ["error", "error", "error"],
        "test_reruns.py::test_steady": ["pass"],
    }
    assert [a for a, _, _ in attempts(db)["test_reruns.py::test_flaky"]] == [1, 2, 3]
    per_run = dict(
        query(db, "SELECT t.test_id, tr.outcome FROM test_runs tr JOIN tests t ON t.id = tr.test")
    )
    assert per_run["test_reruns.py::test_flaky"] == "flaky"
    assert per_run["test_reruns.py::test_always_fails"] == "fail"
    assert per_run["test_reruns.py::test_steady"] == "pass"
    first_message = query(
        db,
        "SELECT r.message FROM results r JOIN tests t ON t.id = r.test"
        " WHERE t.test_id = 'test_reruns.py::test_flaky' AND r.attempt = 1",
    )
    assert str(first_message[0][0]).startswith("AssertionError: not yet")


def test_xdist_with_reruns_records_worker_ids_and_count(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_spread=WORKER_SUITE, test_reruns=RERUN_SUITE)
    result = _run_subprocess(pytester, "-n", "2", "--reruns", "2")
    assert result.parseoutcomes() == {"passed": 10, "failed": 1, "errors": 1, "rerun": 6}
    db = _db(pytester)
    recorded = attempts(db)
    ran_on = {
        f"test_spread.py::test_spread[{p.name}]": p.read_text()
        for p in (pytester.path / "where").iterdir()
    }
    assert len(ran_on) == 8
    assert {tid: recorded[tid] for tid in ran_on} == {
        tid: [(1, "pass", worker)] for tid, worker in ran_on.items()
    }
    assert outcomes(db)["test_reruns.py::test_flaky"] == ["fail", "fail", "pass"]
    assert outcomes(db)["test_reruns.py::test_setup_always_errors"] == ["error"] * 3
    # xdist's first scheduling round gives each worker tests, so both ids appear.
    workers = {row[2] for rows in recorded.values() for row in rows}
    assert workers == {"gw0", "gw1"}
    flaky = query(
        db,
        "SELECT tr.outcome FROM test_runs tr JOIN tests t ON t.id = tr.test"
        " WHERE t.test_id = 'test_reruns.py::test_flaky'",
    )
    assert flaky == [("flaky",)]
    assert [(row[2], row[4]) for row in runs(db)] == [(2, 1)]


def test_xdist_failure_messages_lead_with_the_type_known_on_the_worker(
    pytester: pytest.Pytester,
) -> None:
    # pytest drops "AssertionError: " from a bare assert's crash line; only the worker that ran
    # the test knows the type, so it must travel on the report to the controller.
    pytester.makepyfile(test_bare="def test_bare():\n    assert 1 == 2\n")
    _run_subprocess(pytester, "-n", "2").assert_outcomes(failed=1)
    [(message,)] = query(_db(pytester), "SELECT message FROM results")
    assert str(message).splitlines()[0] == "AssertionError: assert 1 == 2"


@pytest.mark.parametrize("xdist_args", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_killed_session_stays_unfinished(
    pytester: pytest.Pytester, xdist_args: tuple[str, ...]
) -> None:
    pytester.makeconftest(KILLED_CONFTEST)
    pytester.makepyfile(test_killed=KILLED_SUITE)
    result = _run_subprocess(pytester, *xdist_args)
    assert result.ret == -9
    db = _db(pytester)
    [(_, _, _, _, finished)] = runs(db)
    assert finished == 0
    recorded = outcomes(db)
    for name in ("test_a", "test_b", "test_c"):
        assert recorded[f"test_killed.py::{name}"] == ["pass"]
    assert "test_killed.py::test_d" not in recorded


def test_keyboard_interrupt_flushes_but_leaves_the_run_unfinished(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_interrupted="""
        def test_a():
            pass

        def test_b():
            assert False

        def test_c():
            raise KeyboardInterrupt

        def test_d():
            pass
        """
    )
    reprec = pytester.inline_run(
        *PLUGIN_ARGS, "--flaketui-db", str(_db(pytester)), no_reraise_ctrlc=True
    )
    assert reprec.ret == pytest.ExitCode.INTERRUPTED
    db = _db(pytester)
    assert outcomes(db) == {
        "test_interrupted.py::test_a": ["pass"],
        "test_interrupted.py::test_b": ["fail"],
    }
    assert [row[4] for row in runs(db)] == [0]


def test_a_normal_session_is_finished_even_with_failures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one="def test_bad():\n    assert False\n")
    result = _run(pytester, "-x")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert [row[4] for row in runs(_db(pytester))] == [1]


def _not_sqlite(path: Path) -> None:
    path.write_text("name,value\nnot,a database\n")


def _newer_schema(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 999")
    conn.close()


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (_not_sqlite, "not a SQLite database"),
        (_newer_schema, "is newer than this flaketui supports"),
    ],
    ids=["not-sqlite", "newer-schema"],
)
def test_unusable_history_is_a_one_line_usage_error(
    pytester: pytest.Pytester, make: object, expected: str
) -> None:
    pytester.makepyfile(test_one="def test_ok():\n    pass\n")
    db = _db(pytester)
    assert callable(make)
    make(db)
    before = db.read_bytes()
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1
    assert errors[0].startswith(f"ERROR: flaketui: {db}: ")
    assert expected in errors[0]
    assert db.read_bytes() == before


def test_a_damaged_history_fails_no_test_and_says_what_was_not_recorded(
    pytester: pytest.Pytester,
) -> None:
    """Damage past the header is met at the first write, after start-up: the session's own
    result stands, and its end says the attempts were not recorded, and why."""
    pytester.makepyfile(test_one="def test_ok():\n    pass\n\ndef test_bad():\n    assert False\n")
    _run(pytester)
    damage(_db(pytester))
    line = (
        "flaketui: cannot write to the history (database disk image is malformed);"
        " 2 attempts not recorded"
    )
    for verbosity in ("-q", "-v"):  # a line of its own, after the progress, whatever the verbosity
        result = _run(pytester, verbosity)
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        assert [text for text in result.outlines if "flaketui:" in text] == [line]
        assert result.outlines.index(line) > result.outlines.index(
            next(text for text in result.outlines if "[100%]" in text)
        )


def test_a_history_the_plugin_creates_records_its_signature_scheme(
    pytester: pytest.Pytester,
) -> None:
    """Its messages are signed by this flaketui: reading commands must not call them stale."""
    from flaketui.core.ingest.resign import SCHEME_KEY, scheme_of

    pytester.makepyfile(test_one="def test_bad():\n    assert False\n")
    _run(pytester)
    assert query(_db(pytester), "SELECT value FROM meta WHERE key = ?", (SCHEME_KEY,)) == [
        (scheme_of(()),)
    ]


def test_a_session_says_when_it_upgrades_an_older_history(pytester: pytest.Pytester) -> None:
    """An older history's upgrade (a minute on a big one) comes before pytest prints anything:
    the session says on stderr that it starts, the first time only."""
    pytester.makepyfile(test_one="def test_ok():\n    pass\n")
    _run_subprocess(pytester).assert_outcomes(passed=1)
    db = _db(pytester)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DROP INDEX test_runs_failed")  # as version 9 laid it out
    conn.execute("ALTER TABLE runs DROP COLUMN ran_at_least")
    for column in ("first_duration_ms", "first_timeout_ms", "first_position"):
        conn.execute(f"ALTER TABLE test_runs DROP COLUMN {column}")  # as version 8 laid it out
    conn.execute("PRAGMA user_version = 8")
    conn.close()
    upgraded = _run_subprocess(pytester)
    upgraded.assert_outcomes(passed=1)
    upgraded.stderr.fnmatch_lines(
        [f"flaketui: {db}: upgrading the history for this version of flaketui (once;*"]
    )
    again = _run_subprocess(pytester)
    again.assert_outcomes(passed=1)
    assert "upgrading" not in again.stderr.str()
    assert outcomes(db) == {"test_one.py::test_ok": ["pass", "pass", "pass"]}
