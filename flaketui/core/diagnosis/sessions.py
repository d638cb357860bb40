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
  a history nor skips a quarantined test;
- a process group of its own: a session stopped midway is interrupted, then killed, with
  every worker it started (stop_session).

Before any session the interpreter is asked what it has (check_interpreter): pytest and
flaketui's plugin are required, pytest-xdist only for sessions at several workers. A session
counts only when the test ran in it: one that did not start, could not collect the test or
skipped it says why (SessionResult.not_run), and is never a pass.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
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
PROBE_TIMEOUT_S = 120.0
POLL_S = 0.05
STOP_GRACE_S = 5.0  # what a session stopped midway has to tear down before it is killed
OUTPUT_TAIL = 16_000  # characters of a session's output kept to say why the test did not run
EXIT_STATUSES = {2: "interrupted", 3: "internal error", 4: "usage error", 5: "no tests collected"}
PLUGIN_MODULE = "flaketui.pytest_plugin"

# What a session runs: `python -m pytest`, with Ctrl-C's handler installed even when flaketui
# was started with SIGINT ignored (a shell starts a background job so, nohup too) and the session
# inherited that: stop_session interrupts a session as Ctrl-C does. sys.path[0] is the working
# directory as -m makes it (-c makes it '').
RUN_PYTEST = (
    "import os, runpy, signal, sys; "
    "signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.path[0] = os.getcwd(); "
    "runpy.run_module('pytest', run_name='__main__', alter_sys=True)"
)

# Run by the interpreter sessions use (any Python 3): what it has, as one JSON line.
_PROBE = """
import importlib.util, json, sys
found = {"pytest": "", "plugin": False, "xdist": False}
try:
    import pytest
except Exception as exc:
    found["pytest"] = str(exc) or type(exc).__name__
else:
    plugin = sys.argv[1]
    try:
        importable = importlib.util.find_spec(plugin) is not None
    except Exception:
        importable = False
    if sys.argv[2] == "autoload":
        try:
            from importlib.metadata import entry_points
            try:
                points = entry_points(group="pytest11")
            except TypeError:
                points = entry_points().get("pytest11", [])
            importable = importable and any(
                p.value.split(":")[0].strip() == plugin for p in points
            )
        except ImportError:
            pass
    found["plugin"] = importable
    try:
        found["xdist"] = importlib.util.find_spec("xdist") is not None
    except Exception:
        pass
print(json.dumps(found))
"""


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
    timed_out: float | None = None  # the limit it was stopped at
    output: str = ""  # the end of pytest's output

    def not_run(self, test_id: str) -> str | None:
        """Why the test did not run in this session, or None when it has a result.

        A session that did not start, stopped before the test, did not collect it or skipped
        it has no result for it: it is neither a pass nor a failure.
        """
        outcome = self.outcome_of(test_id)
        if outcome not in (None, "skipped"):
            return None
        if self.timed_out is not None:
            return f"pytest did not finish within {self.timed_out:g} s"
        if outcome == "skipped":
            return "the test was skipped"
        if self.exit_code < 0:
            return f"pytest was killed by signal {-self.exit_code}"
        status = f"pytest exit status {self.exit_code}"
        problem = pytest_problem(self.output)
        if not problem and self.exit_code in (0, 1):
            problem = "the test was not among those pytest ran"
        return f"{status}: {problem or EXIT_STATUSES.get(self.exit_code, 'no result')}"

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


_ARGPARSE_ERROR = re.compile(r"^\S+: error: (?P<problem>.+)$")
_ERROR_LINE = re.compile(r"^ERROR: (?!usage:)(?P<problem>.+)$")
_COLLECTING = re.compile(r"^_+ ERROR collecting (?P<path>.+?) _+$")
_EXCEPTION = re.compile(r"^E +(?P<problem>\S.*)$")
_NO_MODULE = re.compile(r"No module named .+")


