"""The shared quarantine skip file: format, path resolution, reading, locked writes.

Format (documented in the README)::

    {
      "format": "flaketui-skip-file",
      "tests": {
        "tests/test_x.py::test_y[a]": {
          "added_by": "flaketui",
          "expires": "2026-01-31T10:00:00Z",
          "mode": "skip",
          "owner": "@team-billing",
          "quarantined_at": "2026-01-01T10:00:00Z",
          "reason": "flaky: 12 flaky runs of 240 on main",
          "scores": {"damage": 1.5, ...},
          "signature": "3f2a...",
          "ticket": "https://example.org/issue/1"
        }
      },
      "version": 1
    }

The rendering is exactly `json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False)` plus a
trailing newline (an empty `tests` object is `"tests": {}`): adding an entry shows in `git diff`
as that entry's lines (plus at most a comma on its neighbour, or the `{}` line opening for the
first one), and removing it restores the file byte for byte. Entries written by hand keep their
exact text until flaketui changes them.
"""

from __future__ import annotations

import json
import math
import os
import stat
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flaketui.core.atomic import write_atomically
from flaketui.core.config import Config, find_pyproject
from flaketui.core.errors import FlaketuiError, SkipFileError
from flaketui.core.reading import IsTerminal, TooLarge, is_pipe, read_at_most
from flaketui.core.timeutil import parse_iso, to_iso

if TYPE_CHECKING:
    import filelock

FORMAT_MARKER = "flaketui-skip-file"
FORMAT_VERSION = 1
DEFAULT_NAME = ".quarantine.json"
# Far above any real skip file (~300 bytes an entry), below what a stream could fill memory with.
MAX_SKIP_FILE_BYTES = 256 << 20
ENV_VAR = "FLAKETUI_SKIP_FILE"
SCORE_KEYS = ("damage", "recency_score", "wilson_low", "wilson_high", "flip_rate", "runs")
SCORE_DIGITS = 6
LOCK_TIMEOUT_S = 30.0
ENTRY_FIELDS = (
    "added_by",
    "expires",
    "mode",
    "owner",
    "quarantined_at",
    "reason",
    "scores",
    "signature",
    "ticket",
)


class SkipMode(StrEnum):
    """How CI treats a quarantined test; compares and prints as its value."""

    SKIP = "skip"  # deselected
    RUN = "run"  # runs, its real outcome reported; only the exit status ignores its failure


MODES = tuple(SkipMode)


class ForeignSkipFile(SkipFileError):
    """An auto-discovered file at the skip file's path that is not a flaketui skip file."""


@dataclass
class SkipEntry:
    """One quarantined test: how CI treats it, why, and the evidence when it was quarantined."""

    test_id: str
    mode: SkipMode = SkipMode.SKIP
    reason: str = ""
    owner: str | None = None
    ticket: str | None = None
    quarantined_at: datetime | None = None  # None only in hand-written entries
    expires: datetime | None = None  # None: never (hand-written entries without a date)
    scores: dict[str, float] = field(default_factory=dict)
    signature: str | None = None
    added_by: str = "flaketui"  # "flaketui", or "hand" when written by a person
    extra: dict[str, Any] = field(default_factory=dict)  # unknown fields, kept as they were
    # The JSON object this entry was read from; written back verbatim while the entry is unchanged.
    raw: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def hand_added(self) -> bool:
        """Whether a person wrote this entry into the file rather than flaketui."""
        return self.added_by != "flaketui"

    def is_expired(self, now: datetime) -> bool:
        """Whether the entry's expiry date has passed (it is still honoured, loudly)."""
        return self.expires is not None and self.expires <= now

    def to_json(self) -> dict[str, Any]:
        """The JSON object stored for this entry."""
        if self.raw is not None and _entry_from_json(self.test_id, self.raw) == self:
            return self.raw
        obj: dict[str, Any] = dict(self.extra)
        obj.update(
            added_by=self.added_by,
            expires=None if self.expires is None else to_iso(self.expires),
            mode=self.mode,
            owner=self.owner,
            quarantined_at=None if self.quarantined_at is None else to_iso(self.quarantined_at),
            reason=self.reason,
            scores=round_scores(self.scores),
            signature=self.signature,
            ticket=self.ticket,
        )
        return obj


