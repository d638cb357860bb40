"""docs/cli.md is click's own help for every command, and is regenerated whenever a command changes.

When a test here fails after a command or option was added or changed, run
`python -m flaketui.cli.reference` (or `make docs`) and commit docs/cli.md.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from flaketui.cli import LAZY_COMMANDS, reference
from flaketui.cli.group import cli

ROOT = Path(__file__).resolve().parents[2]
CLI_MD = ROOT / "docs" / "cli.md"


def _every_command() -> list[tuple[str, click.Command]]:
    """Walked here on its own (not through the generator), lazily imported commands included."""
    found: list[tuple[str, click.Command]] = []
    pending: list[tuple[str, click.Command]] = [("flaketui", cli)]
    while pending:
        path, command = pending.pop()
        found.append((path, command))
        if isinstance(command, click.Group):
            ctx = click.Context(command, info_name=path)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, name
                pending.append((f"{path} {name}", sub))
    return found


def _sections(text: str) -> dict[str, str]:
    """docs/cli.md's sections by heading (`## flaketui report` -> its help text)."""
    sections: dict[str, str] = {}
    for chunk in text.split("\n## ")[1:]:
        title, _, body = chunk.partition("\n")
        sections[title.strip()] = body
    return sections


def test_the_reference_is_current() -> None:
    assert CLI_MD.read_text(encoding="utf-8") == reference.render(), (
        "docs/cli.md is stale: run `python -m flaketui.cli.reference` and commit it"
    )


def test_every_command_has_a_section() -> None:
    sections = _sections(CLI_MD.read_text(encoding="utf-8"))
    paths = {path for path, _ in _every_command()}
    assert {f"flaketui {name}" for name in LAZY_COMMANDS} <= paths
    assert "flaketui incident add" in paths
    assert paths - set(sections) == set()


@pytest.mark.parametrize("path", [path for path, _ in _every_command()])
def test_every_option_and_argument_is_in_its_section(path: str) -> None:
    command = dict(_every_command())[path]
    section = _sections(CLI_MD.read_text(encoding="utf-8"))[path]
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            for opt in (*param.opts, *param.secondary_opts):
                assert opt in section, f"{path}: {opt} missing from docs/cli.md"
        elif isinstance(param, click.Argument):
            usage = next(line for line in section.splitlines() if line.startswith("Usage:"))
            assert (param.metavar or param.human_readable_name) in usage, (path, param.name)
    if command.help:
        assert command.help.split()[0] in section


def test_check_fails_on_a_stale_file_and_passes_on_a_fresh_one(tmp_path: Path) -> None:
    out = tmp_path / "cli.md"
    assert reference.main(["--check", str(out)]) == 1  # missing
    assert reference.main([str(out)]) == 0
    assert reference.main(["--check", str(out)]) == 0
    out.write_text(out.read_text(encoding="utf-8").replace("--skip-file", "--skipfile"))
    assert reference.main(["--check", str(out)]) == 1


def test_a_new_command_or_option_makes_the_file_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "cli.md"
    reference.main([str(out)])

    @click.command("sync")
    @click.option("--remote", help="Where to sync with.")
    def sync() -> None:
        """Sync the history."""

    monkeypatch.setitem(cli.commands, "sync", sync)
    assert reference.main(["--check", str(out)]) == 1
    reference.main([str(out)])
    sections = _sections(out.read_text(encoding="utf-8"))
    assert "--remote" in sections["flaketui sync"]
    assert "sync" in sections["flaketui"]

    monkeypatch.setattr(sync, "params", [*sync.params, click.Option(["--dry-run"], is_flag=True)])
    assert reference.main(["--check", str(out)]) == 1


def test_bad_arguments_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert reference.main(["--nope"]) == 2
    assert "usage:" in capsys.readouterr().err
