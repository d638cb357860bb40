"""Failure signatures: normalise a failure message so one cause gives one hash.

The normalised text is the message's first meaningful line (blank lines and bare traceback
headers skipped) with the user's mask patterns replaced by `<MASK>`, then, in this order:
UUIDs `<UUID>`, timestamps and clock times `<TS>`, URLs `<URL>`, IPv4 addresses `<IP>`, POSIX,
Windows and UNC paths `<PATH>`, `0x` numbers and long hex `<HEX>`, base64-like tokens
`<TOKEN>`, `:port` suffixes `<PORT>`, remaining numbers `<NUM>`; whitespace collapsed; at most
MAX_SIGNATURE_TEXT characters. The hash is the first 16 hex digits of its SHA-256.

A base64-like token is a run of 20+ characters of the base64/base64url alphabet whose longest
`_`/`-`-separated segment is 16+ characters of jumbled case and digits (pieces averaging under
TOKEN_MAX_PIECE characters, a piece being a word, an upper-case run or a digit run). So
`ghp_16C7e42F292c6912E7710c838347Ae178B4a` and JWT parts are tokens, while identifiers such as
`test_checkout_3ds_challenge` or `testCheckout3dsChallengeFlow` stay readable.

SIGNATURE_VERSION names the algorithm: with the user's patterns it makes the scheme that
flaketui.core.ingest.resign records and re-signs stored messages under, so a change in either
regroups old failures instead of splitting groups in two.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

# Bump when the normalisation changes: stored results are then re-signed, not split.
# 2: identifiers with a digit (test_checkout_3ds_challenge) are no longer <TOKEN>.
SIGNATURE_VERSION = 2
MAX_SIGNATURE_TEXT = 240
TOKEN_MAX_PIECE = 3.5  # mean piece length under which a long segment reads as random

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
    ("<PORT>", re.compile(r"(?<=[\w>\]]):\d{2,5}\b")),
    ("<NUM>", re.compile(r"\d+(?:\.\d+)?")),
)
_SPACES = re.compile(r"\s+")
_TOKEN_CANDIDATE = re.compile(r"(?<![\w+/])[A-Za-z0-9+/_-]{20,}={0,2}")
_SEGMENT_SPLIT = re.compile(r"[_-]")
_PIECES = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# Tokens go after hex (a hex run is already <HEX>) and before ports and plain numbers.
_TOKEN_AFTER = "<HEX>"


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


def looks_random(candidate: str) -> bool:
    """Whether a run of base64-alphabet characters reads as a token rather than a name."""
    longest = max(_SEGMENT_SPLIT.split(candidate.rstrip("=")), key=len)
    if len(longest) < 16:
        return False
    pieces = _PIECES.findall(longest)
    if not pieces:
        return False
    mixed = any(c.isdigit() for c in longest) or (
        any(c.isupper() for c in longest) and any(c.islower() for c in longest)
    )
    return mixed and sum(map(len, pieces)) / len(pieces) < TOKEN_MAX_PIECE


def _mask_tokens(text: str) -> str:
    return _TOKEN_CANDIDATE.sub(
        lambda m: "<TOKEN>" if looks_random(m.group(0)) else m.group(0), text
    )


def normalise(message: str, extra_patterns: Iterable[str] = ()) -> str:
    """Mask the volatile parts of a failure message's meaningful first line."""
    text = first_meaningful_line(message)
    for pattern in _compile_user(tuple(extra_patterns)):
        text = pattern.sub("<MASK>", text)
    for placeholder, pattern in _MASKS:
        text = pattern.sub(placeholder, text)
        if placeholder == _TOKEN_AFTER:
            text = _mask_tokens(text)
    text = _SPACES.sub(" ", text).strip()
    return text[:MAX_SIGNATURE_TEXT] or "<EMPTY>"


def sign(message: str | None, extra_patterns: Iterable[str] = ()) -> Signature | None:
    """The signature of a failure message, or None when there is no message at all."""
    if message is None or not message.strip():
        return None
    text = normalise(message, extra_patterns)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return Signature(hash=digest, text=text)
