"""Counted and listed words: `1 run`, `2 runs`, `main or master`, for the messages."""

from __future__ import annotations

from collections.abc import Sequence


def plural(count: int, word: str, many: str | None = None) -> str:
    """`count word`, the word in the plural unless count is 1 (many: an irregular plural)."""
    return f"{count} {word if count == 1 else many or word + 's'}"


def either(names: Sequence[str]) -> str:
    """Names as alternatives: `main`, `main or master`, `main, master or trunk` ('' for none)."""
    if len(names) < 2:
        return "".join(names)
    return f"{', '.join(names[:-1])} or {names[-1]}"
