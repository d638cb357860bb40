"""Test owners from CODEOWNERS (GitHub/GitLab syntax), then suite owners, then a rotation."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from codeowners import CodeOwners

from flaketui.core.config import Config
from flaketui.core.errors import FlaketuiError
from flaketui.core.reading import IsTerminal, TooLarge, is_pipe, read_at_most

# GitHub's search order (first found wins); GitLab also reads .gitlab/CODEOWNERS.
CODEOWNERS_LOCATIONS = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS", ".gitlab/CODEOWNERS")
# GitHub does not load a larger CODEOWNERS file either.
CODEOWNERS_MAX_BYTES = 3 << 20

# GitLab section header: `[Name]`, optional `^` (optional section), optional `[N]` approvals,
# optional default owners. A GitHub pattern such as `[ab]*.py @x` has no space after `]`.
_SECTION = re.compile(r"^\^?\[(?P<name>[^\]]+)\](?:\[\d+\])?(?:\s+(?P<owners>.*))?$")


@dataclass(slots=True)
class _Section:
    """One GitLab section (or the whole file when there are none), ready for matching."""

    name: str | None
    rules: CodeOwners


def find_repo_root(start: Path) -> Path | None:
    """The nearest folder at or above start that holds a `.git` (folder or worktree file)."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def find_codeowners(root: Path) -> Path | None:
    """The CODEOWNERS file GitHub would use for this repository root, if any."""
    for relative in CODEOWNERS_LOCATIONS:
        candidate = root / relative
        if candidate.is_file():
            return candidate
    return None


def locate_codeowners(
    history: Path | None = None, *, cwd: Path | None = None, explicit: Path | None = None
) -> Path | None:
    """The CODEOWNERS to use: `explicit`, else the git root's, else the one beside the history.

    Each folder is searched GitHub's way (.github/, the folder itself, docs/). The history's
    folder is the fallback because a history is often kept beside the project it records
    (the committed sample keeps sample_data/CODEOWNERS next to sample_data/history.db).
    """
    if explicit is not None:
        return explicit
    folders = [find_repo_root(cwd if cwd is not None else Path.cwd())]
    if history is not None:
        folders.append(history.absolute().parent)
    for folder in folders:
        found = find_codeowners(folder) if folder is not None else None
        if found is not None:
            return found
    return None


class CodeownersError(FlaketuiError):
    """A CODEOWNERS file whose rules cannot be read as text, named with the problem."""


def codeowners_text(path: Path) -> str:
    """The rules of a CODEOWNERS file: its text, a byte order mark left out.

    A file that is not UTF-8 (a binary file, a report, another encoding) is refused with a
    CodeownersError naming it: read anyway, its rules would give no owner or garbage ones
    without a word. A file that cannot be read at all degrades to no rules, and the owners
    come from the configured fallbacks. A pipe is refused unopened: it is read more than once
    (checked, then loaded), and a named pipe waits for a writer. A terminal is refused unread:
    reading it waits for someone to type (`/dev/null` reads as a file with no rules).
    """
    if is_pipe(path):
        raise CodeownersError(f"{path}: is a pipe, not a CODEOWNERS file; write it to a file")
    try:
        data = read_at_most(path, CODEOWNERS_MAX_BYTES)
    except TooLarge as exc:
        raise CodeownersError(
            f"{path}: {exc}, the most GitHub loads of a CODEOWNERS file"
        ) from None
    except IsTerminal:
        raise CodeownersError(f"{path}: is a terminal, not a CODEOWNERS file") from None
    except OSError:
        return ""
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise CodeownersError(
            f"{path}: not valid UTF-8 (byte 0x{data[exc.start]:02X} at offset {exc.start}); "
            "a CODEOWNERS file is UTF-8 text"
        ) from None


def _has_owner(line: str) -> bool:
    """Whether a rule line names at least one owner after its pattern."""
    parts = line.replace("\\ ", "_").split()
    return len(parts) > 1


def parse_sections(text: str) -> list[_Section]:
    """Split CODEOWNERS text into GitLab sections, giving ownerless rules the section default."""
    sections: list[tuple[str | None, str, list[str]]] = [(None, "", [])]
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        header = _SECTION.match(line)
        if header:
            sections.append((header["name"].strip().lower(), (header["owners"] or "").strip(), []))
            continue
        name, default_owners, lines = sections[-1]
        if default_owners and not _has_owner(line):
            line = f"{line} {default_owners}"
        lines.append(line)
    # GitLab merges sections that share a name (case-insensitively).
    merged: dict[str | None, list[str]] = {}
    for name, _default, lines in sections:
        merged.setdefault(name, []).extend(lines)
    return [_Section(name, CodeOwners("\n".join(lines))) for name, lines in merged.items() if lines]


def _normalise_path(test_file: str) -> str:
    """A repository-relative POSIX path as CODEOWNERS patterns expect it."""
    path = test_file.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return str(PurePosixPath(path)).lstrip("/")


class OwnerResolver:
    """Resolve a test's owner: CODEOWNERS, then the suite owner, the fallback, the rotation."""

    def __init__(self, root: Path | None, config: Config) -> None:
        """Load CODEOWNERS once: `root` is a folder searched GitHub's way, or the file itself.
        A CODEOWNERS that is not UTF-8 raises CodeownersError (see codeowners_text)."""
        self.config = config
        if root is None:
            self.codeowners_path: Path | None = None
        elif root.is_file():
            self.codeowners_path = root
        else:
            self.codeowners_path = find_codeowners(root)
        self._sections: list[_Section] = []
        if self.codeowners_path is not None:
            self._sections = parse_sections(codeowners_text(self.codeowners_path))

    def codeowners_of(self, test_file: str) -> list[str]:
        """Owners from CODEOWNERS: the last matching rule (per GitLab section, combined)."""
        path = _normalise_path(test_file)
        owners: list[str] = []
        for section in self._sections:
            for _kind, owner in section.rules.of(path):
                if owner not in owners:
                    owners.append(owner)
        return owners

    def owner_of(self, test_file: str | None, suite: str) -> str | None:
        """The owners of a test as one space-joined string, or None when nothing is configured."""
        if test_file:
            owners = self.codeowners_of(test_file)
            if owners:
                return " ".join(owners)
        suite_owner = self.config.suite_owners.get(suite)
        if suite_owner:
            return suite_owner
        if self.config.owner_fallback:
            return self.config.owner_fallback
        if self.config.rotation:
            key = (test_file or suite).encode("utf-8")
            # sha256, not hash(): the choice must not change between processes.
            index = int.from_bytes(hashlib.sha256(key).digest()[:8], "big")
            return self.config.rotation[index % len(self.config.rotation)]
        return None
