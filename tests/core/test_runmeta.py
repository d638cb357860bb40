"""Run metadata from flags, CI variables, git and defaults."""

from __future__ import annotations

import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from flaketui.core.config import Config
from flaketui.core.ingest.runmeta import (
    GitProbe,
    RunMetaError,
    branch_kind_for,
    detect_git,
    resolve_run_meta,
)
from flaketui.core.models import RunMeta
from flaketui.core.testids import file_of_test, normalise_path

CONFIG = Config()


def resolve(env: dict[str, str], cwd: Path, meta: RunMeta | None = None) -> RunMeta:
    return resolve_run_meta(meta or RunMeta(), env=env, cwd=cwd, config=CONFIG)


@pytest.fixture
def no_git(tmp_path: Path) -> Path:
    """A directory outside any git repository."""
    return tmp_path


@pytest.mark.parametrize(
    ("branch", "kind"),
    [
        ("main", "main"),
        ("master", "main"),
        ("refs/heads/main", "main"),
        ("origin/master", "main"),
        ("release/2.1", "release"),
        ("feature/x", "pr"),
        ("mainline", "pr"),
        (None, "pr"),
    ],
)
def test_branch_kind(branch: str | None, kind: str) -> None:
    assert branch_kind_for(branch, CONFIG) == kind


def test_branch_kind_uses_configured_default_branches() -> None:
    assert branch_kind_for("trunk", Config(default_branches=("trunk",))) == "main"
    assert branch_kind_for("main", Config(default_branches=("trunk",))) == "pr"


GITHUB_PUSH = {
    "GITHUB_ACTIONS": "true",
    "GITHUB_RUN_ID": "9001",
    "GITHUB_RUN_ATTEMPT": "2",
    "GITHUB_REF_NAME": "main",
    "GITHUB_SHA": "abc123",
    "GITHUB_SERVER_URL": "https://github.com",
    "GITHUB_REPOSITORY": "acme/shop",
    "GITHUB_WORKFLOW": "CI",
    "GITHUB_JOB": "tests",
}


def test_github_actions_push(no_git: Path) -> None:
    meta = resolve(GITHUB_PUSH, no_git)
    assert meta.run_id == "github-9001-2-tests"
    assert (meta.branch, meta.branch_kind, meta.commit_sha) == ("main", "main", "abc123")
    assert meta.ci_url == "https://github.com/acme/shop/actions/runs/9001"
    assert meta.suite == "CI/tests"


def test_github_actions_pull_request_is_pr_whatever_the_branch(no_git: Path) -> None:
    env = {**GITHUB_PUSH, "GITHUB_REF_NAME": "12/merge", "GITHUB_HEAD_REF": "release/1.0"}
    meta = resolve(env, no_git)
    assert (meta.branch, meta.branch_kind) == ("release/1.0", "pr")


