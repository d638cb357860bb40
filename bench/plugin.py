"""Benchmark the recording plugin's overhead on a generated N-test suite (SPEC §9).

Usage: python bench/plugin.py --tests 5000 [--repeat 5] [--simultaneous]

Writes a suite of N trivial tests (a third parametrized, 2 % failing), then runs it --repeat
times as pairs, in alternating order within each pair: `pytest -p no:cacheprovider` without
recording (the flaketui plugin is installed but inactive) and with `--flaketui-db` into a fresh
history. overhead is the median over pairs of (recording wall time / plain wall time) - 1; both
include interpreter start-up and collection, as a CI job pays them. cpu_overhead is the same
ratio of the child's CPU time (user + sys): on a shared machine the wall ratio of one pair swings
with the neighbours' load, the CPU ratio far less, so it tells a real change from noise. Every
recorded history is checked (one finished run, one result per test) so a broken recorder cannot
look fast. --simultaneous starts both runs of a pair at the same moment instead (mode
"simultaneous"), so both see the same neighbours' load: its cpu_overhead is the steadiest figure
on a shared machine; its wall ratio leans towards 1 (the run finishing first frees a core for
the other), so `overhead` of the default sequential mode is the figure of record.
Last stdout line: JSON.
"""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit, log, machine, median

TESTS_PER_FILE = 500


def write_suite(root: Path, tests: int) -> None:
    """N tests over files of TESTS_PER_FILE: plain functions and parametrized ones."""
    written = file_index = 0
    while written < tests:
        lines = ["import pytest", ""]
        in_file = 0
        while in_file < TESTS_PER_FILE and written < tests:
            name = f"test_f{file_index}_{in_file}"
            if in_file % 30 == 0 and tests - written >= 10:
                lines += ["@pytest.mark.parametrize('x', range(10))", f"def {name}(x):"]
                lines.append("    assert x >= 0")
                count = 10
            elif written % 50 == 7:
                lines += [f"def {name}():", "    assert 1 + 1 == 3, 'volatile 0x7f00'"]
                count = 1
            else:
                lines += [f"def {name}():", "    assert True"]
                count = 1
            lines.append("")
            in_file += count
            written += count
        (root / f"test_gen_{file_index}.py").write_text("\n".join(lines), encoding="utf-8")
        file_index += 1
    (root / "pytest.ini").write_text("[pytest]\naddopts = -q -p no:cacheprovider\n")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_suite(root: Path, db: Path | None) -> tuple[float, float]:
    """Wall and CPU time of one pytest run of the suite (failures expected)."""
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(_command(root, db), cwd=root, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    cpu = _children_cpu() - cpu
    if proc.returncode not in (0, 1):
        raise SystemExit(f"pytest failed ({proc.returncode}):\n{proc.stdout[-2000:]}")
    return elapsed, cpu


def _command(root: Path, db: Path | None) -> list[str]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", str(root)]
    return command if db is None else [*command, "--flaketui-db", str(db)]


def run_pair_simultaneously(root: Path, db: Path) -> tuple[tuple[float, float], ...]:
    """(wall, CPU) of a plain and a recording run started at the same moment."""
    started = [
        (
            subprocess.Popen(_command(root, d), cwd=root, stdout=subprocess.DEVNULL),
            time.perf_counter(),
        )
        for d in (None, db)
    ]
    measured = []
    for proc, start in started:
        _, status, usage = os.wait4(proc.pid, 0)
        measured.append((time.perf_counter() - start, usage.ru_utime + usage.ru_stime))
        if os.waitstatus_to_exitcode(status) not in (0, 1):
            raise SystemExit(f"pytest failed ({os.waitstatus_to_exitcode(status)})")
    return tuple(measured)


def check_history(db: Path, tests: int) -> None:
    """The recording run really recorded: one finished run with one result per test."""
    conn = sqlite3.connect(db)
    try:
        runs = conn.execute("SELECT count(*), min(finished) FROM runs").fetchone()
        results = conn.execute("SELECT count(*) FROM results").fetchone()[0]
    finally:
        conn.close()
    if tuple(runs) != (1, 1) or results != tests:
        raise SystemExit(f"{db}: runs/finished {tuple(runs)}, {results} results for {tests} tests")


def main() -> None:
    """Command line: run the pairs and print the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--simultaneous", action="store_true", help="start both runs of a pair at once"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "suite"
        root.mkdir()
        write_suite(root, args.tests)
        run_suite(root, None)  # warm the OS cache and the .pyc files
        plain, recorded, ratios, cpu_ratios = [], [], [], []
        for pair in range(args.repeat):
            db = Path(tmp) / f"h{pair}.db"
            if args.simultaneous:
                (p, p_cpu), (r, r_cpu) = run_pair_simultaneously(root, db)
            elif pair % 2 == 0:
                (p, p_cpu), (r, r_cpu) = run_suite(root, None), run_suite(root, db)
            else:
                (r, r_cpu), (p, p_cpu) = run_suite(root, db), run_suite(root, None)
            check_history(db, args.tests)
            plain.append(p)
            recorded.append(r)
            ratios.append(r / p)
            cpu_ratios.append(r_cpu / p_cpu)
            log(
                f"pair {pair + 1}: plain {p:.3f}s recording {r:.3f}s ratio {r / p:.3f}"
                f" | cpu plain {p_cpu:.3f}s recording {r_cpu:.3f}s ratio {r_cpu / p_cpu:.3f}"
            )
    emit(
        {
            "bench": "plugin",
            "tests": args.tests,
            "repeat": args.repeat,
            "mode": "simultaneous" if args.simultaneous else "sequential",
            "plain_s": median(plain),
            "recording_s": median(recorded),
            "overhead": round(statistics.median(ratios) - 1.0, 4),
            "cpu_overhead": round(statistics.median(cpu_ratios) - 1.0, 4),
            "pair_ratios": [round(x, 3) for x in ratios],
            "machine": machine(),
        }
    )


if __name__ == "__main__":
    main()
