"""`flaketui quarantine` and `flaketui release` against a real history and a real git repository."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from flaketui.cli.commands import cli
from tests.connections import connected, open_history
from tests.core.history_builder import HistoryBuilder, utc

T0 = utc(2026, 2, 1)
NOW = "2026-03-01T12:00:00Z"
FLAKY = "tests/test_a.py::test_a"
OTHER = "tests/test_b.py::test_b"
FAMILY = "tests/test_f.py::test_f"
PARAMS = [f"{FAMILY}[x]", f"{FAMILY}[y]"]

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository with a history; the current directory is a subfolder of it."""
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    if shutil.which("git"):
        git(root, "init", "-q")
    db = open_history(root / "history.db")
    hb = HistoryBuilder(db)
    hb.sequence(FLAKY, "PRPPRPPPRPPRPPP", start=T0, step=timedelta(hours=12))
    hb.sequence(OTHER, "PPPPPPPPPPPP", start=T0, step=timedelta(hours=12))
    run = hb.run(ts=T0)
    for param in PARAMS:
        run.result(param, ["pass"])
    db.conn.close()
    monkeypatch.chdir(root / "tests")
    monkeypatch.delenv("FLAKETUI_SKIP_FILE", raising=False)
    monkeypatch.setenv("FLAKETUI_WHO", "unused-by-the-cli")
    return root


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def audit(root: Path) -> list[tuple[object, ...]]:
    db = open_history(root / "history.db")
    try:
        return [
            tuple(row)
            for row in db.conn.execute(
                "SELECT action, test_id, mode, reason, ticket, source FROM audit_log ORDER BY id"
            )
        ]
    finally:
        db.conn.close()


