"""Clean failure messages before storage: mask common secret shapes, then cap the size.

The cap is MAX_MESSAGE_BYTES (8 KiB of UTF-8): a longer message keeps its head and ends with
"…[truncated N bytes]", where N counts the UTF-8 bytes dropped. Masking runs before the cap (on
at most PRE_MASK_BYTES, so a huge message cannot make the regexes slow), so a secret is never
half-kept at the cut.
"""

from __future__ import annotations

import re

MAX_MESSAGE_BYTES = 8 * 1024
PRE_MASK_BYTES = 64 * 1024
REDACTED = "<REDACTED>"
TRUNCATION_MARKER = "…[truncated {dropped} bytes]"

# The key starts at a word start and is at most ~40 characters before its secret word: without
# both bounds a long run of letters makes the lazy prefix quadratic.
_SECRET_KEY = (
    r"(?<![\w.-])[\w.-]{0,40}?(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|client[_-]?secret)"
)


class _LazyPattern:
    """A rule's regular expression, compiled the first time a message reaches it: the gates
    keep most messages from most rules, and compiling them all cost every session that loads
    the masking (a test session's recorder among them) more than masking its messages."""

    __slots__ = ("compiled", "flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self.compiled: re.Pattern[str] | None = None

    def sub(self, replacement: str, message: str) -> str:
        """re.sub with this rule's pattern."""
        compiled = self.compiled
        if compiled is None:
            compiled = self.compiled = re.compile(self.pattern, self.flags)
        return compiled.sub(replacement, message)


# (pattern, replacement, gate) in order: whole blocks and headers first, then token shapes, then
# key=value pairs (whose value may already be a mask). A rule can only match an ASCII message
# whose lower-cased text contains one of its gate's words: mask_secrets skips the others without
# running their pattern (a message that is not ASCII runs every rule, since case-insensitive
# matching also pairs some non-ASCII letters with ASCII ones).
_SECRET_WORDS = ("password", "passwd", "pwd", "secret", "token", "key")
_RULES: tuple[tuple[_LazyPattern, str, tuple[str, ...]], ...] = (
    (
        _LazyPattern(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"
            r"(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|.*)",
            re.DOTALL,
        ),
        REDACTED,
        ("-----begin ",),
    ),
    # Credentials in URLs: scheme://user:password@host keeps the scheme and the host.
    (
        _LazyPattern(r"(?<![a-zA-Z0-9+.-])([a-zA-Z][a-zA-Z0-9+.-]{0,30}://)[^\s/@:]*:[^\s/@]*@"),
        r"\1" + REDACTED + "@",
        ("://",),
    ),
    (
        _LazyPattern(
            r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?)"
            r"(?:(bearer|basic|token|digest|negotiate)\s+)?[^\s\"',;]+"
        ),
        r"\1\2 " + REDACTED,
        ("authorization",),
    ),
    (
        _LazyPattern(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"),
        r"\1 " + REDACTED,
        ("bearer", "basic"),
    ),
    (
        _LazyPattern(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
        REDACTED,
        ("eyj",),
    ),
    (_LazyPattern(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), REDACTED, ("akia", "asia")),
    (
        _LazyPattern(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{16,}"),
        REDACTED,
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ),
    (_LazyPattern(r"\bgithub_pat_[A-Za-z0-9_]{16,}"), REDACTED, ("github_pat_",)),
    # Slack: xoxb/xoxp/xoxa/xoxe/xoxc... tokens and xapp app-level tokens.
    (_LazyPattern(r"\b(?:xox[a-z]|xapp)-[A-Za-z0-9-]{8,}"), REDACTED, ("xox", "xapp-")),
    (_LazyPattern(r"\bAIza[0-9A-Za-z_-]{35}"), REDACTED, ("aiza",)),  # Google API key
    # Azure storage / Service Bus connection strings and SAS signatures.
    (
        _LazyPattern(r"(?i)\b((?:account|sharedaccess)key\s*=\s*)[^;\s\"']+"),
        r"\1" + REDACTED,
        ("accountkey", "sharedaccesskey"),
    ),
    (_LazyPattern(r"([?&]sig=)[^&\s\"']+"), r"\1" + REDACTED, ("sig=",)),
    (
        _LazyPattern(
            r"(?i)(" + _SECRET_KEY + r")([\"']?\s*[=:]\s*)"
            r"(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;&)}\]]+)"
        ),
        r"\1\2" + REDACTED,
        _SECRET_WORDS,
    ),
)


def mask_secrets(message: str) -> str:
    """Replace credentials, tokens and key blocks with <REDACTED>."""
    gated = message.isascii()
    lower = message.lower() if gated else ""
    for pattern, replacement, gate in _RULES:
        if gated and not any(word in lower for word in gate):
            continue
        masked = pattern.sub(replacement, message)
        if masked != message:
            message = masked
            lower = message.lower() if gated else ""
    # The Authorization rule leaves a double space when no scheme was given.
    return message.replace(":  " + REDACTED, ": " + REDACTED)


def _head_bytes(text: str, limit: int) -> tuple[str, int]:
    """The longest head of text within limit UTF-8 bytes, and how many bytes were dropped."""
    raw = text.encode("utf-8", errors="replace")
    if len(raw) <= limit:
        return text, 0
    head = raw[:limit].decode("utf-8", errors="ignore")
    return head, len(raw) - len(head.encode("utf-8"))


def cap_message(message: str, limit: int = MAX_MESSAGE_BYTES, already_dropped: int = 0) -> str:
    """Cap a message to limit UTF-8 bytes, marker included, keeping its head."""
    raw_len = len(message.encode("utf-8", errors="replace"))
    if raw_len <= limit and not already_dropped:
        return message
    total = raw_len + already_dropped
    # Reserve room for the marker at its widest for this message.
    reserve = len(TRUNCATION_MARKER.format(dropped=total).encode("utf-8"))
    head, _ = _head_bytes(message, max(limit - reserve, 0))
    dropped = total - len(head.encode("utf-8"))
    return head + TRUNCATION_MARKER.format(dropped=dropped)


def clean_message(message: str | None) -> str | None:
    """Mask secrets and cap the size of a failure message; None stays None."""
    if message is None:
        return None
    head, pre_dropped = _head_bytes(message, PRE_MASK_BYTES)
    return cap_message(mask_secrets(head), already_dropped=pre_dropped)
