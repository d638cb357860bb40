"""Make a 10× history from a generated one: its tests copied under other prefixes.

Usage: python bench/scale.py --results 1000000 [--copies 9] [--seed 6]

Generating a 10 M-result history takes hours; this copies each test of bench/generate.py's
cached (results, seed) history `--copies` times (ids prefixed `copyN/`), with all their
results and test-runs, into `history-<results>-s<seed>-x<copies + 1>.db` beside it, then
rebuilds the rollups. The copies repeat their original's outcomes: the same numbers of rows,
tests and runs as a generated history of that size, not new flake patterns. The last line
printed is one JSON object: path, results, tests, runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def scale(source: Path, target: Path, copies: int) -> None:
    """Write `target`: `source` with its tests copied `copies` times."""
    partial = target.with_name(target.name + ".partial")
    shutil.copyfile(source, partial)
    conn = sqlite3.connect(partial, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN")
        step = int(conn.execute("SELECT max(id) FROM tests").fetchone()[0])
        for copy in range(1, copies + 1):
            shift, prefix = copy * step, f"copy{copy}/"
            conn.execute(
                "INSERT INTO tests (id, test_id, parent, test_file, first_seen)"
                " SELECT id + ?, ? || test_id, ? || parent, test_file, first_seen FROM tests"
                " WHERE id <= ?",
                (shift, prefix, prefix, step),
            )
            for table in ("results", "test_runs"):
                columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
                picked = ", ".join("test + :shift" if c == "test" else c for c in columns)
                conn.execute(
                    f"INSERT INTO {table} ({', '.join(columns)}) SELECT {picked} FROM {table}"
                    " WHERE test <= :step",
                    {"shift": shift, "step": step},
                )
            print(f"copy {copy} of {copies}", file=sys.stderr)
        from flaketui.core.rollups import build

        build.rebuild(conn)
        conn.execute("COMMIT")
    finally:
        conn.close()
    partial.replace(target)


def main() -> int:
    """Scale the cached history; print the new one's path and size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--results", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--copies", type=int, default=9)
    args = parser.parse_args()
    from generate import ensure_history

    source = ensure_history(args.results, args.seed)
    target = source.with_name(f"{source.stem}-x{args.copies + 1}.db")
    if not target.exists():
        started = time.perf_counter()
        scale(source, target, args.copies)
        print(f"scaled in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    conn = sqlite3.connect(f"{target.resolve().as_uri()}?mode=ro", uri=True)
    try:
        counts = {
            name: int(conn.execute(f"SELECT count(*) FROM {name}").fetchone()[0])
            for name in ("results", "tests", "runs")
        }
    finally:
        conn.close()
    print(json.dumps({"path": str(target), **counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
