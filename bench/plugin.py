"""Benchmark the recording plugin's overhead on a generated N-test suite.

Usage: python bench/plugin.py --tests 5000 [--pairs 15] [--lean] [--editable]
                              [--instructions] [--fields] [--wheel] [--simultaneous | --null]
                              [--history H]

Writes a suite of N trivial tests (a third parametrized, 2 % failing) in a git repository of one
commit (recording reads the commit as in a CI checkout), then runs it as --pairs pairs:
`pytest -p no:cacheprovider` alone (flaketui's plugin not loaded: `-p no:flaketui`) and with
`--flaketui-db` into a fresh history. Both include interpreter start-up and collection, as a CI
job pays them. When pytest-timeout loads (not with --lean), the suite's ini sets a timeout in
both runs, so the recorder stores the timeout in force too. Every recorded history is checked
so a broken recorder cannot look fast: one finished run, one result per test, and every field
cause analysis needs recorded (the run's host, OS, Python and platform; each attempt's duration
from the plugin's own clock, its position on the worker, the test before it, the timeout).

The figure of record, `overhead`, is the median over pairs of (recording / plain wall time) - 1.
The machine this runs on is 2 shared cores: a plain run's own time moves by ±20 % from one run to
the next, four times the effect measured, so the bench does not trust one number:
- pairs run in ABBA order (plain first in even pairs, recording first in odd ones), so a drift in
  the neighbours' load during a pair favours neither side; 15 pairs by default (5 before);
- nothing is dropped: every pair's ratio is printed (`pair_ratios`), beside the quartiles
  (`overhead_iqr`) and a distribution-free confidence interval of the median from the order
  statistics (`overhead_ci`, coverage `ci_level`, >= 0.95 from 6 pairs on). The wall-time
  target is no measurable cost: `verdict` is "met" when the interval reaches down to zero (the
  cost cannot be told from none) and stays under +2 % (WALL_RESOLUTION: the pairs would have
  measured a cost that size), "not resolved" when it reaches zero but not under +2 % (too noisy
  to tell), "missed" when all of it lies above zero (a cost these pairs measure), and "not
  established" with an interval of less than 95 %;
- `cpu_overhead` (with `cpu_overhead_iqr`, `cpu_overhead_ci`) is the same median of the pytest
  process's CPU time (user + sys), steadier than wall time but not the figure of record;
- `--null` runs pytest alone twice per pair (plain, recording, plain again; the plain runs'
  order swapped in odd pairs) and prints `null_overhead` (with `_iqr`, `_ci`): the second plain
  run over the first, the same statistic for two identical commands, what this machine's noise
  and drift alone give (an interval of it that misses zero says the pairs' intervals are too
  narrow to trust); the verdict is still read from `overhead`;
- `--instructions` also runs pairs under valgrind (cachegrind, no cache simulation), one per
  hash seed (`--instr-seeds`, 3): `instructions_overhead` (also `instr_overhead`) is the median
  ratio of instructions - 1, a load-independent figure, and `instructions_verdict` compares
  every seed's ratio with the target (INSTRUCTIONS_TARGET, 2 %): "met" when all are under it,
  "missed" when none is, else "not established"; `fold_s` is the time the next writer or
  reader then spends storing the recorded attempts from the journal and folding the run into
  the rollups (the recorder leaves both). Not an
  exact one: loading one module more moves a session by up to 2.4 % through the memory layout
  (see count_instructions; hash seeds move it far less), and under valgrind a session runs ~15x
  slower, so the recorder's one-second batches hold fewer attempts; `idle_overhead` is the same
  for a session that loads flaketui's plugin but asks it for nothing (what installing flaketui
  costs every other session);
- `--fields` counts, per hash seed, a recording session with the per-attempt cause fields and
  one with them switched off, beside pytest alone: `fields_overhead` is what they add, as a
  share of the pytest session (see count_fields);
- `--wheel` counts, per hash seed, pytest alone and recording with flaketui and pytest-flaketui
  installed from wheels into a new environment, plugins autoloaded (see count_wheel):
  `wheel_overhead` is what a CI job's first pytest run in a fresh environment pays;
- the load average before and after (`loadavg`) goes into the JSON line.

What is measured, flaketui side: by default a copy of the working tree's package compiled to
bytecode, first on PYTHONPATH, as a wheel installed by pip is (this environment's editable
install has no bytecode and sets PYTHONDONTWRITEBYTECODE, so each session would compile the
recorder's modules from source: about 0.17 G instructions, 0.6 % of a 5 000-test session, that
no installed copy pays). `--editable` measures the editable install as it is. pytest side: by
default every plugin installed in the environment loads, as in a plain `pytest` here (Textual's
snapshot plugin, syrupy, Hypothesis: ~3 s of a 5 000-test plain run of ~8.8 s, in both runs);
`--lean` blocks every other plugin by its entry-point name (`-p no:NAME`), the strictest
denominator; flaketui's loads through pytest-flaketui's entry point, as in a user's session.
--history H records every pair's session into a copy of the history H, made before the clock,
instead of a new history (what a CI job keeping its history between runs pays), and times the
next reader storing and folding that run there (`history_fold_s`).
--gc loads a probe module into both runs of every pair (`-p`, before any test) that times the
garbage collector's passes: `gc_share` is the share of a plain run's wall time spent in them,
`plain_gc_s` and `recording_gc_s` their medians, and `outside_gc_overhead` (with `_iqr`, `_ci`)
the same statistic as `overhead` over the time outside them. A 5 000-test session spends a
fifth of its time in the collector, and that time swings by a tenth of a second between two
identical sessions: the outside figure keeps those swings out of what recording is seen to
cost (the verdict is still read from `overhead`).
--simultaneous starts both runs of a pair at the same moment instead (mode "simultaneous"): its
CPU ratio sees the same neighbours and is the tightest figure here (`verdict` is then read from
it, `verdict_of`), its wall ratio leans towards 1 (the run finishing first frees a core for the
other), so the sequential `overhead` stays the figure of record.
Last stdout line: JSON.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import math
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit, install_copy, loadavg, log, machine, median

TESTS_PER_FILE = 500
GC_PROBE = "flaketui_bench_gc_probe"  # the module --gc loads into both runs
GC_OUT_VAR = "FLAKETUI_BENCH_GC_OUT"
GC_PROBE_SOURCE = f'''"""The collector's seconds, written as JSON to ${GC_OUT_VAR} at exit."""
import atexit, gc, json, os, time

