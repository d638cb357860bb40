"""The recording plugin reads the same `[tool.flaketui]` table as the commands: a bad value is
one usage error naming the setting, before a history is created."""

from __future__ import annotations

import pytest
from recording_helpers import PLUGIN_ARGS

pytestmark = pytest.mark.usefixtures("recording_env")


@pytest.mark.parametrize(
    ("line", "setting"),
    [
        ('mask_patterns = ["order-[a-z+"]', "mask_patterns"),
        ('suite_thresholds = { integration = "0.4" }', "suite_thresholds.integration"),
        ("exclude-proposed-outages = 1", "exclude_proposed_outages"),
    ],
)
def test_a_bad_setting_is_a_usage_error_before_recording(
    pytester: pytest.Pytester, line: str, setting: str
) -> None:
    pytester.makepyprojecttoml(f"[tool.flaketui]\n{line}\n")
    pytester.makepyfile("def test_pass():\n    pass\n")
    db = pytester.path / "history.db"
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--flaketui-db", str(db))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1, result.stderr.str()
    assert f"flaketui: [tool.flaketui] {setting}" in errors[0]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not db.exists()
