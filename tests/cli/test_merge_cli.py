"""`flaketui merge` through click's CliRunner."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from flaketui.cli.commands import cli


def ingest(db: Path, report: Path, run_id: str) -> None:
    result = CliRunner().invoke(
        cli, ["ingest", str(db), str(report), "--run-id", run_id, "--no-detect"]
    )
    assert result.exit_code == 0, result.output


def merge(*paths: Path) -> Result:
    return CliRunner().invoke(cli, ["merge", *map(str, paths)])


def dump(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


@pytest.fixture
def sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    monkeypatch.chdir(tmp_path)
    paths = []
    for n in range(2):
        report = tmp_path / f"r{n}.xml"
        report.write_text(
            f'<testsuite><testcase classname="m.C" name="t{n}"/>'
            f'<testcase classname="m.C" name="shared"><failure message="E {n}"/></testcase>'
            "</testsuite>"
        )
        ingest(tmp_path / f"job{n}.db", report, f"run-{n}")
        paths.append(tmp_path / f"job{n}.db")
    return paths


def test_merge_gathers_histories_and_is_idempotent(tmp_path: Path, sources: list[Path]) -> None:
    desk = tmp_path / "desk.db"
    first = merge(desk, *sources)
    assert first.exit_code == 0, first.output
    assert "2 runs added" in first.output and first.output.count("\n") == 1
    once = dump(desk)
    second = merge(desk, *sources)
    assert second.exit_code == 0 and "0 runs added" in second.output
    assert dump(desk) == once
    conn = sqlite3.connect(desk)
    assert conn.execute("SELECT count(*) FROM tests").fetchone() == (3,)
    assert conn.execute("SELECT count(*) FROM signatures").fetchone() == (1,)


@pytest.mark.parametrize("kind", ["missing", "not-sqlite", "directory", "self"])
def test_bad_source_is_one_line_and_changes_nothing(
    tmp_path: Path, sources: list[Path], kind: str
) -> None:
    desk = tmp_path / "desk.db"
    assert merge(desk, sources[0]).exit_code == 0
    before = dump(desk)
    bad = {"missing": tmp_path / "gone.db", "not-sqlite": tmp_path / "r0.xml",
           "directory": tmp_path, "self": desk}[kind]  # fmt: skip
    result = merge(desk, sources[1], bad)
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and result.output.count("\n") == 1
    assert dump(desk) == before


def test_bad_source_does_not_create_dest(tmp_path: Path, sources: list[Path]) -> None:
    result = merge(tmp_path / "new.db", tmp_path / "gone.db")
    assert result.exit_code == 1
    assert not (tmp_path / "new.db").exists()
