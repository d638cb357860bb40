"""Test ids: the parts of a pytest node id the store and the skip file agree on."""

from __future__ import annotations


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