def pytest_problem(output: str) -> str:
    """The line of pytest's output that says why it ran nothing, shortened; '' if none does."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    found = ""
    for number, line in enumerate(lines):
        collecting = _COLLECTING.match(line)
        if collecting is not None:  # a module that does not import, whatever else failed
            found = f"error collecting {collecting.group('path')}"
            following = (_EXCEPTION.match(rest) for rest in lines[number + 1 :])
            cause = next((m.group("problem") for m in following if m), None)
            found += f": {cause}" if cause else ""
            break
    else:
        for pattern in (_ARGPARSE_ERROR, _ERROR_LINE, _NO_MODULE):
            hit = next((m for m in map(pattern.search, lines) if m), None)
            if hit is not None:
                found = hit.groupdict().get("problem") or hit.group(0)
                break
    found = " ".join(_UNSAFE.sub("?", found).split())
    return found if len(found) <= 200 else found[:197] + "..."


class PytestSessions:
    """Runs pytest sessions in one repository with one interpreter."""

    def __init__(self, repo: Path, python: str | None = None) -> None:
        self.repo = repo
        self.python = python or sys.executable
        self.env = dict(os.environ)
        self.env["PYTHONDONTWRITEBYTECODE"] = "1"
        self.env.pop("PYTEST_XDIST_WORKER", None)
        self.autoload = not self.env.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
        self.has_xdist = False  # of the interpreter sessions use: see check_interpreter
        self.checked = False
        self.sessions = 0

    def check_interpreter(self) -> None:
        """Ask the interpreter what it has; DiagnoseError when it cannot run a session.

        pytest and flaketui's plugin (registered for pytest, or importable when plugins are
        not autoloaded) are required; pytest-xdist is recorded in has_xdist.
        """
        if self.checked:
            return
        argv = [self.python, "-c", _PROBE, PLUGIN_MODULE, "autoload" if self.autoload else "-p"]
        try:
            done = subprocess.run(
                argv,
                cwd=self.repo,
                env=self.env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=PROBE_TIMEOUT_S,
                check=False,
            )
        except OSError as exc:
            raise DiagnoseError(f"cannot run {self.python} ({exc.strerror or exc})") from exc
        except subprocess.TimeoutExpired as exc:
            raise DiagnoseError(
                f"{self.python} did not answer within {PROBE_TIMEOUT_S:g} s"
            ) from exc
        try:
            found = json.loads(done.stdout.strip().splitlines()[-1])
            missing, plugin, xdist = str(found["pytest"]), found["plugin"], found["xdist"]
        except (IndexError, ValueError, KeyError, TypeError):
            last = (done.stderr.strip().splitlines() or ["no answer"])[-1]
            raise DiagnoseError(
                f"{self.python}: not a Python interpreter diagnose can use ({last[:200]})"
            ) from None
        if missing:
            raise DiagnoseError(f"{self.python}: no pytest there ({missing})")
        if plugin is not True:
            raise DiagnoseError(
                f"{self.python}: flaketui's pytest plugin is not installed there (install "
                "pytest-flaketui in that environment, or choose another one with --python)"
            )
        self.has_xdist = xdist is True
        self.checked = True

    def base_args(self, workers: int) -> list[str]:
        """Options every session gets (see the module docstring), and xdist's when asked."""
        args = ["-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:random_order"]
        args += ["-o", "flaketui_db="]
        if not self.autoload:
            args += ["-p", PLUGIN_MODULE]
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
        """One session over node_ids in that order; cancel stops it (see stop_session)."""
        self.sessions += 1
        scratch = Path(tempfile.mkdtemp(prefix="flaketui-diagnose-"))
        report = scratch / "report.xml"
        output = scratch / "output.txt"
        argv = [
            self.python, "-c", RUN_PYTEST, *self.base_args(workers),
            f"--basetemp={scratch / 'tmp'}", f"--junitxml={report}", "-q", "--no-header", "--",
            *node_ids,
        ]  # fmt: skip
        result = SessionResult(argv, list(node_ids))
        started = time.monotonic()
        try:
            with (
                output.open("wb") as sink,
                subprocess.Popen(
                    argv,
                    cwd=self.repo,
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # a process group: stop_session reaches its workers
                ) as process,
            ):
                deadline = started + timeout_s
                try:
                    while process.poll() is None:
                        if (cancel is not None and cancel.is_set()) or time.monotonic() > deadline:
                            result.cancelled = cancel is not None and cancel.is_set()
                            if not result.cancelled:
                                result.timed_out = timeout_s
                            stop_session(process)
                            break
                        with contextlib.suppress(subprocess.TimeoutExpired):
                            process.wait(timeout=POLL_S)
                except BaseException:
                    stop_session(process)  # the command is stopped: its session goes with it
                    raise
                result.exit_code = process.returncode
            if report.is_file() and not result.cancelled:
                for test_id, _, attempts, _ in iter_case_rows(report):
                    result.outcomes[test_id] = attempts[0][0]
                    result.durations[test_id] = attempts[0][1]
            if any(result.outcome_of(test) in (None, "skipped") for test in node_ids):
                result.output = _tail(output)  # kept only to say why a test did not run
        except OSError as exc:
            raise DiagnoseError(
                f"cannot run {self.python} -m pytest ({exc.strerror or exc})"
            ) from exc
        finally:
            result.seconds = time.monotonic() - started
            shutil.rmtree(scratch, ignore_errors=True)
        return result


def stop_session(process: subprocess.Popen[bytes]) -> None:
    """Stop a session and every process it started (its pytest-xdist workers).

    Its process group is first interrupted as Ctrl-C would: pytest stops the test that runs
    and runs the fixtures' teardowns (a server a fixture started is stopped, a temporary
    folder removed). What is still running STOP_GRACE_S later (a test that ignores the
    interruption) is killed.
    """
    if not hasattr(os, "killpg"):  # no process groups: the session alone, at once
        process.kill()
        process.wait()
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=STOP_GRACE_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # workers the session left, if any
    process.wait()


def _tail(path: Path) -> str:
    """The last OUTPUT_TAIL characters (about) of a session's output file."""
    with path.open("rb") as file:
        file.seek(0, os.SEEK_END)
        file.seek(max(0, file.tell() - OUTPUT_TAIL))
        return file.read().decode("utf-8", errors="replace")
