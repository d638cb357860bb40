"""Bulk backfill: ingest a JSON-lines manifest of archived reports, each run atomically.

Choices made here:
- Unknown keys refuse their line (a typo such as ``brnach`` must not silently drop data); blank
  lines are ignored.
- Lines sharing a ``run_id`` are shards of one run and land together, atomically: if any
  of them is refused, the whole run is refused (every one of its lines is reported). The run's
  metadata is taken key by key from the first line that gives it; changed files are unioned.
  A line giving a suite, branch, commit, timestamp or worker count other than an earlier line
  of its run gives is refused (runmeta.metadata_conflicts), as is one that disagrees with the
  run already stored under its run_id (writer.ingest_batch).
- A run whose lines give no ``timestamp`` takes its reports' own suite timestamps (when
  plausible: after 2000 and at most a day ahead; the first line's wins; one after now dates the
  run now, formats.reports_timestamp); a line with neither is refused. One explicit
  ``timestamp`` on any shard line dates the whole run.
- Lines without ``run_id`` are runs of their own, named from their files' content hashes.
- No environment or git detection; runner_host stays unknown unless given.
- ``format`` (junit, ctrf, trx or tap) reads the line's files in that format instead of telling
  it from their content; a run's shards take the first line's that gives one.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flaketui.core.config import Config
from flaketui.core.errors import FlaketuiError
from flaketui.core.ingest.formats import REPORT_FORMATS, reports_timestamp
from flaketui.core.ingest.runmeta import AGREED_FIELDS, metadata_conflicts
from flaketui.core.ingest.writer import IngestResult, ingest_batch
from flaketui.core.models import BRANCH_KINDS, MAX_WORKER_COUNT, RunMeta
from flaketui.core.reading import TooLarge, read_at_most
from flaketui.core.timeutil import parse_iso

if TYPE_CHECKING:
    import sqlite3

    from flaketui.core.history.dbhandle import Connected

# A batch is one transaction: fewer commits (each rewrites the pages every run touches), while a
# kill loses at most one batch, which a second pass over the manifest lands.
BATCH_RUNS = 32
BATCH_BYTES = 64 * 1024 * 1024
# A manifest is read whole: a million runs take ~250 MB.
MAX_MANIFEST_BYTES = 1 << 30

STRING_KEYS = ("run_id", "suite", "branch", "commit", "incident", "runner_host", "ci_url")
KNOWN_KEYS = frozenset(
    {
        *STRING_KEYS,
        "file",
        "files",
        "branch_kind",
        "timestamp",
        "worker_count",
        "changed_files",
        "format",
    }
)


@dataclass
class ManifestSummary:
    """What a manifest backfill landed and refused."""

    runs_landed: int = 0
    results_landed: int = 0
    runs_already_present: int = 0
    refused: list[tuple[int, str]] = field(default_factory=list)  # (line number, reason)
    runs_empty: int = 0  # runs whose reports held no test case (nothing stored)
    left_untidy: int = 0  # on a history server: tests its pushes left untidy (IngestResult)


@dataclass
class _Line:
    number: int
    files: list[Path]
    meta: RunMeta
    group: str  # run_id, or a per-line key for lines without one
    report_format: str | None = None  # None: told by content


def _strings(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise FlaketuiError(f"{key!r} must be a non-empty list of strings")
    return list(value)


def _parse_line(number: int, text: str, base: Path) -> _Line:
    """Validate one manifest line into files and metadata; FlaketuiError says why not."""
    try:
        entry = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FlaketuiError(f"not valid JSON ({exc.msg})") from None
    except RecursionError:  # the decoder recurses per nested array or object
        raise FlaketuiError("not valid JSON (nested too deeply)") from None
    if not isinstance(entry, dict):
        raise FlaketuiError("not a JSON object")
    unknown = sorted(set(entry) - KNOWN_KEYS)
    if unknown:
        keys = "key" if len(unknown) == 1 else "keys"
        raise FlaketuiError(f"unknown {keys} {', '.join(map(repr, unknown))}")
    for key in STRING_KEYS:
        if key in entry and entry[key] is not None and not isinstance(entry[key], str):
            raise FlaketuiError(f"{key!r} must be a string")
    if ("file" in entry) == ("files" in entry):
        raise FlaketuiError("give exactly one of 'file' or 'files'")
    names = [entry["file"]] if "file" in entry else _strings(entry["files"], "files")
    if not all(isinstance(n, str) and n for n in names):
        raise FlaketuiError("'file' must be a non-empty string")
    files = [p if p.is_absolute() else base / p for p in map(Path, names)]
    for path in files:  # cheap checks here; the ingest reads (and hashes) each file once
        if path.is_dir():
            raise FlaketuiError(f"{path}: is a directory, not a report file")
        if not path.is_file():
            raise FlaketuiError(f"{path}: no such file")
    kind = entry.get("branch_kind")
    if kind is not None and kind not in BRANCH_KINDS:
        raise FlaketuiError(f"'branch_kind' must be one of {', '.join(BRANCH_KINDS)}")
    workers = entry.get("worker_count")
    if workers is not None and (
        isinstance(workers, bool)
        or not isinstance(workers, int)
        or not 1 <= workers <= MAX_WORKER_COUNT
    ):
        raise FlaketuiError(f"'worker_count' must be an integer from 1 to {MAX_WORKER_COUNT}")
    changed = entry.get("changed_files") or []
    if changed:
        changed = _strings(changed, "changed_files")
    report_format = entry.get("format")
    if report_format is not None and report_format not in REPORT_FORMATS:
        raise FlaketuiError(f"'format' must be one of {', '.join(REPORT_FORMATS)}")
    ts = entry.get("timestamp")
    if ts is not None and not isinstance(ts, str):
        raise FlaketuiError("'timestamp' must be an ISO 8601 string")
    meta = RunMeta(
        run_id=entry.get("run_id") or None,
        suite=entry.get("suite"),
        branch=entry.get("branch"),
        branch_kind=kind,
        commit_sha=entry.get("commit"),
        ts=parse_iso(ts) if ts is not None else None,
        worker_count=workers,
        runner_host=entry.get("runner_host"),
        ci_url=entry.get("ci_url"),
        incident=entry.get("incident"),
        changed_files=changed,
    )
    meta.given = frozenset(name for name in AGREED_FIELDS if getattr(meta, name) is not None)
    return _Line(number, files, meta, meta.run_id or f"\0line {number}", report_format)


def _report_timestamps(lines: list[_Line]) -> None:
    """Give each line without a timestamp its report's; FlaketuiError names a line without."""
    for line in lines:
        try:
            if line.meta.ts is None:
                line.meta.ts = reports_timestamp(line.files, line.report_format)
        except FlaketuiError as exc:  # an unreadable report
            raise _LineRefused(line.number, exc.message) from None
        if line.meta.ts is None:
            raise _LineRefused(
                line.number, "no 'timestamp' and the report has no plausible timestamp of its own"
            )


