"""Which CODEOWNERS the app and commands use: --codeowners, the git root's, the history's folder."""

from __future__ import annotations

from pathlib import Path

from flaketui.core.config import Config
from flaketui.core.owners import OwnerResolver, locate_codeowners


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_beside_the_history_when_the_git_root_has_none(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    history = repo / "data" / "history.db"
    beside = _write(repo / "data" / "CODEOWNERS", "* @beside\n")
    assert locate_codeowners(history, cwd=repo) == beside


def test_the_git_root_wins_over_the_history_folder(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    at_root = _write(repo / "docs" / "CODEOWNERS", "* @root\n")
    _write(repo / "data" / "CODEOWNERS", "* @beside\n")
    assert locate_codeowners(repo / "data" / "history.db", cwd=repo) == at_root


def test_github_variants_beside_the_history_outside_any_repository(tmp_path: Path) -> None:
    history = tmp_path / "history.db"
    dotgithub = _write(tmp_path / ".github" / "CODEOWNERS", "* @dotgithub\n")
    _write(tmp_path / "docs" / "CODEOWNERS", "* @docs\n")
    # GitHub's order: .github/ first.
    assert locate_codeowners(history, cwd=tmp_path) == dotgithub


def test_explicit_file_wins_and_nothing_found_is_none(tmp_path: Path) -> None:
    explicit = _write(tmp_path / "owners.txt", "* @explicit\n")
    _write(tmp_path / "CODEOWNERS", "* @beside\n")
    assert locate_codeowners(tmp_path / "h.db", cwd=tmp_path, explicit=explicit) == explicit
    empty = tmp_path / "empty"
    empty.mkdir()
    assert locate_codeowners(empty / "h.db", cwd=empty) is None


def test_the_resolver_takes_a_codeowners_file_as_well_as_a_folder(tmp_path: Path) -> None:
    owners = _write(tmp_path / "owners.txt", "* @all\n/tests/api/ @api\n")
    resolver = OwnerResolver(owners, Config())
    assert resolver.codeowners_path == owners
    assert resolver.owner_of("tests/api/test_x.py", "unit") == "@api"
    assert resolver.owner_of("tests/other.py", "unit") == "@all"
