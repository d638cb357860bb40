"""Shared helpers of the benchmarks: output paths, the fixed clock, medians and the JSON line."""

from __future__ import annotations

import compileall
import importlib.util
import json
import os
import platform
import resource
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

BENCH_DIR = Path(__file__).resolve().parent
OUT_DIR = BENCH_DIR / "out"  # git-ignored cache of generated histories and reports
# The generated histories end here; benchmarks score "as of" this instant so runs are repeatable.
NOW = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)
T = TypeVar("T")


def out_dir() -> Path:
    """The cache directory (FLAKETUI_BENCH_OUT overrides it, e.g. for the smoke tests)."""
    path = Path(os.environ.get("FLAKETUI_BENCH_OUT", str(OUT_DIR)))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file in its place, no permission, a full disk
        raise SystemExit(
            f"bench cache {path}: cannot make the directory ({exc.strerror})"
        ) from None
    return path


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """Wall time of one call, and its value."""
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def median(values: list[float]) -> float:
    """Median, rounded for printing."""
    return round(statistics.median(values), 4)


def peak_rss_mb(children: bool = False) -> float:
    """Peak resident set size of this process (or of its waited-for children), in MB."""
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    kib = resource.getrusage(who).ru_maxrss  # KiB on Linux
    return round(kib / 1024, 1)


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "sqlite": __import__("sqlite3").sqlite_version,
    }


def log(text: str) -> None:
    """Progress on stderr, so stdout's last line stays the JSON result."""
    print(text, file=sys.stderr, flush=True)


def emit(result: dict[str, Any]) -> None:
    """Print the result as the last line of stdout."""
    print(json.dumps(result, sort_keys=True), flush=True)


def loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages (empty where /proc/loadavg is missing)."""
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def install_copy(site: Path) -> Path:
    """Copy the flaketui package under `site` and compile it to bytecode, as pip installs it.

    Put `site` first on PYTHONPATH to run it: it takes precedence over this environment's
    editable install, which has no bytecode (PYTHONDONTWRITEBYTECODE is set here), so every
    start would compile flaketui from source, which no installed copy does.
    """
    spec = importlib.util.find_spec("flaketui")
    if spec is None or spec.origin is None:
        raise SystemExit("flaketui is not importable from this interpreter")
    target = site / "flaketui"
    shutil.copytree(Path(spec.origin).parent, target, ignore=shutil.ignore_patterns("__pycache__"))
    if not compileall.compile_dir(target, quiet=1):
        raise SystemExit(f"cannot compile {target}")
    return target
