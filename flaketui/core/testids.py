"""Test ids: the parts of a pytest node id the store and the skip file agree on."""

from __future__ import annotations

import functools
import posixpath


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


def file_of_test(test_id: str, test_file: str | None) -> str | None:
    """The test's file: the parser's, else the part of a pytest id before the first '::'."""
    if test_file:
        return normalise_path(test_file)
    head, sep, _ = test_id.partition("::")
    if sep and ("/" in head or head.endswith(".py")):
        return normalise_path(head)
    return None
