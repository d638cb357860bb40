"""The ranking kept from the last opening: shown first, marked, replaced by the new one."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from tui_history import NOW

from flaketui.core.config import Config
from flaketui.core.scoring.results import Report
from flaketui.core.scoring.stored import report_from_data, report_to_data
from flaketui.tui.app import FlaketuiApp
from flaketui.tui.loaders import load_main
from flaketui.tui.ranking_store import keep_ranking, load_ranking, ranking_file
from flaketui.tui.startup import StagedRead, make_source

SAFETY_S = 60


def _complete(history: Path, tmp_path: Path) -> Report:
    source = make_source(history, NOW, tmp_path / "q.json")
    return load_main(source, suite=None, branch_kind=None).report


def test_a_report_survives_the_round_trip_through_json(history: Path, tmp_path: Path) -> None:
    report = _complete(history, tmp_path)
    assert report.families and report.tests
    again = report_from_data(json.loads(json.dumps(report_to_data(report))))
    assert again == report


@pytest.mark.parametrize("broken", ["layout", "now", "tests", "scores"])
def test_data_of_another_layout_is_refused(history_report: Report, broken: str) -> None:
    data = report_to_data(history_report)
    if broken == "layout":
        data["layout"] = 0
    elif broken == "now":
        del data["now"]
    elif broken == "tests":
        data["tests"] = [{"test_id": "x"}]
    else:
        data["tests"][0]["scores"] = [1, 2]
    with pytest.raises(ValueError, match="layout"):
        report_from_data(data)


@pytest.fixture
def history_report(history: Path, tmp_path_factory: pytest.TempPathFactory) -> Report:
    return _complete(history, tmp_path_factory.mktemp("report"))


def test_the_first_opening_keeps_its_ranking_and_the_next_shows_it_first(
    history: Path, tmp_path: Path
) -> None:
    source = make_source(history, NOW, tmp_path / "q.json")
    first_opening = StagedRead(source, kept=True)
    assert not first_opening.first().provisional  # nothing kept yet: the live ranking
    complete = first_opening.complete()
    first_opening.extras()
    first_opening.thread.join(SAFETY_S)
    assert load_ranking(source) == complete

    second = StagedRead(source, kept=True)
    shown = second.first()
    assert shown.provisional and shown.groups_loaded
    assert shown.report == complete
    assert second.complete() == complete  # the new ranking is still read, and replaces it
    second.stop()


def test_a_kept_ranking_made_otherwise_is_not_shown(history: Path, tmp_path: Path) -> None:
    source = make_source(history, NOW, tmp_path / "q.json")
    keep_ranking(source, _complete(history, tmp_path))
    assert load_ranking(source) is not None
    for other in (
        make_source(history, NOW + timedelta(days=1), tmp_path / "q.json"),
        make_source(history, None, tmp_path / "q.json"),
        make_source(history, NOW, tmp_path / "q.json", config=Config(window_days=30)),
    ):
        assert ranking_file(other) == ranking_file(source)
        assert load_ranking(other) is None
        read = StagedRead(other, kept=True)
        assert not read.first().provisional
        read.stop()


@pytest.mark.parametrize("content", [b"", b"{", b"[]", b'{"identity": 1}', b"\xff\xfe"])
def test_an_unreadable_kept_ranking_is_not_used(
    history: Path, tmp_path: Path, content: bytes
) -> None:
    source = make_source(history, NOW, tmp_path / "q.json")
    target = ranking_file(source)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    assert load_ranking(source) is None
    read = StagedRead(source, kept=True)
    assert not read.first().provisional
    read.stop()


def test_an_unwritable_cache_loses_only_the_copy(history: Path, tmp_path: Path) -> None:
    source = make_source(history, NOW, tmp_path / "q.json")
    target = ranking_file(source)
    target.parent.parent.mkdir(parents=True, exist_ok=True)
    target.parent.write_text("a file where the folder should be")
    keep_ranking(source, _complete(history, tmp_path))  # no error
    assert load_ranking(source) is None


async def test_the_app_marks_the_kept_ranking_until_the_new_one_is_in(
    history: Path, tmp_path: Path
) -> None:
    source = make_source(history, NOW, tmp_path / "q.json")
    complete = _complete(history, tmp_path)
    # A kept ranking whose order differs from the new one: the top two tests swapped.
    tests = list(complete.tests)
    tests[0], tests[1] = replace(tests[1], rank=1), replace(tests[0], rank=2)
    keep_ranking(source, replace(complete, tests=tests))
    read = StagedRead(source, kept=True)
    assert read.first().provisional
    app = FlaketuiApp(source, watch=False, first_read=read)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = app.main_screen
        deadline = time.monotonic() + SAFETY_S
        while screen.data is None and time.monotonic() < deadline:
            await pilot.pause()
        # First the kept ranking, marked, in its own order...
        assert screen.data.provisional
        assert "refreshing" in str(screen.query_one("#header").render())
        assert [t.test_id for t in screen.data.report.tests][:2] == [
            complete.tests[1].test_id,
            complete.tests[0].test_id,
        ]
        # ...then the new one, unmarked, in the order the history gives now.
        while screen.data.provisional and time.monotonic() < deadline:
            await pilot.pause()
        assert "refreshing" not in str(screen.query_one("#header").render())
        assert [t.test_id for t in screen.data.report.tests] == [t.test_id for t in complete.tests]
