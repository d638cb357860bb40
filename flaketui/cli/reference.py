"""The command-line reference, docs/cli.md, generated from click's own help.

    python -m flaketui.cli.reference             # rewrite docs/cli.md
    python -m flaketui.cli.reference --check     # exit 1 if docs/cli.md is not what it would write

Every command of the `flaketui` group is walked, the lazily imported ones and the subcommands of
groups (`incident add|list|remove`) included, and each one's `--help` is rendered at a fixed
width, so the file is the same on every machine and changes only when a command or its help does.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import click

WIDTH = 100
DEFAULT_OUTPUT = Path("docs") / "cli.md"

HEADER = """\
# Command-line reference

Generated from the commands' own `--help` by `python -m flaketui.cli.reference` (or `make docs`);
do not edit by hand. `flaketui --help` and `flaketui COMMAND --help` print the same text.

`flaketui HISTORY` is short for `flaketui open HISTORY`; `python -m flaketui` is the same program.
Bad input (a missing file, a directory, a wrong option value) is one `Error: ...` line on stderr
with exit status 1, never a traceback, and the history is left as it was; a command line that
cannot be parsed (an unknown option, a missing argument) gets click's usage message and 2.
Text from CI in what a command prints for people (test ids, messages, workers, branches) shows
its control and bidirectional formatting characters as escapes (`\\x1b`, `\\u202e`, `\\n`): a
report cannot send the terminal an escape sequence or make one id read as another, and a message
naming an id with a line break in it stays one line. JSON, CSV and id lists hold the text as it
is.
"""


def walk(
    command: click.Command, ctx: click.Context
) -> Iterator[tuple[click.Command, click.Context]]:
    """The command and every command under it, depth first, each with its own context."""
    yield command, ctx
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            yield from walk(sub, _context(sub, name, ctx))


def _context(command: click.Command, name: str, parent: click.Context | None) -> click.Context:
    settings = {**command.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH}
    return click.Context(command, info_name=name, parent=parent, **settings)


def commands() -> list[tuple[click.Command, click.Context]]:
    """Every command of the `flaketui` group with the context its help is rendered in."""
    from flaketui.cli.group import cli

    return list(walk(cli, _context(cli, "flaketui", None)))


def render() -> str:
    """The whole of docs/cli.md."""
    entries = commands()
    lines = [HEADER, "## Commands", ""]
    for command, ctx in entries[1:]:
        path = ctx.command_path
        summary = command.get_short_help_str(limit=WIDTH)
        lines.append(f"- [`{path}`](#{anchor(path)}): {summary}")
    lines.append("")
    for command, ctx in entries:
        help_text = command.get_help(ctx).rstrip()
        lines += [f"## {ctx.command_path}", "", "```text", help_text, "```", ""]
    return "\n".join(lines)


def anchor(title: str) -> str:
    """The fragment GitHub gives a heading made of words and spaces."""
    return "-".join(title.lower().split())


def main(argv: list[str] | None = None) -> int:
    """Write the reference, or with --check report whether the written one is current."""
    args = sys.argv[1:] if argv is None else argv
    check = "--check" in args
    rest = [a for a in args if a != "--check"]
    if len(rest) > 1 or any(a.startswith("-") for a in rest):
        print("usage: python -m flaketui.cli.reference [--check] [PATH]", file=sys.stderr)
        return 2
    output = Path(rest[0]) if rest else DEFAULT_OUTPUT
    text = render()
    if check:
        current = output.read_text(encoding="utf-8") if output.is_file() else None
        if current != text:
            print(
                f"{output} is out of date: run `python -m flaketui.cli.reference`",
                file=sys.stderr,
            )
            return 1
        return 0
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
