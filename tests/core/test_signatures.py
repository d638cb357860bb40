"""Failure signatures: masks with readable placeholders, user patterns, versioning."""

from __future__ import annotations

import pytest

from flaketui.core.ingest import signatures
from flaketui.core.ingest.resign import scheme_of
from flaketui.core.ingest.signatures import first_meaningful_line, normalise, sign


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        # digits
        ("AssertionError: assert 41 == 42", "AssertionError: assert <NUM> == <NUM>"),
        ("took 1.25s, limit 0.5s", "took <NUM>s, limit <NUM>s"),
        # long hex and 0x numbers (a short hex-looking word stays)
        ("object at 0x7f3a9c2e1b80 is stale", "object at <HEX> is stale"),
        ("commit 3f9c0a1b2c3d4e5f not found", "commit <HEX> not found"),
        ("request 3f9c0a1b failed", "request <HEX> failed"),  # 8 hex digits: an id
        ("request 3f9c0a1 failed", "request <NUM>f<NUM>c<NUM>a<NUM> failed"),  # 7: not yet
        ("cafe closed", "cafe closed"),
        # UUIDs
        ("job 550e8400-e29b-41d4-a716-446655440000 lost", "job <UUID> lost"),
        # base64-like tokens
        ("token ghp_16C7e42F292c6912E7710c838347Ae178B4a refused", "token <TOKEN> refused"),
        ("body dGhpcyBpcyBhIHRlc3QgbWVzc2FnZQ== rejected", "body <TOKEN> rejected"),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0 bad", "jwt <TOKEN>.<TOKEN> bad"),
        # paths: POSIX, temp, home-relative, Windows
        (
            "FileNotFoundError: /tmp/pytest-of-ci/pytest-12/db.sock",
            "FileNotFoundError: <PATH>",
        ),
        ("cannot open ~/cache/data.bin", "cannot open <PATH>"),
        ("cannot open C:\\Users\\ci\\AppData\\x.txt now", "cannot open <PATH> now"),
        # ports, IPs, URLs, timestamps
        ("connect to 127.0.0.1:54321 failed", "connect to <IP><PORT> failed"),
        ("connect to db:5432 failed", "connect to db<PORT> failed"),
        ("connect to db:443 failed", "connect to db<PORT> failed"),
        ("GET host:80 refused", "GET host<PORT> refused"),
        # a colon before one digit or six is not a port
        ("retry host:8 again", "retry host:<NUM> again"),
        ("offset x:123456 bad", "offset x:<NUM> bad"),
        ("GET https://api.example/v1/orders?id=7 -> 503", "GET <URL> -> <NUM>"),
        ("at 2026-11-30T18:00:00Z and 09:15:02.120", "at <TS> and <TS>"),
        # whitespace collapses
        ("a   b\tc", "a b c"),
    ],
)
def test_masks_use_readable_placeholders(message: str, expected: str) -> None:
    assert normalise(message) == expected


def test_identifiers_with_digits_stay_readable() -> None:
    assert normalise("AssertionError: test_checkout_3ds_challenge: expected event") == (
        "AssertionError: test_checkout_<NUM>ds_challenge: expected event"
    )


def test_first_meaningful_line_keeps_exception_type() -> None:
    message = "\n\nTraceback (most recent call last)\nValueError: bad 12\n  File x.py, line 3"
    assert first_meaningful_line(message) == "ValueError: bad 12"
    assert normalise(message) == "ValueError: bad <NUM>"
    assert normalise("   \n\t") == "<EMPTY>"


def test_one_cause_one_signature_despite_volatile_parts() -> None:
    # The sample's database-sidecar cause, across ports, temp paths and errno text.
    first = sign(
        "ConnectionRefusedError: [Errno 111] connect to 127.0.0.1:54012 failed "
        "(socket /tmp/pytest-of-ci/pytest-3/db.sock)"
    )
    second = sign(
        "ConnectionRefusedError: [Errno 111] connect to 127.0.0.1:59981 failed "
        "(socket /tmp/pytest-of-ci/pytest-17/db.sock)\nmore detail 0xdeadbeef"
    )
    other = sign("TimeoutError: QueuePool limit of size 5 overflow 10 reached")
    assert first is not None and second is not None and other is not None
    assert first == second
    assert first.text == (
        "ConnectionRefusedError: [Errno <NUM>] connect to <IP><PORT> failed (socket <PATH>)"
    )
    assert first.hash != other.hash
    assert len(first.hash) == 16


def test_no_message_has_no_signature() -> None:
    assert sign(None) is None
    assert sign("  \n ") is None


def test_user_mask_patterns_apply_first() -> None:
    plain = normalise("tenant acme-eu-west failed")
    masked = normalise("tenant acme-eu-west failed", [r"acme-[a-z-]+"])
    assert plain == "tenant acme-eu-west failed"
    assert masked == "tenant <MASK> failed"
    one = sign("tenant acme-eu-west failed", [r"acme-[a-z-]+"])
    two = sign("tenant acme-us-east failed", [r"acme-[a-z-]+"])
    assert one is not None and one == two


def test_text_is_capped() -> None:
    assert len(normalise("x" * 1000)) == signatures.MAX_SIGNATURE_TEXT


def test_the_algorithm_version_is_part_of_the_scheme() -> None:
    # flaketui.core.ingest.resign re-signs stored messages when the scheme changes; the version and
    # the user's patterns both name it, so bumping either regroups instead of splitting.
    version = signatures.SIGNATURE_VERSION
    assert scheme_of(()).startswith(f"v{version}:")
    assert scheme_of((), version=version + 1) != scheme_of(())
    assert scheme_of(["tenant-[a-z]+"]) != scheme_of(())