def test_gitlab_parallel_shards_share_one_run(no_git: Path) -> None:
    base = {
        "GITLAB_CI": "true",
        "CI_PIPELINE_ID": "777",
        "CI_COMMIT_REF_NAME": "master",
        "CI_COMMIT_SHA": "def456",
        "CI_JOB_URL": "https://gitlab.example/j/1",
    }
    ids = {
        resolve({**base, "CI_JOB_ID": str(n), "CI_JOB_NAME": f"rspec {n}/3"}, no_git).run_id
        for n in (1, 2, 3)
    }
    assert ids == {"gitlab-777-rspec"}
    other = resolve({**base, "CI_JOB_ID": "9", "CI_JOB_NAME": "lint"}, no_git)
    assert other.run_id == "gitlab-777-lint"
    assert (other.branch_kind, other.commit_sha, other.ci_url) == (
        "main",
        "def456",
        "https://gitlab.example/j/1",
    )
    mr = resolve({**base, "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "fix/y"}, no_git)
    assert (mr.branch, mr.branch_kind) == ("fix/y", "pr")


def test_buildkite(no_git: Path) -> None:
    env = {
        "BUILDKITE": "true",
        "BUILDKITE_BUILD_ID": "b-1",
        "BUILDKITE_STEP_ID": "s-1",
        "BUILDKITE_BRANCH": "main",
        "BUILDKITE_COMMIT": "c0ffee",
        "BUILDKITE_BUILD_URL": "https://buildkite.com/x/1",
        "BUILDKITE_PULL_REQUEST": "false",
    }
    meta = resolve(env, no_git)
    assert (meta.run_id, meta.branch_kind, meta.ci_url) == (
        "buildkite-b-1-s-1",
        "main",
        "https://buildkite.com/x/1",
    )
    assert resolve({**env, "BUILDKITE_PULL_REQUEST": "42"}, no_git).branch_kind == "pr"


def test_circleci(no_git: Path) -> None:
    env = {
        "CIRCLECI": "true",
        "CIRCLE_WORKFLOW_ID": "wf",
        "CIRCLE_JOB": "test",
        "CIRCLE_BUILD_NUM": "55",
        "CIRCLE_BRANCH": "release/3",
        "CIRCLE_SHA1": "aaa",
        "CIRCLE_BUILD_URL": "https://circleci.com/55",
    }
    meta = resolve(env, no_git)
    assert (meta.run_id, meta.branch_kind, meta.commit_sha) == (
        "circleci-wf-test",
        "release",
        "aaa",
    )
    without_workflow = {k: v for k, v in env.items() if k != "CIRCLE_WORKFLOW_ID"}
    assert resolve(without_workflow, no_git).run_id == "circleci-55"


def test_jenkins(no_git: Path) -> None:
    env = {
        "JENKINS_URL": "https://ci/",
        "BUILD_TAG": "jenkins-shop-12",
        "BUILD_ID": "12",
        "GIT_BRANCH": "origin/main",
        "GIT_COMMIT": "bbb",
        "BUILD_URL": "https://ci/job/shop/12/",
    }
    meta = resolve(env, no_git)
    assert (meta.run_id, meta.branch, meta.branch_kind) == ("jenkins-shop-12", "main", "main")
    pr = resolve({**env, "CHANGE_ID": "7", "BRANCH_NAME": "PR-7", "CHANGE_BRANCH": "fix"}, no_git)
    assert (pr.branch, pr.branch_kind) == ("fix", "pr")


def test_flags_win_over_ci(no_git: Path) -> None:
    flags = RunMeta(run_id="mine", branch="dev", suite="unit", commit_sha="f1", branch_kind="main")
    meta = resolve(GITHUB_PUSH, no_git, flags)
    assert (meta.run_id, meta.branch, meta.suite, meta.commit_sha, meta.branch_kind) == (
        "mine",
        "dev",
        "unit",
        "f1",
        "main",
    )


def test_defaults_outside_ci_and_git(no_git: Path) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    meta = resolve({}, no_git)
    assert meta.run_id is None
    assert (meta.suite, meta.branch_kind, meta.worker_count) == ("default", "pr", 1)
    assert meta.ts is not None and meta.ts >= before
    assert meta.runner_host  # this machine's host name
    fallback = resolve_run_meta(
        RunMeta(), env={}, cwd=no_git, config=CONFIG, fallback_run_id="report-1"
    )
    assert fallback.run_id == "report-1"


def test_no_detect_uses_defaults_only(tmp_path: Path) -> None:
    meta = resolve_run_meta(
        RunMeta(ts=datetime(2026, 1, 1)), env=GITHUB_PUSH, cwd=tmp_path, config=CONFIG, detect=False
    )
    assert (meta.run_id, meta.branch, meta.runner_host, meta.suite) == (None, None, None, "default")
    assert meta.ts == datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "meta", [RunMeta(branch_kind="feature"), RunMeta(worker_count=0), RunMeta(worker_count=-2)]
)
def test_bad_metadata_is_refused(no_git: Path, meta: RunMeta) -> None:
    with pytest.raises(RunMetaError):
        resolve({}, no_git, meta)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_commit_branch_and_changed_files(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=tmp_path,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    git("init", "-q", "-b", "release/9")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("x = 1\n")
    (tmp_path / "README").write_text("r\n")
    git("add", ".")
    git("commit", "-q", "-m", "one")
    meta = resolve({}, tmp_path)
    assert meta.commit_sha == git("rev-parse", "HEAD")
    assert (meta.branch, meta.branch_kind) == ("release/9", "release")
    assert sorted(meta.changed_files) == ["README", "tests/test_a.py"]
    # Flags and CI values are not overridden by git.
    given = resolve(GITHUB_PUSH, tmp_path, RunMeta(changed_files=["x.py"]))
    assert (given.commit_sha, given.branch, given.changed_files) == ("abc123", "main", ["x.py"])


def test_detached_head_has_no_branch(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    run = dict(cwd=tmp_path, check=True, capture_output=True)
    subprocess.run(["git", "init", "-q"], **run)  # type: ignore[call-overload]
    (tmp_path / "f").write_text("1")
    subprocess.run(["git", "add", "f"], **run)  # type: ignore[call-overload]
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "m"], **run
    )  # type: ignore[call-overload]
    subprocess.run(["git", "checkout", "-q", "--detach"], **run)  # type: ignore[call-overload]
    assert resolve({}, tmp_path).branch is None


def test_paths_are_normalised() -> None:
    assert normalise_path("./tests\\unit/../unit/test_a.py") == "tests/unit/test_a.py"
    assert file_of_test("tests/test_a.py::TestX::test_y[1]", None) == "tests/test_a.py"
    assert file_of_test("com.acme.FooTest::bar", None) is None
    assert file_of_test("com.acme.FooTest::bar", "./src/FooTest.java") == "src/FooTest.java"


def test_git_gives_the_commit_the_branch_and_the_files_it_changed(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-c", "user.email=a@b", "-c", "user.name=a", *args],
            cwd=tmp_path, capture_output=True, text=True, check=True,
        )  # fmt: skip
        return done.stdout.strip()

    git("init", "-q", "-b", "trunk")
    assert detect_git(tmp_path) == (None, None, [])  # no commit yet
    (tmp_path / "test_a.py").write_text("")
    (tmp_path / "test_b.py").write_text("")
    git("add", ".")
    git("commit", "-qm", "two tests")
    sha = git("rev-parse", "HEAD")
    assert detect_git(tmp_path) == (sha, "trunk", ["test_a.py", "test_b.py"])
    git("checkout", "-q", "--detach")
    assert detect_git(tmp_path) == (sha, None, ["test_a.py", "test_b.py"])


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_probe_started_early_gives_what_git_gives_when_read(tmp_path: Path) -> None:
    ident = ["-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run(["git", "init", "-q", "-b", "trunk"], cwd=tmp_path, check=True)
    (tmp_path / "test_a.py").write_text("")
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    subprocess.run(["git", *ident, "commit", "-qm", "one"], cwd=tmp_path, check=True)
    probe = GitProbe(tmp_path)
    meta = resolve_run_meta(RunMeta(), env={}, cwd=tmp_path, config=CONFIG, git=probe)
    assert (meta.commit_sha, meta.branch, meta.changed_files) == detect_git(tmp_path)
    assert meta.branch == "trunk"
    assert meta.changed_files == ["test_a.py"]
    probe.close()  # read already: nothing left to stop


class _Probe(GitProbe):
    """A probe that runs nothing and says whether it was read or closed."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def result(self) -> tuple[str | None, str | None, list[str]]:
        self.calls.append("result")
        return "c0ffee", "feature/x", ["a.py"]

    def close(self) -> None:
        self.calls.append("close")


def test_a_probe_is_read_only_for_what_the_flags_leave_unknown(no_git: Path) -> None:
    probe = _Probe()
    meta = resolve_run_meta(RunMeta(), env={}, cwd=no_git, config=CONFIG, git=probe)
    assert (meta.commit_sha, meta.branch, meta.changed_files) == ("c0ffee", "feature/x", ["a.py"])
    assert probe.calls == ["result"]
    known = RunMeta(commit_sha="abc", branch="main", changed_files=["b.py"])
    probe = _Probe()
    meta = resolve_run_meta(known, env={}, cwd=no_git, config=CONFIG, git=probe)
    assert (meta.commit_sha, meta.branch, meta.changed_files) == ("abc", "main", ["b.py"])
    assert probe.calls == ["close"]
    probe = _Probe()
    resolve_run_meta(RunMeta(), env={}, cwd=no_git, config=CONFIG, detect=False, git=probe)
    assert probe.calls == ["close"]


def test_a_probe_closed_unread_stops_its_commands(tmp_path: Path) -> None:
    probe = GitProbe(tmp_path)
    probe.close()
    assert probe.result() == (None, None, [])
