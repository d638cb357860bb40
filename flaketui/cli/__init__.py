"""The `flaketui` console script: starts the app's first load early, then runs the click group.

This module stays light (no click): for `flaketui HISTORY` the history starts being read before
click and the commands are imported, and the app runs without them when the arguments are plain
(flaketui.tui.early, SPEC §9 first ranked screen). The click group is flaketui.cli.group; `cli`
and `FlaketuiGroup` are importable from here too.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flaketui.cli.group import FlaketuiGroup as FlaketuiGroup
    from flaketui.cli.group import cli as cli

# Command name -> module under flaketui.cli.commands (imported when the command runs).
LAZY_COMMANDS: dict[str, str] = {
    "changes": "changes",
    "export": "export",
    "incident": "incident",
    "ingest": "ingest",
    "lifecycle": "lifecycle",
    "merge": "merge",
    "open": "open",
    "pivot": "pivot",
    "prune": "prune",
    "quarantine": "quarantine",
    "release": "quarantine",
    "report": "report",
    "resign": "resign",
    "sync": "sync",
}


def __getattr__(name: str) -> Any:
    """`cli` and `FlaketuiGroup`, from the click group's module (imported on first use)."""
    if name in ("cli", "FlaketuiGroup"):
        from flaketui.cli import group as cli_group

        return getattr(cli_group, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Console-script entry point."""
    from flaketui.tui import gcpause

    # No cyclic collection while the app starts (flaketui.tui.gcpause): the app resumes it once
    # its first screen is up; any other command resumes it before click starts.
    gcpause.pause_startup()
    from flaketui.tui.early import open_early, start_early

    start_early(sys.argv[1:], LAZY_COMMANDS)
    if open_early():
        return  # a plain `flaketui [open] HISTORY`: the app ran, click had nothing to add
    gcpause.end_startup()
    from flaketui.cli.group import cli

    cli(prog_name="flaketui")


if __name__ == "__main__":  # pragma: no cover
    main()
    sys.exit(0)
