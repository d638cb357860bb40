"""Failure signatures: normalise a failure message so one cause gives one hash."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

# Bump when the normalisation changes: stored results are then re-signed, not split.
SIGNATURE_VERSION = 1
MAX_SIGNATURE_TEXT = 240

# Order matters: specific shapes first, so a UUID is not eaten as hex and digits.
_MASKS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "<UUID>",
        re.compile(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
        ),
    ),
    (
        "<TS>",
        re.compile(
            r"\b\d{4}-\d{2}-\d{2}"
            r"(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b"
            r"|\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b"
        ),
    ),
    ("<URL>", re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")),
    ("<IP>", re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b")),
    (
        "<PATH>",
        re.compile(
            r"(?:[A-Za-z]:\\|\\\\)[^\s'\"<>:|?*]+"  # Windows drive or UNC path
            r"|(?<![\w.])(?:~|\.{1,2})?/(?:[\w.@+-]+/)*[\w.@+-]+/?"  # POSIX path
        ),
    ),
    (
        "<HEX>",
        re.compile(
            r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"
        ),
    ),
    (
        "<TOKEN>",
        re.compile(
            r"(?<![\w+/])(?=[A-Za-z0-9+/_-]*\d)(?=[A-Za-z0-9+/_-]*[A-Za-z])[A-Za-z0-9+/_-]{20,}={0,2}"
        ),
    ),
    ("<PORT>", re.compile(r"(?<=[\w>\]]):\d{2,5}\b")),
    ("<NUM>", re.compile(r"\d+(?:\.\d+)?")),
)
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Signature:
    """A failure signature: its hash and its readable normalised text."""

    hash: str
    text: str


def first_meaningful_line(message: str) -> str:
    """The first line that says something (skips blank lines and bare traceback headers)."""
    for raw in message.splitlines():
        line = raw.strip()
        if not line or line.startswith("Traceback (most recent call last)"):
            continue
        return line
    return ""


@lru_cache(maxsize=64)
def _compile_user(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)


def normalise(message: str, extra_patterns: Iterable[str] = ()) -> str:
    """Mask the volatile parts of a failure message's meaningful first line."""
    text = first_meaningful_line(message)
    for pattern in _compile_user(tuple(extra_patterns)):
        text = pattern.sub("<MASK>", text)
    for placeholder, pattern in _MASKS:
        text = pattern.sub(placeholder, text)
    text = _SPACES.sub(" ", text).strip()
    return text[:MAX_SIGNATURE_TEXT] or "<EMPTY>"


def sign(message: str | None, extra_patterns: Iterable[str] = ()) -> Signature | None:
    """The signature of a failure message, or None when there is no message at all."""
    if message is None or not message.strip():
        return None
    text = normalise(message, extra_patterns)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return Signature(hash=digest, text=text)
