"""Every export format parses back to the decisions (or tests) it was rendered from."""

from __future__ import annotations

import csv
import html
import io
import json
import re
import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from flaketui.core.output.exports import (
    DECISION_COLUMNS,
    TEST_COLUMNS,
    UNOWNED,
    Decision,
    ExportError,
    decisions,
    render_decisions,
    render_tests,
)
from flaketui.core.output.text import one_line
from flaketui.core.quarantine.skipfile import SkipEntry, SkipFile
from flaketui.core.scoring import (
    results,  # not `TestVerdict` by name: pytest would try to collect it
)
from flaketui.core.scoring.results import Report, Scores

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


def verdict(test_id: str, *, owner: str | None, verdict: str = "flaky") -> results.TestVerdict:
    scores = Scores(runs=40, damage=1.25, recency_score=0.3333333333, wilson_low=0.1, flip_rate=0.2)
    return results.TestVerdict(
        test_id=test_id,
        parent=test_id.split("[")[0],
        suite="unit",
        test_file=test_id.split("::")[0],
        scores=scores,
        verdict=verdict,
        reason=f"{verdict}: 3 flaky runs of 40",
        owner=owner,
        rank=1,
        signature="sig1",
    )


def report(*tests: results.TestVerdict) -> Report:
    return Report(now=NOW, window_days=90, config={}, tests=list(tests), families=[], signatures=[])


def entry(test_id: str, **values: object) -> SkipEntry:
    base: dict[str, object] = {
        "mode": "skip",
        "reason": "flaky on main",
        "owner": "@old-owner",
        "ticket": None,
        "quarantined_at": NOW - timedelta(days=3),
        "expires": NOW + timedelta(days=27),
        "scores": {"damage": 2.5, "runs": 30},
        "signature": "sig0",
    }
    base.update(values)
    return SkipEntry(test_id=test_id, **base)  # type: ignore[arg-type]


A = "tests/test_a.py::test_a[x|y]"
B = "tests/test_b.py::test_b"
C = "tests/test_c.py::test_c"


@pytest.fixture
def sample() -> list[Decision]:
    skip = SkipFile(
        path=Path(".quarantine.json"),
        entries={
            A: entry(A, ticket="https://example.org/1"),
            B: entry(B, mode="run", expires=NOW - timedelta(days=1)),
            C: entry(C, owner=None, added_by="hand", reason="ask | Ann"),
        },
    )
    return decisions(skip, report(verdict(A, owner="@team-a"), verdict(B, owner=None)), now=NOW)


# --- parsers a consumer would write ---------------------------------------------------------


def split_row(line: str) -> list[str]:
    """GFM table row -> cells: split on unescaped pipes, trim, then unescape `\\|`."""
    cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [cell.strip().replace("\\|", "|") for cell in cells]


def strip_code(cell: str) -> str:
    """CommonMark code span -> its text."""
    fence = re.match(r"`+", cell)
    assert fence is not None, cell
    inner = cell[len(fence.group()) : -len(fence.group())]
    if len(inner) >= 2 and inner[0] == " " and inner[-1] == " " and inner.strip():
        inner = inner[1:-1]
    return inner


# The only tags an export's Markdown renders to: its headings, tables, code and bold.
REPORT_TAGS = {"h1", "h2", "p", "table", "thead", "tbody", "tr", "th", "td", "code", "strong"}


def md_plain(cell: str) -> str:
    """The text a Markdown table cell of plain text shows (backslash escapes and HTML entities
    undone)."""
    return html.unescape(re.sub(r"\\(.)", r"\1", cell))


def parse_markdown(text: str) -> dict[str, list[dict[str, str]]]:
    """owner heading -> rows as {header: cell}."""
    groups: dict[str, list[dict[str, str]]] = {}
    owner = None
    headers: list[str] = []
    counts: dict[str, int] = {}
    for line in text.splitlines():
        heading = re.fullmatch(r"## (.*) \((\d+)\)", line)
        if heading:
            owner = md_plain(heading.group(1))
            counts[owner] = int(heading.group(2))
            groups[owner] = []
            headers = []
        elif line.startswith("|") and owner is not None:
            cells = split_row(line)
            if not headers:
                headers = cells
            elif not set(line) <= set("|-"):
                groups[owner].append(dict(zip(headers, cells, strict=True)))
    assert {o: len(rows) for o, rows in groups.items()} == counts
    return groups


# --- decisions ------------------------------------------------------------------------------


