"""The repository speaks for itself, its documents stay short, and its version is written once.

Every tracked text file (code, tests, docs, benchmarks, sample data) states its rules in the
project's own words: no reference to outside documents, their section numbers or article
numbers, which a user of flaketui does not have.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

import flaketui

ROOT = Path(__file__).resolve().parents[1]

# Built from pieces so that this file does not match itself.
FORBIDDEN = re.compile(
    "|".join(
        [
            "[Ss]" + r"eed[ _]0\d",  # a numbered article
            r"\b" + "SP" + r"EC\b",  # the product document
            "\u00a7",  # a section sign
            r"\b[Ss]" + r"ections? \d",  # a numbered section
        ]
    )
)


# Work-log wording: documents describe the product, not how or when the work was done.
WORK_LOG = re.compile(
    r"\bthis (morning|afternoon|evening)\b|\b(first|second|third|fourth|fifth|last) session\b"
    r"|\bthe lead\b|\bhelpers?\b",
    re.IGNORECASE,
)


def _tracked_text_files() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    files = []
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if not path.is_file():
            continue  # deleted in the working tree
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary: images, the sample history
        files.append(path)
    return files


def _hits(paths: list[Path], root: Path = ROOT) -> list[str]:
    hits = []
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if FORBIDDEN.search(line):
                hits.append(f"{path.relative_to(root)}:{number}: {line.strip()[:100]}")
    return hits


def test_no_file_refers_to_outside_documents() -> None:
    files = _tracked_text_files()
    assert any(path.name == "README.md" for path in files)
    assert _hits(files) == []


def test_the_check_finds_each_kind_of_reference(tmp_path: Path) -> None:
    samples = {
        "a.py": "# the first-attempt rule (s" + "eed 000)\n",
        "b.md": "S" + "eed 004's score\n",
        "c.py": "def test_s" + "eed_003_sequences(): ...\n",
        "d.md": "as the S" + "PEC says\n",
        "e.py": "# (\u00a79)\n",
        "f.py": "# the rollups of s" + "ection 9\n",
        "ok.md": "SPECIFIC seeds 20261130, PYTHONHASHSEED=0, INSPECT\n",
    }
    for name, text in samples.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    hits = _hits(sorted(tmp_path.iterdir()), tmp_path)
    assert [hit.split(":")[0] for hit in hits] == ["a.py", "b.md", "c.py", "d.md", "e.py", "f.py"]


def test_documents_read_as_reference_not_as_a_work_log() -> None:
    documents = [path for path in _tracked_text_files() if path.suffix == ".md"]
    hits = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in documents
        for match in WORK_LOG.finditer(path.read_text(encoding="utf-8"))
    ]
    assert hits == []


@pytest.mark.parametrize(
    ("name", "limit"), [("README.md", 12 * 1024), ("BENCHMARKS.md", 15 * 1024)]
)
def test_top_level_documents_stay_short(name: str, limit: int) -> None:
    assert (ROOT / name).stat().st_size <= limit


def test_the_version_is_written_once() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "flaketui.__version__"}
    assert importlib.metadata.version("flaketui") == flaketui.__version__, (
        "the installed metadata is older than flaketui/__init__.py: reinstall (pip install -e .)"
    )
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## [{flaketui.__version__}]" in changelog


def test_no_module_of_flaketui_is_named_as_a_test_file() -> None:
    # pytest rewrites the asserts of any module matching its test-file patterns (python_files:
    # test_*.py, *_test.py by default) that a session imports, compiling it from source.
    named = [
        str(path.relative_to(ROOT))
        for pattern in ("test_*.py", "*_test.py")
        for path in (ROOT / "flaketui").rglob(pattern)
    ]
    assert named == []


def test_pytest_flaketui_declares_the_plugin_of_this_version_and_holds_nothing_else() -> None:
    flaketui_project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "pytest11" not in flaketui_project["project"].get("entry-points", {})
    plugin = tomllib.loads(
        (ROOT / "pytest-flaketui" / "pyproject.toml").read_text(encoding="utf-8")
    )
    assert plugin["project"]["version"] == flaketui.__version__
    assert f"flaketui=={flaketui.__version__}" in plugin["project"]["dependencies"]
    assert plugin["project"]["entry-points"]["pytest11"] == {"flaketui": "flaketui.pytest_plugin"}
    assert plugin["tool"]["setuptools"] == {"packages": [], "py-modules": []}


def test_the_readme_test_command_is_what_ci_runs() -> None:
    command = (
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' -e ./pytest-flaketui"
        " && .venv/bin/python -m pytest -n 2"
    )
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert command in readme  # the whole line: nothing added after it
    assert command + " || exit" in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_every_setting_is_documented() -> None:
    """Each field of Config is named in docs/configuration.md's tables."""
    import dataclasses

    from flaketui.core.config import Config

    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = [f.name for f in dataclasses.fields(Config) if f"`{f.name}`" not in text]
    assert not missing, f"settings missing from docs/configuration.md: {missing}"
