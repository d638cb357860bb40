"""Every command leaves the history's folder as it found it: no -wal, -shm or -journal file stays
beside a history it opened, in WAL mode (as ingest writes) or with a rollback journal (as the
committed sample is), whether it only read, wrote, or refused after opening."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from flaketui.cli.commands import cli
from flaketui.core.history.outages import proposed_outages
from flaketui.core.history.store import uses_wal

NOW = "--now 2026-11-02T00:00:00Z"
TEST = "tests/test_c.py::test_0"
UNRECORDED = "tests/test_c.py::test_unrecorded"
SIDECARS = ("-wal", "-shm", "-journal")
# Readers: (command line, exit status); each only reads history.db.
READERS: dict[str, tuple[str, int]] = {
    "report": (f"report history.db {NOW}", 0),
    "report-html": (f"report history.db --format html -o r.html {NOW}", 0),
    "check": (f"check history.db --skip-file q.json --fail-on= {NOW}", 0),
    "check-refused": (f"check history.db --since no-such-run {NOW}", 2),
    "export": (f"export history.db --format json --skip-file q.json {NOW}", 0),
    "changes": (f"changes history.db {TEST} {NOW}", 0),
    "order": (f"order history.db {TEST} {NOW}", 0),
    "pivot": (f"pivot history.db {TEST} {NOW}", 0),
    "pivot-refused": (f"pivot history.db {UNRECORDED} {NOW}", 1),
    "lifecycle": (f"lifecycle history.db --skip-file q.json --no-gate {NOW}", 0),
    "incident-list": (f"incident list history.db {NOW}", 0),
    "incident-proposed": (f"incident list history.db --proposed {NOW}", 0),
    "merge-from": ("merge dest.db history.db", 0),
}
# Writers: the same, for commands that write history.db (or refuse once it is open).
WRITERS: dict[str, tuple[str, int]] = {
    "lifecycle-apply": (f"lifecycle history.db --apply --skip-file q.json --no-gate {NOW}", 0),
    "incident-add": ("incident add history.db later --from 2026-11-02T00:00:00Z "
                     "--to 2026-11-02T00:00:00Z", 0),
    "incident-remove": ("incident remove history.db window", 0),
    "incident-accept": ("incident accept history.db OUTAGE", 0),
    "incident-reject": ("incident reject history.db OUTAGE", 0),
    "quarantine": (f"quarantine history.db tests/test_c.py::test_1 --reason r "
                   f"--skip-file q.json {NOW}", 0),
    "release": (f"release history.db {TEST} --skip-file q.json {NOW}", 0),
    "prune": ("prune history.db --older-than 36500", 0),
    "resign": ("resign history.db", 0),
    "ingest": ("ingest history.db r3.xml --no-detect --run-id r3", 0),
    "merge-into": ("merge history.db other.db", 0),
    "diagnose-refused": (f"diagnose history.db {UNRECORDED} --repo repo --runs 2", 1),
}  # fmt: skip
# Covered elsewhere: the app's reads (tests/tui/test_read_only.py); sync needs a server.
ELSEWHERE = {"open", "sync"}


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def write_report(path: Path, failing: int) -> None:
    """Ten tests of one file, the first `failing` of them failing with one message."""
    cases = "\n".join(
        f'<testcase classname="tests.test_c" name="test_{n}" file="tests/test_c.py">'
        + ('<failure message="ConnectionError: down">boom</failure>' if n < failing else "")
        + "</testcase>"
        for n in range(10)
    )
    path.write_text(f"<testsuite>\n{cases}\n</testsuite>\n", encoding="utf-8")


def sidecars(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(SIDECARS))


@pytest.fixture(scope="module", params=["wal", "rollback-journal"])
def prepared(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str]:
    """history.db (an outage proposed, an incident tagged, a test quarantined), other.db, a
    report and a repository; both histories in the journal mode of the parameter."""
    folder = tmp_path_factory.mktemp(request.param)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)
        mp.delenv("FLAKETUI_SKIP_FILE", raising=False)
        write_report(folder / "r1.xml", failing=6)  # most tests fail at once: an outage
        write_report(folder / "r2.xml", failing=0)
        write_report(folder / "r3.xml", failing=1)
        steps = [
            "ingest history.db r1.xml --no-detect --run-id r1 --timestamp 2026-11-01T10:00:00Z",
            "ingest history.db r2.xml --no-detect --run-id r2 --timestamp 2026-11-01T10:30:00Z",
            "ingest other.db r3.xml --no-detect --run-id r4 --timestamp 2026-11-01T11:00:00Z",
            "incident add history.db window --from 2026-10-01T00:00:00Z --to 2026-10-02T00:00:00Z",
            f"quarantine history.db {TEST} --reason r --skip-file q.json {NOW}",
        ]
        for line in steps:
            result = invoke(*line.split())
            assert result.exit_code == 0, result.output
    with closing(sqlite3.connect(folder / "history.db")) as conn:
        [proposal] = proposed_outages(conn)
    outage = str(proposal["tag"])
    (folder / "repo" / "tests").mkdir(parents=True)
    (folder / "repo" / "tests" / "test_c.py").write_text("def test_unrecorded():\n    pass\n")
    for name in ("history.db", "other.db"):
        assert uses_wal(folder / name)  # as ingest leaves a history
        if request.param == "rollback-journal":
            conn = sqlite3.connect(folder / name)
            conn.execute("PRAGMA journal_mode = DELETE")
            conn.close()
    assert sidecars(folder) == []
    return folder, outage


@pytest.fixture
def work(
    prepared: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, str]:
    """A copy of the prepared folder as the working directory."""
    folder, outage = prepared
    shutil.copytree(folder, tmp_path / "work")
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.delenv("FLAKETUI_SKIP_FILE", raising=False)
    return tmp_path / "work", outage


@pytest.mark.parametrize("command", [*READERS, *WRITERS])
def test_a_command_leaves_no_wal_shm_or_journal_file(work: tuple[Path, str], command: str) -> None:
    folder, outage = work
    line, status = READERS.get(command) or WRITERS[command]
    history = folder / "history.db"
    was_wal = uses_wal(history)
    before = hashlib.sha256(history.read_bytes()).hexdigest()
    result = invoke(*line.replace("OUTAGE", outage).split())
    assert result.exit_code == status, result.output
    assert "Traceback" not in result.output
    assert sidecars(folder) == []
    if command in READERS:  # reading never writes, nor changes the journal mode
        assert hashlib.sha256(history.read_bytes()).hexdigest() == before
        assert uses_wal(history) == was_wal


def test_every_command_that_opens_a_history_is_covered() -> None:
    ctx = click.Context(cli)
    names = set()
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        if isinstance(command, click.Group):
            names |= {f"{name} {sub}" for sub in command.list_commands(ctx)}
        else:
            names.add(name)
    lines = [line for line, _ in [*READERS.values(), *WRITERS.values()]]
    covered = {line.split(" history.db")[0].split(" dest.db")[0] for line in lines}
    assert names - ELSEWHERE == covered