@dataclass
class SkipFile:
    """A parsed skip file: its entries by test id, plus unknown top-level keys kept as they were."""

    path: Path
    entries: dict[str, SkipEntry] = field(default_factory=dict)
    version: int = FORMAT_VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    def expired(self, now: datetime) -> list[SkipEntry]:
        """Entries past their expiry date, by test id."""
        return [e for _, e in sorted(self.entries.items()) if e.is_expired(now)]


def round_scores(scores: Mapping[str, Any]) -> dict[str, Any]:
    """Scores as stored: floats rounded to 6 digits, non-finite values dropped, ints kept."""
    out: dict[str, Any] = {}
    for key, value in scores.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if isinstance(value, float):
            if not math.isfinite(value):
                continue
            value = round(value, SCORE_DIGITS)
        out[key] = value
    return out


# --- path resolution -------------------------------------------------------------------------


def repo_root(cwd: Path | None = None) -> Path:
    """The git repository holding cwd (`git rev-parse --show-toplevel`), else cwd itself."""
    folder = (cwd or Path.cwd()).absolute()
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return folder
    top = out.stdout.strip()
    return Path(top) if out.returncode == 0 and top else folder


def resolve_skip_file_source(
    flag: str | os.PathLike[str] | None,
    *,
    env: Mapping[str, str],
    config: Config,
    root: Path | None,
    ini: Path | None = None,
    config_dir: Path | None = None,
) -> tuple[Path, str]:
    """The skip file's path and where it came from: 'flag', 'env', 'ini', 'config' or 'default'.

    Order: the flag, FLAKETUI_SKIP_FILE, the pytest ini option (already absolute), `skip_file` in
    `[tool.flaketui]` (relative to config_dir, default: the folder of the pyproject.toml found from
    root), then `.quarantine.json` in root (the current directory when root is None).
    """
    base = root if root is not None else Path.cwd()
    if flag:
        return Path(flag).expanduser().absolute(), "flag"
    if env.get(ENV_VAR):
        return Path(env[ENV_VAR]).expanduser().absolute(), "env"
    if ini is not None:
        return ini.absolute(), "ini"
    if config.skip_file:
        if config_dir is None:
            pyproject = find_pyproject(base)
            config_dir = pyproject.parent if pyproject is not None else base
        return (config_dir / Path(config.skip_file).expanduser()).absolute(), "config"
    return (base / DEFAULT_NAME).absolute(), "default"


def resolve_skip_file(
    flag: str | os.PathLike[str] | None,
    *,
    env: Mapping[str, str],
    config: Config,
    root: Path | None,
    ini: Path | None = None,
    config_dir: Path | None = None,
) -> Path:
    """The skip file's path (see resolve_skip_file_source for the order)."""
    path, _ = resolve_skip_file_source(
        flag, env=env, config=config, root=root, ini=ini, config_dir=config_dir
    )
    return path


# --- reading ---------------------------------------------------------------------------------


def _problem(path: Path, text: str) -> SkipFileError:
    return SkipFileError(f"{path}: {text}")


