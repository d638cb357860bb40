"""CODEOWNERS routing: last match wins, globs, GitLab sections, fallbacks in order."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flaketui.core import owners
from flaketui.core.config import Config
from flaketui.core.owners import CodeownersError, OwnerResolver, find_codeowners, find_repo_root

GITHUB = """\
# global owner first: overridden by every later match
*                     @org/everyone
/tests/               @org/qa
/tests/api/           @org/api @alice
*.py                  @bob
/tests/api/*.py       @org/api-python
docs/**               @org/docs
/tests/ui/test_nobody.py
"""


def _repo(tmp_path: Path, text: str, location: str = ".github/CODEOWNERS") -> Path:
    (tmp_path / ".git").mkdir()
    target = tmp_path / location
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return tmp_path


def test_last_match_wins(tmp_path: Path) -> None:
    resolver = OwnerResolver(_repo(tmp_path, GITHUB), Config())
    # `/tests/api/*.py` is the last rule matching, not `*.py` nor `/tests/api/`.
    assert resolver.owner_of("tests/api/test_users.py", "unit") == "@org/api-python"
    # A file deeper than `*` reaches: `/tests/api/*.py` does not match subfolders, `*.py` does.
    assert resolver.owner_of("tests/api/v2/test_x.py", "unit") == "@bob"


def test_directory_patterns_and_globs(tmp_path: Path) -> None:
    resolver = OwnerResolver(_repo(tmp_path, GITHUB), Config())
    assert resolver.owner_of("tests/data/fixture.json", "unit") == "@org/qa"
    assert resolver.owner_of("tests/api/schema.json", "unit") == "@org/api @alice"
    assert resolver.owner_of("README.md", "unit") == "@org/everyone"
    assert resolver.owner_of("docs/a/b/c.md", "unit") == "@org/docs"
    # A leading ./ is accepted as the same repository-relative path.
    assert resolver.owner_of("./tests/data/fixture.json", "unit") == "@org/qa"


def test_rule_without_owner_unsets_and_falls_back(tmp_path: Path) -> None:
    config = Config(suite_owners={"ui": "@org/ui-owners"})
    resolver = OwnerResolver(_repo(tmp_path, GITHUB), config)
    assert resolver.owner_of("tests/ui/test_nobody.py", "ui") == "@org/ui-owners"


def test_gitlab_sections_combine_and_use_defaults(tmp_path: Path) -> None:
    text = """\
[Backend] @org/backend
tests/api/
tests/api/test_pay.py @carol

^[Docs][2] @org/docs
*.md

[QA]
tests/ @org/qa
"""
    resolver = OwnerResolver(_repo(tmp_path, text, "CODEOWNERS"), Config())
    # Section default owner for a rule with no owner of its own.
    assert resolver.owner_of("tests/api/test_get.py", "unit") == "@org/backend @org/qa"
    # Last match within the Backend section, plus the QA section's match.
    assert resolver.owner_of("tests/api/test_pay.py", "unit") == "@carol @org/qa"
    assert resolver.owner_of("README.md", "unit") == "@org/docs"
    assert resolver.owner_of("src/app.py", "unit") is None


def test_search_order(tmp_path: Path) -> None:
    _repo(tmp_path, "* @docs-location\n", "docs/CODEOWNERS")
    (tmp_path / "CODEOWNERS").write_text("* @root-location\n", encoding="utf-8")
    assert find_codeowners(tmp_path) == tmp_path / "CODEOWNERS"
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "CODEOWNERS").write_text("* @github-location\n", encoding="utf-8")
    assert OwnerResolver(tmp_path, Config()).owner_of("x.py", "unit") == "@github-location"


def test_fallbacks_in_order(tmp_path: Path) -> None:
    rotation = ("@r1", "@r2", "@r3")
    full = Config(suite_owners={"unit": "@suite"}, owner_fallback="@fallback", rotation=rotation)
    assert OwnerResolver(None, full).owner_of("tests/t.py", "unit") == "@suite"
    assert OwnerResolver(None, full).owner_of("tests/t.py", "other") == "@fallback"
    only_rotation = Config(rotation=rotation)
    chosen = OwnerResolver(tmp_path, only_rotation).owner_of("tests/t.py", "unit")
    assert chosen in rotation
    assert OwnerResolver(None, Config()).owner_of("tests/t.py", "unit") is None


@given(st.text(min_size=1, max_size=40))
def test_rotation_is_deterministic_and_stable(test_file: str) -> None:
    rotation = ("@r1", "@r2", "@r3")
    first = OwnerResolver(None, Config(rotation=rotation)).owner_of(test_file, "unit")
    again = OwnerResolver(None, Config(rotation=rotation)).owner_of(test_file, "unit")
    assert first == again
    assert first in rotation


def test_rotation_spreads_files() -> None:
    resolver = OwnerResolver(None, Config(rotation=("@r1", "@r2", "@r3")))
    chosen = {resolver.owner_of(f"tests/test_{i}.py", "unit") for i in range(30)}
    assert chosen == {"@r1", "@r2", "@r3"}


def test_find_repo_root(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    assert find_repo_root(nested) == tmp_path.resolve()


def test_a_byte_order_mark_is_not_part_of_the_first_rule(tmp_path: Path) -> None:
    (tmp_path / "CODEOWNERS").write_bytes("tests/test_a.py @team-a\n".encode("utf-8-sig"))
    resolver = OwnerResolver(tmp_path, Config())
    assert resolver.owner_of("tests/test_a.py", "unit") == "@team-a"


def test_a_codeowners_that_is_not_utf8_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "CODEOWNERS"
    path.write_bytes(b"tests/ @caf\xe9\n")
    with pytest.raises(CodeownersError) as caught:
        OwnerResolver(path, Config())
    assert caught.value.message == (
        f"{path}: not valid UTF-8 (byte 0xE9 at offset 11); a CODEOWNERS file is UTF-8 text"
    )


def test_a_codeowners_larger_than_github_loads_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "CODEOWNERS"
    path.write_text("tests/ @team\n" * 100)
    monkeypatch.setattr(owners, "CODEOWNERS_MAX_BYTES", 1300)  # the file is exactly 1 300 bytes
    assert OwnerResolver(path, Config()).owner_of("tests/test_a.py", "unit") == "@team"
    monkeypatch.setattr(owners, "CODEOWNERS_MAX_BYTES", 1299)
    with pytest.raises(CodeownersError) as caught:
        OwnerResolver(path, Config())
    assert caught.value.message == (
        f"{path}: larger than 1299 bytes, the most GitHub loads of a CODEOWNERS file"
    )


def test_a_codeowners_that_never_ends_is_read_no_further_than_the_limit() -> None:
    with pytest.raises(CodeownersError) as caught:
        owners.codeowners_text(Path("/dev/zero"))  # as `--codeowners /dev/zero` reads it
    assert caught.value.message == (
        "/dev/zero: larger than 3 MiB, the most GitHub loads of a CODEOWNERS file"
    )
