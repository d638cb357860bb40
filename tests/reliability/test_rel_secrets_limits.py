"""Bounded resources and secrets: a 50 MB failure message stores as a capped one, and secrets in
failure messages never reach the history file (checked on its raw bytes, WAL included)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import pytest
from reliability_support import child_command, child_env, invoke

from flaketui.core.ingest.redact import MAX_MESSAGE_BYTES, REDACTED

FIFTY_MB = 50 * 1024 * 1024
STREAM_CHUNK = 1024 * 1024
# The history of one small run is ~100 KB; a stored 50 MB message would show at once.
GROWTH_BOUND_BYTES = 1024 * 1024
# Streaming text: the parser's 64 KiB chunks and capture cap, not the 50 MB.
TEXT_PEAK_GROWTH_KIB = 40 * 1024


def _big_report(path: Path, where: str) -> Path:
    """A report whose one failure carries 50 MB, as element text or as the message attribute;
    written in 1 MB chunks so the test itself never holds it."""
    line = "E   assert response.status == 200 (got 503 from upstream)\n"
    chunk = (line * (STREAM_CHUNK // len(line) + 1))[:STREAM_CHUNK]
    with path.open("w", encoding="utf-8") as fh:
        fh.write('<?xml version="1.0"?>\n<testsuite name="s">\n')
        fh.write('<testcase classname="pkg.Mod" name="test_ok" time="0.1"/>\n')
        fh.write('<testcase classname="pkg.Mod" name="test_huge" time="1.0"><failure')
        if where == "attribute":
            fh.write(' message="')
            for _ in range(FIFTY_MB // STREAM_CHUNK):
                fh.write(chunk.replace("\n", "&#10;"))
            fh.write('"/>')
        else:
            fh.write(' message="">')
            for _ in range(FIFTY_MB // STREAM_CHUNK):
                fh.write(chunk)
            fh.write("</failure>")
        fh.write("</testcase>\n</testsuite>\n")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("where", ["text", "attribute"])
def test_a_50_mb_failure_message_is_stored_capped(tmp_path: Path, where: str) -> None:
    report = _big_report(tmp_path / f"{where}.xml", where)
    assert report.stat().st_size > FIFTY_MB
    proc = subprocess.run(
        child_command("ingest", report),
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    outcome = json.loads(proc.stdout.strip().splitlines()[-1])
    assert outcome["outcome"] == "landed", outcome
    db = Path(f"{report}.db")
    assert db.stat().st_size < GROWTH_BOUND_BYTES
    conn = sqlite3.connect(db)
    try:
        (stored,) = conn.execute(
            "SELECT r.message FROM results r JOIN tests t ON t.id = r.test"
            " WHERE t.test_id = 'pkg.Mod::test_huge'"
        ).fetchone()
        (example,) = conn.execute("SELECT max(length(CAST(example AS BLOB))) FROM signatures")
    finally:
        conn.close()
    assert len(stored.encode("utf-8")) <= MAX_MESSAGE_BYTES
    assert stored.startswith("E   assert response.status == 200")
    assert "truncated" in stored
    assert example[0] <= MAX_MESSAGE_BYTES
    growth = outcome["peak_kib"] - outcome["rss_before_kib"]
    print(f"{where}: peak RSS {outcome['peak_kib']} KiB, growth {growth} KiB")
    if where == "text":
        assert growth < TEXT_PEAK_GROWTH_KIB, outcome


# (name, failure message, the secret that must not be stored)
SECRETS = [
    ("url-credentials", "GET https://deploy:s3cr3tPa55w0rd@git.example.com/repo failed",
     "s3cr3tPa55w0rd"),
    ("url-query-token", "fetch https://api.example.com/v1/x?access_token=tok9Fh27Gk3LmQ&page=2",
     "tok9Fh27Gk3LmQ"),
    ("authorization-bearer", "request headers: {'Authorization': 'Bearer abc123DEF456ghi789'}",
     "abc123DEF456ghi789"),
    ("authorization-basic", "Authorization: Basic ZGVwbG95OnMzY3IzdA==", "ZGVwbG95OnMzY3IzdA"),
    ("password-assignment", "connect(host=db, user=app, password=hunter2Hunter2) refused",
     "hunter2Hunter2"),
    ("password-env", "DB_PASSWORD=Corr3ctHorseBattery psql exited 2", "Corr3ctHorseBattery"),
    ("aws-access-key-id", "botocore: invalid key AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("aws-secret-key", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("google-api-key", "maps call failed key=AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
     "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW"),
    ("azure-account-key",
     "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=q1W2e3R4t5Y6u7I8o9P0aSdFgHjKlZx==;"
     "EndpointSuffix=core.windows.net", "q1W2e3R4t5Y6u7I8o9P0aSdFgHjKlZx"),
    ("azure-sas-signature",
     "PUT https://acme.blob.core.windows.net/c/b?sv=2022-11-02&sp=rw&sig=Zx9Yw8Vu7Ts6Rq5Po4Nm3%3D",
     "Zx9Yw8Vu7Ts6Rq5Po4Nm3"),
    ("github-token", "git push: bad credentials ghp_16C7e42F292c6912E7710c838347Ae178B4a",
     "ghp_16C7e42F292c6912E7710c838347Ae178B4a"),
    ("slack-token", "slack post failed token xoxb-2873489234-AbCdEfGhIjKlMnOp",
     "xoxb-2873489234-AbCdEfGhIjKlMnOp"),
    ("jwt", "401 for eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV",
     "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV"),
    ("private-key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq9Zx\n"
     "-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEA7bq9Zx"),
    # Each rule of the masker has at least one shape here that only it masks.
    ("url-db-credentials", "OperationalError: postgres://app:Pg5ecretPass@db:5432/x",
     "Pg5ecretPass"),
    ("authorization-token-scheme", "headers: Authorization: Token 9a8b7c6d5e4f3a2b1c0d",
     "9a8b7c6d5e4f3a2b1c0d"),
    ("authorization-no-scheme", "{'authorization': 'k2J8sL0qW4eR6tY1uI3o'}",
     "k2J8sL0qW4eR6tY1uI3o"),
    ("bearer-other-header", 'curl -H "X-Auth: Bearer k9Lm3Np5Qr7St9Uv1Wx" failed',
     "k9Lm3Np5Qr7St9Uv1Wx"),
    ("password-json", 'payload {"password": "Tr0ub4dor&3", "user": "x"}', "Tr0ub4dor"),
    ("password-flag", "mysql --password=hunter22xyz -u root", "hunter22xyz"),
    ("aws-session-key-id", "ExpiredToken for ASIAY34FZKBOKMUTVV7A", "ASIAY34FZKBOKMUTVV7A"),
    ("github-fine-grained-pat",
     "remote: bad token github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF",
     "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF"),
    ("github-oauth", "token gho_16C7e42F292c6912E7710c838347Ae178B4b rejected",
     "gho_16C7e42F292c6912E7710c838347Ae178B4b"),
    ("slack-user-token", "slack: xoxp-1234567890-0987654321-abcdefABCDEF",
     "xoxp-1234567890-0987654321-abcdefABCDEF"),
    ("slack-refresh-token", "slack: xoxe-1-My0xLTEyMzQ1Njc4OTAtYWJjZGVm", "My0xLTEyMzQ1Njc4OTAt"),
    ("slack-app-token", "socket mode: xapp-1-A0123456789-1234567890123-abcdef0123456789",
     "abcdef0123456789"),
    ("openssh-private-key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
     "-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAA"),
    ("private-key-cut-short", "key: -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0 ...",
     "MIIEvQIBADANBgkqhkiG9w0"),
]  # fmt: skip
# Where in a report a message can hide: each one is stored as an attempt's message.
PLACES = {
    "failure-attribute": lambda m: f"<failure message={quoteattr(m)}/>",
    "failure-text": lambda m: f"<failure>{escape(m)}</failure>",
    "error-attribute": lambda m: f"<error message={quoteattr(m)}/>",
    "skip-reason": lambda m: f"<skipped message={quoteattr(m)}/>",
    "flaky-failure": lambda m: f"<flakyFailure message={quoteattr(m)}/>",
    "rerun-text": lambda m: f"<failure message='x'/><rerunFailure>{escape(m)}</rerunFailure>",
}


def _history_bytes(folder: Path) -> bytes:
    """The raw bytes of the history and any WAL or journal beside it."""
    return b"".join(p.read_bytes() for p in sorted(folder.glob("history.db*")))


def test_secrets_in_failure_messages_never_reach_the_history_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cases = []
    for name, message, _ in SECRETS:
        for place, render in PLACES.items():
            cases.append(
                f'<testcase classname="pkg.{name}" name="{place}" time="0.1">'
                f"{render(message)}</testcase>"
            )
    report = tmp_path / "secrets.xml"
    report.write_text(f'<?xml version="1.0"?>\n<testsuite name="s">{"".join(cases)}</testsuite>\n')
    result = invoke("ingest", tmp_path / "history.db", report, "--no-detect", "--run-id", "r")
    assert result.exit_code == 0, result.output
    raw = _history_bytes(tmp_path)
    leaked = sorted({name for name, _, secret in SECRETS if secret.encode() in raw})
    assert leaked == []
    conn = sqlite3.connect(tmp_path / "history.db")
    try:
        masked = conn.execute(
            "SELECT count(*) FROM results WHERE message LIKE ?", (f"%{REDACTED}%",)
        ).fetchone()[0]
    finally:
        conn.close()
    assert masked == len(SECRETS) * len(PLACES)
