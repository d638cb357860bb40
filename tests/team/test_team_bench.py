"""bench/team.py at its smallest: it runs and prints its figures as one JSON line (no timing
assertions: the figures belong in BENCHMARKS.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.pgcluster import Cluster

BENCH = Path(__file__).resolve().parents[2] / "bench" / "team.py"


def test_team_bench_small(pg_cluster: Cluster, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--small", "--url", pg_cluster.create_database()],
        capture_output=True,
        text=True,
        timeout=600,
        env={**__import__("os").environ, "FLAKETUI_BENCH_OUT": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    ingest = result["ingest"]
    assert ingest["server"]["results"] == ingest["sqlite"]["results"] == 4 * 2 * 200
    assert ingest["ratio_server_over_sqlite"] > 0
    assert pg_cluster.password not in proc.stdout + proc.stderr
