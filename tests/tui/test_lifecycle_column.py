"""The State column marks a lifecycle state that `flaketui lifecycle --apply` has not written."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from tui_history import NOW

from flaketui.cli import cli
from flaketui.tui.loaders import PENDING_MARK, load_extras, load_main
from flaketui.tui.startup import make_source


def test_applying_the_lifecycle_removes_the_mark(history: Path, tmp_path: Path) -> None:
    db = history  # the fixture's own copy, in tmp_path
    skip = tmp_path / "q.json"

    def states() -> dict[str, str]:
        source = make_source(db, NOW, skip)
        return load_extras(source, load_main(source, suite=None, branch_kind=None)).lifecycle

    before = states()
    marked = {t: s for t, s in before.items() if s.endswith(PENDING_MARK)}
    assert marked, before
    now = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    result = CliRunner().invoke(
        cli, ["lifecycle", str(db), "--now", now, "--apply", "--skip-file", str(skip)]
    )
    assert result.exit_code in (0, 4), result.output  # 4: the gate names a new regression
    after = states()
    assert {t: after[t] for t in marked} == {t: s.rstrip(PENDING_MARK) for t, s in marked.items()}
