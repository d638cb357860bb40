"""pytest entry point: options, then the recorder and the skip-file honouring plugins on demand.

Declared to pytest by the pytest-flaketui distribution (pytest-flaketui/ in the repository),
which holds no module, so that pytest does not rewrite flaketui's.

Inactive unless asked: with no flaketui option, ini value or discoverable skip file, it does
nothing. It imports no UI library.

PYTEST_DONT_REWRITE: it has no assert to rewrite, and an editable install imports it before
pytest can mark it, so `-p flaketui.pytest_plugin` would warn "already imported".
"""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register flaketui's command-line and ini options in their own group."""
    group = parser.getgroup("flaketui", "flaketui: record results, honour the skip file")
    group.addoption(
        "--flaketui-db",
        dest="flaketui_db",
        default=None,
        metavar="PATH",
        help="record every test attempt into this flaketui history (SQLite file, or a "
        "postgresql:// URL of a shared history server).",
    )
    group.addoption(
        "--flaketui-suite",
        dest="flaketui_suite",
        default=None,
        metavar="NAME",
        help="suite name of the recorded run (default: detected, else 'default').",
    )
    group.addoption(
        "--flaketui-incident",
        dest="flaketui_incident",
        default=None,
        metavar="TAG",
        help="tag the recorded run as part of incident TAG, so that scoring leaves it out "
        "(default: $FLAKETUI_INCIDENT).",
    )
    group.addoption(
        "--flaketui-skip-file",
        dest="flaketui_skip_file",
        default=None,
        metavar="PATH",
        help="honour this quarantine skip file (default: $FLAKETUI_SKIP_FILE, ini "
        "flaketui_skip_file, [tool.flaketui] skip_file, else <rootdir>/.quarantine.json).",
    )
    group.addoption(
        "--flaketui-quarantined-only",
        dest="flaketui_quarantined_only",
        action="store_true",
        default=False,
        help="run only the quarantined tests, both modes, without failing on them "
        "(the nightly 'is it fixed yet' job).",
    )
    group.addoption(
        "--flaketui-no-skip-file",
        dest="flaketui_no_skip_file",
        action="store_true",
        default=False,
        help="ignore any skip file (run every test).",
    )
    parser.addini("flaketui_db", "record every test attempt into this flaketui history")
    parser.addini("flaketui_suite", "suite name of the recorded run")
    parser.addini("flaketui_skip_file", "quarantine skip file to honour")


# Where a skip file is found when nothing names one (flaketui.core.quarantine.skipfile), and the
# variable that names one: repeated here so that a session without either imports nothing more.
DEFAULT_SKIP_FILE = ".quarantine.json"
SKIP_FILE_VAR = "FLAKETUI_SKIP_FILE"


def skip_file_may_apply(config: pytest.Config) -> bool:
    """Whether a skip file can be in force: an option or the ini names one, FLAKETUI_SKIP_FILE
    does, the default file exists at the rootdir, or the nearest pyproject.toml mentions
    flaketui at all (its `[tool.flaketui]` may name one). False only when none of these holds:
    then nothing of the skip file is read or imported."""
    if (
        config.getoption("flaketui_skip_file", None)
        or config.getoption("flaketui_quarantined_only", False)
        or config.getoption("flaketui_no_skip_file", False)
        or os.environ.get(SKIP_FILE_VAR)
        or config.getini("flaketui_skip_file")
        or (config.rootpath / DEFAULT_SKIP_FILE).exists()
    ):
        return True
    # The walk of flaketui.core.config.find_pyproject, written out: importing that module
    # imports the core's errors and sqlite3 into every session.
    root = config.rootpath.resolve()
    for folder in (root, *root.parents):
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            try:
                return b"flaketui" in pyproject.read_bytes()
            except OSError:
                return True  # the full reading says what is wrong with it
    return False


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Register the recorder and the skip-file plugin when they are asked for."""
    # Loaded into every session of every user who installs pytest-flaketui: the recorder's and the
    # skip file's modules are imported only when recording is asked for or a skip file may be.
    if config.getoption("flaketui_db", None) or config.getini("flaketui_db"):
        from flaketui.pytest_plugin.recording import register_recorder

        register_recorder(config)
    if skip_file_may_apply(config):
        from flaketui.pytest_plugin.skipfile import register_skip_file

        register_skip_file(config)
