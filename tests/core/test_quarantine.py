"""Quarantine and release: skip-file entries, family expansion, scores and the audit log."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
import sqlite_utils

from flaketui.core.config import Config
from flaketui.core.errors import SkipFileError
from flaketui.core.history import store
from flaketui.core.quarantine import actions as quarantine_mod
from flaketui.core.quarantine.actions import QuarantineError, current_user, quarantine, release
from flaketui.core.quarantine.skipfile import SCORE_KEYS, read_skip_file, round_scores
from flaketui.core.scoring.report import build_report
from flaketui.core.timeutil import to_iso
from tests.child_processes import child_context
from tests.connections import open_history
from tests.core.history_builder import HistoryBuilder, utc

T0 = utc(2026, 2, 1)
NOW = utc(2026, 3, 1, 12)
FLAKY = "tests/test_a.py::test_a"
FAMILY = "tests/test_f.py::test_f"
PARAMS = [f"{FAMILY}[1]", f"{FAMILY}[2]", f"{FAMILY}[3]"]
STEADY = "tests/test_f.py::test_f_slow"  # shares the family's prefix, not its parent
CONFIG = Config()


@pytest.fixture
def history(tmp_path: Path) -> sqlite_utils.Database:
    db = open_history(tmp_path / "history.db")
    hb = HistoryBuilder(db)
    hb.sequence(FLAKY, "PRPPRPPPRPPRPPPRPPPP", start=T0, step=timedelta(hours=12))
    for index in range(20):
        run = hb.run(ts=T0 + timedelta(hours=12 * index))
        for param in PARAMS:
            run.result(param, ["fail", "pass"] if index % 5 == 0 else ["pass"])
        run.result(STEADY, ["pass"])
    return db


@pytest.fixture
def skip_path(tmp_path: Path) -> Path:
    return tmp_path / ".quarantine.json"


def audit_rows(db: sqlite_utils.Database) -> list[dict[str, object]]:
    return [dict(row) for row in db.query("SELECT * FROM audit_log ORDER BY id")]


def test_quarantine_writes_entry_with_scores_and_an_audit_row(
    history: sqlite_utils.Database, skip_path: Path
) -> None:
    done = quarantine(
        history,
        skip_path,
        FLAKY,
        reason="  flaky on main  ",
        ticket="https://example.org/1",
        now=NOW,
        who="Ann <ann@example.org>",
        config=CONFIG,
    )
    expected = next(
        t for t in build_report(history, now=NOW, config=CONFIG).tests if t.test_id == FLAKY
    )
    expected_scores = round_scores({k: getattr(expected.scores, k) for k in SCORE_KEYS})
    assert expected_scores["runs"] == 20
    assert [e.test_id for e in done.entries] == [FLAKY]
    assert (done.replaced, done.listed) == ({}, 1)
    skip = read_skip_file(skip_path, explicit=True)
    assert skip is not None
    entry = skip.entries[FLAKY]
    assert (entry.mode, entry.reason, entry.ticket, entry.added_by) == (
        "skip",
        "flaky on main",
        "https://example.org/1",
        "flaketui",
    )
    assert entry.quarantined_at == NOW
    assert entry.expires == NOW + timedelta(days=30)
    assert entry.scores == expected_scores
    assert entry.signature == expected.signature
    (row,) = audit_rows(history)
    assert row["action"] == "quarantine"
    assert row["who"] == "Ann <ann@example.org>"
    assert row["ts"] == to_iso(NOW)
    assert (row["test_id"], row["mode"], row["reason"], row["ticket"], row["source"]) == (
        FLAKY,
        "skip",
        "flaky on main",
        "https://example.org/1",
        "cli",
    )
    assert json.loads(str(row["scores"])) == expected_scores


def test_family_parent_expands_to_every_param_full_id(
    history: sqlite_utils.Database, skip_path: Path
) -> None:
    done = quarantine(
        history, skip_path, FAMILY, reason="fixture leak", mode="run", expires_days=7,
        now=NOW, who="x", source="app", config=CONFIG,
    )  # fmt: skip
    assert [e.test_id for e in done.entries] == PARAMS
    skip = read_skip_file(skip_path, explicit=True)
    assert skip is not None
    assert sorted(skip.entries) == PARAMS  # never the parent, never test_f_slow
    assert {e.mode for e in skip.entries.values()} == {"run"}
    assert {e.expires for e in skip.entries.values()} == {NOW + timedelta(days=7)}
    assert all(e.scores["runs"] == 20 for e in skip.entries.values())
    assert [(r["test_id"], r["source"]) for r in audit_rows(history)] == [
        (p, "app") for p in PARAMS
    ]


def test_scores_come_from_one_report(
    history: sqlite_utils.Database, skip_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[object] = []
    real = quarantine_mod.evidence_for

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(quarantine_mod, "evidence_for", counting)
    quarantine(history, skip_path, FAMILY, reason="r", now=NOW, who="x", config=CONFIG)
    assert len(calls) == 1


def test_unknown_test_is_refused_unless_forced(
    history: sqlite_utils.Database, skip_path: Path
) -> None:
    with pytest.raises(QuarantineError, match=r"no test or family named 'tests/nope\.py::t'"):
        quarantine(
            history, skip_path, "tests/nope.py::t", reason="r", now=NOW, who="x", config=CONFIG
        )
    assert not skip_path.exists()
    assert audit_rows(history) == []
    (entry,) = quarantine(
        history, skip_path, "tests/nope.py::t", reason="r", now=NOW, who="x", config=CONFIG,
        force=True,
    ).entries  # fmt: skip
    assert (entry.test_id, entry.scores, entry.owner) == ("tests/nope.py::t", {}, None)


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"mode": "maybe"}, "mode must be"),
        ({"reason": "  "}, "a reason is required"),
        ({"expires_days": 0}, "number of days from 1 to 3650"),
        ({"source": "robot"}, "unknown source"),
    ],
)
def test_bad_values_are_refused(
    history: sqlite_utils.Database, skip_path: Path, kwargs: dict[str, object], problem: str
) -> None:
    args: dict[str, object] = {"reason": "r", "now": NOW, "who": "x", "config": CONFIG}
    args.update(kwargs)
    with pytest.raises(QuarantineError, match=problem):
        quarantine(history, skip_path, FLAKY, **args)  # type: ignore[arg-type]
    assert not skip_path.exists()


def test_requarantine_is_refused_unless_replacing(
    history: sqlite_utils.Database, skip_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    quarantine(history, skip_path, FLAKY, reason="first", now=NOW, who="x", config=CONFIG)
    before = skip_path.read_bytes()
    scored: list[object] = []
    monkeypatch.setattr(quarantine_mod, "evidence_for", lambda *a, **k: scored.append(a))
    with pytest.raises(
        QuarantineError,
        match=r"'tests/test_a\.py::test_a' is already quarantined in .* \(skip, until "
        r"2026-03-31T12:00:00Z, reason 'first'\); --update replaces its entry",
    ):
        quarantine(history, skip_path, FLAKY, reason="second", now=NOW, who="x", config=CONFIG)
    assert scored == []  # refused before scoring
    assert skip_path.read_bytes() == before
    assert [r["reason"] for r in audit_rows(history)] == ["first"]


def test_a_family_with_a_quarantined_param_is_refused_unless_replacing(
    history: sqlite_utils.Database, skip_path: Path
) -> None:
    quarantine(history, skip_path, PARAMS[1], reason="one", now=NOW, who="x", config=CONFIG)
    with pytest.raises(QuarantineError, match=r"1 of the 3 params of .* is already quarantined"):
        quarantine(history, skip_path, FAMILY, reason="all", now=NOW, who="x", config=CONFIG)
    done = quarantine(
        history, skip_path, FAMILY, reason="all", now=NOW, who="x", config=CONFIG, replace=True
    )
    assert [e.test_id for e in done.entries] == PARAMS
    assert [(t, e.reason) for t, e in done.replaced.items()] == [(PARAMS[1], "one")]
    assert done.listed == 3


def test_requarantine_updates_but_keeps_the_original_date(
    history: sqlite_utils.Database, skip_path: Path
) -> None:
    quarantine(history, skip_path, FLAKY, reason="first", now=NOW, who="x", config=CONFIG)
    later = NOW + timedelta(days=3)
    done = quarantine(
        history, skip_path, FLAKY, reason="second", mode="run", now=later, who="x",
        config=CONFIG, replace=True,
    )  # fmt: skip
    assert [(t, e.reason, e.mode) for t, e in done.replaced.items()] == [(FLAKY, "first", "skip")]
    skip = read_skip_file(skip_path, explicit=True)
    assert skip is not None
    entry = skip.entries[FLAKY]
    assert (entry.reason, entry.mode, entry.quarantined_at) == ("second", "run", NOW)
    assert entry.expires == later + timedelta(days=30)
    assert [r["reason"] for r in audit_rows(history)] == ["first", "second"]


def test_release_restores_the_file_and_audits(
    history: sqlite_utils.Database, skip_path: Path
) -> None:
    quarantine(history, skip_path, FAMILY, reason="r", now=NOW, who="x", config=CONFIG)
    before = skip_path.read_bytes()
    quarantine(history, skip_path, FLAKY, reason="r", now=NOW, who="x", config=CONFIG)
    released = release(history, skip_path, FLAKY, reason="fixed in #12", now=NOW, who="Bo")
    assert released == [FLAKY]
    assert skip_path.read_bytes() == before
    row = audit_rows(history)[-1]
    assert (row["action"], row["test_id"], row["reason"], row["who"]) == (
        "release", FLAKY, "fixed in #12", "Bo",
    )  # fmt: skip


def test_release_of_a_family_parent_removes_every_param(
    history: sqlite_utils.Database, skip_path: Path
) -> None:
    quarantine(history, skip_path, FAMILY, reason="r", now=NOW, who="x", config=CONFIG)
    quarantine(history, skip_path, STEADY, reason="r", now=NOW, who="x", config=CONFIG)
    assert release(history, skip_path, FAMILY, now=NOW, who="x") == PARAMS
    skip = read_skip_file(skip_path, explicit=True)
    assert skip is not None
    assert sorted(skip.entries) == [STEADY]


def test_releasing_what_is_not_quarantined_is_an_error(
    history: sqlite_utils.Database, skip_path: Path
) -> None:
    with pytest.raises(QuarantineError, match="is not quarantined"):
        release(history, skip_path, FLAKY, now=NOW, who="x")
    assert not skip_path.exists()
    quarantine(history, skip_path, STEADY, reason="r", now=NOW, who="x", config=CONFIG)
    before = skip_path.read_bytes()
    with pytest.raises(QuarantineError, match="is not quarantined"):
        release(history, skip_path, FLAKY, now=NOW, who="x")
    assert skip_path.read_bytes() == before
    assert [r["action"] for r in audit_rows(history)] == ["quarantine"]


def test_a_skip_file_that_cannot_be_written_leaves_no_audit_row(
    history: sqlite_utils.Database, skip_path: Path
) -> None:
    skip_path.write_text('{"something": "else"}', encoding="utf-8")
    with pytest.raises(SkipFileError, match="not a flaketui skip file"):
        quarantine(history, skip_path, FLAKY, reason="r", now=NOW, who="x", config=CONFIG)
    assert audit_rows(history) == []
    assert skip_path.read_text(encoding="utf-8") == '{"something": "else"}'


def test_current_user_prefers_git_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text("[user]\n\tname = Ann Lee\n\temail = ann@example.org\n", encoding="utf-8")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.chdir(tmp_path)
    assert current_user() == "Ann Lee <ann@example.org>"
    gitconfig.write_text("", encoding="utf-8")
    monkeypatch.setenv("LOGNAME", "login-name")
    monkeypatch.setenv("USER", "login-name")
    assert current_user() == "login-name"
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))
    assert current_user() == "login-name"


def test_who_defaults_to_the_current_user(
    history: sqlite_utils.Database, skip_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(quarantine_mod, "current_user", lambda: "someone")
    quarantine(history, skip_path, FLAKY, reason="r", now=NOW, config=CONFIG)
    release(history, skip_path, FLAKY, now=NOW)
    assert [r["who"] for r in audit_rows(history)] == ["someone", "someone"]


def _quarantine_in_process(db_path: str, skip_path: str, test_id: str, barrier: object) -> None:
    db = store.open_history(db_path)  # a child's: its process ends with it
    barrier.wait()  # type: ignore[attr-defined]
    quarantine(db, Path(skip_path), test_id, reason="r", now=NOW, who="p", config=CONFIG)


def test_two_processes_quarantining_at_once_both_land(
    history: sqlite_utils.Database, tmp_path: Path
) -> None:
    ctx = child_context()
    db_path = str(tmp_path / "history.db")
    for round_no in range(5):
        skip_path = tmp_path / f"q{round_no}.json"
        barrier = ctx.Barrier(2)
        procs = [
            ctx.Process(target=_quarantine_in_process, args=(db_path, str(skip_path), t, barrier))
            for t in (FLAKY, STEADY)
        ]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join()
            assert proc.exitcode == 0
        skip = read_skip_file(skip_path, explicit=True)
        assert skip is not None
        assert sorted(skip.entries) == [FLAKY, STEADY]
    assert len(audit_rows(history)) == 10