class _LineRefused(FlaketuiError):
    """A manifest line refused while its run is assembled."""

    def __init__(self, number: int, message: str) -> None:
        super().__init__(message)
        self.number = number


def _merge_meta(lines: list[_Line]) -> RunMeta:
    """One run's metadata: per key the first line's value that is set; changed files unioned."""
    meta = RunMeta()
    for line in lines:
        for name in (
            "run_id", "suite", "branch", "branch_kind", "commit_sha", "ts",
            "worker_count", "runner_host", "ci_url", "incident",
        ):  # fmt: skip
            if getattr(meta, name) is None:
                setattr(meta, name, getattr(line.meta, name))
        for path in line.meta.changed_files:
            if path not in meta.changed_files:
                meta.changed_files.append(path)
        meta.given |= line.meta.given
    return meta


def _disagreeing_line(group: str, lines: list[_Line]) -> _LineRefused | None:
    """The first line of a run whose metadata differs from what its earlier lines give."""
    for index, line in enumerate(lines[1:], start=1):
        parts = metadata_conflicts(_merge_meta(lines[:index]), line.meta)
        if parts:
            return _LineRefused(
                line.number, f"run {group!r}: its earlier lines give {'; '.join(parts)}"
            )
    return None


def manifest_text(manifest: Path) -> str:
    """The manifest's text; a manifest that is missing, a directory, not a regular file, larger
    than MAX_MANIFEST_BYTES or unreadable is an error.

    A pipe or a device is refused: a manifest is read twice (checked before the history is
    opened, then ingested), and a stream gives its lines only once or never ends.
    """
    try:
        mode = manifest.stat().st_mode  # not open(): opening a named pipe waits for a writer
    except FileNotFoundError:
        raise FlaketuiError(f"{manifest}: no such manifest") from None
    except OSError as exc:
        raise FlaketuiError(f"{manifest}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode):
        raise FlaketuiError(f"{manifest}: is a directory, not a manifest")
    if not stat.S_ISREG(mode):
        raise FlaketuiError(
            f"{manifest}: not a regular file (a pipe or a device); a manifest is read twice,"
            " so write it to a file first"
        )
    try:
        return read_at_most(manifest, MAX_MANIFEST_BYTES).decode("utf-8")
    except TooLarge as exc:
        raise FlaketuiError(f"{manifest}: {exc}; split it into several manifests") from None
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start]
        raise FlaketuiError(
            f"{manifest}: not valid UTF-8 (byte 0x{bad:02X} at offset {exc.start}); a manifest "
            "is JSON Lines in UTF-8"
        ) from None
    except OSError as exc:
        raise FlaketuiError(f"{manifest}: cannot read ({exc.strerror or exc})") from None