def test_decisions_join_current_verdict_and_owner(sample: list[Decision]) -> None:
    by_id = {d.entry.test_id: d for d in sample}
    assert [d.entry.test_id for d in sample] == [A, B, C]
    assert (by_id[A].owner, by_id[A].verdict, by_id[A].expired) == ("@team-a", "flaky", False)
    # No CODEOWNERS match now: keep the owner recorded at quarantine time.
    assert (by_id[B].owner, by_id[B].expired) == ("@old-owner", True)
    assert (by_id[C].owner, by_id[C].verdict, by_id[C].current) == (None, None, None)


def test_filters_by_owner_and_mode(sample: list[Decision]) -> None:
    skip = SkipFile(path=Path("q"), entries={d.entry.test_id: d.entry for d in sample})
    rep = report(verdict(A, owner="@team-a"))
    assert [d.entry.test_id for d in decisions(skip, rep, now=NOW, owner="@team-a")] == [A]
    assert [d.entry.test_id for d in decisions(skip, rep, now=NOW, owner="")] == [C]
    assert [d.entry.test_id for d in decisions(skip, rep, now=NOW, mode="run")] == [B]
    assert decisions(None, rep, now=NOW) == []


def test_json_parses_back(sample: list[Decision]) -> None:
    doc = json.loads(render_decisions(sample, "json", now=NOW))
    assert (doc["format"], doc["version"], doc["now"], doc["count"]) == (
        "flaketui-decisions", 1, "2026-03-01T12:00:00Z", 3,
    )  # fmt: skip
    a, b, c = doc["items"]
    assert a["test_id"] == A and a["owner"] == "@team-a" and a["ticket"] == "https://example.org/1"
    assert a["scores_at_quarantine"] == {"damage": 2.5, "runs": 30}
    assert a["current_scores"]["recency_score"] == 0.333333
    assert (b["mode"], b["expired"], b["expires"]) == ("run", True, "2026-02-28T12:00:00Z")
    assert (c["added_by"], c["verdict"], c["current_scores"]) == ("hand", None, None)


def test_csv_parses_back(sample: list[Decision]) -> None:
    rows = list(csv.DictReader(io.StringIO(render_decisions(sample, "csv", now=NOW))))
    assert tuple(rows[0]) == DECISION_COLUMNS
    assert [r["test_id"] for r in rows] == [A, B, C]
    assert rows[0]["owner"] == "@team-a"
    assert rows[0]["quarantined_damage"] == "2.5"
    assert rows[0]["current_runs"] == "40"
    assert (rows[1]["expired"], rows[1]["mode"]) == ("true", "run")
    assert (rows[2]["reason"], rows[2]["verdict"], rows[2]["owner"]) == ("ask | Ann", "", "")


def test_markdown_groups_by_owner_and_parses_back(sample: list[Decision]) -> None:
    text = render_decisions(sample, "markdown", now=NOW)
    assert text.startswith("# Quarantined tests: 3 (as of 2026-03-01T12:00:00Z)\n")
    groups = parse_markdown(text)
    assert list(groups) == ["@old-owner", "@team-a", UNOWNED]
    (a,) = groups["@team-a"]
    assert strip_code(a["Test"]) == A
    assert (a["Mode"], a["Verdict now"], a["Ticket"]) == ("skip", "flaky", "https://example.org/1")
    assert (a["Quarantined"], a["Expires"]) == ("2026-02-26", "2026-03-28")
    (b,) = groups["@old-owner"]
    assert b["Expires"] == "2026-02-28 **expired**"
    (c,) = groups[UNOWNED]
    assert (c["Mode"], c["Verdict now"], c["Reason"]) == (
        "skip (hand-added)", "not in history", "ask | Ann",
    )  # fmt: skip


def test_deselect_and_list_parse_back(sample: list[Decision]) -> None:
    deselect = render_decisions(sample, "deselect", now=NOW)
    args = [shlex.split(line) for line in deselect.splitlines()]
    assert args == [["--deselect", A], ["--deselect", B], ["--deselect", C]]
    assert render_decisions(sample, "list", now=NOW).splitlines() == [A, B, C]


def test_empty_exports(sample: list[Decision]) -> None:
    assert render_decisions([], "list", now=NOW) == ""
    assert render_decisions([], "deselect", now=NOW) == ""
    assert json.loads(render_decisions([], "json", now=NOW))["items"] == []
    assert "Nothing to report." in render_decisions([], "markdown", now=NOW)
    assert render_decisions([], "csv", now=NOW).splitlines() == [",".join(DECISION_COLUMNS)]


