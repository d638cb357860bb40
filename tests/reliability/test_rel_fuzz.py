"""Fuzzing the whole ingest (parser + writer): generated and mutated JUnit XML either lands whole
or is refused with one line, and a refusal leaves the history exactly as it was."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_support import TS, Snapshot, junit_case, run_counts, snapshot, write_report

from flaketui.core.errors import ReportError
from flaketui.core.history.store import open_history
from flaketui.core.ingest.junit import MAX_DURATION_SECONDS, iter_cases
from flaketui.core.ingest.redact import MAX_MESSAGE_BYTES
from flaketui.core.ingest.writer import ingest_reports
from flaketui.core.models import RunMeta

TIMES = st.sampled_from(
    ["0.1", "-1", "-0.5", "abc", "", "nan", "inf", "-inf", "1e309", "1,5", "2,503.1", "9" * 30,
     "0x10", "  3 ", "1e-400", "604801"]
)  # fmt: skip
# Any character XML 1.0 allows (expat refuses the rest before any test could see them).
XML_TEXT = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00\ufffe\uffff"),
    max_size=40,
).map(lambda text: "".join(c for c in text if c >= " " or c in "\t\n\r"))
INVALID_BYTES = st.sampled_from(
    [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x00", b"\xc0\xaf", b"\x80"]
)


def _attr(name: str, value: str | None) -> str:
    return "" if value is None else f" {name}={quoteattr(value)}"


@st.composite
def cases(draw: st.DrawFn) -> str:
    """One <testcase>, names possibly missing, times odd, children possibly misplaced."""
    name = draw(st.one_of(st.none(), XML_TEXT))
    classname = draw(st.one_of(st.none(), XML_TEXT))
    time = draw(st.one_of(st.none(), TIMES))
    children = draw(
        st.lists(
            st.sampled_from(
                ["failure", "error", "skipped", "flakyFailure", "rerunError", "system-out",
                 "testcase", "testsuite", "properties"]
            ),
            max_size=4,
        )
    )  # fmt: skip
    inner = []
    for child in children:
        message = draw(st.one_of(st.none(), XML_TEXT))
        body = escape(draw(XML_TEXT))
        attrs = _attr("message", message) + _attr("time", draw(st.one_of(st.none(), TIMES)))
        inner.append(f"<{child}{attrs}>{body}</{child}>")
    return (
        f"<testcase{_attr('classname', classname)}{_attr('name', name)}{_attr('time', time)}>"
        f"{''.join(inner)}</testcase>"
    )


def suites(depth: int = 3) -> st.SearchStrategy[str]:
    """A <testsuite> of cases and (to a few levels) nested suites."""
    children = st.lists(cases(), max_size=4)
    if depth > 0:
        children = st.lists(st.one_of(cases(), suites(depth - 1)), max_size=4)
    return st.tuples(st.one_of(st.none(), XML_TEXT), children).map(
        lambda t: f"<testsuite{_attr('name', t[0])}>{''.join(t[1])}</testsuite>"
    )


@st.composite
def reports(draw: st.DrawFn) -> bytes:
    """A generated report, then maybe mutated: truncated, invalid bytes, misnested, deep."""
    root = draw(st.sampled_from(["testsuites", "testsuite", "testrun", "junit"]))
    body = "".join(draw(st.lists(st.one_of(suites(), cases()), max_size=4)))
    if draw(st.booleans()):  # deep nesting
        levels = draw(st.integers(100, 20_000))
        body = "<testsuite>" * levels + body + "</testsuite>" * draw(st.integers(0, levels))
    if draw(st.booleans()):  # huge attributes and text on one more case
        size = draw(st.integers(100_000, 1_000_000))
        body += (
            f'<testcase classname="c" name="{"N" * size}" time="{"9" * size}">'
            f'<failure message="{"M" * size}">{"T" * size}</failure></testcase>'
        )
    data = f'<?xml version="1.0" encoding="UTF-8"?>\n<{root}>{body}</{root}>\n'.encode()
    mutation = draw(st.sampled_from(["none", "none", "truncate", "invalid-utf8", "misnest"]))
    position = draw(st.integers(0, len(data)))
    if mutation == "truncate":
        data = data[:position]
    elif mutation == "invalid-utf8":
        data = data[:position] + draw(INVALID_BYTES) + data[position:]
    elif mutation == "misnest":
        data = data.replace(b"</testcase>", b"</testsuite>", 1)
    return data


@pytest.fixture(scope="module")
def base_history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Snapshot]:
    """A history holding one earlier run, and its snapshot."""
    folder = tmp_path_factory.mktemp("fuzz")
    db = folder / "base.db"
    history = open_history(db)
    seed = write_report(folder / "seed.xml", [junit_case("pkg.seed", f"t{n}") for n in range(5)])
    ingest_reports(history, [seed], RunMeta(run_id="seed", ts=TS))
    history.conn.close()
    return db, snapshot(db)


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(content=reports())
def test_fuzzed_report_lands_whole_or_is_refused_cleanly(
    base_history: tuple[Path, Snapshot], content: bytes
) -> None:
    base, base_rows = base_history
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "history.db"
        shutil.copyfile(base, db)
        report = Path(folder) / "report.xml"
        report.write_bytes(content)
        try:
            attempts = sum(len(case.attempts) for case in iter_cases(report))
        except ReportError:
            attempts = None
        history = open_history(db)
        try:
            ingest_reports(history, [report], RunMeta(run_id="fuzz", ts=TS))
        except ReportError as exc:
            assert attempts is None
            assert "\n" not in exc.message and exc.message.startswith(str(report))
            history.conn.close()
            assert snapshot(db) == base_rows  # never half-written
            return
        history.conn.close()
        assert attempts is not None, "the writer accepted a report the parser refuses"
        counts = run_counts(db, "fuzz")
        assert (counts[0] if counts else 0) == attempts
        rows = snapshot(db)
        assert all(before <= rows[table] for table, before in base_rows.items() if table != "tests")
        _check_stored_values(db)


def _check_stored_values(db: Path) -> None:
    """Durations are sane and messages capped whatever the report said."""
    conn = sqlite3.connect(db)
    try:
        worst = conn.execute(
            "SELECT min(duration_ms), max(duration_ms), max(length(CAST(message AS BLOB)))"
            " FROM results"
        ).fetchone()
    finally:
        conn.close()
    low, high, longest = worst
    assert low is None or low >= 0
    assert high is None or high <= MAX_DURATION_SECONDS * 1000
    assert longest is None or longest <= MAX_MESSAGE_BYTES
