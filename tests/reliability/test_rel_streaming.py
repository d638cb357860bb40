"""Streaming parse: memory stays flat in the size of a report, however many test cases it holds.

A large report is parsed in a fresh child that keeps nothing; its peak RSS (VmHWM, reset just
before the parse) may grow by a small constant, far below what holding the cases would cost
(about 300 bytes per case: ~24 MB for this report, which the parser must never keep at once)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from reliability_support import child_command, child_env, large_report

CASES = 80_000
GROWTH_BOUND_KIB = 8 * 1024


@pytest.mark.slow
def test_a_large_report_is_parsed_in_constant_memory(tmp_path: Path) -> None:
    report = large_report(tmp_path / "large.xml", CASES)
    proc = subprocess.run(
        child_command("parse", report), env=child_env(), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    outcome = json.loads(proc.stdout.strip().splitlines()[-1])
    assert outcome["attempts"] == CASES
    growth = outcome["peak_kib"] - outcome["rss_before_kib"]
    size_kib = report.stat().st_size // 1024
    print(f"streaming parse: {CASES} cases, {size_kib} KiB of XML, peak RSS growth {growth} KiB")
    assert growth < GROWTH_BOUND_KIB, outcome


def large_trx(path: Path, results: int) -> Path:
    """A TRX file of `results` tests, each with captured output, one in ten failing."""
    ids = [f"{n:08x}-0000-4000-8000-{n:012x}" for n in range(results)]
    output = "<Output><StdOut>" + "log line of a test run " * 20 + "</StdOut></Output>"
    failure = (
        "<Output><ErrorInfo><Message>Assert.Equal() Failure: expected {n}</Message>"
        "<StackTrace>   at Pkg.Tests.Mod{m}.Test_{n}() in /src/Mod.cs:line {n}</StackTrace>"
        "</ErrorInfo></Output>"
    )
    with path.open("w", encoding="utf-8") as out:
        out.write('<?xml version="1.0" encoding="utf-8"?>\n<TestRun id="r" name="big" ')
        out.write('xmlns="http://microsoft.com/schemas/VisualStudio/TeamTest/2010">\n<Results>\n')
        for n, test_id in enumerate(ids):
            failed = n % 10 == 0
            out.write(
                f'<UnitTestResult executionId="{test_id}" testId="{test_id}" '
                f'testName="Pkg.Tests.Mod{n % 40}.Test_{n}" duration="00:00:00.0100000" '
                f'outcome="{"Failed" if failed else "Passed"}">'
                f"{failure.format(n=n, m=n % 40) if failed else output}</UnitTestResult>\n"
            )
        out.write("</Results>\n<TestDefinitions>\n")
        for n, test_id in enumerate(ids):
            out.write(
                f'<UnitTest name="Test_{n}" id="{test_id}"><Execution id="{test_id}"/>'
                f'<TestMethod codeBase="Pkg.Tests.dll" className="Pkg.Tests.Mod{n % 40}" '
                f'name="Test_{n}"/></UnitTest>\n'
            )
        out.write("</TestDefinitions>\n</TestRun>\n")
    return path


def large_tap(path: Path, tests: int) -> Path:
    """A TAP 14 stream of `tests` tests in subtests of 100, one in ten failing with a diagnostic."""
    with path.open("w", encoding="utf-8") as out:
        out.write(f"TAP version 14\n1..{tests // 100}\n")
        for group in range(tests // 100):
            out.write(f"# Subtest: group {group}\n    1..100\n")
            for n in range(100):
                if n % 10 == 0:
                    out.write(f"    not ok {n + 1} - case {group}.{n}\n      ---\n")
                    out.write(f"      message: 'expected {n} got {n + 1}'\n")
                    out.write("      duration_ms: 1.5\n      ...\n")
                else:
                    out.write(f"    ok {n + 1} - case {group}.{n}\n")
            out.write(f"not ok {group + 1} - group {group}\n")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["trx", "tap"])
def test_other_formats_stream_too(tmp_path: Path, kind: str) -> None:
    # TRX keeps one small entry per distinct test (its definitions come after its results),
    # TAP a digest of each id (to number repeated descriptions), about 90 bytes a test: well
    # under the bound for these 40 000; nothing grows with outputs and messages.
    count = 40_000
    report = (large_trx if kind == "trx" else large_tap)(tmp_path / f"large.{kind}", count)
    proc = subprocess.run(
        child_command("parse", report), env=child_env(), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    outcome = json.loads(proc.stdout.strip().splitlines()[-1])
    assert outcome["attempts"] == count
    growth = outcome["peak_kib"] - outcome["rss_before_kib"]
    size_kib = report.stat().st_size // 1024
    print(f"streaming {kind}: {count} tests, {size_kib} KiB, peak RSS growth {growth} KiB")
    assert growth < GROWTH_BOUND_KIB, outcome
