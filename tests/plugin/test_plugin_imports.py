"""What a pytest session imports because flaketui is installed: little, and never sqlite-utils."""

from __future__ import annotations

import json

import pytest

from flaketui.core.quarantine.skipfile import SkipEntry, update_skip_file
from flaketui.core.timeutil import utc_now

# sqlite-utils imports pandas and numpy (~0.3-0.8 s); the recorder works on plain sqlite3.
HEAVY = ("sqlite_utils", "pandas", "numpy", "textual", "rich", "plotext")

# Written when the inner session ends, after the recorder's last flush.
CONFTEST = """
import json
import sys
from pathlib import Path

def pytest_unconfigure(config):
    Path(__file__).with_name("modules.json").write_text(json.dumps(sorted(sys.modules)))
"""


def _modules_of_session(pytester: pytest.Pytester, *args: str) -> set[str]:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_one="def test_ok():\n    pass\n\ndef test_bad():\n    assert 0\n")
    result = pytester.runpytest_subprocess("-p", "flaketui.pytest_plugin", *args, timeout=120)
    result.assert_outcomes(passed=1, failed=1)
    return set(json.loads((pytester.path / "modules.json").read_text()))


@pytest.mark.usefixtures("recording_env")
def test_an_inactive_session_imports_neither_the_recorder_nor_heavy_libraries(
    pytester: pytest.Pytester,
) -> None:
    modules = _modules_of_session(pytester)
    assert "flaketui.pytest_plugin" in modules
    assert "flaketui.pytest_plugin.recording" not in modules
    assert "flaketui.core.ingest.writer" not in modules
    assert "filelock" not in modules  # only writers of the skip file lock it
    assert not {m.split(".")[0] for m in modules} & set(HEAVY)
    # No skip file named, none at the default place, no pyproject.toml mentioning flaketui:
    # nothing of the skip file is read or imported.
    assert "flaketui.pytest_plugin.skipfile" not in modules
    assert "flaketui.core.quarantine.skipfile" not in modules


@pytest.mark.usefixtures("recording_env")
@pytest.mark.parametrize(
    "where",
    ["default file", "pyproject", "environment", "ini"],
)
def test_the_skip_file_is_read_wherever_it_may_be_named(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    name = ".quarantine.json" if where == "default file" else "named.json"

    def quarantine(entries: dict[str, SkipEntry]) -> None:
        entries["test_one.py::test_bad"] = SkipEntry(
            "test_one.py::test_bad", "skip", "flaky", quarantined_at=utc_now()
        )

    update_skip_file(pytester.path / name, quarantine)
    if where == "pyproject":
        pytester.makepyprojecttoml(f'[tool.flaketui]\nskip_file = "{name}"\n')
    elif where == "environment":
        monkeypatch.setenv("FLAKETUI_SKIP_FILE", str(pytester.path / name))
    elif where == "ini":
        pytester.makeini(f"[pytest]\nflaketui_skip_file = {name}\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_one="def test_ok():\n    pass\n\ndef test_bad():\n    assert 0\n")
    result = pytester.runpytest_subprocess("-p", "flaketui.pytest_plugin", timeout=120)
    result.assert_outcomes(passed=1, deselected=1)  # the quarantined test is not run


def test_the_plugin_entry_names_the_skip_files_defaults() -> None:
    from flaketui import pytest_plugin
    from flaketui.core.quarantine import skipfile

    assert pytest_plugin.DEFAULT_SKIP_FILE == skipfile.DEFAULT_NAME
    assert pytest_plugin.SKIP_FILE_VAR == skipfile.ENV_VAR


@pytest.mark.usefixtures("recording_env")
def test_a_recording_session_does_not_import_sqlite_utils(pytester: pytest.Pytester) -> None:
    db = pytester.path / "history.db"
    modules = _modules_of_session(pytester, "--flaketui-db", str(db))
    # The journal's writer only: the result writer is the next reader's to load.
    assert "flaketui.core.ingest.run_journal" in modules
    assert "flaketui.core.ingest.writer" not in modules
    assert "flaketui.core.ingest.rows" not in modules
    assert not {m.split(".")[0] for m in modules} & set(HEAVY)
    # The recorder defers its run's rollups: their code is the next reader's to load.
    assert "flaketui.core.rollups.build" not in modules
    assert db.exists()
    # The history's signature scheme is recorded with its first run only, and without the
    # signing code: neither re-signing nor signing is loaded for it.
    assert "flaketui.core.ingest.scheme" in modules
    assert "flaketui.core.ingest.resign" not in modules
    later = _modules_of_session(pytester, "--flaketui-db", str(db))
    assert "flaketui.core.ingest.scheme" not in later


@pytest.mark.usefixtures("recording_env")
def test_a_passing_session_loads_neither_masking_nor_signing(pytester: pytest.Pytester) -> None:
    db = pytester.path / "history.db"
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_one="def test_ok():\n    pass\n\ndef test_also_ok():\n    pass\n")
    for _ in range(2):  # into a new history (its first run), then into the same one
        result = pytester.runpytest_subprocess(
            "-p", "flaketui.pytest_plugin", "--flaketui-db", str(db), timeout=120
        )
        result.assert_outcomes(passed=2)
        modules = set(json.loads((pytester.path / "modules.json").read_text()))
        assert "flaketui.core.ingest.run_journal" in modules
        # No failure message to mask or sign; storing the attempts is the next reader's work.
        assert "flaketui.core.ingest.redact" not in modules
        assert "flaketui.core.ingest.signatures" not in modules
        assert "flaketui.core.history.derived_rows" not in modules
