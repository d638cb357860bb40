"""Failure messages are masked and capped before they are stored."""

from __future__ import annotations

import string
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flaketui.core.ingest import redact
from flaketui.core.ingest.redact import MAX_MESSAGE_BYTES, REDACTED, clean_message, mask_secrets

ALNUM = string.ascii_letters + string.digits
# Filler text has no digits, and every generated secret has one: a secret cannot reappear in
# the output by way of the filler.
FILLER = st.text(alphabet=string.ascii_letters + " .,:;()\n-", max_size=40)


def _with_digit(body: str) -> str:
    return body[:-1] + "7"


def secret_value(min_size: int = 8, max_size: int = 30, alphabet: str = ALNUM):
    return st.text(alphabet=alphabet, min_size=min_size, max_size=max_size).map(_with_digit)


# Each strategy gives (text containing the secret, the secret).
SHAPES = {
    "url": st.tuples(secret_value(), st.sampled_from(["https", "http", "postgres", "git+ssh"])).map(
        lambda t: (f"{t[1]}://deploy:{t[0]}@db.internal:5432/x", t[0])
    ),
    "bearer": secret_value(12).map(lambda s: (f"Authorization: Bearer {s}", s)),
    "basic": secret_value(12).map(lambda s: (f"authorization=Basic {s}", s)),
    "password": st.tuples(
        st.sampled_from(["password", "DB_PASSWORD", "passwd", "secret", "token", "api_key"]),
        st.sampled_from(["=", ": ", "="]),
        secret_value(),
    ).map(lambda t: (f"{t[0]}{t[1]}{t[2]}", t[2])),
    "json": st.tuples(st.sampled_from(["password", "apiKey", "client_secret"]), secret_value()).map(
        lambda t: (f'{{"{t[0]}": "{t[1]}"}}', t[1])
    ),
    "aws": st.tuples(
        st.sampled_from(["AKIA", "ASIA"]),
        st.text(alphabet=string.ascii_uppercase + string.digits, min_size=16, max_size=16),
    ).map(lambda t: (t[0] + _with_digit(t[1]), t[0] + _with_digit(t[1]))),
    "github": st.tuples(st.sampled_from(["ghp_", "gho_", "ghs_"]), secret_value(36, 36)).map(
        lambda t: (t[0] + t[1], t[0] + t[1])
    ),
    "github_pat": secret_value(40, 60, ALNUM + "_").map(
        lambda s: ("github_pat_" + s, "github_pat_" + s)
    ),
    "slack": st.tuples(st.sampled_from("baprs"), secret_value(20, 40, ALNUM + "-")).map(
        lambda t: (f"xox{t[0]}-{t[1]}", f"xox{t[0]}-{t[1]}")
    ),
    "jwt": st.tuples(
        secret_value(10, 30, ALNUM + "_-"),
        secret_value(10, 30, ALNUM + "_-"),
        secret_value(10, 30, ALNUM + "_-"),
    ).map(lambda t: (f"eyJ{t[0]}.{t[1]}.{t[2]}", f"{t[1]}.{t[2]}")),
    "private_key": secret_value(40, 80).map(
        lambda s: (f"-----BEGIN RSA PRIVATE KEY-----\n{s}\n-----END RSA PRIVATE KEY-----", s)
    ),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_no_masked_shape_survives(shape: str, data: st.DataObject) -> None:
    text, secret = data.draw(SHAPES[shape])
    message = f"{data.draw(FILLER)} {text} {data.draw(FILLER)}"
    cleaned = clean_message(message)
    assert cleaned is not None
    assert secret not in cleaned
    assert REDACTED in cleaned


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "clone failed: https://x-access-token:abc123def@github.com/o/r.git",
            "clone failed: https://<REDACTED>@github.com/o/r.git",
        ),
        ("Authorization: Bearer abc.def.ghi123", "Authorization: Bearer <REDACTED>"),
        ("login failed password=hunter22 for bob", "login failed password=<REDACTED> for bob"),
        ("AssertionError: assert 3 == 4", "AssertionError: assert 3 == 4"),
        ("ssh://git@github.com/o/r", "ssh://git@github.com/o/r"),  # a user name is no secret
        ("InvalidTokenError: expired", "InvalidTokenError: expired"),
    ],
)
def test_masking_examples(message: str, expected: str) -> None:
    assert clean_message(message) == expected


def test_none_stays_none() -> None:
    assert clean_message(None) is None


def test_unterminated_private_key_is_masked_to_the_end() -> None:
    assert clean_message("key: -----BEGIN PRIVATE KEY-----\nMIIEv") == "key: <REDACTED>"


@settings(max_examples=30, deadline=None)
@given(st.text(min_size=0, max_size=30_000))
def test_cap_keeps_the_head_and_says_how_much_was_dropped(message: str) -> None:
    cleaned = clean_message(message)
    assert cleaned is not None
    size = len(cleaned.encode("utf-8"))
    assert size <= max(MAX_MESSAGE_BYTES, len(message.encode("utf-8", "replace")))
    if len(message.encode("utf-8", "replace")) <= MAX_MESSAGE_BYTES:
        assert "[truncated" not in cleaned or "[truncated" in message
    else:
        assert size <= MAX_MESSAGE_BYTES


