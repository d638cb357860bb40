"""bench/plugin.py's statistics and run set-up: the interval, the verdict, what each run loads.

No timing assertions: the figures go to BENCHMARKS.md.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.connections import connected

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def plugin_bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """bench/plugin.py imported as a module."""
    monkeypatch.syspath_prepend(str(BENCH))
    __import__("plugin")
    return sys.modules["plugin"]


def test_the_median_interval_is_the_order_statistics_of_95_percent(
    plugin_bench: ModuleType,
) -> None:
    # 15 values: the 4th smallest and the 4th largest, P(Bin(15, 1/2) <= 3) = 576 / 32768.
    assert plugin_bench.median_ci(list(range(15))) == (3, 11, round(1 - 2 * 576 / 32768, 4))
    assert plugin_bench.median_ci([5.0, 1.0, 3.0, 2.0, 4.0, 6.0]) == (1.0, 6.0, 0.9688)
    low, high, coverage = plugin_bench.median_ci([2.0, 1.0, 3.0])
    assert (low, high) == (1.0, 3.0) and coverage < 0.95  # too few values: the range


def test_the_wall_verdict_misses_on_a_measured_cost_and_meets_on_a_narrow_interval(
    plugin_bench: ModuleType,
) -> None:
    verdict = plugin_bench.verdict
    assert verdict(-0.01, 0.019, 0.96) == "met"  # cannot be told from no cost
    assert verdict(-0.03, -0.01, 0.96) == "met"
    assert verdict(0.0, 0.0199, 0.96) == "met"
    # Reaching zero only as wide as the pairs' noise is no evidence of no cost.
    assert verdict(-0.01, 0.049, 0.96) == "not resolved"
    assert verdict(0.0, 0.08, 0.96) == "not resolved"
    assert verdict(-0.016, 0.075, 0.96) == "not resolved"
    assert verdict(0.001, 0.02, 0.96) == "missed"  # small, but measured
    assert verdict(0.01, 0.02, 0.9) == "not established"  # five pairs or fewer


def test_the_instructions_verdict_needs_every_seed_on_one_side_of_two_percent(
    plugin_bench: ModuleType,
) -> None:
    verdict = plugin_bench.instructions_verdict
    assert plugin_bench.INSTRUCTIONS_TARGET == 0.02
    assert verdict([0.015, 0.019, 0.0199]) == "met"
    assert verdict([0.02, 0.049, 0.05]) == "missed"
    assert verdict([0.019, 0.021]) == "not established"
    assert verdict([]) == "not established"


def test_summary_reports_overheads_with_quartiles_and_interval(plugin_bench: ModuleType) -> None:
    ratios = [1.01, 1.02, 1.03, 1.04, 1.05, 1.06, 1.50]
    out = plugin_bench.summary("overhead", ratios)
    assert out["overhead"] == 0.04
    assert out["overhead_iqr"] == [0.025, 0.055]  # inclusive quartiles
    assert out["overhead_ci"] == [0.01, 0.5] and out["ci_level"] == 0.9844


def test_runs_use_an_installed_copy_with_bytecode_and_lean_loads_only_flaketui(
    plugin_bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    copy = plugin_bench.install_copy(site)
    assert (copy / "__pycache__").is_dir() and (copy / "pytest_plugin" / "__init__.py").is_file()
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    runner = plugin_bench.Runner(tmp_path, site, lean=True)
    # flaketui's plugin loads through its entry point, every other one is blocked by name.
    assert "PYTEST_DISABLE_PLUGIN_AUTOLOAD" not in runner.env
    recording = runner.command(tmp_path / "h.db")
    assert recording[-1] == f"--flaketui-db={tmp_path / 'h.db'}"
    declared = {ep.name for ep in importlib.metadata.entry_points(group="pytest11")}
    blocked = {arg.removeprefix("no:") for arg in recording if arg.startswith("no:")}
    assert blocked == declared - {"flaketui"} | {"randomly"}
    assert "no:timeout" not in plugin_bench.Runner(tmp_path, site, True, keep=("timeout",)).blocked
    where = subprocess.run(
        [sys.executable, "-c", "import flaketui.pytest_plugin as m; print(m.__cached__)"],
        env=runner.env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_file() and Path(where).is_relative_to(site)
    default = plugin_bench.Runner(tmp_path, None, lean=False)
    assert "PYTEST_DISABLE_PLUGIN_AUTOLOAD" not in default.env or os.environ.get(
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD"
    )
    assert "--flaketui-db" not in default.command(None)


def _run(module: ModuleType, args: list[str], monkeypatch: Any, capsys: Any) -> dict[str, Any]:
    monkeypatch.setattr(sys, "argv", ["plugin.py", *args])
    module.main()
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert isinstance(result, dict)
    return result


def test_every_pair_is_reported_with_spread_and_load(
    plugin_bench: ModuleType, monkeypatch: Any, capsys: Any
) -> None:
    out = _run(plugin_bench, ["--tests", "20", "--pairs", "2", "--lean"], monkeypatch, capsys)
    assert out["pairs"] == 2 and len(out["pair_ratios"]) == 2 == len(out["cpu_pair_ratios"])
    assert out["mode"] == "sequential (ABBA)" and out["pytest_plugins"] == "flaketui only"
    assert out["flaketui"] == "installed copy with bytecode"
    assert out["verdict"] == "not established"  # two pairs establish nothing
    low, high = out["overhead_ci"]
    assert low <= out["overhead"] <= high
    assert len(out["overhead_iqr"]) == 2 and len(out["cpu_overhead_ci"]) == 2
    assert set(out["loadavg"]) == {"before", "after"}


def test_sessions_record_into_copies_of_a_given_history(
    plugin_bench: ModuleType, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    history = tmp_path / "kept.db"
    shutil.copy(Path(__file__).resolve().parents[2] / "sample_data" / "history.db", history)
    before = history.read_bytes()
    with connected(history) as conn:
        runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    args = ["--tests", "20", "--pairs", "2", "--lean", "--history", str(history)]
    out = _run(plugin_bench, args, monkeypatch, capsys)
    # Each copy gained exactly one run of 20 results (check_history), the history itself none.
    assert out["history_runs"] == runs > 0 and out["history_fold_s"] > 0
    assert history.read_bytes() == before
    with pytest.raises(SystemExit):
        _run(plugin_bench, ["--tests", "20", "--history", str(tmp_path / "none.db")],
             monkeypatch, capsys)  # fmt: skip
    assert "no such history" in capsys.readouterr().err


def test_a_recording_is_checked_against_the_runs_a_history_held(
    plugin_bench: ModuleType, tmp_path: Path
) -> None:
    db = tmp_path / "one.db"
    suite = tmp_path / "suite"
    suite.mkdir()
    plugin_bench.write_suite(suite, 20)
    plugin_bench.Runner(suite, None, True).run(db)
    plugin_bench.check_history(db, 20)
    with pytest.raises(SystemExit, match="runs/finished"):
        plugin_bench.check_history(db, 20, before=1)  # its run was there before: none recorded


def test_a_simultaneous_verdict_is_read_from_cpu_time(
    plugin_bench: ModuleType, monkeypatch: Any, capsys: Any
) -> None:
    args = ["--tests", "20", "--pairs", "1", "--lean", "--simultaneous"]
    out = _run(plugin_bench, args, monkeypatch, capsys)
    assert out["mode"] == "simultaneous" and out["verdict_of"] == "cpu_overhead"
    args = ["--tests", "20", "--pairs", "1", "--lean"]
    sequential = _run(plugin_bench, args, monkeypatch, capsys)
    assert sequential["verdict_of"] == "overhead"


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="instruction counts need valgrind")
def test_instructions_of_a_pair_per_hash_seed_under_valgrind(
    plugin_bench: ModuleType, monkeypatch: Any, capsys: Any
) -> None:
    args = ["--tests", "10", "--pairs", "1", "--lean", "--instructions", "--instr-tests", "5"]
    out = _run(plugin_bench, [*args, "--instr-seeds", "2"], monkeypatch, capsys)
    assert out["instr_tests"] == 5 and len(out["instr_pair_ratios"]) == 2
    for plain, recording in zip(out["instr_plain_g"], out["instr_recording_g"], strict=True):
        assert recording > plain > 0
    ratios = sorted(out["instr_pair_ratios"])
    assert out["instr_overhead"] == pytest.approx((ratios[0] + ratios[1]) / 2 - 1, abs=2e-4)
    assert -0.05 < out["idle_overhead"] < out["instr_overhead"]  # loaded, asked for nothing
    expected = plugin_bench.instructions_verdict([r - 1 for r in out["instr_pair_ratios"]])
    assert out["instructions_verdict"] == expected and out["instructions_target"] == 0.02


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="instruction counts need valgrind")
def test_a_wheel_install_is_counted_against_pytest_alone(
    plugin_bench: ModuleType, monkeypatch: Any, capsys: Any
) -> None:
    # Builds the wheel and a new environment (pytest from the package index), then one pair.
    args = ["--tests", "10", "--pairs", "1", "--lean", "--wheel", "--instr-tests", "5"]
    out = _run(plugin_bench, [*args, "--instr-seeds", "1"], monkeypatch, capsys)
    (ratio,) = out["wheel_pair_ratios"]
    assert ratio > 1  # the recording session did record (check_history) and cost something
    assert out["wheel_overhead"] == pytest.approx(ratio - 1, abs=1e-4)


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="instruction counts need valgrind")
def test_the_cause_fields_are_counted_with_and_without_them(
    plugin_bench: ModuleType, monkeypatch: Any, capsys: Any
) -> None:
    args = ["--tests", "5", "--pairs", "1", "--lean", "--fields", "--instr-tests", "5"]
    out = _run(plugin_bench, [*args, "--instr-seeds", "1"], monkeypatch, capsys)
    # Each history was checked: every field recorded with them, none without.
    assert out["fields_tests"] == 5 and len(out["fields_delta_g"]) == 1
    assert out["fields_timeout"] == plugin_bench.has_timeout_plugin()
    assert out["fields_overhead"] == pytest.approx(
        out["fields_delta_g"][0] / out["fields_plain_g"][0], rel=0.2, abs=2e-4
    )


def test_the_fields_switch_turns_every_cause_field_off(
    plugin_bench: ModuleType, tmp_path: Path
) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    plugin_bench.write_suite(suite, 12, timeout_s=300)
    switch = tmp_path / "switch"
    switch.mkdir()
    name = plugin_bench.FIELDS_SWITCH_MODULE
    (switch / f"{name}.py").write_text(plugin_bench.FIELDS_SWITCH)
    for state, check in (("on", plugin_bench.check_history), ("off", None)):
        db = tmp_path / f"{state}.db"
        env = {
            **os.environ,
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "PYTHONPATH": os.pathsep.join([str(switch), os.environ.get("PYTHONPATH", "")]),
            "FLAKETUI_BENCH_FIELDS": state,
        }
        subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "flaketui.pytest_plugin", "-p", name,
             "-p", "pytest_timeout", f"--flaketui-db={db}", str(suite)],
            cwd=suite, env=env, capture_output=True, check=False,
        )  # fmt: skip
        if check is not None:
            check(db, 12, 300)
            with pytest.raises(SystemExit, match="durations"):
                plugin_bench.check_fieldless(db, 12)
        else:
            plugin_bench.check_fieldless(db, 12)
            with pytest.raises(SystemExit, match="cause fields missing"):
                plugin_bench.check_history(db, 12, 300)


def test_the_anchor_is_pytest_alone(plugin_bench: ModuleType, tmp_path: Path) -> None:
    default = plugin_bench.Runner(tmp_path, None, lean=False)
    assert default.command(None)[-2:] == ["-p", "no:flaketui"]
    assert "no:flaketui" not in default.command(tmp_path / "h.db")
    lean = plugin_bench.Runner(tmp_path, None, lean=True)
    assert lean.command(None)[-2:] == ["-p", "no:flaketui"]
    assert "no:flaketui" not in lean.command(tmp_path / "h.db")
    # Loaded but asked for nothing: what installing flaketui costs any other session.
    for runner in (lean, default):
        assert not [arg for arg in runner.command(None, idle=True) if "flaketui" in arg]


def test_a_recording_without_the_cause_fields_is_refused(
    plugin_bench: ModuleType, tmp_path: Path
) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    plugin_bench.write_suite(suite, 12, timeout_s=300)
    assert "timeout = 300" in (suite / "pytest.ini").read_text()
    db = tmp_path / "h.db"
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "flaketui.pytest_plugin", "-p", "pytest_timeout",
         f"--flaketui-db={db}", str(suite)],
        cwd=suite, env=env, capture_output=True, check=False,
    )  # fmt: skip
    plugin_bench.check_history(db, 12, 300)  # every field recorded
    with pytest.raises(SystemExit, match="timeout"):
        plugin_bench.check_history(db, 12, 60)
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE results SET predecessor = NULL WHERE position = 5")
    conn.close()
    with pytest.raises(SystemExit, match="cause fields missing"):
        plugin_bench.check_history(db, 12, 300)


def test_a_wheel_environment_runs_its_own_interpreter_compiling_what_pytest_rewrites(
    plugin_bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    python = str(tmp_path / "env" / "bin" / "python")
    runner = plugin_bench.Runner(tmp_path, None, lean=False, python=python)
    assert runner.command(None)[0] == python == runner.command(tmp_path / "h.db")[0]
    assert runner.command(None)[-2:] == ["-p", "no:flaketui"]  # plugins autoload, but this one
    assert "PYTHONPATH" not in runner.env  # nothing of this environment's
    assert runner.env["PYTHONDONTWRITEBYTECODE"] == "1"  # no cached rewrite: a fresh CI job's
    assert "PYTEST_DISABLE_PLUGIN_AUTOLOAD" not in runner.env


def test_lean_needs_flaketui_declared_to_pytest(
    plugin_bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [])
    with pytest.raises(SystemExit, match="pytest-flaketui is not installed"):
        plugin_bench.Runner(tmp_path, None, lean=True)
    assert plugin_bench.Runner(tmp_path, None, lean=False).blocked == []


def test_a_null_arm_compares_pytest_alone_with_itself(
    plugin_bench: ModuleType, monkeypatch: Any, capsys: Any
) -> None:
    calls: list[str] = []
    run = plugin_bench.Runner.run

    def noted(self: Any, db: Path | None) -> tuple[float, float]:
        calls.append("plain" if db is None else "recording")
        return run(self, db)

    monkeypatch.setattr(plugin_bench.Runner, "run", noted)
    args = ["--tests", "20", "--pairs", "2", "--lean", "--null"]
    out = _run(plugin_bench, args, monkeypatch, capsys)
    # Two warm-up runs, then plain, recording, plain in each pair.
    assert calls == ["plain", "recording", *["plain", "recording", "plain"] * 2]
    assert len(out["null_pair_ratios"]) == 2 == len(out["pair_ratios"])
    low, high = out["null_overhead_ci"]
    assert low <= out["null_overhead"] <= high and len(out["null_overhead_iqr"]) == 2
    assert "null_overhead" not in _run(
        plugin_bench, ["--tests", "20", "--pairs", "1", "--lean"], monkeypatch, capsys
    )
    with pytest.raises(SystemExit):
        _run(plugin_bench, [*args, "--simultaneous"], monkeypatch, capsys)
    assert "cannot go with --simultaneous" in capsys.readouterr().err
