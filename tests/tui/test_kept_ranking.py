"""The ranking kept from the last opening: shown first, marked, replaced by the new one."""

from __future__ import annotations

import dataclasses
import gc
import json
import threading
import weakref
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pilots import SAFETY_S, until
from tui_history import NOW

from flaketui.core.config import Config
from flaketui.core.scoring.results import Report, Suspect
from flaketui.core.scoring.stored import (
    FIELDS,
    GROUP_LISTS,
    PLAIN_FIELDS,
    flaky_report,
    read_flaky,
    read_head,
    report_from_lines,
    report_lines,
)
from flaketui.tui import startup
from flaketui.tui.app import FlaketuiApp
from flaketui.tui.loaders import MainData, Source, history_stamp, load_in_stages, load_main
from flaketui.tui.messages import ExtrasLoaded
from flaketui.tui.ranking_store import (
    KeptRanking,
    OpenedRanking,
    keep_ranking,
    load_ranking,
    open_ranking,
    ranking_file,
)
from flaketui.tui.startup import StagedRead, make_source
from flaketui.tui.viewmodel import ViewState, verdict_counts
from flaketui.tui.widgets.flake_table import PreparedRows
from flaketui.tui.widgets.viewtabs import ViewTabs


def _complete(history: Path, tmp_path: Path) -> Report:
    source = make_source(history, NOW, tmp_path / "q.json")
    return load_main(source, suite=None, branch_kind=None).report


def _round_trip(lines: list[str]) -> Report:
    return report_from_lines(read_head(lines[0]), iter(lines[1:]))


def test_every_field_of_a_report_is_kept() -> None:
    names = {field.name for field in dataclasses.fields(Report)}
    assert names == {"now", "tests", *PLAIN_FIELDS, *GROUP_LISTS}


def test_a_report_survives_the_round_trip_through_json(history: Path, tmp_path: Path) -> None:
    report = _complete(history, tmp_path)
    assert report.families and report.tests
    suspect = Suspect("runner_host", "ci-7", 5, 9, 0.56, 2, 80, 0.03, 0.001, 0.0002, "host ci-7")
    report.tests[0] = replace(report.tests[0], causes=(suspect,))
    if not report.cofailures:  # the group lists each come back in their place
        report.cofailures = [replace(report.families[0], key="cofail-1")]
    report.no_default_branch_runs = True  # and the notices, off by default
    lines = list(report_lines(report, {"identity": "x"}))
    groups = len(report.families) + len(report.signatures) + len(report.cofailures)
    assert len(lines) == 1 + len(report.tests) + groups
    assert read_head(lines[0])["identity"] == "x"
    assert _round_trip(lines) == report


def test_a_handled_message_lets_the_data_it_replaced_go(history_report: Report) -> None:
    """The message loop keeps the last message it handled until the next one: the kept
    ranking it replaced must not live on in it while the new ranking's later steps are read."""
    before = MainData(history_report, {}, [], [], ())
    after = replace(before, report=replace(history_report, tests=[]), extras_loaded=True)
    message = ExtrasLoaded(before, after, ViewState(), PreparedRows([], []))
    assert message.follows(before) and not message.follows(after)
    gone = weakref.ref(before)
    del before
    gc.collect()
    assert gone() is None and not message.follows(after) and message.data is after


def test_a_kept_report_holds_no_list_per_test_for_the_collector(history_report: Report) -> None:
    """Read back, a test's flags and suspects are tuples, as the scorer makes them: a kept
    ranking shown while the new one is made adds no list per test to every full collection."""
    flagged = replace(history_report.tests[0], flags=("resolved", "suspected"))
    report = replace(history_report, tests=[flagged, *history_report.tests[1:]])
    back = _round_trip(list(report_lines(report, {})))
    gc.collect()
    items = [*back.tests, *back.families, *back.signatures]
    assert any(item.flags for item in items)
    assert not any(gc.is_tracked(item.flags) for item in items)
    assert not any(gc.is_tracked(item.causes) for item in items if not item.causes)


@pytest.mark.parametrize(
    "broken", ["layout", "fields", "now", "sizes", "a test", "scores", "short row", "too few"]
)
def test_lines_of_another_layout_are_refused(history_report: Report, broken: str) -> None:
    lines = list(report_lines(history_report, {}))
    head = json.loads(lines[0])
    test = json.loads(lines[1])
    if broken == "layout":
        head["layout"] = 0
    elif broken == "fields":  # a row of another dataclass's fields
        head["fields"]["test"] = head["fields"]["test"][::-1]
    elif broken == "now":
        del head["now"]
    elif broken == "sizes":
        head["sizes"] = {"tests": 1}
    elif broken == "a test":
        lines[1] = json.dumps({"test_id": "x"})
    elif broken == "scores":
        test[FIELDS["test"].index("scores")] = [1, 2]
        lines[1] = json.dumps(test)
    elif broken == "short row":
        lines[1] = json.dumps(test[:3])
    else:
        lines = lines[:-1]
    lines[0] = json.dumps(head)
    with pytest.raises(ValueError, match="layout"):
        _round_trip(lines)


