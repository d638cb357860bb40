"""The plugin and pytest's own JUnit XML (both families) name every test the same way."""

from __future__ import annotations

from pathlib import Path

import pytest
from recording_helpers import PLUGIN_ARGS, query

from flaketui.core.ingest.junit import iter_cases

pytestmark = pytest.mark.usefixtures("recording_env")

ID_SUITE = """
import pytest

def test_module_level():
    pass

@pytest.mark.parametrize("value", [1, 2, 3], ids=["with-dash", "with.dot", "with/slash"])
def test_explicit_ids(value):
    pass

@pytest.mark.parametrize("text", ["a b", "x-y.z/w v", "1.5"])
def test_generated_ids(text):
    pass

@pytest.mark.parametrize("a, b", [(1, "p q")])
def test_two_params(a, b):
    pass

class TestOuter:
    def test_method(self):
        pass

    @pytest.mark.parametrize("n", [0], ids=["in class.with-dots/and slash"])
    def test_param_method(self, n):
        pass

    class TestInner:
        def test_nested(self):
            pass

        @pytest.mark.parametrize("n", [7], ids=["deep-id.v2/x y"])
        def test_nested_param(self, n):
            assert n == 7
"""

EXPECTED_IDS = {
    "pkg/test_ids.py::test_module_level",
    "pkg/test_ids.py::test_explicit_ids[with-dash]",
    "pkg/test_ids.py::test_explicit_ids[with.dot]",
    "pkg/test_ids.py::test_explicit_ids[with/slash]",
    "pkg/test_ids.py::test_generated_ids[a b]",
    "pkg/test_ids.py::test_generated_ids[x-y.z/w v]",
    "pkg/test_ids.py::test_generated_ids[1.5]",
    "pkg/test_ids.py::test_two_params[1-p q]",
    "pkg/test_ids.py::TestOuter::test_method",
    "pkg/test_ids.py::TestOuter::test_param_method[in class.with-dots/and slash]",
    "pkg/test_ids.py::TestOuter::TestInner::test_nested",
    "pkg/test_ids.py::TestOuter::TestInner::test_nested_param[deep-id.v2/x y]",
}


@pytest.mark.parametrize("family", ["xunit1", "xunit2"])
def test_plugin_and_junit_ids_agree(pytester: pytest.Pytester, family: str) -> None:
    (pytester.path / "pkg").mkdir()
    (pytester.path / "pkg" / "test_ids.py").write_text(ID_SUITE)
    db = pytester.path / "history.db"
    xml = pytester.path / f"{family}.xml"
    result = pytester.runpytest(
        *PLUGIN_ARGS,
        "--flaketui-db",
        str(db),
        f"--junitxml={xml}",
        "-o",
        f"junit_family={family}",
    )
    result.assert_outcomes(passed=len(EXPECTED_IDS))
    recorded = {str(row[0]) for row in query(db, "SELECT test_id FROM tests")}
    assert recorded == EXPECTED_IDS
    from_junit = {case.test_id for case in iter_cases(Path(xml))}
    assert from_junit == recorded
