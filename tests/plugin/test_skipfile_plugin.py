"""The plugin honours the skip file: deselects, forgives, reports; in one process and with -n 2."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Collection
from datetime import timedelta
from pathlib import Path

import pytest
from recording_helpers import outcomes

from flaketui.core.quarantine.skipfile import SkipEntry, update_skip_file
from flaketui.core.timeutil import utc_now

# Only the plugins the sessions need: the installed entry points cost seconds per subprocess.
PLUGIN_ARGS = ("-p", "xdist.plugin", "-p", "flaketui.pytest_plugin")

SUITE = """
import pytest

def test_pass():
    pass

def test_quarantined_skip():
    raise AssertionError("a skip entry must never run")

def test_run_fails():
    assert False, "quarantined but still run"

def test_run_passes():
    pass

@pytest.mark.parametrize("x", [1, 2])
def test_param(x):
    pass

def test_param_slow():
    pass
"""
SKIP = "test_suite.py::test_quarantined_skip"
RUN_FAILS = "test_suite.py::test_run_fails"
RUN_PASSES = "test_suite.py::test_run_passes"
ALL_IDS = {
    "test_suite.py::test_pass",
    SKIP,
    RUN_FAILS,
    RUN_PASSES,
    "test_suite.py::test_param[1]",
    "test_suite.py::test_param[2]",
    "test_suite.py::test_param_slow",
}


@pytest.fixture(autouse=True)
def quiet_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No plugin autoloading, no inherited options, no skip file from the environment."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    for name in ("PYTEST_ADDOPTS", "FLAKETUI_SKIP_FILE"):
        monkeypatch.delenv(name, raising=False)
    for name in list(os.environ):
        if name.startswith("PYTEST_XDIST"):
            monkeypatch.delenv(name, raising=False)


class Runner:
    """Runs pytest on the suite in-process, or in a subprocess with two xdist workers."""

    def __init__(self, pytester: pytest.Pytester, xdist: bool) -> None:
        self.pytester = pytester
        self.xdist = xdist

    def __call__(self, *args: str) -> pytest.RunResult:
        if self.xdist:
            return self.pytester.runpytest_subprocess(*PLUGIN_ARGS, "-n", "2", *args)
        return self.pytester.runpytest(*PLUGIN_ARGS, *args)


@pytest.fixture(params=["single", "xdist"])
def run(request: pytest.FixtureRequest, pytester: pytest.Pytester) -> Runner:
    """The acceptance checks run twice: in one process and with -n 2."""
    pytester.makepyfile(test_suite=SUITE)
    return Runner(pytester, request.param == "xdist")


@pytest.fixture
def single(pytester: pytest.Pytester) -> Runner:
    """In-process only, for behaviour xdist does not change."""
    pytester.makepyfile(test_suite=SUITE)
    return Runner(pytester, xdist=False)


def write_skip_file(path: Path, entries: dict[str, str], *, expired: Collection[str] = ()) -> Path:
    """A real skip file with test id -> mode entries."""
    now = utc_now()

    def mutate(current: dict[str, SkipEntry]) -> None:
        for test_id, mode in entries.items():
            current[test_id] = SkipEntry(
                test_id=test_id,
                mode=mode,
                reason=f"flaky ({mode})",
                quarantined_at=now - timedelta(days=40),
                expires=now + (timedelta(days=-1) if test_id in expired else timedelta(days=20)),
            )

    update_skip_file(path, mutate)
    return path


def ran_ids(xml_path: Path) -> dict[str, str]:
    """Node id -> outcome of every test case in a JUnit report (pytest's xunit2 naming)."""
    found: dict[str, str] = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        test_id = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        kinds = {child.tag for child in case}
        found[test_id] = (
            "failed"
            if kinds & {"failure", "error"}
            else "skipped"
            if "skipped" in kinds
            else "passed"
        )
    return found


def test_skip_run_expired_and_unmatched_entries(run: Runner, pytester: pytest.Pytester) -> None:
    write_skip_file(
        pytester.path / ".quarantine.json",
        {SKIP: "skip", RUN_FAILS: "run", RUN_PASSES: "run", "test_gone.py::test_gone": "skip"},
        expired={SKIP},
    )
    result = run("--junitxml", "out.xml")
    # The skip entry is not run; the failing run entry fails in every report but not the session.
    result.assert_outcomes(passed=5, failed=1, deselected=1)
    assert result.ret == pytest.ExitCode.OK
    junit = ran_ids(pytester.path / "out.xml")
    assert SKIP not in junit
    assert junit[RUN_FAILS] == "failed"
    assert junit[RUN_PASSES] == "passed"
    assert set(junit) == ALL_IDS - {SKIP}
    assert "a skip entry must never run" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*= flaketui quarantine =*",
            "deselected 1 quarantined test (mode skip):",
            f"  {SKIP}  (flaky (skip); until *",
            "1 quarantined test failed; their failures are reported but do not fail the session:",
            f"  {RUN_FAILS}",
            "EXPIRED: 1 quarantine entry past the expiry date (still honoured; release, fix *",
            f"  {SKIP}  (*",
            "1 skip-file entry matches no collected test (renamed or deleted? release them):",
            "  test_gone.py::test_gone",
        ]
    )
    result.stdout.fnmatch_lines(
        [f"*FlaketuiSkipFileWarning: flaketui: quarantine of {SKIP} expired*"]
    )


