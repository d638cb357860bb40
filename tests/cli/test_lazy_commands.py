"""The CLI imports a command's module only when that command runs, and knows every module."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import flaketui.cli.commands
from flaketui.cli import FlaketuiGroup


def test_every_command_module_is_listed() -> None:
    modules = {m.name for m in pkgutil.iter_modules(flaketui.cli.commands.__path__)}
    assert modules == set(FlaketuiGroup.lazy_commands.values())


def test_running_one_command_imports_only_its_module() -> None:
    code = (
        "import sys\n"
        "from flaketui.cli import cli\n"
        "try:\n"
        "    cli(['prune', '--help'], prog_name='flaketui')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('flaketui.cli.commands.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "['flaketui.cli.commands.prune']"
