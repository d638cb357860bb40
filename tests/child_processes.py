"""Child processes for tests that need several processes at once (writers racing each other) or a
process killed midway (crash safety).

Children come from a fork server, never from a fork of the test process: a pytest-xdist worker
runs threads (execnet's receiver), and a child forked from a process running threads can inherit
a lock that no thread of its own will ever release (Python 3.12 and later warn on every such
fork). The server is a fresh Python that imports the modules in PRELOAD once, runs no threads,
and forks each child from itself, so a child starts in milliseconds.

A child gets from the test process only what is passed to it:
- its target, by name: a module-level function of a module the child can import (a test module
  is one: the child gets the test process's sys.path, which pytest's default import mode fills
  with the test folders, and its working directory);
- its arguments, pickled: plain values, or objects of the same context (Event, Barrier, Queue,
  Value, Condition) to talk to the test;
- the environment of the moment the server started (once per test process): a variable a test
  sets later reaches no child, so pass such a value as an argument;
- the standard output and error the test process had then: pytest's capture, which keeps the
  same files for the whole session, so a child's traceback shows under the test that failed.
Nothing else: no attribute a test patched, no open connection. A child patches what it needs
itself, in its target.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from multiprocessing import forkserver
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext
from pathlib import Path

import flaketui

# Imported once by the server, so that no child pays for them: what the children's targets and
# the test modules holding them import (a test module itself then imports in milliseconds).
PRELOAD = [
    "click.testing",
    "filelock",
    "hypothesis",
    "pytest",
    "sqlite_utils",
    "flaketui.cli.commands",
    "flaketui.core.config",
    "flaketui.core.history.merge",
    "flaketui.core.history.schema_file",
    "flaketui.core.history.store",
    "flaketui.core.ingest.junit",
    "flaketui.core.ingest.manifest",
    "flaketui.core.ingest.pytest_ids",
    "flaketui.core.ingest.report_time",
    "flaketui.core.ingest.writer",
    "flaketui.core.models",
    "flaketui.core.quarantine.actions",
    "flaketui.core.quarantine.skipfile",
    "flaketui.core.rollups.build",
    "flaketui.core.scoring.report",
]

# The folder holding the flaketui this process imported (a mutated copy on PYTHONPATH included).
# The server starts with it first on PYTHONPATH; its first child checks that it got that one.
PACKAGE_ROOT = str(Path(flaketui.__file__).resolve().parent.parent)

_server_checked = False


def child_context() -> ForkServerContext:
    """The multiprocessing context every test child comes from (see the module's docstring).
    The first call in a process starts the server, then checks with one child that children
    import this process's flaketui and every module of PRELOAD is already imported in them."""
    global _server_checked
    ctx = multiprocessing.get_context("forkserver")
    if not _server_checked:
        ctx.set_forkserver_preload(PRELOAD)
        _start_server()
        package, missing = _child_state(ctx)
        assert package == flaketui.__file__, (
            f"children import flaketui from {package}, this process from {flaketui.__file__}"
        )
        assert missing == [], f"the fork server could not import {missing}"
        _server_checked = True
    return ctx


def _start_server() -> None:
    """Start the fork server with PACKAGE_ROOT first on its PYTHONPATH."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, before]))
    try:
        forkserver.ensure_running()
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before


def _send_state(answer: Connection) -> None:
    answer.send((flaketui.__file__, [name for name in PRELOAD if name not in sys.modules]))
    answer.close()


def _child_state(ctx: ForkServerContext) -> tuple[str, list[str]]:
    """Where a child's flaketui comes from, and the modules of PRELOAD it has not imported."""
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_send_state, args=(send,))
    proc.start()
    send.close()
    proc.join(60)
    try:
        assert proc.exitcode == 0, f"a child of the fork server ended with {proc.exitcode}"
        package, missing = receive.recv()
        return str(package), list(missing)
    finally:
        receive.close()
