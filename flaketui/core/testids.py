"""Test ids: the parts of a pytest node id the store and the skip file agree on."""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Iterable

# A suite name ending in one of these (``login.spec.ts``) names a file even without a slash.
_SOURCE_SUFFIX = re.compile(
    r"\.(js|jsx|mjs|cjs|ts|tsx|mts|cts|vue|svelte|coffee|rb|php|phpt|go|rs|java|kt|kts|"
    r"scala|groovy|cs|fs|vb|swift|c|cc|cpp|cxx|m|mm|feature|robot|lua|ex|exs|erl|dart)$"
)


def parent_of(test_id: str) -> str:
    """The test id with one trailing ``[...]`` parameter block (brackets may nest) stripped."""
    if not test_id.endswith("]"):
        return test_id
    depth = 0
    for index in range(len(test_id) - 1, -1, -1):
        char = test_id[index]
        if char == "]":
            depth += 1
        elif char == "[":
            depth -= 1
            if depth == 0:
                return test_id[:index] if index > 0 else test_id
    return test_id


@functools.lru_cache(maxsize=4096)  # the writer asks once per new test; files are far fewer
def normalise_path(path: str) -> str:
    """A repository-relative path in one spelling: forward slashes, no './', no 'a/../'."""
    text = path.strip().replace("\\", "/")
    if not text:
        return text
    normal = posixpath.normpath(text)
    return normal.removeprefix("./")


def names_file(name: str) -> bool:
    """Whether a suite name (or a case's origin) is a file path (jest-junit, Vitest, Playwright
    name suites so; a karma describe block is not)."""
    return "/" in name or "\\" in name or _SOURCE_SUFFIX.search(name) is not None


def origin_file(origin: str | None) -> str | None:
    """The file an attempt's origin names: the origin when it is a path (the case's file, its
    suite's), None when it is a karma describe block. Stored attempts keep the origin alone,
    so this is what tells the two apart wherever a test's file is worked out from them."""
    return origin if origin is not None and names_file(origin) else None


def file_of_test(test_id: str, test_file: str | None) -> str | None:
    """The test's file: the parser's, else the part of a pytest id before the first '::'."""
    if test_file:
        return normalise_path(test_file)
    head, sep, _ = test_id.partition("::")
    if sep and ("/" in head or head.endswith(".py")):
        return normalise_path(head)
    return None


def stored_clashes(held: Iterable[tuple[str, str | None]], origins: dict[str, str]) -> set[str]:
    """Of the new cases' ids (with their files), those a stored run holds as another file's.

    held: the run's test ids, each with the file its attempts' case named (None: unknown). An
    id is shared when the run holds it with another file, or under a file-prefixed id
    (``<file>::<id>``, whatever its file: the rows of a prefixed id from before files were
    stored say none). An id the run holds from an unknown file is not: the rows do not say
    whose they are, and the new case joins them as a leg.
    """
    found: set[str] = set()
    for test_id, origin in held:
        if origin is not None:
            other = origins.get(test_id)
            if other is not None and other != origin:
                found.add(test_id)
        cut = test_id.find("::")
        while cut >= 0:
            if test_id[cut + 2 :] in origins:
                found.add(test_id[cut + 2 :])
            cut = test_id.find("::", cut + 2)
    return found
