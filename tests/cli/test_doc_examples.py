"""Every console example in the documentation that runs flaketui on the committed sample data
prints what the commands print.

An example block whose commands are all `flaketui ...` and name a file under `sample_data/`
is run, command after command, in a scratch folder holding a copy of `sample_data/` (so an
example may build a history and a later command read it), with no CI variable and no git
repository to detect. Each command's documented lines must be the printed ones: a line `...`
stands for any number of lines, and an example may stop before the output does. Without a
leading `...` its first line is the output's first. Examples on made-up files are
illustrations and are not run here.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli.commands import cli

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = "sample_data/"
DOCUMENTS = [
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "README.md",
    ROOT / "sample_data/README.md",
]
CONSOLE = re.compile(r"```console\n(.*?)```", re.S)
SKIPPED = "..."
CI_PREFIXES = ("GITHUB_", "GITLAB", "CI_", "BUILDKITE", "CIRCLE", "JENKINS", "BUILD_", "GIT_")

Example = list[tuple[str, list[str]]]  # (command line, documented output lines)


def sample_examples() -> list[tuple[str, Example]]:
    """(document, its commands with their documented output) of every block that runs."""
    found = []
    for document in DOCUMENTS:
        for block in CONSOLE.findall(document.read_text(encoding="utf-8")):
            lines = block.splitlines()
            starts = [i for i, line in enumerate(lines) if line.startswith("$ ")]
            example = [
                (lines[start][2:], lines[start + 1 : end])
                for start, end in zip(starts, [*starts[1:], len(lines)], strict=True)
            ]
            commands = [shlex.split(command) for command, _ in example]
            if (
                commands
                and all(words[0] == "flaketui" for words in commands)
                and any(word.startswith(SAMPLE) for words in commands for word in words)
            ):
                found.append((document.name, example))
    return found


def matches(documented: list[str], printed: list[str]) -> bool:
    """Whether the documented lines are the printed ones, `...` standing for any run of lines."""
    position = 0
    anchored = True
    for line in documented:
        if line.strip() == SKIPPED:
            anchored = False
            continue
        while position < len(printed) and printed[position].rstrip() != line.rstrip():
            if anchored:
                return False
            position += 1
        if position == len(printed):
            return False
        position += 1
        anchored = True
    return True


EXAMPLES = sample_examples()


def test_the_documents_hold_sample_examples() -> None:
    # The pattern finds them: a change of fence or path would leave nothing to check.
    names = [name for name, _ in EXAMPLES]
    assert len(EXAMPLES) >= 8
    assert {"commands.md", "diagnosis.md", "ingest.md"} <= set(names)


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with a copy of sample_data/, as the current directory, and no CI around."""
    shutil.copytree(ROOT / "sample_data", tmp_path / "sample_data")
    for name in list(os.environ):
        if name.startswith(CI_PREFIXES) or name in ("CI", "FLAKETUI_INCIDENT"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("document", "example"),
    EXAMPLES,
    ids=[
        f"{name}:{' '.join(example[0][0].split()[:2])}:{n}"
        for n, (name, example) in enumerate(EXAMPLES)
    ],
)
def test_an_example_prints_what_its_commands_print(
    document: str, example: Example, scratch: Path
) -> None:
    for command, documented in example:
        words = shlex.split(command)
        if "sample_data/history.db" in words:
            assert "--now" in words, f"{document}: `{command}` scores as of a fixed --now"
        result = CliRunner().invoke(cli, words[1:])
        assert result.exception is None or isinstance(result.exception, SystemExit), result.output
        printed = result.output.splitlines()
        assert matches(documented, printed), f"{document}: `{command}` prints\n" + "\n".join(
            printed[:40]
        )


@pytest.mark.parametrize(
    ("documented", "printed", "expected"),
    [
        (["a", "b"], ["a", "b", "c"], True),  # an excerpt may stop early
        (["b"], ["a", "b"], False),  # anchored at the first line
        (["...", "b"], ["a", "b"], True),
        (["a", "...", "d"], ["a", "b", "c", "d"], True),
        (["a", "c"], ["a", "b", "c"], False),  # no gap without `...`
        (["a", "...", "x"], ["a", "b"], False),
        (["a  "], ["a"], True),  # trailing blanks do not count
    ],
)
def test_the_matching_rule(documented: list[str], printed: list[str], expected: bool) -> None:
    assert matches(documented, printed) is expected
