"""Every command and writer option given a postgresql:// URL: it works, or it says in one line
why it cannot (the password never shown)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli import cli
from tests.connections import sqlite_connect
from tests.core.cause_history import build
from tests.pgcluster import Cluster

REPORTS = Path(__file__).resolve().parents[2] / "sample_data" / "reports"
NOW = ("--now", "2026-11-30T18:00:00Z")


def invoke(*args: object, code: int = 0) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result.output


def stdout(*args: object) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stdout


def one_line_error(*args: object) -> str:
    output = invoke(*args, code=1)
    assert len(output.strip().splitlines()) == 1, output
    return output


def server_tables(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        return int(
            conn.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
            ).fetchone()[0]
        )


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_manifest_backfills_a_server_as_it_backfills_a_file(pg_url: str, tmp_path: Path) -> None:
    manifest = REPORTS / "manifest.jsonl"
    direct = tmp_path / "direct.db"
    assert invoke("ingest", direct, "--manifest", manifest) == (
        invoke("ingest", pg_url, "--manifest", manifest)
    )
    # Run again: every run is already there, nothing is added.
    again = invoke("ingest", pg_url, "--manifest", manifest)
    assert again.startswith("0 runs landed with 0 results, ")
    replica = tmp_path / "replica.db"
    invoke("sync", pg_url, replica)
    report = ("report", "--format", "json", *NOW)
    assert json.loads(invoke(report[0], replica, *report[1:])) == json.loads(
        invoke(report[0], direct, *report[1:])
    )
    tagged = "SELECT run_id, incident FROM runs WHERE incident IS NOT NULL ORDER BY 1"
    assert sqlite_connect(replica).execute(tagged).fetchall() == (
        sqlite_connect(direct).execute(tagged).fetchall()
    )


def test_manifest_into_a_server_refuses_bad_lines_and_lands_the_rest(
    pg_url: str, tmp_path: Path
) -> None:
    manifest = tmp_path / "runs.jsonl"
    lines = [
        {"run_id": "good", "file": str(REPORTS / "main-unit.xml"), "timestamp": NOW[1]},
        {"run_id": "missing", "file": str(tmp_path / "nope.xml"), "timestamp": NOW[1]},
        {"run_id": "shard", "file": str(REPORTS / "nightly-16-workers-shard1.xml")},
    ]
    manifest.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    direct = tmp_path / "direct.db"

    def both() -> str:
        results = [
            CliRunner().invoke(cli, ["ingest", str(target), "--manifest", str(manifest)])
            for target in (direct, pg_url)
        ]
        assert results[0].exit_code == results[1].exit_code
        assert results[0].output == results[1].output
        return results[1].output

    out = both()
    assert out.startswith("2 runs landed with ") and "1 line refused\n" in out
    assert "line 2:" in out and "nope.xml" in out
    # The second shard of a landed run: only its new report is added, then nothing.
    lines[2]["file"] = str(REPORTS / "nightly-16-workers-shard2.xml")
    manifest.write_text(json.dumps(lines[2]) + "\n")
    assert both().startswith("1 run landed with ")
    assert both().startswith("0 runs landed with 0 results, 1 already present")
    replica = tmp_path / "replica.db"
    invoke("sync", pg_url, replica)
    raw = (
        "SELECT r.run_id, t.test_id, x.attempt, x.outcome FROM results x"
        " JOIN runs r ON r.id = x.run JOIN tests t ON t.id = x.test ORDER BY 1, 2, 3"
    )
    assert sqlite_connect(replica).execute(raw).fetchall() == (
        sqlite_connect(direct).execute(raw).fetchall()
    )


def test_a_bad_manifest_leaves_the_server_untouched(pg_url: str, tmp_path: Path) -> None:
    output = one_line_error("ingest", pg_url, "--manifest", tmp_path / "missing.jsonl")
    assert "no such manifest" in output
    assert server_tables(pg_url) == 0


def test_prune_vacuum_on_a_server_says_why_and_prunes_nothing(pg_url: str) -> None:
    invoke(
        "ingest", pg_url, REPORTS / "main-unit.xml", "--run-id", "old",
        "--timestamp", "2020-01-01T00:00:00Z", "--no-detect",
    )  # fmt: skip
    output = one_line_error("prune", pg_url, "--older-than", "365", "--vacuum")
    assert "--vacuum applies to a history file" in output and "autovacuum" in output
    assert "pruned 1 run" in invoke("prune", pg_url, "--older-than", "365")


def test_readers_read_a_server_through_its_cached_replica(
    pg_url: str, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    built = build(tmp_path / "built.db", seed=5, runs=80)
    invoke("merge", pg_url, built)
    history = tmp_path / "h.db"  # a file written as the server's replica is: by merge
    invoke("merge", history, built)
    test = "tests/test_net.py::test_download"
    for command in (
        ("report", "--format", "json", *NOW),
        ("pivot", test, "--by", "all", "--format", "json", *NOW),
        ("changes", test, "--format", "json", *NOW),
        ("export", "--format", "json", *NOW),
    ):
        on_file = stdout(command[0], history, *command[1:])
        assert stdout(command[0], pg_url, *command[1:]) == on_file, command
    result = CliRunner().invoke(cli, ["check", pg_url, *NOW])
    assert result.exit_code == CliRunner().invoke(cli, ["check", str(history), *NOW]).exit_code
    assert len(list((cache / "flaketui" / "replicas").glob("*.db"))) == 1


@pytest.mark.parametrize(
    ("command", "why"),
    [
        (("resign", "{url}"), "re-signing rewrites a history file's signatures"),
        (("diagnose", "{url}", "t::x"), "diagnose records its experiment runs"),
    ],
)
def test_commands_that_need_a_file_say_why_with_the_password_masked(
    pg_cluster: Cluster, command: tuple[str, ...], why: str
) -> None:
    url = pg_cluster.url()
    output = one_line_error(*(part.format(url=url) for part in command))
    assert why in output and "flaketui sync URL FILE" in output
    assert pg_cluster.password not in output and "****" in output


def test_merging_servers_says_how_and_masks_passwords(pg_cluster: Cluster, tmp_path: Path) -> None:
    first, second = pg_cluster.create_database(), pg_cluster.create_database()
    output = one_line_error("merge", first, second)
    assert "sync the source into a file" in output and pg_cluster.password not in output
    invoke("ingest", first, REPORTS / "main-unit.xml", "--run-id", "a", "--no-detect")
    invoke("ingest", second, REPORTS / "main-unit.xml", "--run-id", "b", "--no-detect")
    # A file follows one server: two are refused before anything is written...
    output = one_line_error("merge", tmp_path / "both.db", first, second)
    assert "a history file follows one server" in output and pg_cluster.password not in output
    assert not (tmp_path / "both.db").exists()
    # ...and so is a second server, later.
    invoke("merge", tmp_path / "both.db", first)
    output = one_line_error("merge", tmp_path / "both.db", second)
    assert "replica of another server history" in output
    runs = sqlite_connect(tmp_path / "both.db").execute("SELECT run_id FROM runs").fetchall()
    assert runs == [("a",)]


def test_outage_proposals_are_reviewed_on_the_replica_and_survive_syncs(
    pg_url: str, tmp_path: Path, cache: Path
) -> None:
    history = build(tmp_path / "h.db", seed=11, runs=160)
    invoke("merge", pg_url, history)
    listed = invoke("incident", "list", pg_url, "--proposed")
    tags = [
        line.split()[1].rstrip(":") for line in listed.splitlines() if line.startswith("OUTAGE")
    ]
    assert len(tags) >= 2
    # The URL without its password, which the last line says how to give.
    assert "accept: flaketui incident accept postgresql://flaketui@127.0.0.1:" in listed
    assert "****" not in listed
    assert listed.splitlines()[-1].endswith("give it in ~/.pgpass or PGPASSWORD")
    assert "outage" in invoke("incident", "accept", pg_url, tags[0])
    assert "count again" in invoke("incident", "reject", pg_url, tags[1])
    # A rule added on the server reaches the replica; the replica's own reviews stay.
    invoke(
        "incident", "add", pg_url, "maintenance",
        "--from", "2026-11-05T00:00:00Z", "--to", "2026-11-05T06:00:00Z",
    )  # fmt: skip
    out = invoke("incident", "list", pg_url)
    assert f"\n{tags[0]}: " in f"\n{out}" and "\nmaintenance: " in f"\n{out}"
    assert tags[1] not in out
    proposed = invoke("incident", "list", pg_url, "--proposed")
    # The accepted outage is an incident now, no longer a proposal awaiting review.
    assert f"OUTAGE {tags[0]}:" not in proposed, proposed
    from flaketui.cli.commands.sync import replica_path

    rules = sqlite_connect(replica_path(pg_url)).execute("SELECT tag FROM incidents").fetchall()
    assert sorted(tag for (tag,) in rules) == sorted({tags[0], *tags[2:], "maintenance"})
    assert f"OUTAGE {tags[1]}:" in proposed and "rejected: its runs count" in proposed
    invoke("incident", "remove", pg_url, "maintenance")
    out = invoke("incident", "list", pg_url)
    assert f"\n{tags[0]}: " in f"\n{out}" and "maintenance" not in out