def test_unknown_format_and_unlistable_ids_are_errors(sample: list[Decision]) -> None:
    with pytest.raises(ExportError, match="unknown export format 'xml'"):
        render_decisions(sample, "xml", now=NOW)
    bad = decisions(SkipFile(path=Path("q"), entries={"a\nb": entry("a\nb")}), None, now=NOW)
    for fmt in ("list", "deselect"):
        with pytest.raises(ExportError, match="line break"):
            render_decisions(bad, fmt, now=NOW)


def test_markdown_shows_a_line_break_in_an_id_escaped() -> None:
    found = decisions(SkipFile(path=Path("q"), entries={"a\nb": entry("a\nb")}), None, now=NOW)
    (row,) = parse_markdown(render_decisions(found, "markdown", now=NOW))["@old-owner"]
    assert strip_code(row["Test"]) == "a\\nb"


# Node ids: any printable text without line breaks (params carry spaces, quotes, pipes, backticks).
node_ids = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")),
    min_size=1,
    max_size=40,
)


@settings(max_examples=80, deadline=None)
@given(
    ids=st.lists(node_ids, min_size=1, max_size=6, unique=True),
    owner=st.one_of(
        st.none(),
        st.text(min_size=1, max_size=12).filter(lambda s: s.strip() == s and "\n" not in s and s),
    ),
    reason=st.text(max_size=30),
)
@example(ids=["t"], owner="<b>@x</b>", reason="<img src=x onerror=alert(1)> *now* | `y`")
def test_every_format_round_trips_arbitrary_ids(
    ids: list[str], owner: str | None, reason: str
) -> None:
    skip = SkipFile(path=Path("q"), entries={t: entry(t, owner=owner, reason=reason) for t in ids})
    found = decisions(skip, None, now=NOW)
    expected = sorted(ids)
    assert render_decisions(found, "list", now=NOW).splitlines() == expected
    deselect = render_decisions(found, "deselect", now=NOW).splitlines()
    assert [shlex.split(line) for line in deselect] == [["--deselect", t] for t in expected]
    rows = list(csv.DictReader(io.StringIO(render_decisions(found, "csv", now=NOW))))
    assert [(r["test_id"], r["reason"]) for r in rows] == [(t, reason) for t in expected]
    items = json.loads(render_decisions(found, "json", now=NOW))["items"]
    assert [(i["test_id"], i["reason"]) for i in items] == [(t, reason) for t in expected]
    groups = parse_markdown(render_decisions(found, "markdown", now=NOW))
    heading = one_line(owner) if owner else UNOWNED
    assert list(groups) == [heading]
    assert [strip_code(r["Test"]) for r in groups[heading]] == expected
    assert {md_plain(r["Reason"]) for r in groups[heading]} == {one_line(reason)}
    # Whatever the reason and owner hold, the page has no tag of theirs.
    rendered = (
        MarkdownIt("commonmark")
        .enable("table")
        .render(render_decisions(found, "markdown", now=NOW))
    )
    assert set(re.findall(r"</?([a-z0-9]+)", rendered)) <= REPORT_TAGS


# --- the app's export of listed tests -------------------------------------------------------


def test_render_tests_in_every_format() -> None:
    tests = [verdict(A, owner="@team-a"), verdict(B, owner=None, verdict="regression")]
    rep = report(*tests)
    doc = json.loads(render_tests(tests, "json", report=rep))
    assert doc["format"] == "flaketui-tests"
    assert [(i["test_id"], i["verdict"], i["scores"]["runs"]) for i in doc["items"]] == [
        (A, "flaky", 40), (B, "regression", 40),
    ]  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(render_tests(tests, "csv", report=rep))))
    assert tuple(rows[0]) == TEST_COLUMNS
    assert [(r["test_id"], r["damage"], r["owner"]) for r in rows] == [
        (A, "1.25", "@team-a"), (B, "1.25", ""),
    ]  # fmt: skip
    groups = parse_markdown(render_tests(tests, "markdown", report=rep))
    assert [strip_code(r["Test"]) for r in groups["@team-a"]] == [A]
    assert groups[UNOWNED][0]["Verdict"] == "regression"
    assert render_tests(tests, "list", report=rep).splitlines() == [A, B]
    assert [shlex.split(x) for x in render_tests(tests, "deselect", report=rep).splitlines()] == [
        ["--deselect", A], ["--deselect", B],
    ]  # fmt: skip
