"""flaketui's SQL binds no numbered placeholder (`?1`) from a sequence of values.

Python 3.12.0 to 3.12.3 take a `?NNN` placeholder for a named one and warn on every value
bound to it from a tuple (fixed in 3.12.4): under `-W error` or `PYTHONWARNINGS=error`, which
CI jobs set, `flaketui ingest` stopped with a traceback on its first batch. Statements use
plain `?` or names bound from a dict; the check reads every string in flaketui/ with `ast`, so
it also covers statements no test runs.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import flaketui

PACKAGE = Path(flaketui.__file__).parent
NUMBERED = re.compile(r"\?\d")


def _numbered_placeholders() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and NUMBERED.search(text):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def test_no_numbered_placeholders() -> None:
    assert _numbered_placeholders() == []


def test_the_check_finds_one() -> None:
    """The pattern matches the placeholders it is there to find, and not plain or named ones."""
    assert NUMBERED.search("SELECT 1 FROM runs WHERE id = ?1")
    assert NUMBERED.search("VALUES (?, ?12)")
    assert not NUMBERED.search("SELECT 1 FROM runs WHERE id = ? AND tag = :tag")
