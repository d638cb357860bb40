"""Run metadata: fill what the flags left unknown from CI variables, then git, then defaults.

Run ids from CI are chosen so that the shards of one CI job (matrix / parallel copies) share one
run, while different jobs of a pipeline are different runs:
- GitHub Actions: ``github-<GITHUB_RUN_ID>-<GITHUB_RUN_ATTEMPT>-<GITHUB_JOB>`` (matrix jobs share
  the job key);
- GitLab CI: ``gitlab-<CI_PIPELINE_ID>-<CI_JOB_NAME without a trailing " N/M">`` (``parallel:``
  jobs are named ``rspec 1/3``, ``rspec 2/3``...);
- Buildkite: ``buildkite-<BUILDKITE_BUILD_ID>-<BUILDKITE_STEP_KEY or BUILDKITE_STEP_ID>``;
- CircleCI: ``circleci-<CIRCLE_WORKFLOW_ID>-<CIRCLE_JOB>`` (parallel nodes share both), else
  ``circleci-<CIRCLE_BUILD_NUM>``;
- Jenkins: ``BUILD_TAG`` (``jenkins-<job>-<number>``), else ``jenkins-<BUILD_ID>``.
A pull/merge request is always branch kind ``pr``, whatever its source branch is called.
"""

from __future__ import annotations

import dataclasses
import re
import socket
import subprocess
from collections.abc import Mapping
from datetime import UTC
from pathlib import Path

from flaketui.core.config import Config
from flaketui.core.errors import FlaketuiError
from flaketui.core.models import BRANCH_KINDS, RunMeta
from flaketui.core.timeutil import parse_iso, to_iso, utc_now

GIT_TIMEOUT_SECONDS = 3.0
DEFAULT_SUITE = "default"
# Names the incident (a known outage) a CI job runs during, where the command line names none:
# its runs are tagged as `flaketui ingest --incident` or the plugin's --flaketui-incident tags
# them. Read with or without detection: it is an instruction, not a guess.
INCIDENT_VAR = "FLAKETUI_INCIDENT"
_SHARD_SUFFIX = re.compile(r"\s+\d+/\d+$")


# The metadata every report of one run must agree on, by RunMeta field, as messages name it.
AGREED_FIELDS = {
    "suite": "suite",
    "branch": "branch",
    "commit_sha": "commit",
    "ts": "timestamp",
    "worker_count": "worker count",
}


def metadata_conflicts(held: RunMeta, new: RunMeta) -> list[str]:
    """Where new's given fields (new.given) disagree with the run held describes, one
    "suite 'nightly', not 'unit'" per field; empty when they agree.

    A field either side leaves unknown is no disagreement: None, and on held's side also a
    default it was not given (suite 'default', one worker): a stored run's row cannot tell a
    default from a given value.
    """
    parts = []
    for name, label in AGREED_FIELDS.items():
        old, value = getattr(held, name), getattr(new, name)
        if name not in new.given or old is None or value is None:
            continue
        default = (name, old) in (("suite", DEFAULT_SUITE), ("worker_count", 1))
        if default and name not in held.given:
            continue
        if name == "ts":
            old, value = to_iso(old), to_iso(value)
        elif isinstance(old, str):
            old, value = repr(old), repr(value)
        if old != value:
            parts.append(f"{label} {old}, not {value}")
    return parts


class RunMetaError(FlaketuiError):
    """Run metadata that cannot be stored (unknown branch kind, worker count below 1...)."""


# The stored columns of AGREED_FIELDS, in order, for check_stored_run.
STORED_COLUMNS = "suite, branch, commit_sha, ts, worker_count"


