"""Report outputs show any test id or failure message as inert text: the Markdown as text
inside its cell, the table on one line without a control character. The CSV, data to parse
back, keeps them exactly, each row whole."""

from __future__ import annotations

import csv
import html
import io
import re
import tempfile
import unicodedata
from datetime import timedelta
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from flaketui.core.output.formats import ReportFormat, render, report_dict
from flaketui.core.output.text import csv_table, visible
from flaketui.core.scoring.report import build_report
from flaketui.core.scoring.results import Report
from tests.connections import open_history
from tests.core.history_builder import HistoryBuilder, utc

NOW = utc(2026, 11, 1)
# Markup, code-span fences, table pipes, line breaks, ESC, BEL, NUL, DEL, C1 CSI, spaces, and
# the bidirectional formatting characters (an override, an isolate, a mark).
HOSTILE = "`|<>&\\*_[]()!#$~ \n\r\t\x1b\x07\x00\x7f\x9b\x85\u202e\u2067\u200f"
# Unicode's bidirectional classes of the characters that reorder the text around them.
REORDERING = {"LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"}


def shown_safely(text: str) -> bool:
    """No control character, and nothing that would show the text in another order."""
    return not any(
        unicodedata.category(c) == "Cc"
        or unicodedata.bidirectional(c) in REORDERING
        or c in "\u061c\u200e\u200f"
        for c in text
    )


texts = st.text(
    alphabet=st.one_of(st.sampled_from(HOSTILE), st.characters(codec="utf-8")),
    min_size=1,
    max_size=40,
)
# Tags a rendered report may hold; anything else came from a test id or a message.
REPORT_TAGS = {"h3", "table", "thead", "tbody", "tr", "th", "td", "code"}


def report_for(test_id: str, message: str) -> Report:
    with tempfile.TemporaryDirectory() as folder:
        db = open_history(Path(folder) / "history.db")
        HistoryBuilder(db).sequence(
            test_id, "PRPPRPPRPPRP", start=NOW - timedelta(days=12), step=timedelta(days=1),
            message=f"boom {message}",
        )  # fmt: skip
        report = build_report(db, now=NOW)
        db.conn.close()
    return report


def cells_of_body(rendered: str) -> list[list[str]]:
    body = rendered.split("<tbody>", 1)[1]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for row in body.split("<tr>")[1:]]


def assert_inert(markdown: str, name: str) -> None:
    rendered = MarkdownIt("commonmark").enable("table").render(markdown)
    tags = {tag.lower() for tag in re.findall(r"</?([A-Za-z][A-Za-z0-9]*)", rendered)}
    assert tags <= REPORT_TAGS, rendered
    (row,) = cells_of_body(rendered)
    assert len(row) == 11, rendered
    code = re.fullmatch(r"<code>(.*)</code>", row[1], re.S)
    assert code is not None, row[1]
    assert html.unescape(code.group(1)) == visible(name)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(test_id=texts, message=texts)
def test_markdown_report_shows_ids_and_signatures_as_text(test_id: str, message: str) -> None:
    report = report_for(test_id, message)
    assert [t.test_id for t in report.tests] == [test_id]
    assert_inert(render(report, ReportFormat.MARKDOWN), test_id)
    (group,) = report_dict(report)["signatures"]
    by_signature = render(report, ReportFormat.MARKDOWN, group_by="signature")
    assert_inert(by_signature, f"{group['signature_text']} (1 test)")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(test_id=texts, message=texts)
def test_table_has_no_control_character(test_id: str, message: str) -> None:
    report = report_for(test_id, message)
    for group_by in (None, "signature"):
        table = render(report, ReportFormat.TABLE, group_by=group_by)
        lines = table.split("\n")
        assert shown_safely("".join(lines)), table
        assert len(lines) == 5  # header, blank, column heads, the row, the final newline
    assert lines[3].endswith(
        visible(f"{report_dict(report)['signatures'][0]['signature_text']} (1 test)")
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(test_id=texts, message=texts)
@example(test_id="t::cr\rx", message="a\rb")
def test_csv_keeps_ids_and_signatures_exactly(test_id: str, message: str) -> None:
    report = report_for(test_id, message)
    (group,) = report_dict(report)["signatures"]
    for group_by, column, value in (
        (None, "test_id", test_id),
        ("signature", "signature_text", group["signature_text"]),
    ):
        text = render(report, ReportFormat.CSV, group_by=group_by)
        # A reader splits rows at any line break outside quotes, as a file opened with
        # newline="" (the csv module's advice) does.
        (row,) = csv.DictReader(io.StringIO(text, newline=""))
        assert row[column] == value, text


@given(
    rows=st.lists(
        st.lists(st.text(alphabet=st.one_of(st.sampled_from('\r\n",; '), st.characters()))),
        max_size=5,
    )
)
def test_csv_table_reads_back_as_written(rows: list[list[str]]) -> None:
    width = max((len(row) for row in rows), default=0)
    header = [f"c{n}" for n in range(width)] or ["c"]
    text = csv_table(header, rows)
    assert list(csv.reader(io.StringIO(text, newline=""))) == [header, *rows]


def test_a_right_to_left_override_shows_as_an_escape() -> None:
    # Shown as is, "test_\u202eevil" would read "test_live" in a browser or a bidi terminal.
    report = report_for("t::test_\u202elive\u2066x\u2069", "boom \u200f")
    table = render(report, ReportFormat.TABLE)
    assert table.splitlines()[3].endswith("t::test_\\u202elive\\u2066x\\u2069")
    markdown = render(report, ReportFormat.MARKDOWN)
    assert "`t::test_\\u202elive\\u2066x\\u2069`" in markdown
    assert not [c for c in markdown if c != "\n" and not shown_safely(c)]  # lines end with LF


def test_hostile_id_in_markdown_and_table() -> None:
    test_id = "t::a`b <img src=x onerror=alert(1)>\x1b]52;c;Zm9v\x07|\nend"
    report = report_for(test_id, "`x` <img src=x onerror=alert(1)>")
    markdown = render(report, ReportFormat.MARKDOWN)
    assert "| ``t::a`b <img src=x onerror=alert(1)>\\x1b]52;c;Zm9v\\x07\\|\\nend`` |" in markdown
    table = render(report, ReportFormat.TABLE)
    assert table.splitlines()[3].endswith(
        "t::a`b <img src=x onerror=alert(1)>\\x1b]52;c;Zm9v\\x07|\\nend"
    )
