"""The State column marks a lifecycle state that `flaketui lifecycle --apply` has not written."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from types import SimpleNamespace

from click.testing import CliRunner
from tui_history import NOW

from flaketui.cli import cli
from flaketui.core.lifecycle_machine import LIFECYCLE, Transition
from flaketui.tui.loaders import PENDING_MARK, load_extras, load_main, shown_states
from flaketui.tui.startup import make_source


def _move(test_id: str, after: str, *, by: str = LIFECYCLE, recorded: bool = False) -> Transition:
    moment = datetime(2026, 11, 1, 23, 59, 59)
    return Transition(test_id, "watching", after, date(2026, 11, 1), moment, "r", by, recorded)


def test_only_a_state_reached_by_an_unwritten_lifecycle_move_is_marked() -> None:
    states = {
        name: SimpleNamespace(state=state)
        for name, state in [
            ("pending", "quarantined"),
            ("written", "quarantined"),
            ("by_hand", "quarantined"),
            ("moved_on", "fix_or_delete"),
            ("untracked", "none"),
        ]
    }
    transitions = [
        _move("pending", "quarantined"),
        _move("written", "quarantined", recorded=True),
        _move("by_hand", "quarantined", by="alice"),
        _move("moved_on", "quarantined"),
        _move("moved_on", "fix_or_delete", recorded=True),
    ]
    assert shown_states(states, transitions) == {
        "pending": "quarantined" + PENDING_MARK,
        "written": "quarantined",
        "by_hand": "quarantined",
        "moved_on": "fix_or_delete",
    }


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
