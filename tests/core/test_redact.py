"""Failure messages are masked and capped before they are stored."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flaketui.core.ingest.redact import MAX_MESSAGE_BYTES, REDACTED, clean_message

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
