"""`flaketui changes` through click's CliRunner: table, JSON, --days, read-only, one-line errors."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli.commands import cli

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "history.db"
NOW = "2026-11-30T18:00:00Z"
REGRESSION = "tests/api/test_orders.py::test_order_total_includes_discount"
BILLING = "tests/billing/test_rollup.py::test_billing_rollup"


@pytest.fixture
def history(tmp_path: Path) -> Path:
    path = tmp_path / "history.db"
    shutil.copyfile(SAMPLE, path)
    return path


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_table_names_the_day_a_test_regressed(history: Path) -> None:
    before = hashlib.sha256(history.read_bytes()).hexdigest()
    code, out = invoke("changes", str(history), REGRESSION, "--now", NOW)
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == f"{REGRESSION}: verdict changes over 90 days to {NOW}"
    assert lines[-1].startswith("2026-11-18  healthy -> regression  bad on main")
    assert hashlib.sha256(history.read_bytes()).hexdigest() == before  # reading never writes


def test_json_and_days_for_a_family(history: Path) -> None:
    code, out = invoke(
        "changes", str(history), BILLING, "--now", NOW, "--days", "60", "--format", "json"
    )
    assert code == 0, out
    payload = json.loads(out)
    assert payload["days"] == 60 and payload["now"] == NOW and not payload["now_was_clamped"]
    assert [(c["day"], c["before"], c["after"]) for c in payload["changes"]] == [
        ("2026-10-17", "healthy", "flaky")
    ]
    # Over the whole window, the first change is the family reaching N_min runs.
    code, out = invoke("changes", str(history), BILLING, "--now", NOW, "--format", "json")
    assert json.loads(out)["changes"][0]["before"] == "insufficient"


def test_a_steady_test_has_none(history: Path) -> None:
    code, out = invoke("changes", str(history), BILLING, "--now", NOW, "--days", "7")
    assert code == 0, out
    assert out.splitlines()[-1] == "none"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nosuch::test"], "no test or family named 'nosuch::test'"),
        ([REGRESSION, "--days", "0"], "Invalid value for '--days'"),
        ([REGRESSION, "--now", "yesterday"], "yesterday"),
    ],
)
def test_bad_input_is_one_line(history: Path, args: list[str], message: str) -> None:
    code, out = invoke("changes", str(history), *args)
    assert code != 0
    assert message in out and "Traceback" not in out


def test_not_a_history(tmp_path: Path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\n")
    code, out = invoke("changes", str(junk), REGRESSION)
    assert code == 1 and out.startswith("Error:") and len(out.strip().splitlines()) == 1
    assert junk.read_text() == "hello\n"
