"""Every corpus report parses to its pinned counts or is refused with a one-line ReportError."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest

# tests/core is on sys.path (rootdir-less tests)
from corpus_table import CORPUS, CORPUS_ROOT, TEST_IDS

from flaketui.core.errors import ReportError
from flaketui.core.ingest.junit import iter_cases, report_timestamp
from flaketui.core.models import Attempt

pytestmark = pytest.mark.skipif(not CORPUS_ROOT.is_dir(), reason="JUnit corpus not available")


def test_table_covers_every_corpus_file() -> None:
    on_disk = {str(p.relative_to(CORPUS_ROOT)) for p in CORPUS_ROOT.rglob("*.xml")}
    assert on_disk == set(CORPUS)


@pytest.mark.parametrize("relative", sorted(CORPUS))
def test_corpus_file_matches_pinned_counts(relative: str) -> None:
    path = CORPUS_ROOT / relative
    expected = CORPUS[relative]
    if expected == "refused":
        with pytest.raises(ReportError) as excinfo:
            list(iter_cases(path))
        assert excinfo.value.message.startswith(f"{path}:")
        assert "\n" not in excinfo.value.message
        return
    merged: dict[str, list[Attempt]] = {}
    for case in iter_cases(path):
        merged.setdefault(case.test_id, []).extend(case.attempts)
    attempts = [attempt for test_attempts in merged.values() for attempt in test_attempts]
    outcomes = dict(Counter(attempt.outcome for attempt in attempts))
    assert (len(merged), len(attempts), outcomes) == expected
    report_timestamp(path)  # must not raise on a file that parses


def test_every_landing_file_has_pinned_ids() -> None:
    lands = {rel for rel, exp in CORPUS.items() if exp != "refused" and exp[0]}
    assert set(TEST_IDS) == lands


@pytest.mark.parametrize("relative", sorted(TEST_IDS))
def test_corpus_file_keeps_its_test_ids(relative: str) -> None:
    ids = sorted({case.test_id for case in iter_cases(CORPUS_ROOT / relative)})
    digest = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]
    assert digest == TEST_IDS[relative]


def test_jest_names_shared_by_files_get_the_file_prefix() -> None:
    ids = {c.test_id for c in iter_cases(CORPUS_ROOT / "jest-junit/jest-test-results-large.xml")}
    shared = {i for i in ids if i.endswith("::indent option::default implicit: 2 spaces")}
    assert shared == {
        f"packages/pretty-format/src/__tests__/{file}::indent option::default implicit: 2 spaces"
        for file in ("AsymmetricMatcher.test.ts", "Immutable.test.ts", "react.test.tsx")
    }


@pytest.mark.parametrize(
    ("relative", "iso"),
    [
        (
            "testng/TEST-org.apache.pulsar.AddMissingPatchVersionTest.xml",
            "2021-03-07T10:36:56+00:00",
        ),
        ("mocha/mocha-xunit-latex-utensils.xml", "2022-12-03T23:10:07+00:00"),
        ("gotestsum/junitxml-report.golden.xml", None),  # year 0001 only
        ("jest-junit/jest-suite-failed-to-run.xml", None),  # 1970 only
        ("jenkins-regression/junit-report-testsuite-various-timestamps.xml", None),
    ],
)
def test_corpus_timestamps(relative: str, iso: str | None) -> None:
    found = report_timestamp(CORPUS_ROOT / relative)
    if relative.endswith("various-timestamps.xml"):
        assert found is not None and found.year == 2024
    else:
        assert (found.isoformat() if found else None) == iso


def test_corpus_details() -> None:
    flaky = list(iter_cases(CORPUS_ROOT / "maven-surefire/TEST-io.olamy.FlakyTest.xml"))
    assert [a.outcome for a in flaky[0].attempts] == ["fail", "fail", "pass"]
    always = list(iter_cases(CORPUS_ROOT / "maven-surefire/TEST-io.olamy.AlwaysFailTest.xml"))
    assert [a.outcome for a in always[0].attempts] == ["fail"] * 4
    (ctest,) = iter_cases(CORPUS_ROOT / "ctest/ctest.xml")
    assert ctest.attempts[0].outcome == "fail"
    pytest_ids = [c.test_id for c in iter_cases(CORPUS_ROOT / "pytest/python-xunit-pytest.xml")]
    assert all(".py::" in test_id for test_id in pytest_ids)