def test_entries_from_ci_are_listed_inert(single: Runner, pytester: pytest.Pytester) -> None:
    # Entries are test ids from CI: an escape sequence or a right-to-left override in one is
    # listed as escapes, never written to the terminal as it is.
    gone = "test_gone.py::test_x\x1b]0;PWNED\x07y\u202eevil"
    write_skip_file(pytester.path / ".quarantine.json", {gone: "skip"}, expired={gone})
    result = single()
    text = result.stdout.str()
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    result.stdout.fnmatch_lines(
        [
            "EXPIRED: 1 quarantine entry past the expiry date*",
            "  test_gone.py::test_x\\x1b]0;PWNED\\x07y\\u202eevil  (flaky (skip)*",
            "1 skip-file entry matches no collected test*",
            "  test_gone.py::test_x\\x1b]0;PWNED\\x07y\\u202eevil",
        ]
    )


RUN_MODE_SUITE = """
from pathlib import Path

def test_flaky_today():
    Path(__file__).with_name("flaky_today.ran").write_text("ran", encoding="utf-8")
    assert False, "failed for real while quarantined in run mode"

def test_fine():
    pass
"""


def test_a_run_entry_runs_keeps_its_failure_in_reports_and_only_the_exit_status_forgives(
    run: Runner, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(test_run_mode=RUN_MODE_SUITE)
    flaky = "test_run_mode.py::test_flaky_today"
    write_skip_file(pytester.path / ".quarantine.json", {flaky: "run"})
    result = run("test_run_mode.py", "--junitxml", "out.xml", "-rf")
    # It ran: its side effect is there, and its real outcome is in every report.
    assert (pytester.path / "flaky_today.ran").read_text(encoding="utf-8") == "ran"
    result.assert_outcomes(passed=1, failed=1)
    assert ran_ids(pytester.path / "out.xml") == {
        flaky: "failed",
        "test_run_mode.py::test_fine": "passed",
    }
    result.stdout.fnmatch_lines([f"FAILED {flaky} - AssertionError: failed for real*"])
    result.stdout.fnmatch_lines(
        [
            "1 quarantined test failed; their failures are reported but do not fail the sess*",
            f"  {flaky}",
        ]
    )
    assert "deselected" not in result.stdout.str()
    # Only the exit status forgives it.
    assert result.ret == pytest.ExitCode.OK


def test_under_xdist_the_summary_line_counts_the_deselected_entries(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    write_skip_file(pytester.path / ".quarantine.json", {SKIP: "skip", RUN_FAILS: "run"})
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "-n", "2")
    result.stdout.fnmatch_lines(
        [
            f"skip file: {pytester.path / '.quarantine.json'} (2 entries)",
            "deselected 1 quarantined test (mode skip):",
            "*= 1 failed, 5 passed, 1 deselected in *",
        ]
    )
    assert result.ret == pytest.ExitCode.OK


def test_under_xdist_the_counted_entries_are_read_by_other_plugins_as_items(
    pytester: pytest.Pytester,
) -> None:
    """Hypothesis's plugin reads every entry of the reporter's statistics at the end of a
    session; a deselected test counted there as a bare string crashed it."""
    pytester.makepyfile(test_suite=SUITE)
    write_skip_file(pytester.path / ".quarantine.json", {SKIP: "skip", RUN_FAILS: "run"})
    result = pytester.runpytest_subprocess(
        *PLUGIN_ARGS, "-p", "_hypothesis_pytestplugin", "-n", "2"
    )
    result.stdout.fnmatch_lines(["*= 1 failed, 5 passed, 1 deselected in *"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.OK


def test_quarantined_only_without_a_skip_file_says_it_found_none(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(*PLUGIN_ARGS, "--flaketui-quarantined-only")
    assert result.ret == pytest.ExitCode.OK
    path = pytester.path / ".quarantine.json"
    result.stdout.fnmatch_lines(
        [
            f"flaketui: no skip file at {path}; no test is quarantined",
            "*flaketui quarantine*",
            f"skip file: {path} (not found)",
            "quarantined tests only: ran 0, deselected 7 other tests",
        ]
    )
    assert "discovered" not in result.stdout.str()


def test_quarantined_only_beside_another_tools_file_says_it_ignores_it(
    pytester: pytest.Pytester,
) -> None:
    # A .quarantine.json some other tool wrote: warned about, then honoured as no entry.
    path = pytester.path / ".quarantine.json"
    path.write_text('{"quarantined": ["test_suite.py::test_a"]}\n')
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(*PLUGIN_ARGS, "--flaketui-quarantined-only")
    assert result.ret == pytest.ExitCode.OK
    ignoring = f'ignoring {path}: not a flaketui skip file (no "format": "flaketui-skip-file")'
    result.stdout.fnmatch_lines(
        [
            f"flaketui: {ignoring}; no test is quarantined",
            "*flaketui quarantine*",
            f"skip file: {path} (ignored: not a flaketui skip file)",
            "quarantined tests only: ran 0, deselected 7 other tests",
        ]
    )
    assert "discovered" not in result.stdout.str()


def test_one_entry_is_counted_in_the_singular(single: Runner, pytester: pytest.Pytester) -> None:
    write_skip_file(pytester.path / ".quarantine.json", {SKIP: "skip"})
    result = single()
    result.stdout.fnmatch_lines(
        [
            f"skip file: {pytester.path / '.quarantine.json'} (1 entry)",
            "deselected 1 quarantined test (mode skip):",
        ]
    )


def test_a_real_failure_still_fails_the_session(run: Runner, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_other="def test_broken():\n    assert False\n")
    write_skip_file(pytester.path / ".quarantine.json", {RUN_FAILS: "run", SKIP: "skip"})
    result = run()
    result.assert_outcomes(passed=5, failed=2, deselected=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_quarantined_only_runs_exactly_the_quarantined_tests(
    run: Runner, pytester: pytest.Pytester
) -> None:
    write_skip_file(
        pytester.path / ".quarantine.json",
        {SKIP: "skip", RUN_FAILS: "run", "test_suite.py::test_param[2]": "run"},
    )
    result = run("--flaketui-quarantined-only", "--junitxml", "out.xml")
    assert ran_ids(pytester.path / "out.xml") == {
        SKIP: "failed",
        RUN_FAILS: "failed",
        "test_suite.py::test_param[2]": "passed",
    }
    result.assert_outcomes(passed=1, failed=2, deselected=4)
    assert result.ret == pytest.ExitCode.OK  # the nightly job gathers evidence, it does not gate
    result.stdout.fnmatch_lines(
        [
            "quarantined tests only: ran 3, deselected 4 other tests",
            "passed this session (release candidates): 1",
            "  test_suite.py::test_param[2]",
            "still failing: 2",
        ]
    )


@pytest.mark.parametrize(
    ("tests", "problem"),
    [
        ("{", "not valid JSON (line 1, column *"),
        ("[" * 100_000, "not valid JSON (nested too deeply)"),
    ],
    ids=["cut", "nested"],
)
def test_broken_marked_skip_file_stops_the_session(
    run: Runner, pytester: pytest.Pytester, tests: str, problem: str
) -> None:
    path = pytester.path / ".quarantine.json"
    text = '{"format": "flaketui-skip-file", "version": 1, "tests": ' + tests
    path.write_text(text, encoding="utf-8")
    result = run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*flaketui skip file: {path}: {problem}"])
    assert "Traceback" not in result.stderr.str()
    assert path.read_text(encoding="utf-8") == text


def test_foreign_discovered_file_is_ignored_with_a_warning(
    run: Runner, pytester: pytest.Pytester
) -> None:
    (pytester.path / ".quarantine.json").write_text(json.dumps({"quarantined": [SKIP]}))
    result = run()
    result.assert_outcomes(passed=5, failed=2)
    result.stdout.fnmatch_lines(
        ["*FlaketuiSkipFileWarning: flaketui: ignoring *.quarantine.json: not a flaketui skip*"]
    )
    assert "flaketui quarantine" not in result.stdout.str()


# --- the rest does not depend on xdist: one process is enough --------------------------------


def test_family_entries_are_full_ids_without_prefix_matching(
    single: Runner, pytester: pytest.Pytester
) -> None:
    write_skip_file(
        pytester.path / ".quarantine.json",
        {"test_suite.py::test_param[1]": "skip", "test_suite.py::test_param": "skip"},
    )
    result = single("--junitxml", "out.xml")
    ran = ran_ids(pytester.path / "out.xml")
    assert set(ran) == ALL_IDS - {"test_suite.py::test_param[1]"}
    result.assert_outcomes(passed=4, failed=2, deselected=1)
    result.stdout.fnmatch_lines(
        ["1 skip-file entry matches no collected test*", "  test_suite.py::test_param"]
    )


def test_entries_not_collected_in_a_partial_session(
    single: Runner, pytester: pytest.Pytester
) -> None:
    write_skip_file(
        pytester.path / ".quarantine.json", {SKIP: "skip", "test_gone.py::test_gone": "skip"}
    )
    partial = single("test_suite.py::test_pass")
    partial.assert_outcomes(passed=1)
    partial.stdout.fnmatch_lines(["2 skip-file entries not collected in this session"])
    assert "no collected test" not in partial.stdout.str()
    # -k drops tests after the skip file is matched against the whole collection.
    by_keyword = single("-k", "test_pass")
    by_keyword.assert_outcomes(passed=1, deselected=6)
    by_keyword.stdout.fnmatch_lines(["1 skip-file entry matches no collected test*"])


def test_broken_entry_in_a_marked_file_names_the_problem(
    single: Runner, pytester: pytest.Pytester
) -> None:
    path = pytester.path / ".quarantine.json"
    path.write_text(
        '{"format": "flaketui-skip-file", "version": 1, "tests": {"t": {"mode": "x"}}}',
        encoding="utf-8",
    )
    result = single()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"{path}: tests['t'].mode: expected 'skip' or 'run', got 'x'" in result.stderr.str()


def test_explicit_unreadable_file_is_a_usage_error(
    single: Runner, pytester: pytest.Pytester
) -> None:
    foreign = pytester.path / "foreign.json"
    foreign.write_text("[]", encoding="utf-8")
    result = single("--flaketui-skip-file", str(foreign))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{foreign}: not a flaketui skip file*"])
    missing = single("--flaketui-skip-file", "missing.json")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*missing.json (--flaketui-skip-file): file not found*"])


NAMED_IN_CONFIG = {
    "ini": ("[pytest]\nflaketui_skip_file = ci/q.json\n", "ini option flaketui_skip_file"),
    "pyproject": ('[tool.flaketui]\nskip_file = "ci/q.json"\n', "[tool.flaketui] skip_file"),
}


def name_missing_skip_file(pytester: pytest.Pytester, named_in: str) -> str:
    """Name ci/q.json, which does not exist, in the ini file or pyproject.toml; its label."""
    text, label = NAMED_IN_CONFIG[named_in]
    if named_in == "ini":
        pytester.makeini(text)
    else:
        pytester.makepyprojecttoml(text)
    return label


@pytest.mark.parametrize("named_in", sorted(NAMED_IN_CONFIG))
def test_a_missing_skip_file_named_in_the_configuration_is_warned_about_once(
    run: Runner, pytester: pytest.Pytester, named_in: str
) -> None:
    label = name_missing_skip_file(pytester, named_in)
    result = run("-q")
    # The suite runs as without a skip file, and says why nothing is quarantined.
    result.assert_outcomes(passed=5, failed=2)
    line = (
        f"flaketui: skip file {pytester.path / 'ci' / 'q.json'} ({label}): "
        "file not found; no test is quarantined"
    )
    out = result.stdout.str()
    assert out.count(line) == 1, out
    assert f"FlaketuiSkipFileWarning: {line}" in out


@pytest.mark.parametrize("named_in", sorted(NAMED_IN_CONFIG))
def test_quarantined_only_with_a_missing_named_skip_file_is_a_usage_error(
    single: Runner, pytester: pytest.Pytester, named_in: str
) -> None:
    label = name_missing_skip_file(pytester, named_in)
    result = single("--flaketui-quarantined-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        f"flaketui: skip file {pytester.path / 'ci' / 'q.json'} ({label}): file not found; "
        "--flaketui-quarantined-only has nothing to run"
    ) in result.stderr.str()


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_env_var_ini_and_pyproject_choose_the_file(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_skip_file(suite.path / "by_env.json", {SKIP: "skip"})
    (suite.path / "ci").mkdir()
    write_skip_file(suite.path / "ci" / "by_ini.json", {SKIP: "skip"})
    write_skip_file(suite.path / "by_pyproject.json", {SKIP: "skip"})
    (suite.path / ".quarantine.json").write_text("broken on purpose")  # must not be read
    suite.makepyprojecttoml(
        '[tool.pytest.ini_options]\nflaketui_skip_file = "ci/by_ini.json"\n'
        '[tool.flaketui]\nskip_file = "by_pyproject.json"\n'
    )
    monkeypatch.setenv("FLAKETUI_SKIP_FILE", str(suite.path / "by_env.json"))
    suite.runpytest(*PLUGIN_ARGS).stdout.fnmatch_lines(
        ["flaketui: skip file *by_env.json (FLAKETUI_SKIP_FILE; 1 skip, 0 run)"]
    )
    monkeypatch.delenv("FLAKETUI_SKIP_FILE")
    suite.runpytest(*PLUGIN_ARGS).stdout.fnmatch_lines(
        ["flaketui: skip file *ci/by_ini.json (ini option*"]
    )
    suite.makepyprojecttoml('[tool.flaketui]\nskip_file = "by_pyproject.json"\n')
    result = suite.runpytest(*PLUGIN_ARGS)
    result.stdout.fnmatch_lines(
        ["flaketui: skip file *by_pyproject.json ([[]tool.flaketui] skip_file*"]
    )
    result.assert_outcomes(passed=5, failed=1, deselected=1)


def test_no_skip_file_option_ignores_everything(suite: pytest.Pytester) -> None:
    (suite.path / ".quarantine.json").write_text("broken on purpose")
    suite.runpytest(*PLUGIN_ARGS, "--flaketui-no-skip-file").assert_outcomes(passed=5, failed=2)


def test_without_a_skip_file_the_plugin_stays_silent(suite: pytest.Pytester) -> None:
    result = suite.runpytest(*PLUGIN_ARGS)
    result.assert_outcomes(passed=5, failed=2)
    assert "flaketui" not in result.stdout.str()


def test_hand_added_entry_is_honoured(suite: pytest.Pytester) -> None:
    (suite.path / ".quarantine.json").write_text(
        json.dumps({"format": "flaketui-skip-file", "version": 1, "tests": {SKIP: {}}})
    )
    result = suite.runpytest(*PLUGIN_ARGS)
    result.assert_outcomes(passed=5, failed=1, deselected=1)
    result.stdout.fnmatch_lines([f"  {SKIP}  (no reason given; hand-added)"])


def test_recording_and_honouring_in_one_session(suite: pytest.Pytester) -> None:
    write_skip_file(suite.path / ".quarantine.json", {SKIP: "skip", RUN_FAILS: "run"})
    db = suite.path / "history.db"
    result = suite.runpytest_subprocess(*PLUGIN_ARGS, "-n", "2", "--flaketui-db", str(db))
    assert result.ret == pytest.ExitCode.OK
    recorded = outcomes(db)
    assert SKIP not in recorded  # deselected tests are simply not run, so not recorded
    assert recorded[RUN_FAILS] == ["fail"]
    assert set(recorded) == ALL_IDS - {SKIP}


def test_quarantined_only_with_nothing_quarantined_succeeds(suite: pytest.Pytester) -> None:
    result = suite.runpytest(*PLUGIN_ARGS, "--flaketui-quarantined-only")
    result.assert_outcomes(deselected=7)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["quarantined tests only: ran 0, deselected 7 other tests"])


def test_broken_tool_flaketui_table_matters_only_when_it_is_used(suite: pytest.Pytester) -> None:
    suite.makepyprojecttoml("[tool.flaketui]\nno_such_setting = 1\n")
    result = suite.runpytest(*PLUGIN_ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*flaketui: *unknown setting 'no_such_setting'*"])
    write_skip_file(suite.path / "q.json", {SKIP: "skip"})
    given = suite.runpytest(*PLUGIN_ARGS, "--flaketui-skip-file", "q.json")
    given.assert_outcomes(passed=5, failed=1, deselected=1)


def test_a_plugin_that_rewrites_the_status_does_not_undo_forgiving(
    single: Runner, pytester: pytest.Pytester
) -> None:
    """syrupy (through pytest-textual-snapshot) writes the status it was handed back."""
    pytester.makeconftest(
        "import pytest\n"
        "@pytest.hookimpl(trylast=True)\n"
        "def pytest_sessionfinish(session, exitstatus):\n"
        "    session.exitstatus = exitstatus\n"
    )
    write_skip_file(pytester.path / ".quarantine.json", {RUN_FAILS: "run", SKIP: "skip"})
    result = single("--junitxml", "out.xml")
    assert ran_ids(pytester.path / "out.xml")[RUN_FAILS] == "failed"  # it ran, and failed
    result.assert_outcomes(passed=5, failed=1, deselected=1)
    assert result.ret == pytest.ExitCode.OK
