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