def check_stored_run(run_id: str, stored: tuple[object, ...] | None, meta: RunMeta) -> None:
    """RunMetaError when meta disagrees with the stored run a report is added to (stored: its
    STORED_COLUMNS, or None for a new run)."""
    if stored is None:
        return
    suite, branch, commit, ts, workers = stored
    held = RunMeta(
        suite=None if suite is None else str(suite),
        branch=None if branch is None else str(branch),
        commit_sha=None if commit is None else str(commit),
        ts=None if ts is None else parse_iso(str(ts)),
        worker_count=None if workers is None else int(str(workers)),
    )
    parts = metadata_conflicts(held, meta)
    if parts:
        raise RunMetaError(
            f"run {run_id!r} is stored with other metadata: {'; '.join(parts)}"
            " (give the run's own, or another run id)"
        )


def branch_kind_for(branch: str | None, config: Config) -> str:
    """'main' for a configured default branch, 'release' for release/*, else 'pr'."""
    if branch is None:
        return "pr"
    name = branch.strip()
    for prefix in ("refs/heads/", "origin/"):
        name = name.removeprefix(prefix)
    if name in config.default_branches:
        return "main"
    if name.startswith("release/"):
        return "release"
    return "pr"


# ---- CI environments --------------------------------------------------------------------------


@dataclasses.dataclass
class _Detected:
    run_id: str | None = None
    branch: str | None = None
    commit_sha: str | None = None
    ci_url: str | None = None
    suite: str | None = None
    is_pr: bool = False
    runner_host: str | None = None  # the CI's name for the machine that ran the job


def _get(env: Mapping[str, str], *names: str) -> str | None:
    """The first non-empty value among names."""
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def _github(env: Mapping[str, str]) -> _Detected:
    run = _get(env, "GITHUB_RUN_ID")
    job = _get(env, "GITHUB_JOB")
    head = _get(env, "GITHUB_HEAD_REF")
    server, repo = _get(env, "GITHUB_SERVER_URL"), _get(env, "GITHUB_REPOSITORY")
    workflow = _get(env, "GITHUB_WORKFLOW")
    return _Detected(
        run_id=None
        if run is None
        else "-".join(p for p in ("github", run, _get(env, "GITHUB_RUN_ATTEMPT") or "1", job) if p),
        branch=head or _get(env, "GITHUB_REF_NAME"),
        commit_sha=_get(env, "GITHUB_SHA"),
        ci_url=f"{server}/{repo}/actions/runs/{run}" if server and repo and run else None,
        suite="/".join(p for p in (workflow, job) if p) or None,
        is_pr=head is not None or (_get(env, "GITHUB_EVENT_NAME") or "").startswith("pull_request"),
        runner_host=_get(env, "RUNNER_NAME"),
    )


def _gitlab(env: Mapping[str, str]) -> _Detected:
    pipeline = _get(env, "CI_PIPELINE_ID")
    job_name = _get(env, "CI_JOB_NAME")
    base_name = _SHARD_SUFFIX.sub("", job_name) if job_name else None
    job_id = _get(env, "CI_JOB_ID")
    run_id = None
    if pipeline:
        run_id = "-".join(p for p in ("gitlab", pipeline, base_name) if p)
    elif job_id:
        run_id = f"gitlab-job-{job_id}"
    mr_branch = _get(env, "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME")
    return _Detected(
        run_id=run_id,
        branch=mr_branch or _get(env, "CI_COMMIT_REF_NAME"),
        commit_sha=_get(env, "CI_COMMIT_SHA"),
        ci_url=_get(env, "CI_JOB_URL", "CI_PIPELINE_URL"),
        suite=base_name,
        is_pr=mr_branch is not None or _get(env, "CI_MERGE_REQUEST_IID") is not None,
        runner_host=_get(env, "CI_RUNNER_DESCRIPTION", "CI_RUNNER_SHORT_TOKEN"),
    )


def _buildkite(env: Mapping[str, str]) -> _Detected:
    build = _get(env, "BUILDKITE_BUILD_ID")
    step = _get(env, "BUILDKITE_STEP_KEY", "BUILDKITE_STEP_ID")
    pull = _get(env, "BUILDKITE_PULL_REQUEST")
    return _Detected(
        run_id=None if build is None else "-".join(p for p in ("buildkite", build, step) if p),
        branch=_get(env, "BUILDKITE_BRANCH"),
        commit_sha=_get(env, "BUILDKITE_COMMIT"),
        ci_url=_get(env, "BUILDKITE_BUILD_URL"),
        suite=_get(env, "BUILDKITE_STEP_KEY"),
        is_pr=pull is not None and pull.lower() != "false",
        runner_host=_get(env, "BUILDKITE_AGENT_NAME"),
    )


