"""The signature scheme a history's failure messages are signed under.

A signature depends on the normalisation algorithm (SIGNATURE_VERSION, which
flaketui.core.ingest.signatures implements) and on the user's `mask_patterns`. The scheme
names both; a history keeps the one its signatures were made with in `meta` under SCHEME_KEY,
and flaketui.core.ingest.resign signs every stored message again when it changes. A history
without the key was signed with version 1 and no user patterns.

This module is what a writer needs to record the scheme with a history's first run: no pattern
is compiled here, so a recording session whose tests all pass loads no signing code.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable

# Bump when the normalisation changes: stored results are then re-signed, not split.
# 2: identifiers with a digit (test_checkout_3ds_challenge) are no longer <TOKEN>.
# 3: escapes stripped first, pod names and IPv6 masked, drives and UNC paths need a word
#    boundary, generic lines carry their failure location.
SIGNATURE_VERSION = 3
SCHEME_KEY = "signature_scheme"


def scheme_of(patterns: Iterable[str], version: int = SIGNATURE_VERSION) -> str:
    """The scheme string for an algorithm version and a list of user mask patterns."""
    digest = hashlib.sha256(json.dumps(list(patterns)).encode("utf-8")).hexdigest()[:12]
    return f"v{version}:{digest}"


LEGACY_SCHEME = scheme_of((), version=1)


def record_scheme(conn: sqlite3.Connection, patterns: Iterable[str]) -> None:
    """Write the current scheme into meta (inside the caller's transaction)."""
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
        (SCHEME_KEY, scheme_of(tuple(patterns))),
    )
