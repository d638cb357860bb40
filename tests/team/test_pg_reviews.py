"""Suspected outages' reviews on a real server: pushes, syncs and the review commands carry
each outage's state as a merge of history files does, so a replica scores as the file pushed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli import cli
from tests.connections import connected

SAMPLE_DATA = Path(__file__).resolve().parents[2] / "sample_data" / "history.db"
NOW = ("--now", "2026-11-30T18:00:00Z")
DISK = "outage-20261001-1015-453349"  # both proposed in the sample history
CACHE = "outage-20261124-1153-a103f9"
# The days around the two outages (and the runs after each that pass again): a quarter of the
# sample's results, which every test pushes and syncs whole several times.
KEPT = "ts < '2026-10-04' OR ts >= '2026-11-20'"


def invoke(*args: object, code: int = 0) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result.output


def report(history: object) -> str:
    return invoke("report", history, "--format", "csv", *NOW)


def outages(history: object) -> dict[str, str]:
    """Each outage's state as `incident list --proposed` words it."""
    listed = invoke("incident", "list", history, "--proposed", *NOW)
    return {
        line.split()[1].rstrip(":"): line.rsplit("; ", 1)[1]
        for line in listed.splitlines()
        if line.startswith("OUTAGE ")
    }


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample history cut to the days around its outages, with its rollups rebuilt."""
    from flaketui.core.history.store import history_file, transaction
    from flaketui.core.rollups import build as rollups

    path = tmp_path_factory.mktemp("sample") / "history.db"
    shutil.copyfile(SAMPLE_DATA, path)
    with history_file(path) as db, transaction(db.conn):
        db.conn.execute(f"DELETE FROM runs WHERE NOT ({KEPT})")
        db.conn.execute(
            "DELETE FROM tests WHERE id NOT IN (SELECT test FROM results)"
            " AND test_id NOT IN (SELECT test_id FROM audit_log)"
        )
        db.conn.execute(
            "DELETE FROM signatures"
            " WHERE id NOT IN (SELECT signature FROM results WHERE signature IS NOT NULL)"
        )
        rollups.rebuild(db.conn)
    return path


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def history(tmp_path: Path, sample: Path) -> Path:
    copy = tmp_path / "h.db"
    shutil.copyfile(sample, copy)
    return copy


def test_a_replica_scores_as_the_file_pushed(pg_url: str, tmp_path: Path, history: Path) -> None:
    invoke("incident", "reject", history, CACHE)
    invoke("merge", pg_url, history)
    replica = tmp_path / "replica.db"
    invoke("sync", pg_url, replica)
    assert report(replica) == report(history)
    listed = invoke("incident", "list", replica, *NOW)
    assert f"{DISK}: 1 run, suspected outage" in listed and CACHE not in listed
    assert outages(replica) == outages(history)
    # A replica pushed back keeps the proposal a proposal, for every later replica.
    invoke("merge", pg_url, replica)
    invoke("sync", pg_url, tmp_path / "second.db")
    assert report(tmp_path / "second.db") == report(history)
    assert "1 run counts again" in invoke("incident", "reject", replica, DISK)


def test_reviews_through_the_url_are_the_servers(pg_url: str, tmp_path: Path, sample: Path) -> None:
    # A history without proposals: the replica proposes its outages itself.
    plain = tmp_path / "plain.db"
    shutil.copyfile(sample, plain)
    with connected(plain) as conn:
        conn.execute("DELETE FROM incidents WHERE note LIKE 'outage:%'")
        conn.execute("UPDATE runs SET incident = NULL WHERE incident LIKE 'outage-%'")
        conn.execute("DELETE FROM meta WHERE key = 'outage_reviews'")
    invoke("merge", pg_url, plain)
    assert set(outages(pg_url)) == {DISK, CACHE}
    assert "stays excluded" in invoke("incident", "accept", pg_url, DISK)
    assert "count again" in invoke("incident", "reject", pg_url, CACHE)
    out = invoke("incident", "reject", pg_url, CACHE, code=1)
    assert f"no proposed outage tagged '{CACHE}'" in out and len(out.strip().splitlines()) == 1
    # Another desk's replica reads the same decisions, and scores as the cached replica.
    other = tmp_path / "other.db"
    invoke("sync", pg_url, other)
    listed = invoke("incident", "list", other, *NOW)
    assert f"{DISK}: 1 run, outage " in listed and CACHE not in listed
    assert outages(other) == {CACHE: "rejected: its runs count"}
    assert report(other) == report(pg_url)


def test_differing_decisions_keep_the_destinations(
    pg_url: str, tmp_path: Path, history: Path, sample: Path
) -> None:
    invoke("merge", pg_url, history)
    invoke("incident", "accept", pg_url, DISK)
    desk = tmp_path / "desk.db"
    shutil.copyfile(sample, desk)
    invoke("incident", "reject", desk, DISK)
    invoke("incident", "reject", desk, CACHE)
    pushed = invoke("merge", pg_url, desk)
    assert f"outage {DISK}: decided otherwise in a merged history; kept as decided here" in pushed
    # The server kept its acceptance and took the rejection nobody had decided otherwise.
    fresh = tmp_path / "fresh.db"
    invoke("sync", pg_url, fresh)
    assert outages(fresh) == {CACHE: "rejected: its runs count"}
    assert f"{DISK}: 1 run, outage " in invoke("incident", "list", fresh, *NOW)
    # The desk's file keeps its own rejection, and says so.
    synced = invoke("sync", pg_url, desk)
    assert f"outage {DISK}: decided otherwise on the server; kept as decided here" in synced
    assert outages(desk)[DISK] == "rejected: its runs count"


def test_a_suspected_outages_tag_is_refused_on_the_server(
    pg_url: str, tmp_path: Path, history: Path
) -> None:
    invoke("incident", "reject", history, CACHE)
    invoke("merge", pg_url, history)
    window = ("--from", "2026-01-01T00:00:00Z", "--to", "2026-01-02T00:00:00Z")
    # A rejected outage has no incident row left, but its tag stays taken.
    out = invoke("incident", "add", pg_url, CACHE, *window, code=1)
    assert f"{CACHE!r} is a suspected outage's tag" in out, out
    assert len(out.strip().splitlines()) == 1
    assert "already exists" in invoke("incident", "add", pg_url, DISK, *window, code=1)
    # As a history file refuses them.
    out = invoke("incident", "add", history, CACHE, *window, code=1)
    assert f"{CACHE!r} is a suspected outage's tag" in out
