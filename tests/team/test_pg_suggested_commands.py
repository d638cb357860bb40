"""The commands flaketui suggests for a server name its URL without the password, and say how
to give it: pasted with the password in PGPASSWORD, they work."""

from __future__ import annotations

import shlex
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from flaketui.cli import cli
from flaketui.core.history.address import (
    MASK,
    PASSWORD_LEFT_OUT,
    command_address,
    mask_url,
)
from tests.core.test_outages import _report_file
from tests.pgcluster import Cluster

NOW = "2026-11-02T00:00:00Z"

passwords = st.text(
    st.characters(codec="ascii", categories=("L", "N", "P", "S")), min_size=1, max_size=20
)


@given(password=passwords, in_query=st.booleans(), masked=st.booleans())
def test_a_suggested_url_leaves_the_password_out(
    password: str, in_query: bool, masked: bool
) -> None:
    secret = quote(password, safe="")
    url = (
        f"postgresql://flaketui@db.example:5433/ci?sslmode=require&password={secret}"
        if in_query
        else f"postgresql://flaketui:{secret}@db.example:5433/ci?sslmode=require"
    )
    address, note = command_address(mask_url(url) if masked else url)
    assert address == "postgresql://flaketui@db.example:5433/ci?sslmode=require"
    assert note == PASSWORD_LEFT_OUT


@pytest.mark.parametrize(
    "address",
    [
        "postgresql://flaketui@db.example/ci",
        "postgresql:///ci?host=/var/run/postgresql&user=flaketui",  # a local socket: no host
        "postgresql://",
        "POSTGRES://flaketui@db.example/ci",
        "ci runs/history.db",
        "h.db",
    ],
)
def test_an_address_without_a_password_is_left_as_it_is(address: str) -> None:
    assert command_address(address) == (address, None)
    if "://" in address:
        assert mask_url(address) == address


words = st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=8)


@given(
    scheme=st.sampled_from(["postgresql", "postgres", "POSTGRESQL", "PostgreS"]),
    user=st.none() | words,
    password=st.none() | passwords,
    host=st.sampled_from(["", "db.example", "127.0.0.1", "[::1]"]),
    port=st.none() | st.integers(1, 65535),
    database=st.none() | words,
    query=st.lists(st.tuples(words, words), max_size=3),
    in_query=st.booleans(),
)
def test_a_url_keeps_every_part_but_its_password(
    scheme: str,
    user: str | None,
    password: str | None,
    host: str,
    port: int | None,
    database: str | None,
    query: list[tuple[str, str]],
    in_query: bool,
) -> None:
    secret = None if password is None else quote(password, safe="")
    userinfo = "" if user is None else user + (f":{secret}" if secret and not in_query else "")
    netloc = (f"{userinfo}@" if user is not None else "") + host + (f":{port}" if port else "")
    params = [f"{k}={v}" for k, v in query if k.lower() != "password"]
    if secret and (in_query or user is None):
        params.append(f"password={secret}")
    url = f"{scheme}://{netloc}/{database or ''}" + ("?" + "&".join(params) if params else "")
    bare_netloc = (f"{user}@" if user is not None else "") + host + (f":{port}" if port else "")
    kept = [p for p in params if not p.startswith("password=")]
    bare = f"{scheme}://{bare_netloc}/{database or ''}" + ("?" + "&".join(kept) if kept else "")
    address, note = command_address(url)
    assert address == bare
    assert note == (PASSWORD_LEFT_OUT if secret else None)
    assert command_address(mask_url(url))[0] == bare
    if not secret:
        assert mask_url(url) == url


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "PostgreSQL"])
def test_a_local_socket_url_keeps_its_empty_host(scheme: str) -> None:
    url = f"{scheme}:///ci?host=/var/run/postgresql&password=s3cret&sslmode=disable"
    assert mask_url(url) == (
        f"{scheme}:///ci?host=/var/run/postgresql&password={MASK}&sslmode=disable"
    )
    assert command_address(url) == (
        f"{scheme}:///ci?host=/var/run/postgresql&sslmode=disable",
        PASSWORD_LEFT_OUT,
    )


def pasted(line: str) -> list[str]:
    """The arguments of the command a line gives between backticks, as a shell splits it."""
    words = shlex.split(line.split("`")[1])
    assert words[0] == "flaketui"
    return words[1:]


@pytest.mark.parametrize("socket", [False, True], ids=["tcp", "local-socket"])
def test_the_review_hint_for_a_server_works_once_pasted(
    pg_cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, socket: bool
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("PGPASSWORD", raising=False)
    url = pg_cluster.create_database()
    database = urlsplit(url).path[1:]
    bare = pg_cluster.url(database, password=False)
    if socket:
        url, bare = pg_cluster.socket_url(database), pg_cluster.socket_url(database, password=False)
    for run_id, failing, ts in (("r1", 6, "10:00"), ("r2", 0, "10:30")):
        report = _report_file(tmp_path / f"{run_id}.xml", failing=failing)
        result = CliRunner().invoke(
            cli,
            ["ingest", url, str(report), "--run-id", run_id, "--no-detect",
             "--timestamp", f"2026-11-01T{ts}:00Z"],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
    listed = CliRunner().invoke(cli, ["incident", "list", url, "--now", NOW])
    assert listed.exit_code == 0, listed.output
    assert pg_cluster.password not in listed.output and MASK not in listed.output
    hint = listed.output.splitlines()[-1]
    assert hint == (
        "1 suspected outage excluded from scoring: review with "
        f"`flaketui incident list {shlex.quote(bare)} --proposed --now {NOW}` "
        f"({PASSWORD_LEFT_OUT})"
    )

    monkeypatch.setenv("PGPASSWORD", pg_cluster.password)
    shown = CliRunner().invoke(cli, pasted(hint))
    assert shown.exit_code == 0, shown.output
    assert "OUTAGE " in shown.output
    assert pg_cluster.password not in shown.output and MASK not in shown.output
    assert "note:" not in shown.output  # the URL as typed holds no password
    with_password = CliRunner().invoke(cli, ["incident", "list", url, "--proposed"])
    assert pg_cluster.password not in with_password.output and MASK not in with_password.output
    last = with_password.output.splitlines()[-1]
    assert last == f"note: in the commands above, {PASSWORD_LEFT_OUT}"
    reject = next(line for line in shown.output.splitlines() if line.startswith("  reject: "))
    rejected = CliRunner().invoke(cli, shlex.split(reject.split(": ", 1)[1])[1:])
    assert rejected.exit_code == 0, rejected.output
