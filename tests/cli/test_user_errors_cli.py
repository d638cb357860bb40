"""Bad user input is one line and exit status 1 in every command; a malformed command line is
click's usage message and status 2."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli.commands import cli

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "history.db"
FLAKY = "tests/storage/test_cache.py::test_cache_invalidate_on_write"

WITH_A_DIRECTORY = [
    ["adir"],
    ["open", "adir"],
    ["report", "adir"],
    ["check", "adir"],
    ["changes", "adir", "t"],
    ["export", "adir", "--format", "json"],
    ["pivot", "adir", "t"],
    ["prune", "adir", "--older-than", "5"],
    ["resign", "adir"],
    ["lifecycle", "adir"],
    ["quarantine", "adir", "t", "--reason", "r"],
    ["release", "adir", "t"],
    ["merge", "adir", "adir"],
    ["incident", "list", "adir"],
]


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir").mkdir()
    return CliRunner()


@pytest.mark.parametrize("args", WITH_A_DIRECTORY, ids=" ".join)
def test_a_directory_for_the_history_is_one_line_and_status_1(
    runner: CliRunner, args: list[str]
) -> None:
    result = runner.invoke(cli, args, prog_name="flaketui")
    assert result.exit_code == 1, result.output
    assert result.output == "Error: adir: is a directory, not a history file\n"


WITH_A_NAMED_PIPE = [
    ["fifo"],
    ["open", "fifo"],
    ["report", "fifo"],
    ["diagnose", "fifo", FLAKY],
    ["ingest", "fifo", "r.xml"],
    ["merge", "h.db", "fifo"],
]


@pytest.mark.parametrize("args", WITH_A_NAMED_PIPE, ids=" ".join)
def test_a_named_pipe_for_the_history_is_one_line_not_a_wait_for_a_writer(
    runner: CliRunner, tmp_path: Path, args: list[str]
) -> None:
    # Opening a named pipe waits for a writer: the history is refused on stat() alone.
    os.mkfifo(tmp_path / "fifo")
    shutil.copy(SAMPLE, tmp_path / "h.db")
    (tmp_path / "r.xml").write_text('<testsuite><testcase classname="a" name="b"/></testsuite>')
    before = (tmp_path / "h.db").read_bytes()
    result = runner.invoke(cli, args, prog_name="flaketui")
    assert result.exit_code == 1, result.output
    assert result.output == (
        "Error: fifo: not a regular file (a pipe or a device), not a history file\n"
    )
    assert (tmp_path / "h.db").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "fifo", "h.db", "r.xml"]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["report", "missing.db"], "Error: missing.db: does not exist"),
        (
            ["open", "h.db", "--codeowners", "adir"],
            "Error: adir: is a directory, not a CODEOWNERS file",
        ),
        (["open", "h.db", "--codeowners", "nope"], "Error: nope: does not exist"),
        (["open", "h.db", "--skip-file", "adir"], "Error: adir: is a directory, not a skip file"),
        (  # read no further than a CODEOWNERS file may be, not until memory runs out
            ["open", "h.db", "--codeowners", "/dev/zero"],
            "Error: /dev/zero: larger than 3 MiB, the most GitHub loads of a CODEOWNERS file",
        ),
        (
            ["report", "h.db", "--limit", "0"],
            "Error: Invalid value for '--limit': 0 is not in the range x>=1.",
        ),
        (
            ["report", "h.db", "--format", "yaml"],
            "Error: Invalid value for '--format': 'yaml' is not one of",
        ),
    ],
)
def test_a_wrong_value_is_one_line_and_status_1(
    runner: CliRunner, args: list[str], line: str
) -> None:
    result = runner.invoke(cli, args, prog_name="flaketui")
    assert result.exit_code == 1, result.output
    assert result.output.startswith(line) and result.output.count("\n") == 1, result.output


@pytest.mark.parametrize(
    "args",
    [
        ["export", "h.db", "--format", "json", "--skip-file", "/dev/zero"],
        ["quarantine", "h.db", FLAKY, "--reason", "r", "--skip-file", "/dev/zero"],
        ["release", "h.db", FLAKY, "--skip-file", "/dev/zero"],
    ],
    ids=["export", "quarantine", "release"],
)
def test_a_skip_file_that_never_ends_is_refused_at_its_limit(
    runner: CliRunner, tmp_path: Path, args: list[str]
) -> None:
    shutil.copy(SAMPLE, tmp_path / "h.db")
    result = runner.invoke(cli, args, prog_name="flaketui")
    assert result.exit_code == 1, result.output
    assert result.output == "Error: /dev/zero: larger than 256 MiB\n"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["open", "h.db", "--codeowners", "fifo"], "fifo: is a pipe, not a CODEOWNERS file"),
        (["report", "h.db", "--codeowners", "fifo"], "fifo: is a pipe, not a CODEOWNERS file"),
        (["export", "h.db", "--format", "json", "--skip-file", "fifo"], "fifo: is a pipe"),
        (["quarantine", "h.db", FLAKY, "--reason", "r", "--skip-file", "fifo"], "fifo: is a pipe"),
    ],
    ids=["open", "report", "export", "quarantine"],
)
def test_a_named_pipe_for_codeowners_or_the_skip_file_is_refused_unopened(
    runner: CliRunner, tmp_path: Path, args: list[str], line: str
) -> None:
    # Opening a named pipe waits for a writer; a pipe is refused on stat() alone.
    os.mkfifo(tmp_path / "fifo")
    shutil.copy(SAMPLE, tmp_path / "h.db")
    result = runner.invoke(cli, args, prog_name="flaketui")
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ") and line in result.output, result.output
    assert result.output.count("\n") == 1, result.output
    assert stat.S_ISFIFO((tmp_path / "fifo").stat().st_mode)


TYPED = b"* @typed-owner\n"


@pytest.fixture
def terminal() -> Iterator[tuple[str, int]]:
    """A pseudo-terminal's path (as /dev/tty would be, without waiting on a real one) with a
    line typed into it, then end-of-file typed at the start of a line several times over: a
    command that reads it gets the line, then an end at each read, and never waits. Its
    descriptor, to read what the command left unread."""
    primary, secondary = os.openpty()
    try:
        os.write(primary, TYPED + b"\x04" * 8)
        yield os.ttyname(secondary), secondary
    finally:
        os.close(primary)
        os.close(secondary)


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (["open", "missing.db", "--codeowners", "TTY"], "a CODEOWNERS file"),
        (["report", "h.db", "--codeowners", "TTY"], "a CODEOWNERS file"),
        (["export", "h.db", "--format", "json", "--codeowners", "TTY"], "a CODEOWNERS file"),
        (["check", "h.db", "--codeowners", "TTY"], "a CODEOWNERS file"),
        (["export", "h.db", "--format", "json", "--skip-file", "TTY"], "a skip file"),
        (["quarantine", "h.db", FLAKY, "--reason", "r", "--skip-file", "TTY"], "a skip file"),
        (["release", "h.db", FLAKY, "--skip-file", "TTY"], "a skip file"),
    ],
    ids=[
        "open codeowners",
        "report codeowners",
        "export codeowners",
        "check codeowners",
        "export skip-file",
        "quarantine skip-file",
        "release skip-file",
    ],
)
def test_a_terminal_for_codeowners_or_the_skip_file_is_refused_unread(
    runner: CliRunner,
    tmp_path: Path,
    terminal: tuple[str, int],
    args: list[str],
    what: str,
) -> None:
    # Reading a terminal (/dev/tty) waits for someone to type: it is refused once opened.
    tty, secondary = terminal
    shutil.copy(SAMPLE, tmp_path / "h.db")
    result = runner.invoke(cli, [tty if a == "TTY" else a for a in args], prog_name="flaketui")
    assert result.exit_code == 1, result.output
    assert result.output == f"Error: {tty}: is a terminal, not {what}\n"
    os.set_blocking(secondary, False)
    assert os.read(secondary, 100) == TYPED  # nothing was read from it


def test_dev_null_for_codeowners_is_a_file_with_no_owner(runner: CliRunner, tmp_path: Path) -> None:
    shutil.copy(SAMPLE, tmp_path / "h.db")
    shutil.copy(SAMPLE.with_name("CODEOWNERS"), tmp_path / "CODEOWNERS")  # found beside h.db

    def owners(*option: str) -> set[str | None]:
        args = ["report", "h.db", "--format", "json", *option]
        result = runner.invoke(cli, args, prog_name="flaketui")
        assert result.exit_code == 0, result.output
        return {test["owner"] for test in json.loads(result.output)["tests"]}

    assert None not in owners()
    assert owners("--codeowners", os.devnull) == {None}


@pytest.mark.parametrize(
    ("replica", "line"),
    [
        ("adir", "adir: is a directory, not a history file"),
        ("nodir/r.db", "nodir/r.db: directory nodir does not exist"),
        (
            "postgresql://u:pw@127.0.0.1:1/r",
            "postgresql://u:****@127.0.0.1:1/r: the replica is a file, not a second server: "
            "flaketui sync URL FILE",
        ),
    ],
    ids=["directory", "no-directory", "server"],
)
def test_a_replica_sync_cannot_build_is_named_as_typed_before_the_server_is_asked(
    runner: CliRunner, tmp_path: Path, replica: str, line: str
) -> None:
    # Nothing listens on port 1: a refusal that came after connecting would say so instead.
    result = runner.invoke(cli, ["sync", "postgresql://u@127.0.0.1:1/db", replica])
    assert result.exit_code == 1, result.output
    assert result.output == f"Error: {line}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"]


@pytest.mark.parametrize(
    "args",
    [
        ["open", "URL"],
        ["report", "URL"],
        ["check", "URL"],
        ["quarantine", "URL", FLAKY, "--reason", "r"],
    ],
    ids=lambda args: args[0],
)
@pytest.mark.parametrize("cache_exists", [False, True], ids=["no-cache", "empty-cache"])
def test_a_server_that_cannot_be_reached_leaves_no_cache_folder(
    runner: CliRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    cache_exists: bool,
) -> None:
    # Nothing listens on port 1: the replica's folder in the cache is made only once it answers.
    cache = tmp_path / "cache"
    if cache_exists:
        cache.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    url = "postgresql://user@127.0.0.1:1/db"
    result = runner.invoke(cli, [url if a == "URL" else a for a in args], prog_name="flaketui")
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"Error: {url}: connecting failed ("), result.output
    assert result.output.count("\n") == 1, result.output
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert left == (["adir", "cache"] if cache_exists else ["adir"])


@pytest.mark.parametrize(
    "args",
    [["report", "h.db", "--bogus"], ["report"], ["quarantine", "h.db", "t"], ["nosuch", "x", "y"]],
)
def test_a_malformed_command_line_keeps_clicks_usage_and_status_2(
    runner: CliRunner, args: list[str]
) -> None:
    result = runner.invoke(cli, args, prog_name="flaketui")
    assert result.exit_code == 2, result.output
    assert result.output.startswith("Usage: "), result.output


@pytest.mark.parametrize(
    ("args", "suggestion"),
    [
        (["reprot", "h.db"], "Did you mean 'report'?"),
        (["reprot"], "Did you mean 'report'?"),
        (["opne", "h.db", "--now", "2026-01-01"], "Did you mean 'open'?"),
        (["repot", "h.db"], "(Did you mean one of: 'export', 'report'?)"),
    ],
)
def test_a_mistyped_command_is_named_with_the_close_ones(
    runner: CliRunner, args: list[str], suggestion: str
) -> None:
    result = runner.invoke(cli, args, prog_name="flaketui")
    assert result.exit_code == 2, result.output
    assert result.output.startswith("Usage: flaketui [OPTIONS] COMMAND"), result.output
    assert result.output.endswith(f"Error: No such command {args[0]!r}. {suggestion}\n")


@pytest.mark.parametrize("args", [["reprot.db"], ["adir/reprot"], ["nosuch"]])
def test_a_path_or_a_word_like_no_command_is_the_history_to_open(
    runner: CliRunner, args: list[str]
) -> None:
    result = runner.invoke(cli, args, prog_name="flaketui")
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"Error: {args[0]}: does not exist"), result.output


def test_an_existing_file_named_like_a_typo_is_opened(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "reprot").write_bytes(b"")
    result = runner.invoke(cli, ["reprot"], prog_name="flaketui")
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: reprot: is empty"), result.output


WRITERS = [
    ["ingest", "h.db", "r.xml", "--no-detect", "--run-id", "r2"],
    ["prune", "h.db", "--older-than", "1"],
    ["resign", "h.db"],
    ["incident", "add", "h.db", "outage", "--from", "2020-01-01", "--to", "2020-01-02"],
    ["quarantine", "h.db", "tests.test_a::test_b", "--reason", "r", "--skip-file", "q.json"],
    ["merge", "h.db", "other.db"],
]


@pytest.mark.parametrize("args", WRITERS, ids=" ".join)
def test_a_history_without_a_write_bit_is_never_written(
    runner: CliRunner, tmp_path: Path, args: list[str]
) -> None:
    # No write bit for anyone is read-only for every user, root too, as for the skip file.
    report = '<testsuite><testcase classname="tests.test_a" name="test_b"/></testsuite>'
    (tmp_path / "r.xml").write_text(report)
    for name, run in (("h.db", "r1"), ("other.db", "r3")):
        ingested = runner.invoke(cli, ["ingest", name, "r.xml", "--no-detect", "--run-id", run])
        assert ingested.exit_code == 0, ingested.output
    history = tmp_path / "h.db"
    history.chmod(0o444)
    before = history.read_bytes()
    result = runner.invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert result.output == (
        "Error: h.db: read-only; it can be read (report, open) but not written\n"
    )
    assert history.read_bytes() == before
    assert not (tmp_path / "q.json").exists()


LONG = "x" * 5000  # longer than any file name the system takes (ENAMETOOLONG)


@pytest.mark.parametrize(
    "args",
    [
        [LONG],
        ["report", LONG],
        ["check", LONG],
        ["quarantine", LONG, "t", "--reason", "r"],
        ["merge", "h.db", LONG],
        ["ingest", LONG, "r.xml"],
        ["ingest", "h.db", LONG],
        ["report", "h.db", "--output", LONG],
    ],
    ids=["open", "report", "check", "quarantine", "merge", "ingest-into", "ingest-of", "output"],
)
def test_a_name_the_system_refuses_is_one_line_naming_its_reason(
    runner: CliRunner, tmp_path: Path, args: list[str]
) -> None:
    shutil.copy(SAMPLE, tmp_path / "h.db")
    (tmp_path / "r.xml").write_text('<testsuite><testcase classname="a" name="b"/></testsuite>')
    before = (tmp_path / "h.db").read_bytes()
    result = runner.invoke(cli, args, prog_name="flaketui")
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"Error: {LONG}") or result.output.startswith(
        f"Error: {tmp_path / LONG}"
    ), result.output[-200:]
    assert "file name too long" in result.output.lower(), result.output[-200:]
    assert result.output.count("\n") == 1
    assert (tmp_path / "h.db").read_bytes() == before


def _no_room_for_files() -> None:
    """A child that may not grow any file past 16 KiB: its writes fail as on a full disk."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE as Linux applies it")
@pytest.mark.parametrize(
    "args",
    [
        ["report", "h.db"],
        ["h.db"],
        ["incident", "list", "h.db"],
        ["ingest", "h.db", "report.xml", "--no-detect"],
    ],
    ids=" ".join,
)
def test_a_disk_that_refuses_the_shared_memory_file_is_named_as_the_disk(
    tmp_path: Path, args: list[str]
) -> None:
    """A WAL history opened where its `-shm` file cannot grow (a full disk): the error names
    the disk, not the history, which is sound and stays as it was."""
    history = tmp_path / "h.db"
    shutil.copyfile(SAMPLE, history)
    conn = sqlite3.connect(history)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()  # the last connection: -wal and -shm go
    (tmp_path / "report.xml").write_text(
        '<testsuite><testcase classname="c" name="t"/></testsuite>'
    )
    before = history.read_bytes()
    done = subprocess.run(
        [sys.executable, "-m", "flaketui", *args],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_no_room_for_files,
    )
    assert (
        done.stderr
        == "Error: h.db: disk I/O error while opening it; is its disk full or failing?\n"
    )
    assert done.returncode == 1
    assert history.read_bytes() == before
