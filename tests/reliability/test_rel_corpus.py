"""Every file of the shared JUnit corpus, ingested one after another into ONE history through the
CLI: each lands whole or is refused with one line naming it; nothing ingested before is lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import Result
from reliability_support import (
    assert_one_line_error,
    integrity,
    invoke,
    run_counts,
    run_fingerprints,
    snapshot,
)

from flaketui.core.errors import ReportError
from flaketui.core.ingest.junit import iter_cases

# ../shared/junit-corpus beside the repository, as the issue names it (else where it lives here).
CORPUS_ROOT = Path(__file__).resolve().parents[3] / "shared" / "junit-corpus"
if not CORPUS_ROOT.is_dir():
    CORPUS_ROOT = Path("/work/shared/junit-corpus")
CORPUS_FILES = sorted(CORPUS_ROOT.rglob("*.xml")) if CORPUS_ROOT.is_dir() else []

pytestmark = pytest.mark.skipif(not CORPUS_FILES, reason="JUnit corpus not available")


def _attempts(path: Path) -> int | None:
    """Attempts the parser yields for path, or None when it refuses the file."""
    try:
        return sum(len(case.attempts) for case in iter_cases(path))
    except ReportError:
        return None


def _ingest(db: Path, report: Path, number: int) -> Result:
    result = invoke(
        "ingest", db, report, "--no-detect", "--run-id", f"corpus-{number}",
        "--suite", "corpus", "--timestamp", f"2026-10-01T{number // 60:02d}:{number % 60:02d}:00Z",
    )  # fmt: skip
    assert "Traceback" not in result.output
    return result


def test_every_corpus_file_lands_or_is_refused_and_earlier_data_survives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no pyproject.toml, no git repository
    db = tmp_path / "history.db"
    landed: dict[int, int] = {}
    refused: list[str] = []
    empty: list[str] = []
    for number, report in enumerate(CORPUS_FILES):
        expected = _attempts(report)
        # A full snapshot where a refusal is expected, per-run fingerprints elsewhere (fast).
        before = snapshot(db) if db.exists() and expected is None else None
        earlier = run_fingerprints(db) if db.exists() else {}
        result = _ingest(db, report, number)
        output = result.output
        if result.exit_code != 0:
            assert_one_line_error(result, str(report))
            assert expected is None, f"{report} parses but the ingest refused it: {output}"
            if before is not None:
                assert snapshot(db) == before, f"refusing {report} changed the history"
            else:
                assert not db.exists(), "a refused first file must not create the history"
            refused.append(str(report.relative_to(CORPUS_ROOT)))
            continue
        assert output.count("\n") == 1, output
        assert expected is not None
        after = run_fingerprints(db)
        assert {k: after[k] for k in earlier} == earlier, f"{report} changed earlier runs"
        counts = run_counts(db, f"corpus-{number}")
        if expected == 0:
            assert counts is None and "no test cases" in output
            empty.append(str(report.relative_to(CORPUS_ROOT)))
        else:
            assert counts is not None and counts[0] == expected, (report, counts, expected)
            landed[number] = expected
    print(
        f"corpus: {len(CORPUS_FILES)} files tried, {len(landed)} landed, {len(empty)} hold no test"
        f" case, {len(refused)} refused in one line: {refused}"
    )
    assert len(landed) + len(empty) + len(refused) == len(CORPUS_FILES)
    assert integrity(db) == ("ok", [])
    assert len(landed) >= len(CORPUS_FILES) // 2
    # Ingesting every landed file again changes nothing.
    before = snapshot(db)
    for number in landed:
        result = _ingest(db, CORPUS_FILES[number], number)
        assert result.exit_code == 0, result.output
        assert "0 files ingested, 1 already ingested" in result.output
    assert snapshot(db) == before
