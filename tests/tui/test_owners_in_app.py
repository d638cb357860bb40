"""The app shows owners from the CODEOWNERS beside the history (the sample keeps it there)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from pilots import settle

from flaketui.cli.commands import cli
from flaketui.tui.app import FlaketuiApp, make_app
from flaketui.tui.widgets.flake_table import FlakeTable

SIZE = (160, 48)
SAMPLE_CODEOWNERS = Path(__file__).resolve().parents[2] / "sample_data" / "CODEOWNERS"


def _owners_shown(app: FlaketuiApp) -> list[str]:
    table = app.main_screen.query_one(FlakeTable)
    column = table.column_keys.index("owner")
    return [row.cells[column] for row in table.rows_by_key.values()]


async def _owners_of(app: FlaketuiApp) -> tuple[list[str], str]:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        header = str(app.main_screen.query_one("#header").render())
        return _owners_shown(app), header


@pytest.fixture
def sample_copy(sample_history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The sample history in a folder outside any git repository, run from that folder."""
    folder = tmp_path / "sample_data"
    folder.mkdir()
    shutil.copyfile(sample_history, folder / "history.db")
    monkeypatch.chdir(tmp_path)
    return folder / "history.db"


async def test_the_sample_shows_owners_from_the_codeowners_beside_it(
    sample_copy: Path, tmp_path: Path
) -> None:
    shutil.copyfile(SAMPLE_CODEOWNERS, sample_copy.parent / "CODEOWNERS")
    app = make_app(sample_copy, skip_file=tmp_path / "q.json", cursor_blink=False, watch=False)
    owners, header = await _owners_of(app)
    assert owners and all(owner.startswith("@") for owner in owners)
    assert "@acme/billing" in " ".join(owners)
    assert "owners: sample_data/CODEOWNERS" in header


async def test_without_codeowners_no_owner_is_invented(sample_copy: Path, tmp_path: Path) -> None:
    app = make_app(sample_copy, skip_file=tmp_path / "q.json", cursor_blink=False, watch=False)
    owners, header = await _owners_of(app)
    assert owners and set(owners) == {"—"}
    assert "no CODEOWNERS" in header


async def test_an_explicit_codeowners_file_is_used(sample_copy: Path, tmp_path: Path) -> None:
    shutil.copyfile(SAMPLE_CODEOWNERS, sample_copy.parent / "CODEOWNERS")
    explicit = tmp_path / "team-owners"
    explicit.write_text("* @the-one-team\n", encoding="utf-8")
    app = make_app(
        sample_copy,
        skip_file=tmp_path / "q.json",
        cursor_blink=False,
        watch=False,
        codeowners=explicit,
    )
    owners, _header = await _owners_of(app)
    assert set(owners) == {"@the-one-team"}


def test_open_passes_codeowners_and_refuses_a_missing_one(
    monkeypatch: pytest.MonkeyPatch, history: Path, tmp_path: Path
) -> None:
    started: list[FlaketuiApp] = []
    monkeypatch.setattr(FlaketuiApp, "run", lambda self: started.append(self))
    owners = tmp_path / "OWNERS"
    owners.write_text("* @x\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["open", str(history), "--codeowners", str(owners)])
    assert result.exit_code == 0, result.output
    assert started[0].source.owners_from == owners.absolute()
    missing = CliRunner().invoke(cli, ["open", str(history), "--codeowners", str(tmp_path / "no")])
    assert missing.exit_code == 1 and "does not exist" in missing.output
    assert not started[1:]


def test_open_refuses_a_codeowners_beside_the_history_that_is_not_utf8(
    monkeypatch: pytest.MonkeyPatch, history: Path, tmp_path: Path
) -> None:
    started: list[FlaketuiApp] = []
    monkeypatch.setattr(FlaketuiApp, "run", lambda self: started.append(self))
    monkeypatch.chdir(tmp_path)  # outside any git repository
    beside = history.parent / "CODEOWNERS"
    beside.write_bytes(b"* @x\n\xff\xfe")
    result = CliRunner().invoke(cli, ["open", str(history)])
    assert result.exit_code == 1, result.output
    assert result.output == (
        f"Error: {beside.absolute()}: not valid UTF-8 (byte 0xFF at offset 5); "
        "a CODEOWNERS file is UTF-8 text\n"
    )
    assert not started


def _report_owners(history: Path, *extra: str) -> set[str | None]:
    result = CliRunner().invoke(
        cli, ["report", str(history), "--format", "json", "--now", "2026-11-30T18:00:00Z", *extra]
    )
    assert result.exit_code == 0, result.output
    return {item["owner"] for item in json.loads(result.stdout)["tests"]}


def test_report_reads_codeowners_beside_the_history_or_the_given_file(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # outside any git repository
    assert _report_owners(history) == {None}
    (history.parent / "CODEOWNERS").write_text("* @beside\n", encoding="utf-8")
    assert _report_owners(history) == {"@beside"}
    explicit = tmp_path / "owners.txt"
    explicit.write_text("* @explicit\n", encoding="utf-8")
    assert _report_owners(history, "--codeowners", str(explicit)) == {"@explicit"}