def _optional_str(test_id: str, obj: Mapping[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value
    raise FlaketuiError(f"tests[{test_id!r}].{key}: expected a string, got {value!r}")


def _optional_time(test_id: str, obj: Mapping[str, Any], key: str) -> datetime | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise FlaketuiError(f"tests[{test_id!r}].{key}: expected a timestamp, got {value!r}")
    try:
        return parse_iso(value, bounded=False)  # an expiry is only compared: 9999 means never
    except FlaketuiError:
        raise FlaketuiError(
            f"tests[{test_id!r}].{key}: not an ISO 8601 timestamp: {value!r}"
        ) from None


def _entry_from_json(test_id: str, obj: Any) -> SkipEntry:
    """Parse one entry; missing fields (hand-written entries) get defaults."""
    if not isinstance(obj, dict):
        raise FlaketuiError(f"tests[{test_id!r}]: expected an object, got {obj!r}")
    mode = obj.get("mode", SkipMode.SKIP)
    if mode not in MODES:
        raise FlaketuiError(f"tests[{test_id!r}].mode: expected 'skip' or 'run', got {mode!r}")
    scores = obj.get("scores") or {}
    if not isinstance(scores, dict):
        raise FlaketuiError(f"tests[{test_id!r}].scores: expected an object")
    added_by = _optional_str(test_id, obj, "added_by") or "hand"
    return SkipEntry(
        test_id=test_id,
        mode=SkipMode(mode),
        reason=_optional_str(test_id, obj, "reason") or "",
        owner=_optional_str(test_id, obj, "owner"),
        ticket=_optional_str(test_id, obj, "ticket"),
        quarantined_at=_optional_time(test_id, obj, "quarantined_at"),
        expires=_optional_time(test_id, obj, "expires"),
        scores=round_scores(scores),
        signature=_optional_str(test_id, obj, "signature"),
        added_by=added_by,
        extra={k: v for k, v in obj.items() if k not in ENTRY_FIELDS},
        raw=obj,
    )


def parse_skip_file(text: str, path: Path, *, explicit: bool) -> SkipFile:
    """Parse skip-file text; SkipFileError if broken, ForeignSkipFile if unmarked and implicit."""
    marked = FORMAT_MARKER in text
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        # RecursionError: the decoder recurses per nested array or object.
        problem = (
            f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
            if isinstance(exc, json.JSONDecodeError)
            else "not valid JSON (nested too deeply)"
        )
        if marked or explicit:
            raise _problem(path, problem) from None
        raise ForeignSkipFile(f"{path}: not a flaketui skip file ({problem})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_MARKER:
        problem = f'not a flaketui skip file (no "format": "{FORMAT_MARKER}")'
        if explicit:
            raise _problem(path, problem)
        raise ForeignSkipFile(f"{path}: {problem}")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise _problem(path, f"missing or invalid format version: {version!r}")
    if version > FORMAT_VERSION:
        raise _problem(
            path,
            f"format version {version} is newer than this flaketui supports ({FORMAT_VERSION})",
        )
    tests = doc.get("tests", {})
    if not isinstance(tests, dict):
        raise _problem(path, '"tests" must be an object of test id -> entry')
    entries: dict[str, SkipEntry] = {}
    for test_id, obj in tests.items():
        try:
            entries[test_id] = _entry_from_json(test_id, obj)
        except FlaketuiError as exc:
            raise _problem(path, exc.message) from None
    extra = {k: v for k, v in doc.items() if k not in ("format", "version", "tests")}
    return SkipFile(path=path, entries=entries, version=version, extra=extra)


def read_skip_file(path: Path, *, explicit: bool) -> SkipFile | None:
    """Read a skip file; None if absent.

    A broken file raises SkipFileError (one line: file and problem) when it carries the marker or
    was named explicitly; an auto-discovered file without the marker raises ForeignSkipFile.
    A pipe is refused unopened (a named pipe waits for a writer; a skip file is written back),
    a terminal unread (reading it waits for someone to type).
    """
    if is_pipe(path):
        raise _problem(path, "is a pipe, not a skip file")
    try:
        data = read_at_most(path, MAX_SKIP_FILE_BYTES)
    except TooLarge as exc:
        raise _problem(path, str(exc)) from None
    except IsTerminal:
        raise _problem(path, "is a terminal, not a skip file") from None
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise _problem(path, "is a directory, not a skip file") from None
    except OSError as exc:
        raise _problem(path, f"cannot read ({exc.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        if explicit or FORMAT_MARKER.encode() in data:
            raise _problem(path, "not UTF-8 text") from None
        raise ForeignSkipFile(f"{path}: not a flaketui skip file (not UTF-8 text)") from None
    return parse_skip_file(text, path, explicit=explicit)


# --- writing ---------------------------------------------------------------------------------


def render_skip_file(skip: SkipFile) -> str:
    """The canonical text of a skip file: sorted keys, indent 2, trailing newline."""
    doc: dict[str, Any] = dict(skip.extra)
    doc["format"] = FORMAT_MARKER
    doc["version"] = FORMAT_VERSION
    doc["tests"] = {tid: skip.entries[tid].to_json() for tid in sorted(skip.entries)}
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _git_dir(folder: Path) -> Path | None:
    """The git directory of the work tree holding folder (`.git`, or where a linked worktree's
    `.git` file points), found by walking up; None outside a work tree."""
    for parent in (folder, *folder.parents):
        marker = parent / ".git"
        if marker.is_dir():
            return marker
        if marker.is_file():
            try:
                text = marker.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError):
                return None
            if not text.startswith("gitdir:"):
                return None
            target = Path(text.removeprefix("gitdir:").strip())
            target = target if target.is_absolute() else parent / target
            return target if target.is_dir() else None
    return None


def lock_path(path: Path) -> Path:
    """Where the lock guarding skip file `path` lives.

    Inside a git work tree, in its git directory (`.git/flaketui/<name>-<hash>.lock`, named by
    the file's resolved path): the lock file outlives the write, and there it never shows in
    `git status` or lands in a commit. Elsewhere, or when that directory cannot be written, a
    sibling `<name>.lock`. Every writer of one file computes the same place.
    """
    resolved = path.resolve()
    git_dir = _git_dir(resolved.parent)
    if git_dir is not None:
        folder = git_dir / "flaketui"
        try:
            folder.mkdir(exist_ok=True)
        except OSError:
            pass
        else:
            if os.access(folder, os.W_OK):
                import hashlib  # only writers lock; the plugin never does

                digest = hashlib.sha1(str(resolved).encode("utf-8")).hexdigest()[:12]
                return folder / f"{resolved.name}-{digest}.lock"
    return path.with_name(path.name + ".lock")


def skip_file_lock(path: Path) -> filelock.BaseFileLock:
    """The inter-process lock guarding path (see lock_path)."""
    # Imported here: the pytest plugin reads skip files in every session and never locks.
    import filelock

    return filelock.FileLock(str(lock_path(path)), timeout=LOCK_TIMEOUT_S)


def refuse_read_only(path: Path) -> None:
    """Refuse to change a skip file that is read-only (SkipFileError); an absent file is not.

    Read-only means no write bit for anyone, or no write access: root has write access to every
    file, so the mode bits decide for it. The atomic write renames a new file over the old one,
    which the folder's permissions allow whatever the file's own, so without this check a
    read-only file would be replaced.
    """
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    writable_bits = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
    if stat.S_ISREG(mode) and (not mode & writable_bits or not os.access(path, os.W_OK)):
        raise SkipFileError(f"{path} is read-only; make it writable to change it")


def check_skip_file_to_write(path: Path) -> SkipFile | None:
    """The skip file a command is about to change, as it reads now (None: not there yet), or
    SkipFileError for one it cannot change: its folder is missing, it is read-only, or it is a
    pipe, a directory, larger than the limit or not a flaketui skip file. A command asks this
    before it opens the history for writing, so a refused skip file leaves the history as it
    was."""
    path = path.absolute()
    if not path.parent.is_dir():
        raise _problem(path, f"directory {path.parent} does not exist")
    refuse_read_only(path)
    return read_skip_file(path, explicit=True)


def update_skip_file(
    path: Path,
    mutate: Callable[[dict[str, SkipEntry]], object],
    *,
    check: Callable[[Mapping[str, SkipEntry]], object] | None = None,
) -> SkipFile:
    """Under the lock: re-read path, apply mutate to its entries, write it back atomically.

    mutate may raise (a FlaketuiError, say) to abandon the update: the file is then untouched.
    A file that exists but is broken or foreign is never overwritten (SkipFileError).
    Nothing is written when mutate leaves the entries as they were.

    A read-only file is refused (see refuse_read_only). A refusal takes no lock, so it leaves
    no lock file (outside a git work tree the lock is a file beside the skip file): the file is
    checked, read, and given to check, before the lock is taken.
    check raises to refuse, as mutate would; mutate must still refuse on its own what check
    does, since the file may change before the lock is taken.
    """
    import filelock

    path = path.absolute()
    found = check_skip_file_to_write(path)
    if check is not None:
        check({} if found is None else found.entries)
    try:
        with skip_file_lock(path):
            refuse_read_only(path)  # made read-only while the lock was awaited
            current = read_skip_file(path, explicit=True)
            skip = current if current is not None else SkipFile(path=path)
            before = render_skip_file(skip) if current is not None else None
            mutate(skip.entries)
            for test_id, entry in skip.entries.items():
                if entry.test_id != test_id:
                    raise SkipFileError(f"entry keyed {test_id!r} has test_id {entry.test_id!r}")
            text = render_skip_file(skip)
            if text != before:
                try:
                    write_atomically(path, text.encode("utf-8"))
                except FlaketuiError as exc:
                    raise SkipFileError(exc.message) from None
            return skip
    except filelock.Timeout:
        raise _problem(
            path, f"another process holds the lock {lock_path(path)} (waited {LOCK_TIMEOUT_S:g} s)"
        ) from None
    except PermissionError as exc:
        raise _problem(path, f"cannot lock ({exc.strerror})") from None