@pytest.fixture
def history_report(history: Path, tmp_path_factory: pytest.TempPathFactory) -> Report:
    return _complete(history, tmp_path_factory.mktemp("report"))


def test_the_first_opening_keeps_its_ranking_and_the_next_shows_it_first(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    causes_wanted = threading.Event()

    def held(source: Source, apart: Any = None) -> Iterator[object]:
        """load_in_stages, its last step (the causes) held until the test asks for it."""
        stages = load_in_stages(source, apart)
        for step, value in enumerate(stages):
            if step == 3:
                causes_wanted.wait(SAFETY_S)
            yield value

    monkeypatch.setattr(startup, "load_in_stages", held)
    source = make_source(history, NOW, tmp_path / "q.json")
    first_opening = StagedRead(source, kept=True)
    assert not first_opening.first().provisional  # nothing kept yet: the live ranking
    without_causes = first_opening.complete()
    # Kept once the app has shown it, when it asks for the next step: an app quit soon after
    # keeps it (and one quit at once too: see the next test)...
    first_opening.extras()
    assert load_ranking(source) == KeptRanking(without_causes, with_causes=False)
    # ...and again once its likely causes are in and shown (the app then stops the read).
    causes_wanted.set()
    complete = first_opening.causes()
    first_opening.stop()
    first_opening.thread.join(SAFETY_S)
    assert load_ranking(source) == KeptRanking(complete, with_causes=True)

    second = StagedRead(source, kept=True)
    shown = second.first()
    # First its flaky tests, the list's first view, with the whole report's verdict counts...
    flaky = [t for t in complete.tests if t.verdict == "flaky"]
    assert flaky and len(flaky) < len(complete.tests)
    assert shown.provisional and shown.causes_loaded and not shown.groups_loaded
    assert shown.report.tests == flaky and shown.report.families == []
    assert verdict_counts(shown.report, shown.verdicts) == verdict_counts(complete)
    # ...then the whole of it.
    assert second.kept_rest() == KeptRanking(complete, with_causes=True)
    # The new ranking is still read, and replaces it; its causes come last again.
    assert second.complete() == without_causes
    assert second.causes() == complete
    second.stop()


def test_an_app_quit_once_the_complete_report_is_in_still_keeps_it(
    history: Path, tmp_path: Path
) -> None:
    source = make_source(history, NOW, tmp_path / "q.json")
    read = StagedRead(source, kept=True)
    complete = read.complete()
    read.stop()  # what quitting does; the next step is never asked for
    read.thread.join(SAFETY_S)
    assert load_ranking(source) == KeptRanking(complete, with_causes=False)


def test_a_kept_ranking_made_otherwise_is_not_shown(history: Path, tmp_path: Path) -> None:
    source = make_source(history, NOW, tmp_path / "q.json")
    keep_ranking(source, _complete(history, tmp_path), with_causes=False)
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


@pytest.mark.parametrize(
    "content",
    [b"", b"{", b"[]", b'{"identity": 1}', b"\xff\xfe", b'{"layout": 1}\n{'],
)
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
    keep_ranking(source, _complete(history, tmp_path), with_causes=False)  # no error
    assert load_ranking(source) is None


async def test_the_app_marks_the_kept_ranking_until_the_new_one_is_in(
    history: Path, tmp_path: Path
) -> None:
    source = make_source(history, NOW, tmp_path / "q.json")
    complete = _complete(history, tmp_path)
    # A kept ranking whose order differs from the new one: the top two tests swapped.
    tests = list(complete.tests)
    tests[0], tests[1] = replace(tests[1], rank=1), replace(tests[0], rank=2)
    keep_ranking(source, replace(complete, tests=tests), with_causes=False)
    read = StagedRead(source, kept=True)
    assert read.first().provisional
    app = FlaketuiApp(source, watch=False, first_read=read)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = app.main_screen
        await until(pilot, lambda: screen.data is not None)
        # First the kept ranking, marked, in its own order...
        assert screen.data.provisional
        assert app.last_stamp is None  # it arms no watch: the new read's stamp does
        assert "refreshing" in str(screen.query_one("#header").render())
        assert [t.test_id for t in screen.data.report.tests][:2] == [
            complete.tests[1].test_id,
            complete.tests[0].test_id,
        ]
        # ...then the new one, unmarked, in the order the history gives now.
        await until(pilot, lambda: not screen.data.provisional)
        assert "refreshing" not in str(screen.query_one("#header").render())
        assert [t.test_id for t in screen.data.report.tests] == [t.test_id for t in complete.tests]
        assert app.last_stamp == history_stamp(history)


def test_the_flaky_tests_are_read_alone_and_the_rest_goes_on_from_them(
    history_report: Report,
) -> None:
    lines = list(report_lines(history_report, {}))
    flaky = [t for t in history_report.tests if t.verdict == "flaky"]
    assert flaky and len(flaky) < len(history_report.tests)
    head = read_head(lines[0])
    rest = iter(lines[1:])
    assert read_flaky(head, rest) == flaky
    # Read no further than the flaky tests: the next line is the first other test.
    following = next(rest)
    assert json.loads(following)[0] == history_report.tests[len(flaky)].test_id
    first = flaky_report(head, flaky)
    assert first.tests == flaky and first.families == [] and first.now == history_report.now
    assert report_from_lines(head, iter(lines[1 + len(flaky) :]), leading=flaky) == history_report


def test_a_kept_ranking_not_listing_its_flaky_tests_first_is_not_used(
    history: Path, tmp_path: Path
) -> None:
    source = make_source(history, NOW, tmp_path / "q.json")
    complete = _complete(history, tmp_path)
    keep_ranking(source, replace(complete, tests=complete.tests[::-1]), with_causes=False)
    assert open_ranking(source) is None and load_ranking(source) is None


@pytest.mark.parametrize("counts", [{"flaky": "5"}, {"flaky": -1}, {"flaky": 10**6}, []])
def test_wrong_verdict_counts_are_refused(history_report: Report, counts: object) -> None:
    lines = list(report_lines(history_report, {}))
    head = json.loads(lines[0])
    head["verdicts"] = counts
    with pytest.raises(ValueError, match="layout"):
        read_flaky(read_head(json.dumps(head)), iter(lines[1:]))


def _report_alive(tests: list[Any]) -> bool:
    """Whether a report of this very list of tests is still in memory."""
    gc.collect()
    return any(isinstance(o, Report) and o.tests is tests for o in gc.get_objects())


def test_the_staged_read_hands_its_steps_over_and_keeps_none(history: Path, tmp_path: Path) -> None:
    read = StagedRead(make_source(history, NOW, tmp_path / "q.json"))
    first = read.first().report.tests
    complete = read.complete().tests
    read.extras()
    last = read.causes().tests
    read.thread.join(SAFETY_S)
    # The app holds what it shows; a reader holding every step too would double it.
    assert not any(_report_alive(tests) for tests in (first, complete, last))


async def test_the_first_screen_of_a_kept_ranking_is_drawn_from_its_flaky_tests_alone(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = make_source(history, NOW, tmp_path / "q.json")
    complete = _complete(history, tmp_path)
    keep_ranking(source, complete, with_causes=False)
    released = threading.Event()
    rest = OpenedRanking.rest

    def held(self: OpenedRanking) -> KeptRanking | None:
        assert released.wait(SAFETY_S)
        return rest(self)

    monkeypatch.setattr(OpenedRanking, "rest", held)
    ranked = threading.Event()

    def stages(source: Source, apart: Any = None) -> Iterator[object]:
        """load_in_stages, its complete report held until the test has seen the kept one."""
        for step, value in enumerate(load_in_stages(source, apart)):
            if step == 1:
                assert ranked.wait(SAFETY_S)
            yield value

    monkeypatch.setattr(startup, "load_in_stages", stages)
    read = StagedRead(source, kept=True)
    app = FlaketuiApp(source, watch=False, first_read=read)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = app.main_screen
        await until(pilot, lambda: screen.data is not None)
        await pilot.pause()
        assert screen.data.provisional and not screen.data.groups_loaded
        first_view = screen.data.report
        assert len(first_view.tests) < len(complete.tests)
        tabs = screen.query_one(ViewTabs)
        assert tabs.note == "⏳ reading ranking, groups, states, causes…"
        tabs.note = ""  # the screens are compared without it: the groups are in below
        await pilot.pause()
        first_screen = app.export_screenshot()
        first_tests = first_view.tests
        del first_view
        released.set()
        await until(pilot, lambda: screen.data.report.tests is not first_tests)
        await pilot.pause()
        # The whole kept ranking draws the same screen: the same rows, widths and counts.
        assert screen.data.provisional and screen.data.report == complete
        assert tabs.note == "⏳ reading ranking, states, causes…"
        tabs.note = ""
        await pilot.pause()
        assert app.export_screenshot() == first_screen
        ranked.set()
        await until(pilot, lambda: not screen.data.provisional)
        await until(pilot, lambda: screen.data.causes_loaded)
        # The first screen's report is let go of, as the messages that carried it are.
        assert not _report_alive(first_tests)
