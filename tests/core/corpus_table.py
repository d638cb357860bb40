"""Pinned expectations for every file of /work/shared/junit-corpus (shared with the ingest tests).

Each entry maps a path relative to the corpus root to either ``"refused"`` (ingesting it must raise
ReportError) or ``(tests, attempts, outcomes)`` as the writer stores one report:

- ``tests``: distinct test ids after the writer merges repeats -- a ``<testcase>`` appearing N
  times in one report is ONE test whose attempts are the N cases' attempts in order;
- ``attempts``: all attempts of all tests: one per ``<testcase>``, plus one per
  ``flakyFailure``/``flakyError`` (failed attempts before the final one) and one per
  ``rerunFailure``/``rerunError`` (failed attempts after the first);
- ``outcomes``: attempts counted by outcome (``pass``/``fail``/``error``/``skipped``), zero counts
  left out. Several ``<failure>`` elements in one case are one attempt; ``<error>`` directly in a
  ``<testsuite>`` (no case) counts for nothing; suite-level counts are never used.

Pinned by reading each file (grep counts of testcase/failure/error/skipped/retry elements and
status attributes, cross-checked with an independent ElementTree count); notes say why where the
file's own summary disagrees.
"""

from __future__ import annotations

from pathlib import Path

CORPUS_ROOT = Path("/work/shared/junit-corpus")

Expected = tuple[int, int, dict[str, int]]