def _circleci(env: Mapping[str, str]) -> _Detected:
    workflow, job = _get(env, "CIRCLE_WORKFLOW_ID"), _get(env, "CIRCLE_JOB")
    build_num = _get(env, "CIRCLE_BUILD_NUM")
    run_id = None
    if workflow:
        run_id = "-".join(p for p in ("circleci", workflow, job) if p)
    elif build_num:
        run_id = f"circleci-{build_num}"
    return _Detected(
        run_id=run_id,
        branch=_get(env, "CIRCLE_BRANCH"),
        commit_sha=_get(env, "CIRCLE_SHA1"),
        ci_url=_get(env, "CIRCLE_BUILD_URL"),
        suite=job,
        is_pr=_get(env, "CIRCLE_PULL_REQUEST", "CIRCLE_PR_NUMBER") is not None,
    )


def _jenkins(env: Mapping[str, str]) -> _Detected:
    tag, build_id = _get(env, "BUILD_TAG"), _get(env, "BUILD_ID")
    change = _get(env, "CHANGE_ID")
    branch = _get(env, "CHANGE_BRANCH") if change else None
    branch = branch or _get(env, "BRANCH_NAME", "GIT_BRANCH")
    return _Detected(
        run_id=tag or (f"jenkins-{build_id}" if build_id else None),
        branch=branch.removeprefix("origin/") if branch else None,
        commit_sha=_get(env, "GIT_COMMIT"),
        ci_url=_get(env, "BUILD_URL"),
        is_pr=change is not None,
        runner_host=_get(env, "NODE_NAME"),
    )


def detect_ci(env: Mapping[str, str]) -> _Detected | None:
    """What the CI variables say about this run, or None outside a known CI."""
    if _get(env, "GITHUB_ACTIONS"):
        return _github(env)
    if _get(env, "GITLAB_CI", "CI_PIPELINE_ID", "CI_JOB_ID"):
        return _gitlab(env)
    if _get(env, "BUILDKITE", "BUILDKITE_BUILD_ID"):
        return _buildkite(env)
    if _get(env, "CIRCLECI", "CIRCLE_WORKFLOW_ID", "CIRCLE_BUILD_NUM"):
        return _circleci(env)
    if _get(env, "JENKINS_URL", "JENKINS_HOME", "BUILD_TAG"):
        return _jenkins(env)
    return None


# ---- git ----------------------------------------------------------------------------------------


class GitProbe:
    """The git commands detect_git reads, started side by side and read on demand.

    Whatever the caller does between starting them and `result()` (the pytest recorder loads
    its config and opens the history) overlaps with them. A probe whose result is not wanted
    is closed: `close()` stops and reaps what still runs.
    """

    COMMANDS = (
        # The commit, then the branch name ("HEAD" when detached).
        ("rev-parse", "HEAD", "--abbrev-ref", "HEAD"),
        ("show", "--name-only", "--format=", "--no-renames", "HEAD"),
    )

    def __init__(self, cwd: Path) -> None:
        self._running = [_start_git(cwd, args) for args in self.COMMANDS]

    def result(self) -> tuple[str | None, str | None, list[str]]:
        """HEAD's commit, branch (None when detached) and changed files; each command given
        GIT_TIMEOUT_SECONDS from here."""
        names, changed = (_git_output(proc) for proc in self._running)
        self._running = [None, None]
        if names is None:
            return None, None, []
        head, branch = ([*names.split(), "", ""])[:2]
        files = [line.strip() for line in (changed or "").splitlines() if line.strip()]
        return head or None, (branch if branch and branch != "HEAD" else None), files

    def close(self) -> None:
        """Stop the commands not read yet."""
        for proc in self._running:
            if proc is not None and proc.poll() is None:
                proc.kill()
            if proc is not None:
                proc.communicate()
        self._running = [None, None]


