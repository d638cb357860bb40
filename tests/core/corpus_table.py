"""Pinned expectations for every file of /work/shared/junit-corpus (shared with the ingest tests).

Each entry of CORPUS maps a path relative to the corpus root to either ``"refused"`` (ingesting
it must raise ReportError) or ``(tests, attempts, outcomes)`` as the writer stores one report:

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
    # 4239 cases; classname="" cases are scoped by their suite (file). 156 names recur in
    # several files: each file's is its own test, its id prefixed with the file (316 ids).
    # 97 repeats remain within one file (it.each-style same names), merged as attempts.
    "jest-junit/jest-test-results-large.xml": (
        4142,
        4239,
        {"fail": 2, "pass": 4207, "skipped": 30},
    ),
    "karma/karma-failures.xml": (12, 12, {"fail": 2, "pass": 10}),
    # "..browser-test::should log ngOnInit" three times (different parentSuites=, non-standard).
    "karma/karma-odd-attributes.xml": (10, 10, {"pass": 10}),
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


# sha256 (first 16 hex digits) of the sorted distinct test ids of each file that lands, joined
# with newlines: any change in how a producer's tests are named changes its digest. Every digest
# but jest-test-results-large.xml's equals the one from before file-qualified ids existed.
TEST_IDS: dict[str, str] = {
    "bazel/suite-logs.xml": "6f79d3c7a743aba7",
    "cargo-nextest/fixture-project-junit.xml": "e56751442d0fa308",
    "cargo-nextest/setup-script-junit.xml": "f1a514f0b7268053",
    "cargo-nextest/stress-test-junit.xml": "e5a5450b52056f2f",
    "catch2/report.xml": "e5517772cd7f48ea",
    "container-structure-test/test.xml": "d0586c8e0ed49a72",
    "ctest/ctest.xml": "77e79e94b56a0a05",
    "dotnet-junit-logger/TestResults.xml": "b56eae03b2a4f13b",
    "go-junit-report/013-build-failed.xml": "a765db0ff57f7d4a",
    "go-junit-report/106-testmain.xml": "733956b68fec796e",
    "googletest/test_detail.xml": "f1d6c17cfed7917a",
    "gotestsum/junitxml-report-tc-with-attributes.golden.xml": "06f2443fcf83a593",
    "gotestsum/junitxml-report.golden.xml": "5a7fbb4d93a2c6f5",
    "gotestsum/rerun-fails-report.xml": "95b74150a66c2217",
    "gradle/TEST-com.github.onozaty.junit.xml2csv.TestCase1.xml": "74ea368d3f5bf2c5",
    "gradle/TEST-com.github.onozaty.junit.xml2csv.TestCase2.xml": "7dbf9cfb1b5d8a81",
    "jasmine/jasmine-reporters-nested.xml": "88574d5f4745c30a",
    "jenkins-regression/junit-report-20090516.xml": "0f192384f3fbbf9b",
    "jenkins-regression/junit-report-bad-duration.xml": "2d8b8978bb91923b",
    "jenkins-regression/junit-report-nested-testsuites.xml": "fc640581da9b49e7",
    "jenkins-regression/junit-report-testsuite-time-attrs.xml": "d7e6545799dc222e",
    "jenkins-regression/junit-report-testsuite-various-timestamps.xml": "c14cc11f9bb1cd5e",
    "jest-junit/jest-junit.xml": "dca70b36a886adbf",
    "jest-junit/jest-suite-failed-to-run.xml": "889094e69fc19998",
    "jest-junit/jest-test-results-large.xml": "f394a55815562ab7",
    "karma/karma-failures.xml": "3c66b0bd91e615f5",
    "karma/karma-odd-attributes.xml": "1c8f80c91984f5bb",
    "maven-surefire/TEST-action.surefire.report.email.EmailAddressTest.xml": "d5411bbe027c2291",
    "maven-surefire/TEST-io.olamy.AlwaysFailTest.xml": "22878e2ee2bc8a78",
    "maven-surefire/TEST-io.olamy.FlakyTest.xml": "818cc7de37897254",
    "maven-surefire/TEST-pro.taskana.common.api.ListUtilTest-H2.xml": "a96035e95d559232",
    "maven-surefire/TEST-test.MyIntegrationTestSuite.xml": "7d9e7367074490f4",
    "maven-surefire/junit5-failing-in-beforeall.xml": "936ed2128d34d633",
    "mocha/mocha-junit-reporter.xml": "2eebd7b0c09073b7",
    "mocha/mocha-xunit-latex-utensils.xml": "0b86ab8e1b9f0cb5",
    "nette-tester/tester-v1.7-report.xml": "e7b8593ba48d3703",
    "odd/leading-newline-before-declaration.xml": "76827edcd16870fc",
    "odd/testrun-root.xml": "145c1c07f30472cc",
    "odd/unsupported-unicode.xml": "11fcd7d6139c0dd7",
    "phpunit/phpcheckstyle-phpunit.xml": "2974eb33b4c6768c",
    "phpunit/phpunit.xml": "40e75fb52c704c7a",
    "playwright/playwright-results.xml": "5125b0a9c6b0e2ad",
    "pytest/junit.fail.xml": "0a3f0d159bfa0b35",
    "pytest/pytest-binary-names.xml": "c441337839b94f97",
    "pytest/python-xunit-pytest.xml": "ac266ad0ddb6cd20",
    "robot/xunit.xml": "0faff81d43fba13b",
    "rspec/rspec.xml": "79372333eeb02be9",
    "testng/TEST-org.apache.pulsar.AddMissingPatchVersionTest.xml": "ec0458fb29954dd9",
    "tst/disabled.xml": "16d7e12ba6384703",
    "unittest-xml-reporting/junit-jenkins-stdout.xml": "a21db5fddedb2453",
    "unittest-xml-reporting/python-xunit-unittest.xml": "0e2b50f8aca60572",
    "vitest/vitest-junit.xml": "92dc68b85698b734",
    "xunit-dotnet/xunit.xml": "a4040f4f1a4080c4",
}
