"""Run pytest sessions in a user's repository safely and read back what each test did.

A test id comes from a history, which is data from CI: it is checked to be a plain pytest node
id of a ``.py`` file inside the repository (relative, no ``..``, no option-like or control
characters, each name part an identifier, params only on the last part) before it is ever
passed to a process. Sessions run through ``subprocess`` with an argument list, never a shell,
with ``cwd`` at the repository and:
- ``-p no:cacheprovider``, ``--basetemp`` and the JUnit report in a temporary directory outside
  the repository, and ``PYTHONDONTWRITEBYTECODE=1``: a session leaves no file in the repository;
- ``-p no:randomly -p no:random_order`` and the node ids in the order wanted (pytest runs them
  as given);
- ``-o flaketui_db=`` and ``--flaketui-no-skip-file``: an experiment neither records itself into
  a history nor skips a quarantined test.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from flaketui.core.errors import FlaketuiError
from flaketui.core.ingest.junit import iter_case_rows

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_NODE_ID = re.compile(rf"(?P<file>[^:\[\]]+\.py)(?P<names>(?:::{_NAME})+)(?P<params>\[[^\]]*\])?")
_UNSAFE = re.compile(r"[\x00-\x1f\x7f]")
SESSION_TIMEOUT_S = 600.0
POLL_S = 0.05


class DiagnoseError(FlaketuiError):
    """A repository or test id that diagnose cannot use."""


def check_repository(repo: Path) -> Path:
    """The repository's resolved path; DiagnoseError when it is not a directory."""
    if not repo.exists():
        raise DiagnoseError(f"{repo}: no such directory; give the repository with --repo DIR")
    if not repo.is_dir():
        raise DiagnoseError(f"{repo}: not a directory; give the repository with --repo DIR")
    return repo.resolve()


def check_node_id(repo: Path, test_id: str) -> str:
    """The test id if it is a plain node id of a file inside repo, else DiagnoseError."""
    shown = test_id if len(test_id) <= 120 else test_id[:117] + "..."
    shown = _UNSAFE.sub("?", shown)
    match = _NODE_ID.fullmatch(test_id)
    if match is None or _UNSAFE.search(test_id) or test_id.startswith(("-", "/", "\\")):
        raise DiagnoseError(f"{shown!r} is not a plain pytest node id (path.py::test_name)")
    file = match.group("file")
    parts = Path(file).parts
    if Path(file).is_absolute() or ".." in parts or any(p.startswith("-") for p in parts):
        raise DiagnoseError(
            f"{shown!r}: the test file must be a relative path inside the repository"
        )
    path = (repo / file).resolve()
    if not path.is_relative_to(repo) or not path.is_file():
        raise DiagnoseError(f"{shown!r}: {file} is not a file in {repo}")
    return test_id


@dataclass(slots=True)
class SessionResult:
    """What one pytest session did: each test's outcome, in the order the session ran them."""

    argv: list[str]
    order: list[str]  # node ids as asked, in the asked order
    outcomes: dict[str, str] = field(default_factory=dict)  # node id -> pass|fail|error|skipped
    durations: dict[str, int | None] = field(default_factory=dict)
    exit_code: int = 0
    seconds: float = 0.0
    cancelled: bool = False

    def outcome_of(self, test_id: str) -> str | None:
        """The outcome of a test (or of the worst param of a family), None if it did not run."""
        if test_id in self.outcomes:
            return self.outcomes[test_id]
        found = [o for t, o in self.outcomes.items() if t.startswith(test_id + "[")]
        for worst in ("error", "fail", "pass", "skipped"):
            if worst in found:
                return worst
        return None

    def failed(self, test_id: str) -> bool:
        """Whether the test's (first and only) attempt failed or errored."""
        return self.outcome_of(test_id) in ("fail", "error")


class PytestSessions:
    """Runs pytest sessions in one repository with one interpreter."""

    def __init__(self, repo: Path, python: str | None = None) -> None:
        self.repo = repo
        self.python = python or sys.executable
        self.env = dict(os.environ)
        self.env["PYTHONDONTWRITEBYTECODE"] = "1"
        self.env.pop("PYTEST_XDIST_WORKER", None)
        self.autoload = not self.env.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
        self.has_xdist = importlib.util.find_spec("xdist") is not None
        self.sessions = 0

    def base_args(self, workers: int) -> list[str]:
        """Options every session gets (see the module docstring), and xdist's when asked."""
        args = ["-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:random_order"]
        args += ["-o", "flaketui_db="]
        if not self.autoload:
            args += ["-p", "flaketui.pytest_plugin"]
        args.append("--flaketui-no-skip-file")
        if workers > 1:
            if not self.autoload:
                args += ["-p", "xdist.plugin"]
            args += ["-n", str(workers)]
        elif self.has_xdist and self.autoload:
            args += ["-n", "0"]  # serial, whatever the project's addopts say
        return args

    def command(self, node_ids: list[str], workers: int = 1) -> list[str]:
        """The reproduction command a user can paste (no temporary paths)."""
        return [
            "pytest",
            *node_ids,
            "-p",
            "no:randomly",
            *(["-n", str(workers)] if workers > 1 else []),
        ]

    def run(
        self,
        node_ids: list[str],
        *,
        workers: int = 1,
        cancel: threading.Event | None = None,
        timeout_s: float = SESSION_TIMEOUT_S,
    ) -> SessionResult:
        """One session over node_ids in that order; cancel stops it (killing pytest)."""
        self.sessions += 1
        scratch = Path(tempfile.mkdtemp(prefix="flaketui-diagnose-"))
        report = scratch / "report.xml"
        argv = [
            self.python, "-m", "pytest", *self.base_args(workers), f"--basetemp={scratch / 'tmp'}",
            f"--junitxml={report}", "-q", "--no-header", "--", *node_ids,
        ]  # fmt: skip
        result = SessionResult(argv, list(node_ids))
        started = time.monotonic()
        try:
            with subprocess.Popen(
                argv,
                cwd=self.repo,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            ) as process:
                deadline = started + timeout_s
                while process.poll() is None:
                    if (cancel is not None and cancel.is_set()) or time.monotonic() > deadline:
                        process.kill()
                        process.wait()
                        result.cancelled = cancel is not None and cancel.is_set()
                        break
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        process.wait(timeout=POLL_S)
                result.exit_code = process.returncode
            if report.is_file() and not result.cancelled:
                for test_id, _, attempts in iter_case_rows(report):
                    result.outcomes[test_id] = attempts[0][0]
                    result.durations[test_id] = attempts[0][1]
        except OSError as exc:
            raise DiagnoseError(
                f"cannot run {self.python} -m pytest ({exc.strerror or exc})"
            ) from exc
        finally:
            result.seconds = time.monotonic() - started
            shutil.rmtree(scratch, ignore_errors=True)
        return result
