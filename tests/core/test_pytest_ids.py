"""pytest node ids recovered from pytest's own JUnit XML equal item.nodeid (xunit1 and xunit2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flaketui.core.ingest.junit import iter_cases
from flaketui.core.ingest.pytest_ids import pytest_node_id

SUITE_FILES = {
    "test_top.py": """
        import pytest

        def test_plain():
            pass

        @pytest.mark.parametrize("v", ["a.b", "x/y", "p::q", "a-b", "[x]", "T.Test"])
        def test_param(v):
            assert v != "x/y"
    """,
    "tests/test_mod.py": """
        import unittest
        import pytest

        class TestCls:
            def test_method(self):
                pass

            @pytest.mark.parametrize("a,b", [(1, 2), ("m.n", "o/p::r")])
            def test_x(self, a, b):
                pass

            class TestInner:
                @pytest.mark.parametrize("w", ["1.5", "s::t"])
                def test_deep(self, w):
                    pass

        class MyCase(unittest.TestCase):
            def test_unit(self):
                self.skipTest("not today")

        def test_module_level():
            raise RuntimeError("boom")
    """,
    "tests/pkg/sub/test_nested_dir.py": """
        class TestA:
            class TestB:
                def test_c(self):
                    pass

        def test_d():
            pass
    """,
    "tests/integration/checks_test.py": """
        class TestSuffix:
            def test_e(self):
                pass
    """,
    "conftest.py": """
        def pytest_collection_modifyitems(session, config, items):
            with open("nodeids.txt", "w") as out:
                out.write("\\n".join(item.nodeid for item in items))
    """,
}


def _run(pytester: pytest.Pytester, family: str) -> tuple[list[str], Path]:
    """Run the small suite with one junit family; return the collected node ids and the report."""
    for name, body in SUITE_FILES.items():
        target = pytester.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        lines = body.strip("\n").splitlines()
        indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
        target.write_text("\n".join(line[indent:] for line in lines) + "\n")
    report = pytester.path / f"junit-{family}.xml"
    result = pytester.runpytest(
        f"--junitxml={report}",
        "-o",
        f"junit_family={family}",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:textual-snapshot",
    )
    result.assert_outcomes(passed=14, failed=2, skipped=1)
    nodeids = (pytester.path / "nodeids.txt").read_text().splitlines()
    return nodeids, report


@pytest.mark.parametrize("family", ["xunit1", "xunit2"])
def test_ids_from_pytest_junit_equal_nodeids(pytester: pytest.Pytester, family: str) -> None:
    nodeids, report = _run(pytester, family)
    cases = list(iter_cases(report))
    assert [case.test_id for case in cases] == nodeids
    assert all(case.test_file == case.test_id.split("::")[0] for case in cases)
    by_id = {case.test_id: case.attempts for case in cases}
    assert by_id["tests/test_mod.py::test_module_level"][0].outcome == "fail"
    assert "boom" in (by_id["tests/test_mod.py::test_module_level"][0].message or "")
    assert by_id["tests/test_mod.py::MyCase::test_unit"][0].outcome == "skipped"
    assert by_id["test_top.py::test_param[x/y]"][0].outcome == "fail"
    assert by_id["test_top.py::test_plain"][0].outcome == "pass"


@pytest.mark.parametrize(
    ("classname", "name", "file", "expected"),
    [
        ("tests.test_mod.TestCls", "test_x[a-b]", None, "tests/test_mod.py::TestCls::test_x[a-b]"),
        ("tests.test_mod", "test_f[a.b/c::d]", None, "tests/test_mod.py::test_f[a.b/c::d]"),
        ("test_top", "test_a", None, "test_top.py::test_a"),
        ("a.b.checks_test.TestS", "test_e", None, "a/b/checks_test.py::TestS::test_e"),
        ("a.b.check.TestS.TestT", "test_e", None, "a/b/check.py::TestS::TestT::test_e"),
        ("test_utils.test_x.TestA", "test_y", None, "test_utils/test_x.py::TestA::test_y"),
        ("pkg.mod", "pkg.mod.func", None, "pkg/mod.py::pkg.mod.func"),
        ("t.v1.2.test_x", "test_y", "t/v1.2/test_x.py", "t/v1.2/test_x.py::test_y"),
        ("Tests.check.Cls", "test_y", "Tests/check.py", "Tests/check.py::Cls::test_y"),
        ("docs.x.txt", "x.txt", "docs/x.txt", "docs/x.txt::x.txt"),
        ("", "test 1", "test/test-1.py", "test/test-1.py::test 1"),
        ("t.test_w", "test_z", "t\\test_w.py", "t/test_w.py::test_z"),
    ],
)
def test_pytest_node_id_reverses_the_mangling(
    classname: str, name: str, file: str | None, expected: str
) -> None:
    assert pytest_node_id(classname, name, file)[0] == expected


def test_pytest_node_id_known_ambiguity_dotted_directory_without_file() -> None:
    # Documented: with xunit2 a dotted directory cannot be told from a package boundary.
    assert pytest_node_id("t.v1.2.test_x", "test_y", None)[0] == "t/v1/2/test_x.py::test_y"
