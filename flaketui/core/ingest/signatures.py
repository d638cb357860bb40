r"""Failure signatures: normalise a failure message so one cause gives one hash.

Terminal escape sequences (colour codes, as a real ESC or written out as `\x1b[31m` in a
repr) are removed from the whole message first, so no mask ever sees their digits. The
normalised text is then the message's first meaningful line (blank lines and bare traceback
headers skipped) with the user's mask patterns replaced by `<MASK>`, then, in this order:
UUIDs `<UUID>`, IPv6 addresses `<IP>` (before clock times, whose shape they can contain),
timestamps and clock times `<TS>`, URLs `<URL>`, IPv4 addresses `<IP>`, Kubernetes pod names
(`api-7d9f8b6c5-x2k4p` -> `api-<POD>`), POSIX, Windows and UNC paths `<PATH>`, `0x` numbers
and long hex `<HEX>` (container ids among them), base64-like tokens `<TOKEN>`, `:port`
suffixes `<PORT>`, remaining numbers `<NUM>`; whitespace collapsed; at most
MAX_SIGNATURE_TEXT characters. The hash is the first 16 hex digits of its SHA-256.

Masks never start inside a word: a Windows drive is a lone letter (`C:\`), so the `y:\n` of
`'property:\n'` in a repr stays text; a UNC path needs a server and a share.

A generic line says nothing of the cause (`assert False`, `AssertionError`,
`assert '<NUM>' == '<NUM>'`: no word left once placeholders, exception names and Python's
keywords are set aside). Such a line is told apart by where it failed: the last
`file:line:` location of the report that follows it (pytest's crash line, which names the
test file and line, or the exception's location), kept verbatim as ` @ tests/test_x.py:42`.
Without a location in the message, a generic line stays as it is.

A base64-like token is a run of 20+ characters of the base64/base64url alphabet whose longest
`_`/`-`-separated segment is 16+ characters of jumbled case and digits (pieces averaging under
TOKEN_MAX_PIECE characters, a piece being a word, an upper-case run or a digit run). So
`ghp_16C7e42F292c6912E7710c838347Ae178B4a` and JWT parts are tokens, while identifiers such as
`test_checkout_3ds_challenge` or `testCheckout3dsChallengeFlow` stay readable.

SIGNATURE_VERSION (flaketui.core.ingest.scheme) names the algorithm: with the user's patterns it
makes the scheme that a history records and flaketui.core.ingest.resign re-signs stored messages
under, so a change in either regroups old failures instead of splitting groups in two.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

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
        "<IP>",
        re.compile(
            # Full or `::`-compressed groups, optionally ending in a dotted IPv4 part; at least
            # two colons with `::`, else seven, so `a:b` labels and clock times stay.
            r"(?<![\w:.])(?=[0-9a-fA-F:]*[0-9a-fA-F])(?:"
            r"(?:[0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}"
            r"|(?:[0-9a-fA-F]{1,4}:){0,6}[0-9a-fA-F]{0,4}::(?:[0-9a-fA-F]{1,4}:){0,6}"
            r"(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9a-fA-F]{1,4})?"
            r")(?![\w:])"
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
        # Deployment pods: <name>-<replica-set hash>-<suffix>; bare <name>-<suffix> pods need a
        # digit in the suffix. Kubernetes draws both from an alphabet without vowels.
        "<POD>",
        re.compile(
            r"(?<=[a-z0-9]-)(?:[bcdfghjklmnpqrstvwxz24-9]{6,10}-[bcdfghjklmnpqrstvwxz24-9]{5}"
            r"|(?=[bcdfghjklmnpqrstvwxz]*[24-9])[bcdfghjklmnpqrstvwxz24-9]{5})(?![\w-])"
        ),
    ),
    (
        "<PATH>",
        re.compile(
            r"(?:(?<![\w\\])[A-Za-z]:\\|(?<![\w\\])\\\\(?=[\w.$-]+\\[\w.$-]))"
            r"[^\s'\"<>:|?*]+"  # Windows drive or UNC path
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
# CSI (colour, cursor) and OSC sequences, as the ESC character or written out in a repr.
_ESCAPES = re.compile(
    r"(?:\x1b|\\x1b|\\033|\\u001b)\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"
)
# A failure location: `path/file.ext:42:` at a line start (pytest's crash line, Go, ...).
_LOCATION = re.compile(r"(?m)^\s*([\w./\\-]+\.\w+):(\d+):")
# What a line may hold and still say nothing: placeholders, exception names, keywords.
_UNINFORMATIVE = re.compile(
    r"<[A-Z]+>|\b\w*(?:Error|Exception|Failure)\b|\b(?:assert|not|is|in|and|or|None|True|False)\b"
)
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


def strip_escapes(message: str) -> str:
    """The message without terminal escape sequences (real or written out in a repr)."""
    return _ESCAPES.sub("", message)


def is_generic(text: str) -> bool:
    """Whether a normalised line carries no word of its own (`assert False`, `AssertionError`)."""
    return not re.search(r"[A-Za-z]{2,}", _UNINFORMATIVE.sub(" ", text))


def failure_location(message: str) -> str | None:
    """The last `file:line` location in a failure report, or None."""
    found = list(_LOCATION.finditer(message))
    if not found:
        return None
    last = found[-1]
    return f"{last.group(1).replace(chr(92), '/')}:{last.group(2)}"


def normalise(message: str, extra_patterns: Iterable[str] = ()) -> str:
    """Mask the volatile parts of a failure message's meaningful first line."""
    message = strip_escapes(message)
    text = _mask_line(first_meaningful_line(message), extra_patterns)
    if is_generic(text):
        where = failure_location(message)
        if where is not None:
            text = f"{text} @ {where}"
    return text[:MAX_SIGNATURE_TEXT] or "<EMPTY>"


def _mask_line(text: str, extra_patterns: Iterable[str]) -> str:
    for pattern in _compile_user(tuple(extra_patterns)):
        text = pattern.sub("<MASK>", text)
    for placeholder, pattern in _MASKS:
        text = pattern.sub(placeholder, text)
        if placeholder == _TOKEN_AFTER:
            text = _mask_tokens(text)
    return _SPACES.sub(" ", text).strip()


def sign(message: str | None, extra_patterns: Iterable[str] = ()) -> Signature | None:
    """The signature of a failure message, or None when there is no message at all."""
    if message is None or not message.strip():
        return None
    text = normalise(message, extra_patterns)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return Signature(hash=digest, text=text)