def read_manifest(manifest: Path) -> tuple[list[list[_Line]], list[tuple[int, str]]]:
    """The manifest's runs (lines grouped by run_id, in first-seen order) and refused lines."""
    text = manifest_text(manifest)
    groups: dict[str, list[_Line]] = {}
    refused: list[tuple[int, str]] = []
    refused_groups: dict[str, int] = {}
    base = manifest.resolve().parent
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = _parse_line(number, raw, base)
        except FlaketuiError as exc:
            refused.append((number, exc.message))
            group = _run_id_of(raw)
            if group is not None:
                refused_groups.setdefault(group, number)
            continue
        groups.setdefault(line.group, []).append(line)
    runs: list[list[_Line]] = []
    for group, lines in groups.items():
        disagreeing = None if group in refused_groups else _disagreeing_line(group, lines)
        if disagreeing is not None:
            refused.append((disagreeing.number, disagreeing.message))
            refused_groups[group] = disagreeing.number
        if group not in refused_groups and not any(line.meta.ts for line in lines):
            # No explicit timestamp in the whole run: each line takes its report's own.
            try:
                _report_timestamps(lines)
            except _LineRefused as exc:
                refused.append((exc.number, exc.message))
                refused_groups[group] = exc.number
        if group in refused_groups:
            bad = refused_groups[group]
            refused.extend(
                (line.number, f"run {group!r} not ingested: its line {bad} was refused")
                for line in lines
                if line.number != bad
            )
        else:
            runs.append(lines)
    return runs, refused


def _run_id_of(raw: str) -> str | None:
    """The run_id of a refused line, when it has a readable one (its run is refused too)."""
    try:
        entry = json.loads(raw)
    except (json.JSONDecodeError, RecursionError):
        return None
    run_id = entry.get("run_id") if isinstance(entry, dict) else None
    return run_id if isinstance(run_id, str) and run_id else None


# Lands one batch of runs, each (report files, metadata), with one report format per run
# (None: told by content); returns one outcome per run, in order: an IngestResult, or the
# FlaketuiError that refused the run.
Lander = Callable[
    [Sequence[tuple[Sequence[Path], RunMeta]], Sequence[str | None]],
    Sequence["IngestResult | FlaketuiError"],
]


def ingest_manifest(
    db: Connected | sqlite3.Connection,
    manifest: Path,
    *,
    config: Config = Config(),  # noqa: B008 - frozen dataclass, safe as a default
    progress: Callable[[int, int], None] | None = None,
) -> ManifestSummary:
    """Ingest every run a manifest names, each atomically; refused lines are listed, not raised.

    Runs land in batches of up to BATCH_RUNS runs or BATCH_BYTES of report files, one
    transaction each (writer.ingest_batch: a run refused alone). A process killed mid-way
    leaves whole runs only; running the manifest again lands the rest.
    """

    def land(
        runs: Sequence[tuple[Sequence[Path], RunMeta]], formats: Sequence[str | None]
    ) -> Sequence[IngestResult | FlaketuiError]:
        return ingest_batch(db, runs, config=config, report_formats=formats)

    return land_manifest(manifest, land, progress=progress)


def land_manifest(
    manifest: Path, land: Lander, *, progress: Callable[[int, int], None] | None = None
) -> ManifestSummary:
    """Read a manifest and hand its runs to `land` batch by batch (see ingest_manifest); the
    summary of what landed, was already there or was refused."""
    runs, refused = read_manifest(manifest)
    summary = ManifestSummary(refused=refused)
    done = 0
    for batch in _batches(runs):
        outcomes = land(
            [
                ([path for line in lines for path in line.files], _merge_meta(lines))
                for lines in batch
            ],
            [_run_format(lines) for lines in batch],
        )
        for lines, outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, FlaketuiError):  # ReportError, bad metadata
                summary.refused.extend((line.number, outcome.message) for line in lines)
                continue
            summary.left_untidy += outcome.left_untidy
            if outcome.empty:
                summary.runs_empty += 1
            elif outcome.created or outcome.results:
                summary.runs_landed += 1
                summary.results_landed += outcome.results
            else:
                summary.runs_already_present += 1
        done += len(batch)
        if progress is not None:
            progress(done, len(runs))
    summary.refused.sort()
    return summary


def _run_format(lines: list[_Line]) -> str | None:
    """The report format of a run: the first of its lines that gives one."""
    return next((line.report_format for line in lines if line.report_format), None)


def _batches(runs: list[list[_Line]]) -> Iterator[list[list[_Line]]]:
    """Consecutive runs, up to BATCH_RUNS of them or BATCH_BYTES of report files per batch."""
    batch: list[list[_Line]] = []
    size = 0
    for lines in runs:
        batch.append(lines)
        size += sum(_size(path) for line in lines for path in line.files)
        if len(batch) >= BATCH_RUNS or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # refused by the writer, with its own message
