"""Tiny runs of every benchmark script: each works and prints one JSON object as its last line.

No timing assertions (figures go to BENCHMARKS.md, never into tests).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.connections import sqlite_connect

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """Import a bench script by name with its cache under tmp_path."""
    monkeypatch.setenv("FLAKETUI_BENCH_OUT", str(tmp_path / "out"))
    monkeypatch.syspath_prepend(str(BENCH))

    def load(name: str) -> ModuleType:
        __import__(name)
        return sys.modules[name]

    return load


def run_main(
    module: ModuleType, args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> dict[str, Any]:
    """Call module.main() with args; return the JSON object of its last stdout line."""
    monkeypatch.setattr(sys, "argv", [f"{module.__name__}.py", *args])
    module.main()
    lines = capsys.readouterr().out.strip().splitlines()
    result = json.loads(lines[-1])
    assert isinstance(result, dict)
    return result


def test_generate_writes_a_ci_shaped_history(bench: Any, monkeypatch: Any, capsys: Any) -> None:
    out = run_main(bench("generate"), ["--results", "2000"], monkeypatch, capsys)
    assert 1800 <= out["results"] <= 2400 and out["runs"] >= 10
    conn = sqlite3.connect(out["path"])
    kinds = dict(conn.execute("SELECT branch_kind, count(*) FROM runs GROUP BY 1").fetchall())
    suites = {s for (s,) in conn.execute("SELECT DISTINCT suite FROM runs")}
    outcomes = {o for (o,) in conn.execute("SELECT DISTINCT outcome FROM test_runs")}
    (tagged,) = conn.execute("SELECT count(*) FROM runs WHERE incident IS NOT NULL").fetchone()
    (messages,) = conn.execute("SELECT count(DISTINCT message) FROM results").fetchone()
    (sigs,) = conn.execute("SELECT count(*) FROM signatures").fetchone()
    conn.close()
    assert set(kinds) == {"main", "pr"} and suites == {"ci", "nightly"}
    assert {"pass", "fail", "skipped"} <= outcomes
    assert tagged == 1
    # Volatile parts make messages distinct while signatures collapse them.
    assert messages > sigs > 0
    again = run_main(bench("generate"), ["--results", "2000"], monkeypatch, capsys)
    assert again["cached"] is True and again["path"] == out["path"]


def test_a_cached_history_gets_current_rollups(bench: Any, monkeypatch: Any, capsys: Any) -> None:
    """A cache from an older flaketui would be scored from raw rows: its rollups are rebuilt."""
    from flaketui.core.rollups import build as rollups

    out = run_main(bench("generate"), ["--results", "1000"], monkeypatch, capsys)
    conn = sqlite3.connect(out["path"])
    with conn:
        conn.execute("UPDATE meta SET value = 'old' WHERE key = ?", (rollups.VERSION_KEY,))
    assert not rollups.enabled(conn)
    run_main(bench("generate"), ["--results", "1000"], monkeypatch, capsys)
    assert rollups.enabled(conn)
    conn.close()


def test_scoring_prints_ratios_and_agrees_with_pandas(
    bench: Any, monkeypatch: Any, capsys: Any
) -> None:
    out = run_main(bench("scoring"), ["--results", "2000", "--repeat", "1"], monkeypatch, capsys)
    for key in ("results", "rescore_s", "scan_s", "pandas_s", "scan_ratio", "pandas_speedup"):
        assert out[key] > 0
    # The pandas anchor computes the same recency scores as flaketui, and so do the rollups.
    assert out["recency_max_diff"] < 1e-9
    assert out["rollup_recency_max_diff"] < 1e-9
    assert out["rollup_s"] > 0 and out["rollup_scan_ratio"] > 0
    for key in ("filtered_suite_s", "filtered_kind_s", "filtered_ratio"):
        assert out[key] > 0
    # The anchor touches every raw row once, in table order: no index of results orders it.
    assert out["scan_plan"].startswith("SCAN results;"), out["scan_plan"]


def test_causes_prints_ratios_with_and_without_a_recorded_order(
    bench: Any, monkeypatch: Any, capsys: Any
) -> None:
    from flaketui.core.scoring import causes_apart

    # Shared with a child however small, as on a big history with two cores: the bench checks
    # that the shared analysis finds the same causes.
    monkeypatch.setattr(causes_apart, "SHARE_MIN_ROWS", 1)
    monkeypatch.setattr(causes_apart, "_cores", lambda: 2)
    out = run_main(bench("causes"), ["--results", "3000", "--repeat", "1"], monkeypatch, capsys)
    for key in ("report_s", "causes_s", "causes_ratio", "ordered_report_s", "ordered_causes_s"):
        assert out[key] > 0
    assert out["ordered_causes_ratio"] > 0
    assert out["shared_causes_s"] > 0 and out["ordered_shared_causes_ratio"] > 0
    # The copy records an order as the plugin does: positions 0..n-1 on each worker of each run.
    conn = sqlite3.connect(out["ordered_history"])
    assert conn.execute("SELECT count(*) FROM results WHERE position IS NOT NULL").fetchone()[0]
    (gaps,) = conn.execute(
        "SELECT count(*) FROM (SELECT run, coalesce(worker_id, '') AS w, count(*) AS n,"
        " min(position) AS lo, max(position) AS hi, count(DISTINCT position) AS d"
        " FROM results WHERE attempt = 1 GROUP BY run, w) WHERE lo <> 0 OR hi <> n - 1 OR d <> n"
    ).fetchone()
    (original,) = (
        sqlite_connect(out["history"])
        .execute("SELECT count(*) FROM results WHERE position IS NOT NULL")
        .fetchone()
    )
    conn.close()
    assert gaps == 0 and original == 0


def test_ingest_prints_rate_and_parse_ratio(bench: Any, monkeypatch: Any, capsys: Any) -> None:
    out = run_main(bench("ingest"), ["--results", "600", "--repeat", "1"], monkeypatch, capsys)
    assert out["results"] == 600
    for key in (
        "results_per_s",
        "parse_ratio",
        "peak_rss_mb",
        "parser_ratio",
        "append_floor_ratio",
    ):
        assert out[key] > 0
    bound = (out["parser_s"] + out["append_floor_s"]) / out["parse_s"]
    assert out["lower_bound_ratio"] == round(bound, 3)


def test_ingest_big_report_measures_a_child(bench: Any, monkeypatch: Any, capsys: Any) -> None:
    out = run_main(bench("ingest"), ["--report-mb", "1"], monkeypatch, capsys)
    assert out["report_mb"] >= 1.0
    assert out["results"] == out["cases"] > 1000
    assert out["peak_rss_mb"] > 0 and out["parse_ratio"] > 0


def test_ingest_into_a_history_runs_the_command(bench: Any, monkeypatch: Any, capsys: Any) -> None:
    history = run_main(bench("generate"), ["--results", "1000"], monkeypatch, capsys)["path"]
    before = Path(history).read_bytes()
    out = run_main(
        bench("ingest"),
        ["--history", history, "--runs", "2", "--repeat", "1"],
        monkeypatch,
        capsys,
    )
    conn = sqlite3.connect(history)
    (tests,) = conn.execute("SELECT count(*) FROM tests").fetchone()
    conn.close()
    assert out["cases"] == tests and out["runs"] == 2
    assert out["command_s"] > 0 and out["new_command_s"] > 0 and out["history_ratio"] > 0
    assert out["merge_new_s"] > 0 and out["file_copy_s"] > 0 and out["merge_ratio"] > 0
    assert Path(history).read_bytes() == before  # a copy is written, never the cached history


def test_plugin_prints_overhead(bench: Any, monkeypatch: Any, capsys: Any) -> None:
    out = run_main(bench("plugin"), ["--tests", "30", "--repeat", "1"], monkeypatch, capsys)
    assert out["tests"] == 30
    assert isinstance(out["overhead"], float)
    assert out["plain_s"] > 0 and out["recording_s"] > 0
    assert isinstance(out["cpu_overhead"], float)


def test_plugin_times_the_collector_in_both_runs(bench: Any, monkeypatch: Any, capsys: Any) -> None:
    """--gc: each run's collector time comes back from its probe, and the overhead outside it
    is recording over plain time less those."""
    args = ["--tests", "30", "--repeat", "1", "--lean", "--gc"]
    out = run_main(bench("plugin"), args, monkeypatch, capsys)
    plain, recording = out["plain_s"], out["recording_s"]
    plain_gc, recording_gc = out["plain_gc_s"], out["recording_gc_s"]
    assert 0 < plain_gc < plain and 0 < recording_gc < recording
    assert out["gc_share"] == pytest.approx(plain_gc / plain, abs=1e-3)
    expected = (recording - recording_gc) / (plain - plain_gc) - 1
    assert out["outside_gc_overhead"] == pytest.approx(expected, abs=2e-3)


def test_plugin_simultaneous_pairs(bench: Any, monkeypatch: Any, capsys: Any) -> None:
    args = ["--tests", "30", "--repeat", "1", "--simultaneous"]
    out = run_main(bench("plugin"), args, monkeypatch, capsys)
    assert out["mode"] == "simultaneous"
    assert isinstance(out["cpu_overhead"], float) and out["recording_s"] > 0


def test_app_prints_first_screen_ratios_and_stalls_idle_and_busy(
    bench: Any, monkeypatch: Any, capsys: Any
) -> None:
    out = run_main(bench("app"), ["--results", "2000", "--repeat", "1"], monkeypatch, capsys)
    for prefix in ("", "busy_"):
        assert out[f"{prefix}first_screen_s"] > 0 and out[f"{prefix}bare_app_s"] > 0
        assert out[f"{prefix}ratio"] > 0 and out[f"{prefix}max_stall_ms"] >= 0
        assert out[f"{prefix}cold_first_screen_s"] > 0 and out[f"{prefix}cold_ratio"] > 0
        after = out[f"{prefix}after_ingest_first_screen_s"]
        assert after > 0 and out[f"{prefix}after_ingest_max_stall_ms"] >= 0
        ratio = out[f"{prefix}after_ingest_ratio"]
        assert _ratio_of_rounded(ratio, after, out[f"{prefix}bare_app_s"])
        after_cold = out[f"{prefix}after_ingest_cold_first_screen_s"]
        ratio = out[f"{prefix}after_ingest_cold_ratio"]
        assert _ratio_of_rounded(ratio, after_cold, out[f"{prefix}cold_first_screen_s"])


def _ratio_of_rounded(ratio: float, top: float, bottom: float) -> bool:
    """Whether `ratio`, rounded to 2 places, is top / bottom, each rounded to 3 places: the
    shorter the times (the faster the machine), the more their rounding moves the quotient."""
    low = (top - 5e-4) / (bottom + 5e-4) - 5e-3
    high = (top + 5e-4) / (bottom - 5e-4) + 5e-3
    return low <= ratio <= high


def test_app_opens_copies_left_as_ingest_leaves_them(
    bench: Any, monkeypatch: Any, capsys: Any, tmp_path: Path
) -> None:
    """What the after-ingest round opens: the history N `flaketui ingest` runs later, each
    run's per-test rows still waiting for the fold (the app pays it), a ranking of the first
    copy kept from before them, the history untouched."""
    history = Path(run_main(bench("generate"), ["--results", "1000"], monkeypatch, capsys)["path"])
    before = history.read_bytes()
    app = bench("app")
    cache = tmp_path / "cache"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    with app.after_ingest(history, 2, tmp_path / "skip.json", env) as copies:
        opened, cold, probed, top = copies
        assert opened.read_bytes() == cold.read_bytes() == probed.read_bytes()
        [kept] = (cache / "flaketui" / "rankings").iterdir()  # the first copy's, and its top
        assert str(opened) in kept.read_text() and top and top in kept.read_text()
        conn = sqlite3.connect(f"{opened.as_uri()}?mode=ro", uri=True)
        try:
            tests = conn.execute("SELECT count(*) FROM tests").fetchone()[0]
            runs = conn.execute(
                "SELECT run_id FROM runs WHERE run_id GLOB 'bench-[0-9]'"
            ).fetchall()
            waiting = conn.execute("SELECT count(*) FROM test_runs_waiting").fetchone()[0]
        finally:
            conn.close()
        assert sorted(runs) == [("bench-0",), ("bench-1",)]
        assert tests > 0 and waiting == 2 * tests
    assert not opened.exists() and history.read_bytes() == before


def test_app_compares_two_histories_of_different_sizes(
    bench: Any, monkeypatch: Any, capsys: Any
) -> None:
    small = run_main(bench("generate"), ["--results", "1000"], monkeypatch, capsys)["path"]
    args = ["--results", "2000", "--repeat", "1", "--against", small, "--after-ingest", "0"]
    out = run_main(bench("app"), args, monkeypatch, capsys)
    assert not any(key.startswith(("after_", "busy_after_")) for key in out)
    for prefix in ("", "busy_"):
        against = out[f"{prefix}against_first_screen_s"]
        assert against > 0
        ratio = out[f"{prefix}size_ratio"]
        assert _ratio_of_rounded(ratio, out[f"{prefix}first_screen_s"], against)


def test_the_busy_condition_runs_one_spinning_process_and_stops_it(bench: Any) -> None:
    app = bench("app")
    with app.condition("idle") as nothing:
        assert nothing is None
    with app.condition("busy") as spinner:
        assert spinner.poll() is None  # running while the block runs
        ticks = os.sysconf("SC_CLK_TCK")
        deadline = time.monotonic() + 30
        while _cpu_ticks(spinner.pid) < ticks // 10:  # it spins: 0.1 s of CPU, soon
            assert time.monotonic() < deadline
            time.sleep(0.01)
    assert spinner.poll() is not None  # stopped and reaped after it


def _cpu_ticks(pid: int) -> int:
    """User and system CPU time of a process, in clock ticks (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


@pytest.mark.skipif(shutil.which("tmux") is None, reason="bench/keys.py drives the app in tmux")
def test_keys_prints_latencies_against_a_bare_table(
    bench: Any, monkeypatch: Any, capsys: Any
) -> None:
    # 20 runs of 300 tests: a ranked list of about ten flaky tests to move in.
    args = ["--results", "6000", "--tests", "300", "--repeat", "1", "--moves", "3", "--pages", "1"]
    keys = bench("keys")
    # This history loads in a second: a screen that never comes fails in two minutes, not in
    # the ten a big history is given.
    monkeypatch.setattr(keys, "TIMEOUT_S", 120.0)
    out = run_main(keys, args, monkeypatch, capsys)
    assert out["tests"] == 300
    for key in (
        "move",
        "page",
        "view",
        "all_move",
        "sort",
        "detail",
        "back",
        "back_key",
        "bare_move",
        "bare_back",
        "bare_back_key",
    ):
        assert out[f"{key}_ms"] > 0
    assert out["move_ratio"] > 0 and out["back_ratio"] > 0 and out["back_key_ratio"] > 0
    assert out["max_ms"] >= out["move_ms"]
    for key in ("family_changes", "lifecycle_replay"):
        assert out[f"{key}_s"] > 0 and out[f"{key}_scan_ratio"] > 0
    # A history this small may be read before any key: the loading keys are counted, not
    # required.
    loading = [out["loading_move_ms"], out["loading_back_key_ms"]]
    assert out["loading_keys"] == 0 or any(ms is not None and ms > 0 for ms in loading)


def test_scale_copies_every_test_with_its_outcomes(
    bench: Any, monkeypatch: Any, capsys: Any
) -> None:
    from flaketui.core.scoring.report import build_report
    from tests.connections import open_history

    base = run_main(bench("generate"), ["--results", "2000"], monkeypatch, capsys)
    out = run_main(bench("scale"), ["--results", "2000", "--copies", "2"], monkeypatch, capsys)
    assert out["path"] != base["path"] and out["results"] == 3 * base["results"]
    assert out["runs"] == base["runs"]
    now = bench("common").NOW

    def verdicts(path: str) -> dict[str, tuple[str, float]]:
        db = open_history(Path(path), readonly=True)
        try:
            report = build_report(db, now=now)
        finally:
            db.close()
        return {t.test_id: (str(t.verdict), round(t.scores.damage, 9)) for t in report.tests}

    original, scaled = verdicts(base["path"]), verdicts(out["path"])
    assert original and len(scaled) == 3 * len(original)
    for copy in ("", "copy1/", "copy2/"):
        assert {test: scaled[copy + test] for test in original} == original


def test_keys_core_only_needs_no_terminal(bench: Any, monkeypatch: Any, capsys: Any) -> None:
    args = ["--results", "6000", "--tests", "300", "--repeat", "1", "--core-only"]
    out = run_main(bench("keys"), args, monkeypatch, capsys)
    for key in ("family_changes", "lifecycle_replay"):
        assert out[f"{key}_s"] > 0 and out[f"{key}_scan_ratio"] > 0
    assert "move_ms" not in out


def test_a_file_where_the_cache_goes_is_a_one_line_error(
    bench: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "taken").write_text("")
    monkeypatch.setenv("FLAKETUI_BENCH_OUT", str(tmp_path / "taken"))
    with pytest.raises(SystemExit, match=r"^bench cache .*taken: cannot make the directory \("):
        bench("common").out_dir()
