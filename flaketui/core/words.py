"""Counted words: `1 run`, `2 runs`, for every message that counts something."""

from __future__ import annotations


def plural(count: int, word: str, many: str | None = None) -> str:
    """`count word`, the word in the plural unless count is 1 (many: an irregular plural)."""
    return f"{count} {word if count == 1 else many or word + 's'}"