CORPUS: dict[str, str | Expected] = {
    "bazel/suite-logs.xml": (1, 1, {"error": 1}),
    # test_failure_assert: failure + 2 rerunFailure; test_flaky_mod_4: 3 flakyFailure then pass.
    "cargo-nextest/fixture-project-junit.xml": (3, 8, {"fail": 6, "pass": 2}),
    "cargo-nextest/setup-script-junit.xml": (1, 1, {"pass": 1}),
    # Two stress iterations (two suites) of the same two tests: 2 tests x 2 attempts.
    "cargo-nextest/stress-test-junit.xml": (2, 4, {"pass": 4}),
    "catch2/report.xml": (1, 1, {"fail": 1}),
    "container-structure-test/test.xml": (3, 3, {"pass": 3}),  # root says tests=8
    "ctest/ctest.xml": (1, 1, {"fail": 1}),
    "dotnet-junit-logger/TestResults.xml": (52, 52, {"fail": 14, "pass": 32, "skipped": 6}),
    "go-junit-report/013-build-failed.xml": (5, 5, {"error": 3, "pass": 2}),
    "go-junit-report/106-testmain.xml": (3, 3, {"error": 1, "pass": 2}),
    # FTInfoTests/happy_path_hnsw holds two <failure> elements: one failed attempt.
    "googletest/test_detail.xml": (9, 9, {"fail": 1, "pass": 8}),
    "gotestsum/junitxml-report-tc-with-attributes.golden.xml": (1, 1, {"pass": 1}),
    "gotestsum/junitxml-report.golden.xml": (60, 60, {"fail": 13, "pass": 42, "skipped": 5}),
    # TestWebSocketReconnectRace appears twice (fail, then pass on --rerun-fails).
    "gotestsum/rerun-fails-report.xml": (3, 4, {"fail": 1, "pass": 2, "skipped": 1}),
    "gradle/TEST-com.github.onozaty.junit.xml2csv.TestCase1.xml": (
        5,
        5,
        {"error": 1, "fail": 1, "pass": 2, "skipped": 1},
    ),
    "gradle/TEST-com.github.onozaty.junit.xml2csv.TestCase2.xml": (2, 2, {"fail": 1, "pass": 1}),
    "jasmine/jasmine-reporters-nested.xml": (3, 3, {"fail": 1, "pass": 1, "skipped": 1}),
    "jenkins-regression/junit-report-20090516.xml": (8, 8, {"error": 3, "pass": 5}),
    # DummyTest.testDummyMethod twice (tests=1): one test, two attempts.
    "jenkins-regression/junit-report-bad-duration.xml": (1, 2, {"pass": 2}),
    # The suite-level <error> in test.3rdlevel has no testcase: ignored.
    "jenkins-regression/junit-report-nested-testsuites.xml": (2, 2, {"pass": 2}),
    "jenkins-regression/junit-report-testsuite-time-attrs.xml": (8, 8, {"pass": 8}),
    "jenkins-regression/junit-report-testsuite-various-timestamps.xml": (12, 12, {"pass": 12}),
    "jenkins-regression/testXxe-xxe.xml": "refused",  # DOCTYPE with external entity
    "jest-junit/jest-junit-empty.xml": (0, 0, {}),
    "jest-junit/jest-junit.xml": (6, 6, {"fail": 4, "pass": 1, "skipped": 1}),
    "jest-junit/jest-suite-failed-to-run.xml": (2, 2, {"error": 2}),
    # 4239 cases; classname="" cases are scoped by their suite (file); 257 repeats remain
    # (it.each-style same names within one file), merged as attempts.
    "jest-junit/jest-test-results-large.xml": (
        3982,
        4239,
        {"fail": 2, "pass": 4207, "skipped": 30},
    ),
    "karma/karma-failures.xml": (12, 12, {"fail": 2, "pass": 10}),
    # "..browser-test::should log ngOnInit" three times (different parentSuites=, non-standard).
    "karma/karma-odd-attributes.xml": (8, 10, {"pass": 10}),
    "maven-surefire/TEST-action.surefire.report.email.EmailAddressTest.xml": (
        9,
        9,
        {"error": 5, "fail": 2, "pass": 2},
    ),
    # failure + 3 rerunFailure; the suite says tests=4 for one testcase.
    "maven-surefire/TEST-io.olamy.AlwaysFailTest.xml": (1, 4, {"fail": 4}),
    # 2 flakyFailure then the passing run.
    "maven-surefire/TEST-io.olamy.FlakyTest.xml": (1, 3, {"fail": 2, "pass": 1}),
    "maven-surefire/TEST-pro.taskana.common.api.ListUtilTest-H2.xml": (1, 1, {"fail": 1}),
    # 5 cases: 2 failures, 2 cases each with one flakyFailure before passing, 1 plain pass.
    "maven-surefire/TEST-test.MyIntegrationTestSuite.xml": (5, 7, {"fail": 4, "pass": 3}),
    "maven-surefire/junit5-failing-in-beforeall.xml": (1, 1, {"fail": 1}),  # name=""
    "mocha/mocha-junit-reporter.xml": (1, 1, {"pass": 1}),  # root says tests=15515
    # 109 cases, 8 repeats of classname+name (duplicate titles in the project).
    "mocha/mocha-xunit-latex-utensils.xml": (101, 109, {"pass": 109}),
    "nette-tester/tester-v1.7-report.xml": (65, 65, {"fail": 1, "pass": 61, "skipped": 3}),
    "odd/empty.xml": "refused",  # zero bytes
    # Accepted: whitespace before the XML declaration is tolerated.
    "odd/leading-newline-before-declaration.xml": (1, 1, {"fail": 1}),
    "odd/non-xml.xml": "refused",
    "odd/testrun-root.xml": (7, 7, {"pass": 7}),
    "odd/unsupported-unicode.xml": (7, 7, {"error": 2, "fail": 2, "pass": 1, "skipped": 2}),
    "phpunit/phpcheckstyle-phpunit.xml": (30, 30, {"fail": 2, "pass": 28}),
    "phpunit/phpunit-empty.xml": (0, 0, {}),
    "phpunit/phpunit.xml": (12, 12, {"fail": 2, "pass": 10}),
    "playwright/playwright-results.xml": (2, 2, {"fail": 1, "pass": 1}),
    "pytest/corrupt-xml.xml": "refused",  # truncated mid-document
    "pytest/junit.fail.xml": (5, 5, {"fail": 1, "pass": 3, "skipped": 1}),
    "pytest/pytest-binary-names.xml": (1, 1, {"pass": 1}),  # tests=3121, trimmed to one case
    "pytest/python-xunit-pytest.xml": (10, 10, {"fail": 2, "pass": 6, "skipped": 2}),
    "robot/xunit.xml": (5, 5, {"pass": 5}),
    "rspec/rspec.xml": (386, 386, {"fail": 1, "pass": 384, "skipped": 1}),
    # testVersionStrings twice: skipped, then failed.
    "testng/TEST-org.apache.pulsar.AddMissingPatchVersionTest.xml": (
        1,
        2,
        {"fail": 1, "skipped": 1},
    ),
    # status='passed' x6, 'failed' x19 (with <failure>), 'errored' x1, 'disabled' x5 (skipped).
    "tst/disabled.xml": (31, 31, {"error": 1, "fail": 19, "pass": 6, "skipped": 5}),
    "unittest-xml-reporting/junit-jenkins-stdout.xml": (1, 1, {"fail": 1}),
    "unittest-xml-reporting/python-xunit-unittest.xml": (
        8,
        8,
        {"error": 1, "fail": 1, "pass": 4, "skipped": 2},
    ),
    "vitest/vitest-junit.xml": (2, 2, {"fail": 1, "pass": 1}),
    "web-test-runner/expectedRetries.xml": "refused",  # time="<<computed>>" is not well-formed
    "xunit-dotnet/xunit.xml": (2, 2, {"pass": 2}),
}
