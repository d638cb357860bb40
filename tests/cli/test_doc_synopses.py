"""The command synopses of docs/ (`flaketui report DB [--now ISO] ...` in a fenced block) against
the commands' own options: each option they name exists, and a list of choices they give is the
option's; `report`'s synopses name every option of `flaketui report --help`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from flaketui.cli.commands import cli

ROOT = Path(__file__).resolve().parents[2]
# docs/cli.md is the help itself, generated.
PAGES = [path for path in sorted((ROOT / "docs").glob("*.md")) if path.name != "cli.md"]
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
# An option, with the value written after it: `--format table|json`, `-o PATH`.
_OPTION = re.compile(r"(?<![\w-])(--?[a-z][\w-]*)(?:[ =]([\w|.]+))?")


@dataclass(frozen=True)
class Synopsis:
    page: str
    text: str  # one command, its continuation lines joined

    @property
    def command(self) -> click.Command:
        words = self.text.split()[1:]
        command: click.Command = cli
        while isinstance(command, click.Group):
            found = command.get_command(click.Context(command), words.pop(0))
            assert found is not None, f"{self.page}: no command in {self.text!r}"
            command = found
        return command


def synopses() -> list[Synopsis]:
    """Each `flaketui ...` command of a fenced block that gives options in brackets."""
    found = []
    for page in PAGES:
        for _language, block in _FENCE.findall(page.read_text(encoding="utf-8")):
            if not block.startswith("flaketui ") or "[-" not in block:
                continue
            commands: list[str] = []
            for line in block.splitlines():
                text = line.split("  #")[0].rstrip()  # a comment after the command
                if text.startswith("flaketui "):
                    commands.append(text)
                elif commands and text:
                    commands[-1] += " " + text.strip()
            found += [Synopsis(page.name, text) for text in commands]
    return found


def options(command: click.Command) -> dict[str, click.Parameter]:
    return {name: p for p in command.params for name in (*p.opts, *p.secondary_opts)}


@pytest.mark.parametrize("synopsis", synopses(), ids=lambda s: f"{s.page}:{s.text[:40]}")
def test_a_synopsis_names_options_and_choices_the_command_has(synopsis: Synopsis) -> None:
    known = options(synopsis.command)
    for match in _OPTION.finditer(synopsis.text):
        name, value = match.groups()
        assert name in known, f"{synopsis.page}: {synopsis.text!r} names no option {name}"
        param_type = known[name].type
        if isinstance(param_type, click.Choice) and value and "|" in value:
            assert set(value.split("|")) == set(param_type.choices), (
                f"{synopsis.page}: {name} {value}, but the command takes "
                f"{'|'.join(map(str, param_type.choices))}"
            )


def test_a_synopsis_of_report_names_every_option_of_its_help() -> None:
    reports = [s for s in synopses() if s.text.split()[1] == "report"]
    assert {s.page for s in reports} >= {"commands.md", "report-json.md"}
    for synopsis in reports:
        named = {match.group(1) for match in _OPTION.finditer(synopsis.text)}
        for param in synopsis.command.params:
            if isinstance(param, click.Option) and param.name != "help":
                # The short form when there is one, as the help puts it first.
                assert param.opts[0] in named, f"{synopsis.page}: {param.opts[0]} missing"