@needs_git
def test_quarantine_writes_at_the_git_root_and_release_restores_bytes(repo: Path) -> None:
    db = str(repo / "history.db")
    assert invoke("quarantine", db, OTHER, "--reason", "base", "--now", NOW).exit_code == 0
    skip = repo / ".quarantine.json"
    git(repo, "add", ".quarantine.json")
    git(repo, "commit", "-q", "-m", "base")
    committed = skip.read_bytes()

    result = invoke(
        "quarantine", db, FLAKY, "--reason", "flaky on main", "--mode", "run",
        "--expires", "14", "--ticket", "https://example.org/7", "--now", NOW,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"quarantined (run, until 2026-03-15T12:00:00Z): {FLAKY}" in result.output
    diff = git(repo, "diff", "-U0", "--", ".quarantine.json").splitlines()
    changed = [line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    removed = [line[1:] for line in changed if line.startswith("-")]
    added = [line[1:] for line in changed if line.startswith("+")]
    entry = json.loads(skip.read_text())["tests"][FLAKY]
    # The entry's own lines (its key, its fields, its closing brace), nothing else.
    rendered = json.dumps({FLAKY: entry}, indent=2, sort_keys=True).splitlines()[1:-1]
    assert removed == []
    assert added == [f"  {line}" for line in rendered[:-1]] + ["    },"]  # OTHER sorts after it
    assert entry["mode"] == "run" and entry["ticket"] == "https://example.org/7"

    result = invoke("release", db, FLAKY, "--reason", "fixed", "--now", NOW)
    assert result.exit_code == 0, result.output
    assert f"released: {FLAKY}" in result.output
    assert skip.read_bytes() == committed
    assert git(repo, "status", "--porcelain", "--", ".quarantine.json") == ""
    assert audit(repo) == [
        ("quarantine", OTHER, "skip", "base", None, "cli"),
        ("quarantine", FLAKY, "run", "flaky on main", "https://example.org/7", "cli"),
        ("release", FLAKY, "run", "fixed", "https://example.org/7", "cli"),
    ]


def test_family_parent_writes_every_param(repo: Path) -> None:
    result = invoke("quarantine", str(repo / "history.db"), FAMILY, "--reason", "r", "--now", NOW)
    assert result.exit_code == 0, result.output
    tests = json.loads((repo / ".quarantine.json").read_text())["tests"]
    assert sorted(tests) == PARAMS
    assert result.output.splitlines()[-1] == (
        f"quarantined 2 tests; {repo / '.quarantine.json'} now lists 2 tests"
    )


def test_unknown_test_is_a_one_line_error_unless_forced(repo: Path) -> None:
    db = str(repo / "history.db")
    result = invoke("quarantine", db, "tests/test_z.py::nope", "--reason", "r")
    assert result.exit_code == 1
    assert result.output.count("\n") == 1
    assert result.output.startswith("Error: no test or family named 'tests/test_z.py::nope'")
    assert not (repo / ".quarantine.json").exists()
    forced = invoke("quarantine", db, "tests/test_z.py::nope", "--reason", "r", "--force")
    assert forced.exit_code == 0, forced.output
    assert "tests/test_z.py::nope" in json.loads((repo / ".quarantine.json").read_text())["tests"]


def test_releasing_what_is_not_quarantined_is_a_one_line_error(repo: Path) -> None:
    result = invoke("release", str(repo / "history.db"), FLAKY)
    assert result.exit_code == 1
    assert result.output.count("\n") == 1
    assert "is not quarantined in" in result.output


def test_releasing_a_mistyped_id_offers_the_close_entries_of_the_skip_file(repo: Path) -> None:
    db = str(repo / "history.db")
    skip = repo / ".quarantine.json"
    for test_id in (FLAKY, PARAMS[0]):
        assert invoke("quarantine", db, test_id, "--reason", "r", "--now", NOW).exit_code == 0
    before = skip.read_bytes()
    # A param's family is offered, and a name as close in another file after the same file's.
    offered = {
        "tests/test_a.py::test_aa": f"{FLAKY!r}",
        "tests/test_f.py::tst_f": f"{FAMILY!r}",
        f"{FAMILY}[z]": f"{FAMILY!r}, {FLAKY!r}",
    }
    for typed, close in offered.items():
        result = invoke("release", db, typed)
        assert result.exit_code == 1
        assert result.output == (
            f"Error: {typed!r} is not quarantined in {skip}; did you mean {close}?\n"
        )
    # A test of the history that the skip file does not list is not offered.
    result = invoke("release", db, "tests/test_b.py::test_bb")
    assert result.output == f"Error: 'tests/test_b.py::test_bb' is not quarantined in {skip}\n"
    assert skip.read_bytes() == before
    assert [row[0] for row in audit(repo)] == ["quarantine", "quarantine"]


def test_reason_is_required_and_expiry_positive(repo: Path) -> None:
    db = str(repo / "history.db")
    assert invoke("quarantine", db, FLAKY).exit_code == 2
    assert invoke("quarantine", db, FLAKY, "--reason", "r", "--expires", "0").exit_code == 1


def test_skip_file_option_and_environment(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = str(repo / "history.db")
    target = repo / "ci" / "q.json"
    target.parent.mkdir()
    assert (
        invoke("quarantine", db, FLAKY, "--reason", "r", "--skip-file", str(target)).exit_code == 0
    )
    entry = json.loads(target.read_text())["tests"][FLAKY]
    # Without --now an old history is scored as of its newest run, yet the entry is dated today.
    assert entry["scores"]["runs"] == 15
    assert entry["quarantined_at"] > "2026-03"
    monkeypatch.setenv("FLAKETUI_SKIP_FILE", str(target))
    assert invoke("release", db, FLAKY).exit_code == 0
    assert json.loads(target.read_text())["tests"] == {}
    assert not (repo / ".quarantine.json").exists()


def test_pyproject_skip_file_is_relative_to_its_folder(repo: Path) -> None:
    (repo / "pyproject.toml").write_text('[tool.flaketui]\nskip_file = "quarantine/q.json"\n')
    (repo / "quarantine").mkdir()
    assert invoke("quarantine", str(repo / "history.db"), FLAKY, "--reason", "r").exit_code == 0
    assert FLAKY in json.loads((repo / "quarantine" / "q.json").read_text())["tests"]


def test_broken_skip_file_is_a_one_line_error_and_untouched(repo: Path) -> None:
    skip = repo / ".quarantine.json"
    skip.write_text('{"format": "flaketui-skip-file", "version": 1, "tests": {"a": 1')
    result = invoke("quarantine", str(repo / "history.db"), FLAKY, "--reason", "r")
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {skip}: not valid JSON")
    assert skip.read_text().endswith('"a": 1')
    assert audit(repo) == []


def test_missing_history_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("quarantine", str(tmp_path / "none.db"), FLAKY, "--reason", "r")
    assert result.exit_code == 1
    assert "does not exist" in result.output


def test_the_summary_tells_what_was_written_from_what_the_file_lists(repo: Path) -> None:
    db = str(repo / "history.db")
    assert invoke("quarantine", db, FAMILY, "--reason", "r", "--now", NOW).exit_code == 0
    result = invoke("quarantine", db, FLAKY, "--reason", "r", "--now", NOW)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"quarantined (skip, until 2026-03-31T12:00:00Z): {FLAKY}",
        f"quarantined 1 test; {repo / '.quarantine.json'} now lists 3 tests",
    ]


def test_a_quarantined_test_is_refused_and_update_says_what_it_replaces(repo: Path) -> None:
    db = str(repo / "history.db")
    skip = repo / ".quarantine.json"
    first = ["quarantine", db, FLAKY, "--reason", "first", "--ticket", "T-1", "--now", NOW]
    assert invoke(*first).exit_code == 0
    before = skip.read_bytes()
    again = ["quarantine", db, FLAKY, "--reason", "second", "--expires", "7", "--now", NOW]
    result = invoke(*again)
    assert result.exit_code == 1
    assert result.output == (
        f"Error: '{FLAKY}' is already quarantined in {skip} (skip, until 2026-03-31T12:00:00Z, "
        "reason 'first'); --update replaces its entry\n"
    )
    assert skip.read_bytes() == before
    assert [row[3] for row in audit(repo)] == ["first"]

    result = invoke(*again, "--mode", "run", "--update")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"updated (run, until 2026-03-08T12:00:00Z): {FLAKY}",
        "  mode: skip -> run",
        "  reason: 'first' -> 'second'",
        "  expires: 2026-03-31T12:00:00Z -> 2026-03-08T12:00:00Z",
        "  ticket: 'T-1' -> none",
        f"updated 1 entry; {skip} now lists 1 test",
    ]
    entry = json.loads(skip.read_text())["tests"][FLAKY]
    assert (entry["reason"], entry["mode"], entry["ticket"]) == ("second", "run", None)
    assert [row[3] for row in audit(repo)] == ["first", "second"]

    result = invoke("quarantine", db, FAMILY, "--reason", "r", "--update", "--now", NOW)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == f"quarantined 2 tests; {skip} now lists 3 tests"


@pytest.mark.parametrize("held", [1, 2])
def test_a_family_refused_for_its_quarantined_params_counts_them_in_agreement(
    repo: Path, held: int
) -> None:
    db = str(repo / "history.db")
    skip = repo / ".quarantine.json"
    for param in PARAMS[:held]:
        assert invoke("quarantine", db, param, "--reason", "one", "--now", NOW).exit_code == 0
    before = skip.read_bytes()
    result = invoke("quarantine", db, FAMILY, "--reason", "all", "--now", NOW)
    assert result.exit_code == 1
    verb, entries = ("is", "its entry") if held == 1 else ("are", "their entries")
    assert result.output == (
        f"Error: {held} of the 2 params of '{FAMILY}' {verb} already quarantined in {skip} "
        f"('{PARAMS[0]}': skip, until 2026-03-31T12:00:00Z, reason 'one'); "
        f"--update replaces {entries}\n"
    )
    assert skip.read_bytes() == before


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _quarantined_once(repo: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> tuple[str, Path]:
    """The history and a skip file q.json holding one quarantine, in or outside a git work
    tree (where), with no lock file left from writing it."""
    if where == "outside git":
        shutil.rmtree(repo / ".git", ignore_errors=True)
        monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(repo.parent))
    elif shutil.which("git") is None:
        pytest.skip("git is not installed")
    db = str(repo / "history.db")
    skip = repo / "q.json"
    assert invoke("quarantine", db, OTHER, "--reason", "r", "--skip-file", str(skip)).exit_code == 0
    for lock in [*repo.glob("*.lock"), *repo.glob(".git/flaketui/*.lock")]:
        lock.unlink()
    return db, skip


@pytest.mark.parametrize("where", ["outside git", "in git"])
def test_a_refused_skip_file_command_leaves_no_file(
    repo: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    db, skip = _quarantined_once(repo, monkeypatch, where)
    (repo / "broken.json").write_text('{"format": "flaketui-skip-file", "version": 1, "tests": {')
    before = _files(repo)
    refused = [
        ["release", db, FLAKY, "--skip-file", str(skip)],
        ["release", db, FLAKY, "--skip-file", str(repo / "absent.json")],
        ["quarantine", db, OTHER, "--reason", "again", "--skip-file", str(skip)],
        ["quarantine", db, FLAKY, "--reason", "r", "--skip-file", str(repo / "broken.json")],
        ["release", db, FLAKY, "--skip-file", str(repo / "broken.json")],
    ]
    for args in refused:
        result = invoke(*args)
        assert result.exit_code == 1, result.output
        assert result.output.count("\n") == 1 and result.output.startswith("Error: ")
        assert _files(repo) == before, args


@pytest.mark.parametrize("where", ["outside git", "in git"])
def test_a_read_only_skip_file_is_refused_and_left_as_it_was(
    repo: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    db, skip = _quarantined_once(repo, monkeypatch, where)
    skip.chmod(0o444)  # no write bit for anyone: read-only, even to root
    before, data = _files(repo), skip.read_bytes()
    refused = [
        ["quarantine", db, FLAKY, "--reason", "r", "--skip-file", str(skip)],
        ["quarantine", db, OTHER, "--reason", "again", "--update", "--skip-file", str(skip)],
        ["release", db, OTHER, "--skip-file", str(skip)],
    ]
    for args in refused:
        result = invoke(*args)
        assert result.exit_code == 1, result.output
        assert result.output == f"Error: {skip} is read-only; make it writable to change it\n"
        assert skip.read_bytes() == data, args
        assert stat.S_IMODE(skip.stat().st_mode) == 0o444
        assert _files(repo) == before, args  # no lock file, no temporary file
    assert [row[:2] for row in audit(repo)] == [("quarantine", OTHER)]


EMPTY_SKIP_FILE = '{"format": "flaketui-skip-file", "tests": {}, "version": 1}\n'
# A skip file each command refuses without the history: its name in the repository, how it is
# made there, and what the error says of it.
REFUSED_SKIP_FILES = {
    "directory": ("adir", lambda p: p.mkdir(), "is a directory, not a skip file"),
    "pipe": ("fifo", os.mkfifo, "is a pipe, not a skip file"),
    "broken": ("broken.json", lambda p: p.write_text('{"tests": {'), "not valid JSON"),
    "foreign": ("other.json", lambda p: p.write_text("{}"), "not a flaketui skip file"),
    "not utf-8": ("latin.json", lambda p: p.write_bytes(b"\xff{}"), "not UTF-8 text"),
    "no folder": ("nodir/q.json", lambda p: None, "does not exist"),
    "read-only": (
        "ro.json",
        lambda p: (p.write_text(EMPTY_SKIP_FILE), p.chmod(0o444)),
        "is read-only; make it writable to change it",
    ),
}


@pytest.mark.parametrize("command", ["quarantine", "release"])
@pytest.mark.parametrize("kind", REFUSED_SKIP_FILES)
def test_a_refused_skip_file_leaves_the_history_byte_for_byte(
    repo: Path, command: str, kind: str
) -> None:
    # A history in rollback-journal mode, as another SQLite client may leave it: opening it for
    # writing would turn it to WAL mode (its header changes) and add -wal and -shm files.
    history = repo / "history.db"
    with connected(history) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
    name, make, problem = REFUSED_SKIP_FILES[kind]
    skip = repo / name
    make(skip)
    data, before = history.read_bytes(), _files(repo)
    args = ["--reason", "r"] if command == "quarantine" else []
    result = invoke(command, str(history), FLAKY, *args, "--skip-file", str(skip))
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"Error: {skip}") and problem in result.output, result.output
    assert result.output.count("\n") == 1, result.output
    assert history.read_bytes() == data
    assert _files(repo) == before


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["quarantine", FLAKY, "--reason", " "], "a reason is required"),
        (["release", FLAKY], f"{FLAKY!r} is not quarantined in"),
    ],
    ids=["no reason", "not quarantined"],
)
def test_a_command_refused_without_the_history_leaves_it_byte_for_byte(
    repo: Path, args: list[str], problem: str
) -> None:
    history = repo / "history.db"
    with connected(history) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
    (repo / "q.json").write_text(EMPTY_SKIP_FILE)
    data, before = history.read_bytes(), _files(repo)
    command, *rest = args
    result = invoke(command, str(history), *rest, "--skip-file", str(repo / "q.json"))
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ") and problem in result.output, result.output
    assert history.read_bytes() == data
    assert _files(repo) == before


