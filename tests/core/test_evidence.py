"""The counted-runs SQL and the staged aggregation against a plain Python reference."""

from __future__ import annotations

import tempfile
import types
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flaketui.core.config import Config
from flaketui.core.rollups.evidence import counted_runs_cte
from flaketui.core.scoring.aggregates import per_test_evidence
from flaketui.core.scoring.report import build_report
from flaketui.core.scoring.statistics import flip_count
from tests.connections import open_history
from tests.core.history_builder import PATTERN_ATTEMPTS, HistoryBuilder, run_outcome, utc

T0 = utc(2026, 10, 1)
NOW = utc(2026, 11, 1)

run_spec = st.tuples(st.sampled_from(["main", "pr"]), st.sampled_from("PFERXS"), st.booleans())


def _reference(runs: list[tuple[str, str, bool]]) -> dict[str, Any]:
    """What the SQL must find for one test, from its (branch, letter, edited) runs in order."""
    counted = [
        (branch, run_outcome(PATTERN_ATTEMPTS[letter]))
        for branch, letter, edited in runs
        if letter != "S" and not edited
    ]
    bad = [b for _branch, (_o, b) in counted]
    failed_any = [o != "pass" for _branch, (o, _b) in counted]
    main = [(o, b) for branch, (o, b) in counted if branch == "main"]
    streak = 0
    for _o, b in reversed(main):
        if not b:
            break
        streak += 1
    clean_tail = 0
    for failed in reversed(failed_any):
        if failed:
            break
        clean_tail += 1
    main_bad = [b for _o, b in main]
    return {
        "runs": len(counted),
        "failed_runs": sum(bad),
        "flaky_runs": sum(o == "flaky" for _branch, (o, _b) in counted),
        "flips": flip_count([bool(b) for b in bad]),
        "clean_tail": clean_tail,
        "main_runs": len(main),
        "main_bad": sum(main_bad),
        "main_flips": flip_count([bool(b) for b in main_bad]),
        "streak": streak,
        "streak_flaky": sum(o == "flaky" for o, _b in main[len(main) - streak :]),
    }


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(run_spec, min_size=1, max_size=14), min_size=1, max_size=3))
def test_staged_evidence_matches_a_python_reference(histories: list[list[Any]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        db = open_history(Path(folder) / "h.db")
        hb = HistoryBuilder(db)
        for index, runs in enumerate(histories):
            test_id = f"tests/test_t.py::test_{index}"
            for position, (branch, letter, edited) in enumerate(runs):
                changed = ["tests/test_t.py"] if edited else []
                hb.run(
                    ts=T0 + timedelta(hours=position), branch_kind=branch, changed_files=changed
                ).result(test_id, PATTERN_ATTEMPTS[letter])
        evidence = per_test_evidence(db, NOW, Config())
        ids = dict(db.conn.execute("SELECT test_id, id FROM tests"))
        for index, runs in enumerate(histories):
            expected = _reference(runs)
            pk = ids[f"tests/test_t.py::test_{index}"]
            if expected["runs"] == 0:
                assert pk not in evidence
                continue
            got = evidence[pk]
            assert {key: getattr(got, key) for key in expected} == expected
        db.conn.close()


def test_counted_runs_exclude_skipped_edited_incident_and_out_of_window(tmp_path: Path) -> None:
    db = open_history(tmp_path / "h.db")
    hb = HistoryBuilder(db)
    test = "tests/test_w.py::test_w"
    hb.run(ts=T0).result(test, ["pass"])
    hb.run(ts=T0 + timedelta(hours=1)).result(test, ["skipped"])
    hb.run(ts=T0 + timedelta(hours=2), changed_files=["tests/test_w.py"]).result(test, ["fail"])
    hb.run(ts=T0 + timedelta(hours=3), incident="outage").result(test, ["fail"])
    hb.run(ts=NOW - timedelta(days=90)).result(test, ["fail"])  # window is (now - 90 d, now]
    hb.run(ts=NOW + timedelta(hours=1)).result(test, ["fail"])  # after now
    hb.run(ts=NOW).result(test, ["fail", "pass"])
    cte, params = counted_runs_cte(NOW, Config())
    rows = db.conn.execute(f"WITH {cte} SELECT ts, outcome FROM counted ORDER BY ts", params)
    assert rows.fetchall() == [("2026-10-01T00:00:00Z", "pass"), ("2026-11-01T00:00:00Z", "flaky")]
    cte, params = counted_runs_cte(NOW, Config(), test_ids=[test], branch_kind="pr")
    assert db.conn.execute(f"WITH {cte} SELECT count(*) FROM counted", params).fetchone() == (0,)


class _CountingConnection:
    """A connection proxy counting the rows Python receives."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.rows = 0

    def execute(self, sql: str, params: Any = ()) -> Any:
        cursor = self.conn.execute(sql, params)
        proxy = self

        class _Cursor:
            description = cursor.description

            def __iter__(self) -> Any:
                for row in cursor:
                    proxy.rows += 1
                    yield row

            def fetchone(self) -> Any:
                proxy.rows += 1
                return cursor.fetchone()

            def fetchall(self) -> list[Any]:
                rows = cursor.fetchall()
                proxy.rows += len(rows)
                return rows

        return _Cursor()

    def create_function(self, *args: Any, **kwargs: Any) -> None:
        self.conn.create_function(*args, **kwargs)


def _counted_report_rows(path: Path, runs_per_day: int) -> tuple[int, int]:
    """(rows the report reads into Python, test-runs stored) for 20 days of 12 param tests."""
    db = open_history(path)
    hb = HistoryBuilder(db)
    tests = [f"tests/test_many.py::test_{n}[{p}]" for n in range(6) for p in "ab"]
    for step in range(20 * runs_per_day):
        run = hb.run(ts=T0 + timedelta(hours=24 / runs_per_day * step))
        for number, test in enumerate(tests):
            run.result(test, ["fail", "pass"] if (step + number) % 20 == 0 else ["pass"])
    stored = db.conn.execute("SELECT count(*) FROM test_runs").fetchone()[0]
    counting = _CountingConnection(db.conn)
    report = build_report(types.SimpleNamespace(conn=counting), now=NOW)  # type: ignore[arg-type]
    assert len(report.tests) == len(tests)
    return counting.rows, stored


def test_scoring_never_loads_the_history_into_python(tmp_path: Path) -> None:
    """Rows per test and group (and the series' per-day sums), never one per stored run: the
    same 20 days with three times the runs read about the same number of rows."""
    rows, stored = _counted_report_rows(tmp_path / "a.db", runs_per_day=3)
    rows_x3, stored_x3 = _counted_report_rows(tmp_path / "b.db", runs_per_day=9)
    assert (stored, stored_x3) == (720, 2160)
    assert rows_x3 < stored_x3 / 4
    assert rows_x3 <= rows * 1.15


def test_section_4_rules_hand_computed(tmp_path: Path) -> None:
    # Main runs, in order: P(c1) E(c1) S(c2) F(c3) P(c3) R(c4).
    db = open_history(tmp_path / "h.db")
    hb = HistoryBuilder(db)
    test = "tests/test_s.py::test_s"
    hb.sequence(test, "PESFPR", start=T0, commits=["c1", "c1", "c2", "c3", "c3", "c4"])
    (ev,) = per_test_evidence(db, NOW, Config()).values()
    # The skip is not a run: 5 counted runs. An error is a failure: E, F and R (first attempt
    # failed) are bad; only R passed on retry.
    assert (ev.runs, ev.failed_runs, ev.flaky_runs) == (5, 3, 1)
    # Flips over P E F P R: P->E, F->P, P->R = 3 (a skip between E and F flips nothing).
    assert ev.flips == 3 and ev.main_flips == 3
    # Same commit with a good and a bad run: c1 (P, E) and c3 (F, P).
    assert ev.mixed_commits == 2
    # Bad stretches on main: E F, then R; the trailing streak is R alone, and it is flaky.
    assert (ev.main_bad_streaks, ev.main_recoveries) == (2, 1)
    assert (ev.streak, ev.streak_flaky, ev.good_rn) == (1, 1, 4)
    assert ev.clean_tail == 0
    assert ev.first_bad_commit == "c4" and ev.last_good_commit == "c3"