def test_cap_marker_counts_the_dropped_bytes() -> None:
    message = "E" * 10_000 + "é" * 50_000 + "tail"  # 110 004 bytes, beyond the pre-mask cut too
    cleaned = clean_message(message)
    assert cleaned is not None
    head, _, marker = cleaned.partition("…[truncated ")
    assert message.startswith(head)
    dropped = int(marker.removesuffix(" bytes]"))
    assert len(head.encode()) + dropped == len(message.encode())
    assert len(cleaned.encode()) <= MAX_MESSAGE_BYTES


def _every_rule(message: str) -> str:
    """mask_secrets without its gates: every rule's pattern runs, in order."""
    for pattern, replacement, _gate in redact._RULES:
        message = pattern.sub(replacement, message)
    return message.replace(":  " + REDACTED, ": " + REDACTED)


# Pieces of secrets, of near misses and of letters that case-insensitive matching pairs with
# ASCII ones (long s, dotless i, Kelvin sign), joined at random.
PIECES = [
    "password", "PassWd", "pwd", "SECRET", "token", "api-key", "ApiKey", "access_key",
    "private-key", "client_secret", "=", ": ", '"', "'", " ", "\n", ";", "&", "?sig=",
    "Authorization", "authorization: ", "Bearer ", "basic ", "token ", "abcdEFGH1234",
    "eyJhbGciOi", ".", "AKIA", "ASIA", "ABCDEFGHIJKLMNOP", "ghp_", "gho_", "github_pat_",
    "xoxb-", "xapp-", "AIza", "A" * 35, "AccountKey=", "SharedAccessKey =", "https://",
    "u:p@", "@", "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----",
    "pa\u017f\u017fword", "authori\u017eation", "to\u212aen", "\u0131", "\u017f", "\u212a",
]  # fmt: skip


# One whole match of every rule.
WHOLE = [
    "-----BEGIN EC PRIVATE KEY-----\nabc\n-----END EC PRIVATE KEY-----", "git+ssh://me:pw@host/",
    "Authorization: Negotiate abc", "bearer abcdEFGH1234", "Basic abcdEFGH1234",
    "eyJhbGci.eyJzdWIi.sig", "AKIAABCDEFGHIJKLMNOP", "ghr_abcdefghijklmnop1",
    "github_pat_abcdefghijklmnop1", "xoxe-abcdefgh1", "AIza" + "b" * 35, "AccountKey=abc;",
    "&sig=abc", "client-secret: 'abc'", "apikey=abc",
]  # fmt: skip


def _recase(text: str, flips: list[bool]) -> str:
    padded = flips + [False] * (len(text) - len(flips))
    return "".join(c.swapcase() if flip else c for c, flip in zip(text, padded, strict=False))


PIECE = (
    st.sampled_from(PIECES)
    | st.text(max_size=6)
    | st.builds(_recase, st.sampled_from(WHOLE), st.lists(st.booleans(), max_size=40))
)


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECE, max_size=24).map("".join))
def test_the_gates_skip_only_rules_that_cannot_match(message: str) -> None:
    assert mask_secrets(message) == _every_rule(message)


def test_a_rule_is_skipped_when_its_words_are_absent() -> None:
    """The gates do skip: a message naming no gate word runs no pattern at all."""
    calls: list[str] = []

    class Counting:
        def __init__(self, pattern: Any) -> None:
            self.pattern = pattern

        def sub(self, replacement: str, message: str) -> str:
            calls.append(self.pattern.pattern)
            return self.pattern.sub(replacement, message)

    rules = [(Counting(p), r, g) for p, r, g in redact._RULES]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(redact, "_RULES", rules)
        assert mask_secrets("AssertionError: assert 1 + 1 == 3") == (
            "AssertionError: assert 1 + 1 == 3"
        )
        assert calls == []
        assert mask_secrets("password=hunter42") == f"password={REDACTED}"
        assert len(calls) == 1
        calls.clear()
        assert mask_secrets("pa\u017f\u017fword=hunter42") == f"pa\u017f\u017fword={REDACTED}"
        assert len(calls) == len(rules)  # not ASCII: every rule runs


def test_rules_compile_only_when_a_message_reaches_them() -> None:
    # In a fresh interpreter, as a test session's recorder loads the masking: a failure message
    # without any gate word compiles no rule, one with a URL compiles the URL rule alone.
    code = (
        "from flaketui.core.ingest import redact\n"
        "def compiled(): return [r[0].pattern for r in redact._RULES if r[0].compiled]\n"
        "redact.clean_message('AssertionError: assert 1 + 1 == 3')\n"
        "print(len(compiled()))\n"
        "redact.clean_message('cannot reach https://me:pw@db.example/x')\n"
        "print(len(compiled()), '://' in compiled()[0])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:2] == ["0", "1 True"]