def _history_beside_codeowners(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codeowners: bytes
) -> tuple[Path, Path]:
    """A history of FLAKY in tmp_path/ci beside a CODEOWNERS file holding `codeowners`, and the
    working folder the test runs in (tmp_path/work, no git repository, no skip file set)."""
    folder = tmp_path / "ci"
    folder.mkdir()
    db = open_history(folder / "history.db")
    HistoryBuilder(db).sequence(FLAKY, "PRPPRPPPRPPRPPP", start=T0, step=timedelta(hours=12))
    db.conn.close()
    (folder / "CODEOWNERS").write_bytes(codeowners)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("FLAKETUI_SKIP_FILE", raising=False)
    return folder, work


def test_an_entry_takes_its_owner_from_the_codeowners_beside_the_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No git repository: the CODEOWNERS beside the history names the owner, as in `report`.
    folder, work = _history_beside_codeowners(tmp_path, monkeypatch, b"tests/test_a.py @team-a\n")
    history = str(folder / "history.db")
    result = invoke("quarantine", history, FLAKY, "--reason", "flaky", "--now", NOW)
    assert result.exit_code == 0, result.output
    entry = json.loads((work / ".quarantine.json").read_text())["tests"][FLAKY]
    assert entry["owner"] == "@team-a"
    report = invoke("report", history, "--now", NOW, "--format", "json")
    assert json.loads(report.output)["tests"][0]["owner"] == "@team-a"


def test_a_codeowners_beside_the_history_that_is_not_utf8_writes_no_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, work = _history_beside_codeowners(
        tmp_path, monkeypatch, b"tests/test_a.py @\xe9quipe\n"
    )
    history = str(folder / "history.db")
    result = invoke("quarantine", history, FLAKY, "--reason", "flaky", "--now", NOW)
    assert result.exit_code == 1, result.output
    assert result.output == (
        f"Error: {folder / 'CODEOWNERS'}: not valid UTF-8 (byte 0xE9 at offset 17); "
        "a CODEOWNERS file is UTF-8 text\n"
    )
    assert not (work / ".quarantine.json").exists()
