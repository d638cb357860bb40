"""JUnit test identity: a name shared by different files is different tests; a retry is not."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flaketui.core.ingest import junit
from flaketui.core.ingest.junit import iter_cases
from flaketui.core.models import CaseResult


def _ids(tmp_path: Path, content: str, name: str = "report.xml") -> list[str]:
    return [case.test_id for case in _cases(tmp_path, content, name)]


def _cases(tmp_path: Path, content: str, name: str = "report.xml") -> list[CaseResult]:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    return list(iter_cases(path))


def _suite(name: str, *cases: str, attrs: str = "") -> str:
    return f'<testsuite name="{name}"{attrs}>{"".join(cases)}</testsuite>'


def _case(classname: str, name: str, *, failed: bool = False, attrs: str = "") -> str:
    body = '<failure message="boom">Error: boom</failure>' if failed else ""
    return f'<testcase classname="{classname}" name="{name}"{attrs}>{body}</testcase>'


def test_jest_files_sharing_a_test_name_are_two_tests(tmp_path: Path) -> None:
    report = (
        "<testsuites>"
        + _suite("src/a.test.js", _case("parser empty", "parser empty", failed=True))
        + _suite("src/b.test.js", _case("parser empty", "parser empty"), _case("b only", "b"))
        + "</testsuites>"
    )
    cases = _cases(tmp_path, report)
    assert [(c.test_id, [a.outcome for a in c.attempts]) for c in cases] == [
        ("src/a.test.js::parser empty::parser empty", ["fail"]),
        ("src/b.test.js::parser empty::parser empty", ["pass"]),
        ("b only::b", ["pass"]),  # unambiguous: the id it always had
    ]
    assert [c.test_file for c in cases] == [None, None, None]


def test_a_file_attribute_on_the_case_or_the_suite_tells_files_apart(tmp_path: Path) -> None:
    by_case = _ids(
        tmp_path,
        "<testsuites>"
        + _suite("Specs", _case("Login", "works", attrs=' file="spec/a_spec.rb"'))
        + _suite("Specs", _case("Login", "works", attrs=' file="spec/b_spec.rb"'))
        + "</testsuites>",
    )
    assert by_case == ["spec/a_spec.rb::Login::works", "spec/b_spec.rb::Login::works"]
    by_suite = _ids(
        tmp_path,
        "<testsuites>"
        + _suite("Config", _case("Config", "loads"), attrs=' file="/p/test/a.js"')
        + _suite("Config", _case("Config", "loads"), attrs=' file="/p/test/b.js"')
        + "</testsuites>",
    )
    assert by_suite == ["/p/test/a.js::Config::loads", "/p/test/b.js::Config::loads"]


def test_playwright_suite_named_after_a_file_without_a_slash(tmp_path: Path) -> None:
    ids = _ids(
        tmp_path,
        "<testsuites>"
        + _suite("login.spec.ts", _case("login", "works"))
        + _suite("signup.spec.ts", _case("login", "works"))
        + "</testsuites>",
    )
    assert ids == ["login.spec.ts::login::works", "signup.spec.ts::login::works"]


def test_a_rerun_within_one_file_stays_attempts_of_one_test(tmp_path: Path) -> None:
    # Repeated in the same suite, or in another suite of the same file: one test, two attempts.
    ids = _ids(
        tmp_path,
        "<testsuites>"
        + _suite("src/a.test.js", _case("t", "t", failed=True), _case("t", "t"))
        + _suite("src/a.test.js", _case("t", "t"))
        + "</testsuites>",
    )
    assert ids == ["t::t", "t::t", "t::t"]


def test_suites_that_name_no_file_still_merge_repeats(tmp_path: Path) -> None:
    # nextest stress iterations and karma browsers: suite names that are not paths.
    ids = _ids(
        tmp_path,
        "<testsuites>"
        + _suite("nextest-filtering::match@stress-0", _case("nextest-filtering::match", "x"))
        + _suite("nextest-filtering::match@stress-1", _case("nextest-filtering::match", "x"))
        + _suite("com.example.FooTest", _case("Foo", "y"))
        + _suite("com.example.BarTest", _case("Foo", "y"))
        + "</testsuites>",
    )
    assert ids == ["nextest-filtering::match::x"] * 2 + ["Foo::y"] * 2


def test_one_known_file_and_an_unknown_one_stay_one_test(tmp_path: Path) -> None:
    ids = _ids(
        tmp_path,
        "<testsuites>"
        + _suite("src/a.test.js", _case("t", "t"))
        + _suite("Unnamed browser", _case("t", "t"))
        + "</testsuites>",
    )
    assert ids == ["t::t", "t::t"]


def test_pytest_ids_keep_their_own_file(tmp_path: Path) -> None:
    ids = _ids(
        tmp_path,
        "<testsuites>"
        + _suite("pytest", _case("tests.test_a", "test_x", failed=True))
        + _suite("pytest", _case("tests.test_a", "test_x"))
        + "</testsuites>",
    )
    assert ids == ["tests/test_a.py::test_x"] * 2


def test_a_clash_found_late_renames_cases_read_chunks_earlier(tmp_path: Path) -> None:
    filler = "".join(_case("f", f"filler {i}") for i in range(junit.CHUNK_BYTES // 40))
    ids = _ids(
        tmp_path,
        "<testsuites>"
        + _suite("src/a.test.js", _case("t", "t"), filler)
        + _suite("src/b.test.js", _case("t", "t"))
        + "</testsuites>",
    )
    assert ids[0] == "src/a.test.js::t::t"
    assert ids[-1] == "src/b.test.js::t::t"
    assert ids[1] == "f::filler 0"


_FILES = st.sampled_from(["src/a.test.js", "src/b.test.js", "lib/c.spec.ts"])
_NAMES = st.sampled_from(["renders", "parses", "loads"])


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(suites=st.lists(st.tuples(_FILES, st.lists(_NAMES, min_size=1, max_size=4)), max_size=6))
def test_same_test_exactly_when_same_file_and_name(
    tmp_path: Path, suites: list[tuple[str, list[str]]]
) -> None:
    report = (
        "<testsuites>"
        + "".join(_suite(file, *(_case("d", name) for name in names)) for file, names in suites)
        + "</testsuites>"
    )
    ids = _ids(tmp_path, report)
    keys = [(file, name) for file, names in suites for name in names]
    assert len(ids) == len(keys)
    for (file, name), test_id in zip(keys, ids, strict=True):
        files_of_name = {f for f, n in keys if n == name}
        expected = f"d::{name}" if len(files_of_name) == 1 else f"{file}::d::{name}"
        assert test_id == expected
    # Two cases share an id exactly when they share a file and a name.
    for i, key in enumerate(keys):
        for j, other in enumerate(keys):
            assert (ids[i] == ids[j]) == (key == other)


_BLOCKS = st.sampled_from(["About", "App", "Home"])


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cases=st.lists(st.tuples(_BLOCKS, _NAMES), min_size=1, max_size=8),
    browsers=st.integers(1, 2),
)
def test_karma_describe_blocks_sharing_a_test_name_are_different_tests(
    tmp_path: Path, cases: list[tuple[str, str]], browsers: int
) -> None:
    """karma names no file, only each case's describe block (parentSuites): a name two blocks
    share is two tests, prefixed with their blocks; a name one block has keeps its plain id,
    and its repeats (another browser's suite) stay attempts of one test."""
    suites = "".join(
        _suite(
            f"Chrome {n}",
            *(
                _case("..browser-test", name, attrs=f' parentSuites="{block}"')
                for block, name in cases
            ),
        )
        for n in range(browsers)
    )
    ids = _ids(tmp_path, f"<testsuites>{suites}</testsuites>")
    for (block, name), test_id in zip(cases * browsers, ids, strict=True):
        shared = len({b for b, n in cases if n == name}) > 1
        plain = f"..browser-test::{name}"
        assert test_id == (f"{block}::{plain}" if shared else plain)


def test_karma_corpus_blocks_are_three_tests(tmp_path: Path) -> None:
    suite = _suite(
        "Chrome 55.0.2883 (Windows 8.1 0.0.0)",
        *(
            _case("..browser-test", "should log ngOnInit", attrs=f' parentSuites="{block}"')
            for block in ("About", "App", "Home")
        ),
        _case("..browser-test", "should have http", attrs=' parentSuites="Title"'),
    )
    assert _ids(tmp_path, f"<testsuites>{suite}</testsuites>") == [
        "About::..browser-test::should log ngOnInit",
        "App::..browser-test::should log ngOnInit",
        "Home::..browser-test::should log ngOnInit",
        "..browser-test::should have http",
    ]
