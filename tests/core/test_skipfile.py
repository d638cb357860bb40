"""The skip file: format, stable output, path resolution, broken files, locked concurrent writes."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flaketui.core.config import Config
from flaketui.core.errors import SkipFileError
from flaketui.core.quarantine.skipfile import (
    FORMAT_MARKER,
    FORMAT_VERSION,
    ForeignSkipFile,
    SkipEntry,
    SkipFile,
    lock_path,
    read_skip_file,
    render_skip_file,
    resolve_skip_file,
    resolve_skip_file_source,
    update_skip_file,
)
from tests.child_processes import child_context

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
GIT = shutil.which("git")


def entry(test_id: str, **overrides: object) -> SkipEntry:
    """A complete flaketui-written entry."""
    values: dict[str, object] = {
        "mode": "skip",
        "reason": "flaky: 3 flaky runs of 40 on main",
        "owner": "@team-a",
        "ticket": "https://example.org/issues/1",
        "quarantined_at": NOW,
        "expires": NOW + timedelta(days=30),
        "scores": {"damage": 1.23456789, "runs": 40, "wilson_low": 0.05},
        "signature": "abc123",
    }
    values.update(overrides)
    return SkipEntry(test_id=test_id, **values)  # type: ignore[arg-type]


def add(path: Path, new: SkipEntry) -> SkipFile:
    def mutate(entries: dict[str, SkipEntry]) -> None:
        entries[new.test_id] = new

    return update_skip_file(path, mutate)


def remove(path: Path, test_id: str) -> SkipFile:
    return update_skip_file(path, lambda entries: entries.pop(test_id))


# --- format ---------------------------------------------------------------------------------


def test_written_file_is_marked_sorted_pretty_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / ".quarantine.json"
    add(path, entry("tests/test_b.py::test_b"))
    add(path, entry("tests/test_a.py::test_a[x-1]", mode="run", ticket=None))
    text = path.read_text(encoding="utf-8")
    doc = json.loads(text)
    assert doc["format"] == FORMAT_MARKER
    assert doc["version"] == FORMAT_VERSION
    assert list(doc["tests"]) == ["tests/test_a.py::test_a[x-1]", "tests/test_b.py::test_b"]
    assert text == json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    stored = doc["tests"]["tests/test_b.py::test_b"]
    assert stored["scores"] == {"damage": 1.234568, "runs": 40, "wilson_low": 0.05}
    assert stored["quarantined_at"] == "2026-03-01T12:00:00Z"
    assert stored["expires"] == "2026-03-31T12:00:00Z"
    assert stored["added_by"] == "flaketui"
    back = read_skip_file(path, explicit=True)
    assert back is not None
    assert back.entries["tests/test_a.py::test_a[x-1]"].mode == "run"
    assert back.entries["tests/test_b.py::test_b"] == entry(
        "tests/test_b.py::test_b", scores={"damage": 1.234568, "runs": 40, "wilson_low": 0.05}
    )


def test_an_empty_tests_object_is_written_as_json_writes_it(tmp_path: Path) -> None:
    text = render_skip_file(SkipFile(path=tmp_path / "x.json"))
    assert text == '{\n  "format": "flaketui-skip-file",\n  "tests": {},\n  "version": 1\n}\n'
    assert json.loads(text)["tests"] == {}


def test_absent_file_reads_as_none(tmp_path: Path) -> None:
    assert read_skip_file(tmp_path / "missing.json", explicit=True) is None


def test_hand_written_entries_get_defaults_and_keep_their_text(tmp_path: Path) -> None:
    path = tmp_path / ".quarantine.json"
    hand = (
        '{"format": "flaketui-skip-file", "version": 1, "tests": {\n'
        '  "tests/test_h.py::test_h": {"reason": "ask Ann", "expires": "2026-04-01",'
        ' "note": "kept"},\n'
        '  "tests/test_i.py::test_i": {}\n}}\n'
    )
    path.write_text(hand, encoding="utf-8")
    skip = read_skip_file(path, explicit=False)
    assert skip is not None
    h = skip.entries["tests/test_h.py::test_h"]
    assert (h.mode, h.reason, h.added_by, h.hand_added) == ("skip", "ask Ann", "hand", True)
    assert h.expires == datetime(2026, 4, 1, tzinfo=UTC)
    assert h.extra == {"note": "kept"}
    i = skip.entries["tests/test_i.py::test_i"]
    assert (i.mode, i.quarantined_at, i.expires, i.hand_added) == ("skip", None, None, True)

    add(path, entry("tests/test_z.py::test_z"))
    doc = json.loads(path.read_text(encoding="utf-8"))
    # Unchanged hand entries are not filled in with defaults: their lines stay as written.
    assert doc["tests"]["tests/test_h.py::test_h"] == {
        "reason": "ask Ann",
        "expires": "2026-04-01",
        "note": "kept",
    }
    assert doc["tests"]["tests/test_i.py::test_i"] == {}


def test_expired_entries(tmp_path: Path) -> None:
    skip = SkipFile(
        path=tmp_path / "x.json",
        entries={
            "a": entry("a", expires=NOW - timedelta(seconds=1)),
            "b": entry("b", expires=NOW + timedelta(days=1)),
            "c": entry("c", expires=None),
        },
    )
    assert [e.test_id for e in skip.expired(NOW)] == ["a"]


ids = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=30)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    existing=st.lists(ids, max_size=5, unique=True),
    new_id=ids,
    reason=st.text(max_size=40),
    mode=st.sampled_from(["skip", "run"]),
)
def test_adding_then_removing_restores_the_file_byte_for_byte(
    tmp_path_factory: pytest.TempPathFactory,
    existing: list[str],
    new_id: str,
    reason: str,
    mode: str,
) -> None:
    path = tmp_path_factory.mktemp("bytes") / ".quarantine.json"
    for test_id in existing:
        if test_id != new_id:
            add(path, entry(test_id))
    if not path.exists():
        update_skip_file(path, lambda entries: None)  # an empty skip file
    before = path.read_bytes()
    add(path, entry(new_id, reason=reason, mode=mode))
    assert path.read_bytes() != before
    assert new_id in json.loads(path.read_bytes())["tests"]
    remove(path, new_id)
    assert path.read_bytes() == before


# --- git diff -------------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _changed_lines(diff: str) -> tuple[list[str], list[str]]:
    body = [line for line in diff.splitlines() if not line.startswith(("+++", "---"))]
    return (
        [line[1:] for line in body if line.startswith("-")],
        [line[1:] for line in body if line.startswith("+")],
    )


@pytest.mark.skipif(GIT is None, reason="git is not installed")
@pytest.mark.parametrize(
    ("existing", "new_id"),
    [
        ([], "tests/test_m.py::test_m"),
        (["tests/test_a.py::test_a", "tests/test_z.py::test_z"], "tests/test_m.py::test_m"),
        (["tests/test_a.py::test_a", "tests/test_b.py::test_b"], "tests/test_z.py::test_z"),
        (["tests/test_b.py::test_b"], "tests/test_a.py::test_a"),
    ],
    ids=["first-entry", "middle", "last", "first"],
)
def test_git_diff_shows_only_the_new_entry(
    tmp_path: Path, existing: list[str], new_id: str
) -> None:
    _git(tmp_path, "init", "-q")
    path = tmp_path / ".quarantine.json"
    update_skip_file(path, lambda entries: entries.update({t: entry(t) for t in existing}))
    _git(tmp_path, "add", ".quarantine.json")
    _git(tmp_path, "commit", "-q", "-m", "base")
    committed = path.read_bytes()

    add(path, entry(new_id))
    removed, added = _changed_lines(_git(tmp_path, "diff", "-U0", "--", ".quarantine.json"))
    entry_lines = json.dumps(
        {new_id: entry(new_id).to_json()}, indent=2, sort_keys=True, ensure_ascii=False
    ).splitlines()[1:-1]
    entry_lines = ["  " + line for line in entry_lines]
    others = [
        line for line in added if line.rstrip(",") not in {e.rstrip(",") for e in entry_lines}
    ]
    if not existing:
        # The first entry opens the empty `"tests": {}` line.
        assert removed == ['  "tests": {},']
        assert others == ['  "tests": {', "  },"]
    else:
        # Allowed beyond the entry itself: a comma appearing on the neighbour's closing brace.
        assert all(line == "    }" for line in removed)
        assert len(removed) <= 1
        assert others in ([], ["    },"])
        assert len(added) == len(entry_lines) + len(removed)

    remove(path, new_id)
    assert path.read_bytes() == committed
    assert _git(tmp_path, "diff", "--", ".quarantine.json") == ""


# --- broken and foreign files ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"format": "flaketui-skip-file", "version": 1, "tests": {', "not valid JSON (line 1"),
        pytest.param(
            '{"format": "flaketui-skip-file", "version": 1, "tests": '
            + "[" * 100_000
            + "]" * 100_000
            + "}",
            "not valid JSON (nested too deeply)",
            id="nested-too-deeply",
        ),
        ('{"format": "flaketui-skip-file", "tests": {}}', "format version"),
        ('{"format": "flaketui-skip-file", "version": 99, "tests": {}}', "newer"),
        ('{"format": "flaketui-skip-file", "version": 1, "tests": []}', '"tests" must be'),
        (
            '{"format": "flaketui-skip-file", "version": 1, "tests": {"t": {"mode": "maybe"}}}',
            "tests['t'].mode: expected 'skip' or 'run'",
        ),
        (
            '{"format": "flaketui-skip-file", "version": 1, "tests": {"t": {"expires": "soon"}}}',
            "tests['t'].expires: not an ISO 8601",
        ),
        ('{"format": "flaketui-skip-file", "version": 1, "tests": {"t": 3}}', "expected an object"),
    ],
)
@pytest.mark.parametrize("explicit", [True, False])
def test_broken_marked_file_is_an_error_naming_file_and_problem(
    tmp_path: Path, text: str, problem: str, explicit: bool
) -> None:
    path = tmp_path / ".quarantine.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SkipFileError) as info:
        read_skip_file(path, explicit=explicit)
    assert not isinstance(info.value, ForeignSkipFile)
    assert str(path) in info.value.message
    assert problem in info.value.message
    assert "\n" not in info.value.message


@pytest.mark.parametrize(
    "text",
    [
        '{"quarantined": ["a"]}',
        "[1, 2]",
        "not json at all",
        "\xff\xfe".encode("latin-1"),
        pytest.param("[" * 100_000 + "]" * 100_000, id="nested-too-deeply"),
    ],
)
def test_unmarked_file_is_foreign_when_discovered_and_an_error_when_explicit(
    tmp_path: Path, text: str | bytes
) -> None:
    path = tmp_path / ".quarantine.json"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(ForeignSkipFile, match="not a flaketui skip file"):
        read_skip_file(path, explicit=False)
    with pytest.raises(SkipFileError) as info:
        read_skip_file(path, explicit=True)
    assert not isinstance(info.value, ForeignSkipFile)
    assert str(path) in info.value.message


def test_a_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SkipFileError, match="is a directory"):
        read_skip_file(tmp_path, explicit=False)


@pytest.mark.parametrize(
    "text", ['{"format": "flaketui-skip-file", "version": 1, "tests": {', '{"other": 1}']
)
def test_update_never_overwrites_a_broken_or_foreign_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / ".quarantine.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SkipFileError):
        add(path, entry("a"))
    assert path.read_text(encoding="utf-8") == text


def test_failing_mutation_leaves_the_file_untouched(tmp_path: Path) -> None:
    path = tmp_path / ".quarantine.json"
    add(path, entry("a"))
    before = path.read_bytes()

    def explode(entries: dict[str, SkipEntry]) -> None:
        entries.clear()
        raise SkipFileError("nope")

    with pytest.raises(SkipFileError, match="nope"):
        update_skip_file(path, explode)
    assert path.read_bytes() == before
    assert not list(tmp_path.glob("*.tmp"))


def _all_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("where", ["plain", "git"])
@pytest.mark.parametrize("refusal", ["broken", "foreign", "check"])
def test_a_refused_update_takes_no_lock_and_leaves_no_file(
    tmp_path: Path, where: str, refusal: str
) -> None:
    if where == "git" and GIT is None:
        pytest.skip("git is not installed")
    folder = skip_folder(tmp_path, where)
    path = folder / ".quarantine.json"
    if refusal == "broken":
        path.write_text('{"format": "flaketui-skip-file", "version": 1, "tests": {')
    elif refusal == "foreign":
        path.write_text('{"other": 1}')
    before = _all_files(tmp_path)
    mutated: list[bool] = []

    def refuse(entries: object) -> None:
        raise SkipFileError("refused")

    check = refuse if refusal == "check" else None
    with pytest.raises(SkipFileError):
        update_skip_file(path, lambda entries: mutated.append(True), check=check)
    assert _all_files(tmp_path) == before  # no lock file, beside the file or in .git
    assert mutated == []


def test_check_sees_the_entries_before_the_lock_and_mutate_refuses_on_its_own(
    tmp_path: Path,
) -> None:
    path = tmp_path / ".quarantine.json"
    add(path, entry("a"))
    seen: list[list[str]] = []

    def check(entries: object) -> None:
        assert isinstance(entries, dict)
        seen.append(sorted(entries))
        add(path, entry("b"))  # another writer, between the check and the lock

    def mutate(entries: dict[str, SkipEntry]) -> None:
        if "b" in entries:
            raise SkipFileError("b appeared")

    with pytest.raises(SkipFileError, match="b appeared"):
        update_skip_file(path, mutate, check=check)
    assert seen == [["a"]]


def test_missing_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SkipFileError, match="does not exist"):
        add(tmp_path / "nope" / ".quarantine.json", entry("a"))


def test_write_keeps_the_file_mode(tmp_path: Path) -> None:
    path = tmp_path / ".quarantine.json"
    add(path, entry("a"))
    path.chmod(0o640)
    add(path, entry("b"))
    assert path.stat().st_mode & 0o777 == 0o640


# --- path resolution ------------------------------------------------------------------------


def test_resolution_order(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "sub").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[tool.flaketui]\n", encoding="utf-8")
    configured = Config(skip_file="ci/q.json")
    env = {"FLAKETUI_SKIP_FILE": str(tmp_path / "env.json")}
    ini = tmp_path / "ini.json"

    def source(flag: str | None, env: dict[str, str], config: Config, ini: Path | None) -> object:
        return resolve_skip_file_source(flag, env=env, config=config, root=root, ini=ini)

    assert source(str(tmp_path / "f.json"), env, configured, ini) == (tmp_path / "f.json", "flag")
    assert source(None, env, configured, ini) == (tmp_path / "env.json", "env")
    assert source(None, {}, configured, ini) == (ini, "ini")
    assert source(None, {}, configured, None) == (root / "ci" / "q.json", "config")
    assert source(None, {}, Config(), None) == (root / ".quarantine.json", "default")
    assert resolve_skip_file(None, env={"FLAKETUI_SKIP_FILE": ""}, config=Config(), root=root) == (
        root / ".quarantine.json"
    )


def test_configured_path_is_relative_to_the_pyproject_folder(tmp_path: Path) -> None:
    project = tmp_path / "project"
    root = project / "nested"
    root.mkdir(parents=True)
    (project / "pyproject.toml").write_text("[tool.flaketui]\n", encoding="utf-8")
    config = Config(skip_file="q.json")
    assert resolve_skip_file(None, env={}, config=config, root=root) == project / "q.json"
    assert resolve_skip_file(None, env={}, config=config, root=root, config_dir=root) == (
        root / "q.json"
    )


def test_relative_flag_is_relative_to_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_skip_file("q.json", env={}, config=Config(), root=Path("/elsewhere")) == (
        tmp_path / "q.json"
    )


# --- concurrency ----------------------------------------------------------------------------

ROUNDS = 20


def _writer(folder: str, name: str, barrier: object, errors: object) -> None:
    """Quarantine one test per round, all writers starting each round together."""
    for round_no in range(ROUNDS):
        barrier.wait()  # type: ignore[attr-defined]
        try:
            add(Path(folder) / f"round{round_no}.json", entry(f"tests/test_{name}.py::t{round_no}"))
        except Exception as exc:  # reported to the parent, which fails the test
            errors.put(f"{name} round {round_no}: {exc!r}")  # type: ignore[attr-defined]


def test_two_concurrent_writers_both_land_and_the_file_always_parses(tmp_path: Path) -> None:
    ctx = child_context()
    barrier = ctx.Barrier(2)
    errors = ctx.Queue()
    writers = [
        ctx.Process(target=_writer, args=(str(tmp_path), name, barrier, errors))
        for name in ("left", "right")
    ]
    for proc in writers:
        proc.start()
    unreadable: list[str] = []
    # Read without the lock while the writers work: a reader must never see a partial file.
    while any(proc.is_alive() for proc in writers):
        for path in tmp_path.glob("round*.json"):
            try:
                read_skip_file(path, explicit=True)
            except SkipFileError as exc:
                unreadable.append(exc.message)
    for proc in writers:
        proc.join()
        assert proc.exitcode == 0
    assert errors.empty()
    assert unreadable == []
    for round_no in range(ROUNDS):
        skip = read_skip_file(tmp_path / f"round{round_no}.json", explicit=True)
        assert skip is not None
        assert sorted(skip.entries) == [
            f"tests/test_left.py::t{round_no}",
            f"tests/test_right.py::t{round_no}",
        ]
    assert not list(tmp_path.glob("*.tmp"))


# How long the first writer, paused inside its update, leaves the second to barge in: locked,
# the second cannot even read the file meanwhile; unlocked, it finishes in milliseconds.
BARGE_IN_DEADLINE_S = 1.0


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout


def skip_folder(tmp_path: Path, where: str) -> Path:
    """A folder for the skip file: a plain one, a git work tree, or a linked git worktree."""
    if where == "plain":
        return tmp_path
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    if where == "git":
        return repo
    (repo / "README").write_text("x\n")
    _git(repo, "add", "README")
    _git(repo, "commit", "-q", "-m", "init")
    _git(repo, "worktree", "add", "-q", str(tmp_path / "linked"))
    return tmp_path / "linked"


@pytest.mark.parametrize("where", ["plain", "git", "worktree"])
def test_a_second_writer_waits_for_the_first_and_both_entries_land(
    tmp_path: Path, where: str
) -> None:
    """Two writers sharing nothing but the skip file (no history, no lock of their own).

    The first pauses between reading the file and writing it back, until the second is done or
    a deadline passes. Without the skip file's lock the second reads the same old file and its
    entry is then overwritten by the first's write.
    """
    path = skip_folder(tmp_path, where) / ".quarantine.json"
    add(path, entry("tests/test_old.py::t"))
    first_inside, second_inside, second_done = (threading.Event() for _ in range(3))
    overlapped: list[bool] = []

    def first_mutation(entries: dict[str, SkipEntry]) -> None:
        entries["tests/test_first.py::t"] = entry("tests/test_first.py::t")
        first_inside.set()
        second_done.wait(BARGE_IN_DEADLINE_S)
        overlapped.append(second_inside.is_set())

    def second_mutation(entries: dict[str, SkipEntry]) -> None:
        second_inside.set()
        entries["tests/test_second.py::t"] = entry("tests/test_second.py::t")

    def second_writer() -> None:
        assert first_inside.wait(30), "the first writer never started its update"
        update_skip_file(path, second_mutation)
        second_done.set()

    with ThreadPoolExecutor(max_workers=1) as pool:
        second = pool.submit(second_writer)
        update_skip_file(path, first_mutation)
        second.result(timeout=60)
    assert overlapped == [False], "the second writer read the file during the first's update"
    skip = read_skip_file(path, explicit=True)
    assert skip is not None
    assert sorted(skip.entries) == [
        "tests/test_first.py::t",
        "tests/test_old.py::t",
        "tests/test_second.py::t",
    ]


@pytest.mark.parametrize("where", ["git", "worktree"])
def test_in_a_git_work_tree_the_lock_stays_out_of_it(tmp_path: Path, where: str) -> None:
    folder = skip_folder(tmp_path, where)
    path = folder / ".quarantine.json"
    add(path, entry("tests/test_a.py::t"))
    # Only the skip file is new in the work tree; the lock lives in the git directory.
    assert _git(folder, "status", "--porcelain", "--untracked-files=all").splitlines() == [
        "?? .quarantine.json"
    ]
    git_dir = Path(_git(folder, "rev-parse", "--absolute-git-dir").strip())
    assert lock_path(path).parent == git_dir / "flaketui"
    assert lock_path(path).exists()
    # Every spelling of the path takes the same lock.
    assert lock_path(folder / "sub" / ".." / ".quarantine.json") == lock_path(path)


def test_outside_a_work_tree_the_lock_is_a_sibling(tmp_path: Path) -> None:
    path = tmp_path / ".quarantine.json"
    add(path, entry("tests/test_a.py::t"))
    assert lock_path(path) == tmp_path / ".quarantine.json.lock"


def test_a_failed_rename_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / ".quarantine.json"
    add(path, entry("a"))
    before = path.read_bytes()

    def refuse(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("flaketui.core.atomic.os.replace", refuse)
    with pytest.raises(SkipFileError, match=r"cannot write \(No space left on device\)"):
        add(path, entry("b"))
    assert path.read_bytes() == before
    assert not list(tmp_path.glob("*.tmp"))
