"""Every console example in the documentation that runs a command on the committed sample
history prints what that command prints.

An example may be an excerpt: a line `...` stands for any number of lines, and the example
may stop before the output does. Without a leading `...` its first line is the output's first.
Examples on other histories (made-up paths) are illustrations and are not run here.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli.commands import cli

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = "sample_data/history.db"
DOCUMENTS = [
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "README.md",
    ROOT / "sample_data/README.md",
]
CONSOLE = re.compile(r"```console\n(.*?)```", re.S)
SKIPPED = "..."


def sample_examples() -> list[tuple[str, str, list[str]]]:
    """(document, command line, documented output lines) of every sample example."""
    found = []
    for document in DOCUMENTS:
        for block in CONSOLE.findall(document.read_text(encoding="utf-8")):
            lines = block.splitlines()
            starts = [i for i, line in enumerate(lines) if line.startswith("$ ")]
            for start, end in zip(starts, [*starts[1:], len(lines)], strict=True):
                command = lines[start][2:]
                if command.startswith("flaketui ") and SAMPLE in shlex.split(command):
                    found.append((document.name, command, lines[start + 1 : end]))
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
    assert len(EXAMPLES) >= 6
    assert {name for name, _, _ in EXAMPLES} >= {"commands.md", "diagnosis.md"}


@pytest.mark.parametrize(
    ("document", "command", "documented"),
    EXAMPLES,
    ids=[
        f"{name}:{' '.join(command.split()[:2])}:{n}"
        for n, (name, command, _) in enumerate(EXAMPLES)
    ],
)
def test_an_example_prints_what_the_command_prints(
    document: str, command: str, documented: list[str], tmp_path: Path
) -> None:
    assert "--now" in command, f"{document}: a sample example scores as of a fixed --now"
    history = tmp_path / "history.db"
    shutil.copyfile(ROOT / SAMPLE, history)
    args = [str(history) if word == SAMPLE else word for word in shlex.split(command)[1:]]
    result = CliRunner().invoke(cli, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    printed = result.output.replace(str(history), SAMPLE).splitlines()
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