def _start_git(cwd: Path, args: tuple[str, ...]) -> subprocess.Popen[str] | None:
    """One git command started in cwd, or None when git cannot be started."""
    try:
        return subprocess.Popen(
            ["git", *args],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None


def _git_output(proc: subprocess.Popen[str] | None) -> str | None:
    """Output of a started git command, or None when it fails or is slow (then stopped)."""
    if proc is None:
        return None
    try:
        out, _ = proc.communicate(timeout=GIT_TIMEOUT_SECONDS)
    except (OSError, subprocess.SubprocessError):
        proc.kill()
        proc.communicate()
        return None
    return out if proc.returncode == 0 else None


def detect_git(cwd: Path) -> tuple[str | None, str | None, list[str]]:
    """HEAD's commit, branch (None when detached) and changed files, from git in cwd."""
    return GitProbe(cwd).result()


# ---- resolution ---------------------------------------------------------------------------------


def apply_defaults(meta: RunMeta, config: Config, *, fallback_run_id: str | None = None) -> RunMeta:
    """Validate meta and fill suite, branch kind, ts, worker count and run id defaults; an
    incident tag loses surrounding blanks, and a blank one is none."""
    run_id = (meta.run_id or "").strip() or fallback_run_id
    kind = meta.branch_kind or branch_kind_for(meta.branch, config)
    if kind not in BRANCH_KINDS:
        raise RunMetaError(f"branch kind must be one of {', '.join(BRANCH_KINDS)}, got {kind!r}")
    workers = 1 if meta.worker_count is None else meta.worker_count
    if workers < 1:
        raise RunMetaError(f"worker count must be at least 1, got {workers}")
    ts = meta.ts or utc_now()
    ts = ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)
    return dataclasses.replace(
        meta,
        run_id=run_id,
        suite=(meta.suite or "").strip() or DEFAULT_SUITE,
        incident=(meta.incident or "").strip() or None,
        branch_kind=kind,
        worker_count=workers,
        ts=ts,
        changed_files=list(meta.changed_files),
    )


def resolve_run_meta(
    meta: RunMeta,
    *,
    env: Mapping[str, str],
    cwd: Path,
    config: Config,
    detect: bool = True,
    fallback_run_id: str | None = None,
    git: GitProbe | None = None,
) -> RunMeta:
    """Fill what the flags left None from CI variables and git (detect=False: defaults only);
    an incident tag left blank from FLAKETUI_INCIDENT in either case. `git`: a probe started
    earlier in cwd, read if git is asked and closed otherwise."""
    if not (meta.incident or "").strip() and env.get(INCIDENT_VAR, "").strip():
        meta = dataclasses.replace(meta, incident=env[INCIDENT_VAR])
    if not detect:
        if git is not None:
            git.close()
        return apply_defaults(meta, config, fallback_run_id=fallback_run_id)
    filled = dataclasses.replace(meta, changed_files=list(meta.changed_files))
    ci = detect_ci(env)
    if ci is not None:
        filled.run_id = filled.run_id or ci.run_id
        filled.branch = filled.branch or ci.branch
        filled.commit_sha = filled.commit_sha or ci.commit_sha
        filled.ci_url = filled.ci_url or ci.ci_url
        filled.suite = filled.suite or ci.suite
        filled.runner_host = filled.runner_host or ci.runner_host
        if ci.is_pr and filled.branch_kind is None:
            filled.branch_kind = "pr"
    if filled.commit_sha is None or filled.branch is None or not filled.changed_files:
        commit, branch, changed = (git or GitProbe(cwd)).result()
        filled.commit_sha = filled.commit_sha or commit
        filled.branch = filled.branch or branch
        if not filled.changed_files:
            filled.changed_files = changed
    elif git is not None:
        git.close()
    if filled.runner_host is None:
        filled.runner_host = socket.gethostname() or None
    return apply_defaults(filled, config, fallback_run_id=fallback_run_id)
