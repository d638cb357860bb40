"""bench/app_timeline.py (diagnostics of bench/app.py) runs and reports every step it hooks."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_the_timeline_reports_each_step(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Any
) -> None:
    monkeypatch.setenv("FLAKETUI_BENCH_OUT", str(tmp_path / "out"))
    monkeypatch.syspath_prepend(str(BENCH))
    import app_timeline

    monkeypatch.setattr(sys, "argv", ["app_timeline.py", "--results", "2000", "--repeat", "1"])
    assert app_timeline.main() == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(out["bare"]) >= {"started", "Textual and the app imported", "marker written"}
    steps = [
        "started",
        "early read forked",
        "Textual and the app imported",
        "main screen mounted",
        "ranking received",
        "rows shown",
        "marker written",
    ]
    assert set(out["app"]) >= set(steps)
    assert [out["app"][s] for s in steps] == sorted(out["app"][s] for s in steps)