_clock = time.perf_counter
_spent = [0.0]
_started = [0.0]


def _note(phase, info):
    if phase == "start":
        _started[0] = _clock()
    else:
        _spent[0] += _clock() - _started[0]


gc.callbacks.append(_note)


@atexit.register
def _write():
    with open(os.environ["{GC_OUT_VAR}"], "w") as out:
        json.dump(_spent[0], out)
'''
INSTRUCTIONS_TARGET = 0.02  # the target: under 2 % more instructions than pytest alone...
# ...and no wall time a paired measurement can tell from none (see verdict)
SUITE_TIMEOUT_S = 300  # pytest-timeout's timeout in the suite's ini, when it is installed
CI_LEVEL = 0.95
# The least wall-time cost a run must be able to measure for "no measurable cost" to mean
# something: the interval of a met verdict lies under it (the instructions target's size).
WALL_RESOLUTION = 0.02


def has_timeout_plugin() -> bool:
    """Whether pytest-timeout is installed (its `timeout` ini option then applies)."""
    return importlib.util.find_spec("pytest_timeout") is not None


def write_suite(root: Path, tests: int, timeout_s: int | None = None) -> None:
    """N tests over files of TESTS_PER_FILE: plain functions and parametrized ones; with
    timeout_s, the ini sets pytest-timeout's timeout."""
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
    ini = "[pytest]\naddopts = -q -p no:cacheprovider\n"
    if timeout_s is not None:
        ini += f"timeout = {timeout_s}\n"
    (root / "pytest.ini").write_text(ini)


def commit_suite(root: Path) -> bool:
    """Make the suite a git repository of one commit, as a CI checkout is; False without git."""
    if shutil.which("git") is None:
        return False
    ident = ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    for args in (["init", "-q"], ["add", "-A"], [*ident, "commit", "-q", "-m", "suite"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    return True


def other_plugins(keep: tuple[str, ...] = ()) -> list[str]:
    """`-p no:NAME` for every pytest plugin this environment declares but flaketui's (and those
    in keep); SystemExit when flaketui's is not declared (pytest-flaketui not installed)."""
    names = {ep.name for ep in importlib.metadata.entry_points(group="pytest11")}
    if "flaketui" not in names:
        raise SystemExit("pytest-flaketui is not installed: pip install -e ./pytest-flaketui")
    return [arg for name in sorted(names - {"flaketui", *keep}) for arg in ("-p", f"no:{name}")]


class Runner:
    """How to start one pytest session of the suite, plain or recording."""

    def __init__(
        self,
        root: Path,
        site: Path | None,
        lean: bool,
        python: str = sys.executable,
        keep: tuple[str, ...] = (),
        gc_probe: Path | None = None,
    ) -> None:
        self.root = root
        # --gc: the folder holding GC_PROBE, loaded into every run (see run_measured).
        self.gc_probe = gc_probe
        self.lean = lean
        # With lean, every other plugin installed is blocked by its entry-point name (but those
        # in keep), and flaketui's loads through its entry point, as in a user's session.
        self.blocked = other_plugins(keep) if lean else []
        self.python = python  # another environment's interpreter (see install_wheel)
        self.env = dict(os.environ)
        if python != sys.executable:
            # Nothing of this environment's; pytest compiles what it rewrites in every session,
            # as in a fresh CI environment (no cached rewrite to find).
            self.env.pop("PYTHONPATH", None)
            self.env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)  # plugins load as installed
            self.env["PYTHONDONTWRITEBYTECODE"] = "1"
        if site is not None:
            self.env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p
            )
        if lean:
            self.env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        if gc_probe is not None:
            self.env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(gc_probe), self.env.get("PYTHONPATH", "")) if p
            )
            self.env[GC_OUT_VAR] = str(gc_probe / "spent.json")

    def command(self, db: Path | None, *, idle: bool = False) -> list[str]:
        """The pytest command line: with a history path it records, without it pytest runs
        alone (flaketui's plugin not loaded), or with `idle` loaded but asked for nothing."""
        command = [self.python, "-m", "pytest", "-q", "-p", "no:randomly", *self.blocked]
        if self.gc_probe is not None:
            command += ["-p", GC_PROBE]
        command.append(str(self.root))
        if db is None and idle:
            return command
        if db is None:
            return [*command, "-p", "no:flaketui"]
        return [*command, f"--flaketui-db={db}"]  # one word: see the plugin's rootdir rule

    def run_measured(self, db: Path | None) -> tuple[float, float, float | None]:
        """run's wall and CPU time, and the seconds the run's collector took (None without a
        probe)."""
        if self.gc_probe is None:
            return (*self.run(db), None)
        spent = self.gc_probe / "spent.json"
        spent.unlink(missing_ok=True)
        wall, cpu = self.run(db)
        return wall, cpu, float(json.loads(spent.read_text()))

    def run(self, db: Path | None) -> tuple[float, float]:
        """Wall time and the child's CPU time (user + sys) of one run (failures expected)."""
        with tempfile.TemporaryFile("w+") as out:  # a pipe could fill up and block the child
            start = time.perf_counter()
            proc = subprocess.Popen(
                self.command(db), cwd=self.root, env=self.env, stdout=out, stderr=out
            )
            _, status, usage = os.wait4(proc.pid, 0)
            elapsed = time.perf_counter() - start
            proc.returncode = os.waitstatus_to_exitcode(status)
            if proc.returncode not in (0, 1):
                out.seek(0)
                raise SystemExit(f"pytest failed ({proc.returncode}):\n{out.read()[-2000:]}")
        return elapsed, usage.ru_utime + usage.ru_stime

    def run_pair_simultaneously(self, db: Path) -> tuple[tuple[float, float], ...]:
        """(wall, CPU) of a plain and a recording run started at the same moment."""
        started = [
            (
                subprocess.Popen(
                    self.command(d), cwd=self.root, env=self.env, stdout=subprocess.DEVNULL
                ),
                time.perf_counter(),
            )
            for d in (None, db)
        ]
        measured = []
        for proc, start in started:
            _, status, usage = os.wait4(proc.pid, 0)
            measured.append((time.perf_counter() - start, usage.ru_utime + usage.ru_stime))
            proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by proc
            if proc.returncode not in (0, 1):
                raise SystemExit(f"pytest failed ({proc.returncode})")
        return tuple(measured)

    def instructions(
        self,
        commands: dict[str, list[str]],
        stem: Path,
        seed: int,
        env: dict[str, dict[str, str]] | None = None,
    ) -> dict[str, int]:
        """Instructions of each session under valgrind (cachegrind, no cache model), all run
        side by side with the same hash seed; `env` adds variables to a session by name."""
        procs = []
        for name, session in commands.items():
            log_file = Path(f"{stem}-{name}.log")
            command = [
                "valgrind",
                "--tool=cachegrind",
                "--cache-sim=no",
                "--cachegrind-out-file=/dev/null",
                f"--log-file={log_file}",
                *session,
            ]
            session_env = {**self.env, "PYTHONHASHSEED": str(seed), **(env or {}).get(name, {})}
            out = stem.with_name(f"{stem.name}-{name}.out").open("w")
            proc = subprocess.Popen(command, cwd=self.root, env=session_env, stdout=out, stderr=out)
            procs.append((name, proc, log_file, out))
        counts = {}
        for name, proc, log_file, out in procs:
            code = proc.wait()
            out.close()
            if code not in (0, 1):
                raise SystemExit(f"valgrind pytest failed ({code}), see {out.name}")
            found = re.search(r"I\s+refs:\s+([\d,]+)", log_file.read_text())
            if found is None:
                raise SystemExit(f"{log_file}: no instruction count")
            counts[name] = int(found.group(1).replace(",", ""))
        return counts


RECORDED_FIELDS = (
    "runs.runner_host",
    "runs.os",
    "runs.python",
    "runs.platform",
    "results.duration_ms",
    "results.position",
    "results.predecessor",
)


def check_history(db: Path, tests: int, timeout_s: int | None = None, before: int = 0) -> None:
    """The recording run really recorded: one finished run more than the `before` the history
    held, with one result per test, and RECORDED_FIELDS (and the timeout, when the suite sets
    one) in every row that has them (the first test of the session has no predecessor), once
    the journaled attempts are stored."""
    stored(db)
    conn = sqlite3.connect(db)
    newest = "(SELECT max(id) FROM runs)"
    try:
        runs = conn.execute(
            f"SELECT count(*) - ?, (SELECT finished FROM runs WHERE id = {newest}) FROM runs",
            (before,),
        ).fetchone()
        results = conn.execute(f"SELECT count(*) FROM results WHERE run = {newest}").fetchone()[0]
        run_fields = conn.execute(
            "SELECT runner_host IS NOT NULL AND os IS NOT NULL AND python IS NOT NULL"
            f" AND platform IS NOT NULL FROM runs WHERE id = {newest}"
        ).fetchone()
        attempts = conn.execute(
            "SELECT count(duration_ms), count(position), count(predecessor),"
            f" count(DISTINCT position), sum(timeout_ms = ?) FROM results WHERE run = {newest}",
            (None if timeout_s is None else timeout_s * 1000,),
        ).fetchone()
    finally:
        conn.close()
    if tuple(runs) != (1, 1) or results != tests:
        raise SystemExit(f"{db}: runs/finished {tuple(runs)}, {results} results for {tests} tests")
    durations, positions, predecessors, distinct, timeouts = attempts
    expected = (tests, tests, tests - 1, tests)
    if (
        not run_fields
        or not run_fields[0]
        or (durations, positions, predecessors, distinct) != (expected)
    ):
        raise SystemExit(
            f"{db}: cause fields missing: run fields {run_fields}, durations/positions/"
            f"predecessors/distinct positions {(durations, positions, predecessors, distinct)}"
            f" for {tests} tests"
        )
    if timeout_s is not None and timeouts != tests:
        raise SystemExit(f"{db}: {timeouts} of {tests} results recorded the {timeout_s} s timeout")


def check_fieldless(db: Path, tests: int) -> None:
    """The session with the cause fields switched off recorded every test and none of them."""
    stored(db)
    conn = sqlite3.connect(db)
    try:
        row = conn.execute(
            "SELECT count(*), count(duration_ms), count(position), count(predecessor),"
            " count(timeout_ms) FROM results"
        ).fetchone()
    finally:
        conn.close()
    if tuple(row) != (tests, 0, 0, 0, 0):
        raise SystemExit(f"{db}: results/durations/positions/predecessors/timeouts {tuple(row)}")


def median_ci(values: list[float], level: float = CI_LEVEL) -> tuple[float, float, float]:
    """Distribution-free interval of the median: (low, high, its exact coverage).

    The k-th smallest and k-th largest values, k the largest rank whose binomial tail
    P(Bin(n, 1/2) < k) stays within (1 - level) / 2; with too few values the whole range.
    """
    ordered = sorted(values)
    n = len(ordered)
    k, tail = 0, 0.0
    while k < n // 2:
        next_tail = tail + math.comb(n, k) / 2**n
        if next_tail > (1 - level) / 2:
            break
        k, tail = k + 1, next_tail
    k = max(k, 1)  # with fewer than 6 values no interval reaches 95 %: the range
    coverage = 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n
    return ordered[k - 1], ordered[n - k], round(coverage, 4)


def quartiles(values: list[float]) -> tuple[float, float]:
    """First and third quartiles (both the value itself when there is one)."""
    if len(values) < 2:
        return values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


def verdict(low: float, high: float, coverage: float) -> str:
    """Whether the wall-time overhead is measurable: "missed" when the whole interval of its
    median lies above zero; "met" when the interval reaches zero or below and also stays under
    WALL_RESOLUTION, so that these pairs would have measured a cost that size; "not resolved"
    when it reaches zero only because it is wide (pairs too noisy to tell a WALL_RESOLUTION
    cost from none).

    Too few pairs for a CI_LEVEL interval establish nothing either way.
    """
    if coverage < CI_LEVEL:
        return "not established"
    if low > 0.0:
        return "missed"
    return "met" if high < WALL_RESOLUTION else "not resolved"


def instructions_verdict(overheads: list[float]) -> str:
    """Every seed's instruction overhead under INSTRUCTIONS_TARGET ("met"), none ("missed"), or
    seeds on both sides ("not established")."""
    if not overheads:
        return "not established"
    if max(overheads) < INSTRUCTIONS_TARGET:
        return "met"
    if min(overheads) >= INSTRUCTIONS_TARGET:
        return "missed"
    return "not established"


def summary(prefix: str, ratios: list[float]) -> dict[str, object]:
    """Median, quartiles and interval of the ratios, as overheads (ratio - 1)."""
    low, high, coverage = median_ci(ratios)
    q1, q3 = quartiles(ratios)
    return {
        prefix: round(statistics.median(ratios) - 1.0, 4),
        f"{prefix}_iqr": [round(q1 - 1.0, 4), round(q3 - 1.0, 4)],
        f"{prefix}_ci": [round(low - 1.0, 4), round(high - 1.0, 4)],
        "ci_level": coverage,
    }


def _null_summary(ratios: list[float]) -> dict[str, object]:
    """The A/A figures of --null: pytest alone against itself, as `overhead` is computed."""
    null = summary("null_overhead", ratios)
    return {
        "null_overhead": null["null_overhead"],
        "null_overhead_iqr": null["null_overhead_iqr"],
        "null_overhead_ci": null["null_overhead_ci"],
        "null_pair_ratios": [round(x, 3) for x in ratios],
    }


def _gc_summary(
    ratios: list[float], plain: list[float], plain_gc: list[float], recorded_gc: list[float]
) -> dict[str, object]:
    """The figures of --gc: the overhead outside the collector, and the collector's time."""
    outside = summary("outside_gc_overhead", ratios)
    return {
        "outside_gc_overhead": outside["outside_gc_overhead"],
        "outside_gc_overhead_iqr": outside["outside_gc_overhead_iqr"],
        "outside_gc_overhead_ci": outside["outside_gc_overhead_ci"],
        "gc_share": round(
            statistics.median(g / w for g, w in zip(plain_gc, plain, strict=True)), 4
        ),
        "plain_gc_s": median(plain_gc),
        "recording_gc_s": median(recorded_gc),
    }


def main() -> None:
    """Command line: run the pairs and print the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=5000)
    parser.add_argument(
        "--pairs", "--repeat", dest="pairs", type=int, default=15, help="pairs of runs"
    )
    parser.add_argument(
        "--simultaneous", action="store_true", help="start both runs of a pair at once"
    )
    parser.add_argument(
        "--null",
        action="store_true",
        help="also run pytest alone a second time per pair: the same figures, A against A",
    )
    parser.add_argument(
        "--lean", action="store_true", help="only flaketui's pytest plugin: every other blocked"
    )
    parser.add_argument(
        "--gc",
        action="store_true",
        help="also time the garbage collector in every run: the overhead outside it",
    )
    parser.add_argument(
        "--editable", action="store_true", help="the editable install as is (no bytecode copy)"
    )
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions of one pair"
    )
    parser.add_argument(
        "--instr-tests", type=int, default=None, help="suite size under valgrind (default --tests)"
    )
    parser.add_argument(
        "--instr-seeds", type=int, default=3, help="hash seeds (memory layouts) under valgrind"
    )
    parser.add_argument(
        "--wheel",
        action="store_true",
        help="also count instructions with flaketui installed from a wheel in a new environment",
    )
    parser.add_argument(
        "--fields",
        action="store_true",
        help="also count the instructions the per-attempt cause fields cost the recorder",
    )
    parser.add_argument(
        "--history",
        type=Path,
        default=None,
        help="record into a copy of this history (made before the clock) instead of a new one",
    )
    args = parser.parse_args()
    if args.null and args.simultaneous:
        parser.error("--null runs the pairs in turn: it cannot go with --simultaneous")
    if args.gc and args.simultaneous:
        parser.error("--gc compares the runs of a pair in turn: it cannot go with --simultaneous")
    if args.history is not None and not args.history.is_file():
        parser.error(f"{args.history}: no such history")
    load_before = loadavg()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "suite"
        root.mkdir()
        timeout_s = None if args.lean or not has_timeout_plugin() else SUITE_TIMEOUT_S
        write_suite(root, args.tests, timeout_s)
        in_git = commit_suite(root)
        site = None
        if not args.editable:
            site = Path(tmp) / "site"
            install_copy(site)
        probe = None
        if args.gc:
            probe = Path(tmp) / "probe"
            probe.mkdir()
            (probe / f"{GC_PROBE}.py").write_text(GC_PROBE_SOURCE)
        runner = Runner(root, site, args.lean, gc_probe=probe)
        # Warm the OS cache and both code paths; these two runs are not pairs.
        runner.run(None)
        runner.run(Path(tmp) / "warm.db")
        plain, recorded, ratios, cpu_ratios, folds = [], [], [], [], []
        null_ratios: list[float] = []  # with --null: a second plain run over the first
        # with --gc: recording over plain time outside the collector, and each run's collector
        outside_ratios: list[float] = []
        plain_gc: list[float] = []
        recorded_gc: list[float] = []
        before = 0 if args.history is None else runs_in(args.history)
        for pair in range(args.pairs):
            db = Path(tmp) / f"h{pair}.db"
            if args.history is not None:
                copy_history(args.history, db)  # before the clock
            p_gc = r_gc = None
            if args.simultaneous:
                (p, p_cpu), (r, r_cpu) = runner.run_pair_simultaneously(db)
            elif args.null:
                # Plain, recording and plain again, the order of the plain runs swapped in odd
                # pairs (ABA'/A'BA): the recording is compared with the first plain run, the
                # second with the first, each sitting as far from its anchor.
                first = runner.run_measured(None)
                r, r_cpu, r_gc = runner.run_measured(db)
                second = runner.run_measured(None)
                (p, p_cpu, p_gc), again = (first, second) if pair % 2 == 0 else (second, first)
                null_ratios.append(again[0] / p)
            elif pair % 2 == 0:
                (p, p_cpu, p_gc), (r, r_cpu, r_gc) = (
                    runner.run_measured(None),
                    runner.run_measured(db),
                )
            else:
                (r, r_cpu, r_gc), (p, p_cpu, p_gc) = (
                    runner.run_measured(db),
                    runner.run_measured(None),
                )
            if p_gc is not None and r_gc is not None:
                outside_ratios.append((r - r_gc) / (p - p_gc))
                plain_gc.append(p_gc)
                recorded_gc.append(r_gc)
            if args.history is not None:
                folds.append(fold_seconds(db))
            check_history(db, args.tests, timeout_s, before)
            for leftover in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
                leftover.unlink(missing_ok=True)
            plain.append(p)
            recorded.append(r)
            ratios.append(r / p)
            cpu_ratios.append(r_cpu / p_cpu)
            log(
                f"pair {pair + 1}: plain {p:.3f}s recording {r:.3f}s ratio {r / p:.3f}"
                f" | cpu plain {p_cpu:.3f}s recording {r_cpu:.3f}s ratio {r_cpu / p_cpu:.3f}"
                f" | load {loadavg()[0]}"
            )
        instr: dict[str, object] = {}
        if args.instructions:
            instr = count_instructions(args, Path(tmp), site)
        if args.wheel:
            instr.update(count_wheel(args, Path(tmp)))
        if args.fields:
            instr.update(count_fields(args, Path(tmp), site))
    wall = summary("overhead", ratios)
    cpu = summary("cpu_overhead", cpu_ratios)
    # Started together, the run finishing first frees a core for the other: that wall ratio
    # leans towards 1, so a simultaneous verdict is read from the CPU ratios.
    verdict_of = "cpu_overhead" if args.simultaneous else "overhead"
    low, high, coverage = median_ci(cpu_ratios if args.simultaneous else ratios)
    emit(
        {
            "bench": "plugin",
            "tests": args.tests,
            "pairs": args.pairs,
            "repeat": args.pairs,  # the former name of --pairs
            "mode": "simultaneous" if args.simultaneous else "sequential (ABBA)",
            "flaketui": "editable install" if args.editable else "installed copy with bytecode",
            "pytest_plugins": "flaketui only" if args.lean else "all installed",
            "suite_in_git": in_git,
            "anchor": "pytest alone (flaketui's plugin not loaded)",
            "recorded_fields": [*RECORDED_FIELDS, *(["results.timeout_ms"] if timeout_s else [])],
            "plain_s": median(plain),
            "recording_s": median(recorded),
            **wall,
            "wall_target": "no measurable cost",
            "verdict": verdict(low - 1.0, high - 1.0, coverage),
            "verdict_of": verdict_of,
            "cpu_overhead": cpu["cpu_overhead"],
            "cpu_overhead_iqr": cpu["cpu_overhead_iqr"],
            "cpu_overhead_ci": cpu["cpu_overhead_ci"],
            "pair_ratios": [round(x, 3) for x in ratios],
            "cpu_pair_ratios": [round(x, 3) for x in cpu_ratios],
            **({} if not null_ratios else _null_summary(null_ratios)),
            **(
                {}
                if not outside_ratios
                else _gc_summary(outside_ratios, plain, plain_gc, recorded_gc)
            ),
            **instr,
            **(
                {}
                if args.history is None
                else {
                    "history": str(args.history),
                    "history_runs": before,
                    "history_fold_s": round(statistics.median(folds), 4),
                }
            ),
            "loadavg": {"before": load_before, "after": loadavg()},
            "machine": machine(),
        }
    )


def valgrind_suite(args: argparse.Namespace, tmp: Path, name: str) -> tuple[Path, int]:
    """The suite valgrind's sessions run (--instr-tests tests, default --tests), in a git
    repository of one commit; its folder and size."""
    tests = args.instr_tests or args.tests
    root = tmp / name
    root.mkdir()
    write_suite(root, tests)
    commit_suite(root)
    return root, tests


def count_instructions(args: argparse.Namespace, tmp: Path, site: Path | None) -> dict[str, object]:
    """Plain and recording sessions under valgrind, one pair per hash seed: median ratio - 1.

    One pair is one memory layout: CPython's type-attribute cache is indexed by addresses, so
    loading any module more (an empty one does it) moves which lookups collide, by up to 0.7 G
    instructions of a 29 G session. Each seed (PYTHONHASHSEED, the same for both runs of its
    pair) is another layout, if a close one (three seeds agreed within 0.2 points); the two runs
    of a pair go in parallel (counts ignore the load).
    """
    if shutil.which("valgrind") is None:
        return {"instr_overhead": None, "instr_note": "valgrind not found"}
    root, tests = valgrind_suite(args, tmp, "instr-suite")
    runner = Runner(root, site, args.lean)
    plain, recording, ratios, folds, idle = [], [], [], [], []
    for seed in range(1, args.instr_seeds + 1):
        log(f"instructions: {tests} tests under valgrind, hash seed {seed} (minutes)")
        db = tmp / f"instr{seed}.db"
        counts = runner.instructions(
            {
                "plain": runner.command(None),
                "recording": runner.command(db),
                "idle": runner.command(None, idle=True),
            },
            tmp / f"instr{seed}",
            seed,
        )
        p, r = counts["plain"], counts["recording"]
        folds.append(fold_seconds(db))
        check_history(db, tests)
        log(f"instructions: plain {p / 1e9:.3f} G, recording {r / 1e9:.3f} G, ratio {r / p:.4f}")
        plain.append(p)
        recording.append(r)
        ratios.append(r / p)
        idle.append(counts["idle"] / p)
    return {
        "instr_tests": tests,
        "instr_plain_g": [round(x / 1e9, 3) for x in plain],
        "instr_recording_g": [round(x / 1e9, 3) for x in recording],
        "instr_pair_ratios": [round(x, 4) for x in ratios],
        "instr_overhead": round(statistics.median(ratios) - 1.0, 4),
        "instructions_overhead": round(statistics.median(ratios) - 1.0, 4),
        "instructions_target": INSTRUCTIONS_TARGET,
        "instructions_verdict": instructions_verdict([x - 1.0 for x in ratios]),
        "idle_overhead": round(statistics.median(idle) - 1.0, 4),
        "fold_s": round(statistics.median(folds), 4),
    }


def install_wheel(tmp: Path) -> str:
    """A new virtual environment holding pytest (this one's version), flaketui and
    pytest-flaketui built as wheels, as a user's `pip install` leaves them; its interpreter."""
    wheels, env = tmp / "wheel", tmp / "wheel-env"
    root = Path(__file__).resolve().parents[1]
    pip = [sys.executable, "-m", "pip", "-q"]
    # Without this environment's PYTHONPATH: a checkout on it holds flaketui's metadata, and
    # pip would take the wheel for installed already and skip it.
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    build = [
        *pip,
        "wheel",
        "--no-deps",
        "-w",
        str(wheels),
        str(root),
        str(root / "pytest-flaketui"),
    ]
    subprocess.run(build, check=True, env=clean)
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, env=clean)
    python = str(env / "bin" / "python")
    # The recorder imports none of flaketui's dependencies: pytest is the only one it needs.
    install = [python, "-m", "pip", "-q", "install", "--disable-pip-version-check"]
    subprocess.run([*install, "--no-deps", *map(str, wheels.glob("*.whl"))], check=True, env=clean)
    subprocess.run(
        [*install, f"pytest=={importlib.metadata.version('pytest')}"], check=True, env=clean
    )
    return python


def count_wheel(args: argparse.Namespace, tmp: Path) -> dict[str, object]:
    """Plain and recording sessions of flaketui installed from a wheel, plugins autoloaded (pytest
    alone: `-p no:flaketui`), one pair per hash seed under valgrind.

    pytest rewrites the asserts of every module of a plugin's distribution that a session
    imports, and compiles them from source unless it finds its own cached copy: a fresh
    environment's first run (a CI job's) pays that, and so does every run with
    PYTHONDONTWRITEBYTECODE, which the runner sets for these sessions. pytest-flaketui, which
    declares the plugin, holds no module: flaketui's load from the bytecode pip wrote.
    """
    if shutil.which("valgrind") is None:
        return {"wheel_overhead": None, "wheel_note": "valgrind not found"}
    root, tests = valgrind_suite(args, tmp, "wheel-suite")
    runner = Runner(root, None, lean=False, python=install_wheel(tmp))
    ratios = []
    for seed in range(1, args.instr_seeds + 1):
        log(f"wheel: {tests} tests under valgrind, hash seed {seed} (minutes)")
        db = tmp / f"wheel{seed}.db"
        sessions = {"plain": runner.command(None), "recording": runner.command(db)}
        counts = runner.instructions(sessions, tmp / f"wheel{seed}", seed)
        check_history(db, tests)
        p, r = counts["plain"], counts["recording"]
        log(f"wheel: plain {p / 1e9:.3f} G, recording {r / 1e9:.3f} G, ratio {r / p:.4f}")
        ratios.append(r / p)
    return {
        "wheel_pair_ratios": [round(x, 4) for x in ratios],
        "wheel_overhead": round(statistics.median(ratios) - 1.0, 4),
    }


# Loaded in both recording sessions of the cause-field comparison, so that both load the same
# modules (one module more moves a session's count through the memory layout, see
# count_instructions): with FLAKETUI_BENCH_FIELDS=off the recorder starts no attempt clock and
# implements no hook of pytest-timeout's, and so stores no per-attempt cause field and does none
# of their work (removed before the recorder registers, at configure).
FIELDS_SWITCH = """import os

from flaketui.pytest_plugin import recording

if os.environ.get("FLAKETUI_BENCH_FIELDS") == "off":
    recording._AttemptClock.start = lambda self, item: None
    del recording.Recorder.pytest_timeout_set_timer
    del recording.AttemptTracker.pytest_timeout_set_timer
"""
FIELDS_SWITCH_MODULE = "flaketui_bench_fields"


def count_fields(args: argparse.Namespace, tmp: Path, site: Path | None) -> dict[str, object]:
    """What the per-attempt cause fields (the attempt's own duration, its position and
    predecessor on its worker, its timeout) cost: per hash seed, a recording session with them
    and one without, beside pytest alone, under valgrind. `fields_overhead` is the median of
    (with - without) / pytest alone; pytest-timeout is loaded in all three when installed, so
    the timeout lookup is counted. The per-run fields (host, OS, Python, platform, order seed)
    are read once per session and left in both."""
    if shutil.which("valgrind") is None:
        return {"fields_overhead": None, "fields_note": "valgrind not found"}
    tests = args.instr_tests or args.tests
    timeout_s = SUITE_TIMEOUT_S if has_timeout_plugin() else None
    root = tmp / "fields-suite"
    root.mkdir()
    write_suite(root, tests, timeout_s)
    commit_suite(root)
    switch = tmp / "fields-switch"
    switch.mkdir()
    (switch / f"{FIELDS_SWITCH_MODULE}.py").write_text(FIELDS_SWITCH, encoding="utf-8")
    runner = Runner(root, site, args.lean, keep=("timeout",))
    runner.env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(switch), runner.env.get("PYTHONPATH", "")) if p
    )
    plain, shares, overheads, deltas = [], [], [], []
    for seed in range(1, args.instr_seeds + 1):
        log(f"cause fields: {tests} tests under valgrind, hash seed {seed} (minutes)")
        with_db, without_db = tmp / f"fields-on{seed}.db", tmp / f"fields-off{seed}.db"
        recording = ["-p", FIELDS_SWITCH_MODULE]
        counts = runner.instructions(
            {
                "plain": runner.command(None),
                "with": [*runner.command(with_db), *recording],
                "without": [*runner.command(without_db), *recording],
            },
            tmp / f"fields{seed}",
            seed,
            env={"without": {"FLAKETUI_BENCH_FIELDS": "off"}},
        )
        check_history(with_db, tests, timeout_s)
        check_fieldless(without_db, tests)
        delta = counts["with"] - counts["without"]
        log(
            f"cause fields: plain {counts['plain'] / 1e9:.3f} G, with {counts['with'] / 1e9:.3f}"
            f" G, without {counts['without'] / 1e9:.3f} G"
        )
        plain.append(counts["plain"])
        deltas.append(delta)
        overheads.append(delta / counts["plain"])
        shares.append(delta / (counts["with"] - counts["plain"]))
    return {
        "fields_tests": tests,
        "fields_timeout": timeout_s is not None,
        "fields_plain_g": [round(x / 1e9, 3) for x in plain],
        "fields_delta_g": [round(x / 1e9, 4) for x in deltas],
        "fields_overhead": round(statistics.median(overheads), 4),
        "fields_share_of_recording": round(statistics.median(shares), 3),
    }


def runs_in(history: Path) -> int:
    """How many runs a history holds."""
    conn = sqlite3.connect(f"file:{history}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM runs").fetchone()[0])
    finally:
        conn.close()


def copy_history(history: Path, db: Path) -> None:
    """A consistent copy of a history (its WAL included), through SQLite's backup."""
    src = sqlite3.connect(f"file:{history}?mode=ro", uri=True)
    dst = sqlite3.connect(db)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def fold_seconds(db: Path) -> float:
    """Seconds the next writer or reader spends storing the recorded run's journaled attempts
    and folding it into the rollups (the recorder leaves both): paid once per run, after the
    test session."""
    start = time.perf_counter()
    stored(db)
    return time.perf_counter() - start


def stored(db: Path) -> None:
    """Open the history as any flaketui command does: the recorder's journal is stored."""
    from flaketui.core.history.store import open_connection

    open_connection(db, create=False).close()


if __name__ == "__main__":
    main()
