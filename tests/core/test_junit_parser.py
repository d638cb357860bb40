"""The streaming JUnit parser: dialects, retries, attempt fields, hostile and broken input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flaketui.core.errors import ReportError
from flaketui.core.ingest import junit
from flaketui.core.ingest.junit import iter_cases, parse_duration_ms, report_timestamp
from flaketui.core.ingest.report_time import parse_report_timestamp
from flaketui.core.models import OUTCOMES, Attempt, CaseResult


def _write(tmp_path: Path, content: str | bytes, name: str = "report.xml") -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def _cases(tmp_path: Path, content: str | bytes) -> list[CaseResult]:
    return list(iter_cases(_write(tmp_path, content)))


def _outcomes(case: CaseResult) -> list[str]:
    return [attempt.outcome for attempt in case.attempts]


def _error(tmp_path: Path, content: str | bytes) -> str:
    with pytest.raises(ReportError) as excinfo:
        _cases(tmp_path, content)
    return excinfo.value.message


# ---- dialects ------------------------------------------------------------------------------------


def test_nested_suites_any_depth_in_document_order(tmp_path: Path) -> None:
    cases = _cases(
        tmp_path,
        """<testsuites><testsuite name="a"><testcase classname="A" name="one"/>
        <testsuite name="b"><testsuite name="c"><testcase classname="C" name="two"/></testsuite>
        </testsuite><testcase classname="A" name="three"/></testsuite></testsuites>""",
    )
    assert [c.test_id for c in cases] == ["A::one", "C::two", "A::three"]
    assert all(_outcomes(c) == ["pass"] for c in cases)


@pytest.mark.parametrize("root", ["testsuite", "testrun"])
def test_bare_testsuite_and_eclipse_testrun_roots(tmp_path: Path, root: str) -> None:
    cases = _cases(tmp_path, f'<{root} name="r"><testcase classname="K" name="t"/></{root}>')
    assert [c.test_id for c in cases] == ["K::t"]


@pytest.mark.parametrize("content", ['<testsuites tests="0"/>', "<testsuite></testsuite>"])
def test_empty_reports_yield_nothing(tmp_path: Path, content: str) -> None:
    assert _cases(tmp_path, content) == []


def test_not_a_junit_root_is_refused_with_its_name(tmp_path: Path) -> None:
    assert _error(tmp_path, "<html><body/></html>") == (
        f"{tmp_path / 'report.xml'}: not a JUnit report (root element <html>)"
    )


def test_outcomes_failure_error_skipped_and_status_attributes(tmp_path: Path) -> None:
    cases = _cases(
        tmp_path,
        """<testsuite>
        <testcase name="f"><failure message="boom">trace</failure></testcase>
        <testcase name="e"><error type="X">crash text</error></testcase>
        <testcase name="s"><skipped message="later"/></testcase>
        <testcase name="d" status="disabled"/>
        <testcase name="n" status="notrun"/>
        <testcase name="k" status="Skipped"/>
        <testcase name="x" status="failed"/>
        <testcase name="y" status="errored"/>
        <testcase name="r" status="run"/>
        </testsuite>""",
    )
    assert {c.test_id: _outcomes(c) for c in cases} == {
        "f": ["fail"],
        "e": ["error"],
        "s": ["skipped"],
        "d": ["skipped"],
        "n": ["skipped"],
        "k": ["skipped"],
        "x": ["fail"],
        "y": ["error"],
        "r": ["pass"],
    }
    messages = {c.test_id: c.attempts[0].message for c in cases}
    assert messages["f"] == "boom"
    assert messages["e"] == "crash text"  # no message attribute: the text
    assert messages["s"] == "later"
    assert messages["r"] is None


def test_several_failures_are_one_attempt_with_joined_messages(tmp_path: Path) -> None:
    (case,) = _cases(
        tmp_path,
        '<testsuite><testcase name="t"><failure message="first"/>'
        "<failure>second</failure></testcase></testsuite>",
    )
    assert _outcomes(case) == ["fail"]
    assert case.attempts[0].message == "first\nsecond"


# ---- retries -------------------------------------------------------------------------------------


def test_flaky_failures_come_before_the_final_pass(tmp_path: Path) -> None:
    (case,) = _cases(
        tmp_path,
        """<testsuite><testcase name="t" time="3"><flakyFailure message="m1" time="1">
        <stackTrace>st</stackTrace><system-out>noise</system-out></flakyFailure>
        <flakyError time="2"><stackTrace>err trace</stackTrace><system-err>x</system-err>
        </flakyError></testcase></testsuite>""",
    )
    assert _outcomes(case) == ["fail", "error", "pass"]
    assert [a.duration_ms for a in case.attempts] == [1000, 2000, 3000]
    assert case.attempts[0].message == "m1"
    assert case.attempts[1].message == "err trace"  # system-err inside the retry is not a message
    assert case.attempts[2].message is None


def test_rerun_failures_come_after_the_first_failure(tmp_path: Path) -> None:
    (case,) = _cases(
        tmp_path,
        """<testsuite><testcase name="t"><failure message="a"/>
        <rerunFailure message="b"/><rerunError message="c"/></testcase></testsuite>""",
    )
    assert _outcomes(case) == ["fail", "fail", "error"]
    assert [a.message for a in case.attempts] == ["a", "b", "c"]


def test_repeated_testcase_is_yielded_again_not_merged(tmp_path: Path) -> None:
    cases = _cases(
        tmp_path,
        '<testsuite><testcase classname="p" name="T"><failure/></testcase>'
        '<testcase classname="p" name="T"/></testsuite>',
    )
    assert [(c.test_id, _outcomes(c)) for c in cases] == [("p::T", ["fail"]), ("p::T", ["pass"])]


# ---- attempt fields ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.5", 1500),
        ("0.", 0),
        ("2,503.1", 2503100),
        ("1,234", 1234000),
        ("0,25", 250),
        ("-345345", None),
        ("abc", None),
        ("nan", None),
        ("inf", None),
        ("", None),
        (None, None),
        ("999638317", None),  # container-structure-test nanoseconds: not seconds
    ],
)
def test_duration_parsing(text: str | None, expected: int | None) -> None:
    assert parse_duration_ms(text) == expected


def test_worker_id_from_testcase_properties_even_after_failure(tmp_path: Path) -> None:
    cases = _cases(
        tmp_path,
        """<testsuite><properties><property name="worker_id" value="suite"/></properties>
        <testcase name="a"><failure/><properties><property name="worker_id" value="gw1"/>
        </properties></testcase>
        <testcase name="b"/></testsuite>""",
    )
    assert [a.worker_id for c in cases for a in c.attempts] == ["gw1", None]


def test_empty_name_and_missing_classname(tmp_path: Path) -> None:
    cases = _cases(
        tmp_path,
        """<testsuites><testsuite name="file.spec.js"><testcase classname="" name="same"/>
        </testsuite><testsuite name="other.spec.js"><testcase name="same"/></testsuite>
        <testsuite><testcase classname="Cls" name=""/><testcase name="alone"/>
        <testcase/></testsuite></testsuites>""",
    )
    assert [c.test_id for c in cases] == [
        "file.spec.js::same",
        "other.spec.js::same",
        "Cls",
        "alone",
        "(unnamed)",
    ]


def test_file_attribute_becomes_test_file(tmp_path: Path) -> None:
    (case,) = _cases(
        tmp_path, '<testsuite><testcase classname="a" name="b" file="x/a.js"/></testsuite>'
    )
    assert (case.test_id, case.test_file) == ("a::b", "x/a.js")


def test_pytest_report_gets_node_ids(tmp_path: Path) -> None:
    (case,) = _cases(
        tmp_path,
        '<testsuites><testsuite name="pytest"><testcase classname="tests.test_m.TestC" '
        'name="test_x[a.b]"/></testsuite></testsuites>',
    )
    assert (case.test_id, case.test_file) == (
        "tests/test_m.py::TestC::test_x[a.b]",
        "tests/test_m.py",
    )


def test_huge_failure_text_is_truncated_while_reading(tmp_path: Path) -> None:
    body = "x" * (3 * junit.CHUNK_BYTES)
    (case,) = _cases(
        tmp_path, f'<testsuite><testcase name="t"><failure>{body}</failure></testcase></testsuite>'
    )
    assert case.attempts[0].message == "x" * junit.MESSAGE_CAP_CHARS


def test_suite_level_error_without_testcase_is_ignored(tmp_path: Path) -> None:
    cases = _cases(
        tmp_path,
        '<testsuite><error message="setup">boom</error><testcase name="t"/></testsuite>',
    )
    assert [(c.test_id, _outcomes(c)) for c in cases] == [("t", ["pass"])]


# ---- encodings and lexical gotchas ---------------------------------------------------------------


def test_bom_crlf_comments_cdata_and_astral_characters(tmp_path: Path) -> None:
    content = (
        '\ufeff<?xml version="1.0" encoding="UTF-8"?>\r\n<!-- c -->\r\n<testsuite>\r\n'
        '<system-out>early</system-out><testcase name="t\U0001237a"><!-- c -->'
        "<failure><![CDATA[a]]]]><![CDATA[>b]]></failure></testcase>\r\n</testsuite>\r\n"
    )
    (case,) = _cases(tmp_path, content)
    assert case.test_id == "t\U0001237a"
    assert case.attempts[0].message == "a]]>b"


def test_iso_8859_1_declaration(tmp_path: Path) -> None:
    content = '<?xml version="1.0" encoding="ISO-8859-1"?><testsuite><testcase name="caf\xe9"/>'
    (case,) = _cases(tmp_path, (content + "</testsuite>").encode("latin-1"))
    assert case.test_id == "café"


@pytest.mark.parametrize(
    ("declared", "reason"),
    [("foo-bar", "unknown encoding"), ("Shift_JIS", "multi-byte encodings are not supported")],
)
def test_unsupported_encodings_are_refused(tmp_path: Path, declared: str, reason: str) -> None:
    content = f'<?xml version="1.0" encoding="{declared}"?><testsuite/>'
    assert _error(tmp_path, content) == (
        f"{tmp_path / 'report.xml'}: unreadable encoding ({reason}: {declared})"
        if reason == "unknown encoding"
        else f"{tmp_path / 'report.xml'}: unreadable encoding ({reason})"
    )


def test_leading_newlines_before_declaration_are_accepted_and_lines_stay_right(
    tmp_path: Path,
) -> None:
    ok = '\n\n<?xml version="1.0"?>\n<testsuite><testcase name="t"/></testsuite>'
    assert [c.test_id for c in _cases(tmp_path, ok)] == ["t"]
    bad = '\n\n<?xml version="1.0"?>\n<testsuite>\n<testcase time="<<x>>"/></testsuite>'
    assert _error(tmp_path, bad) == f"{tmp_path / 'report.xml'}:5:17: {INVALID_CHARACTER}"


INVALID_CHARACTER = (
    "a character XML does not allow here (an unescaped < or & in an attribute or text?)"
)


def test_malformed_attribute_names_the_line(tmp_path: Path) -> None:
    content = '<?xml version="1.0"?>\n<testsuite>\n<testcase name="a" time="<<computed>>"/>'
    assert _error(tmp_path, content) == (f"{tmp_path / 'report.xml'}:3:26: {INVALID_CHARACTER}")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("<testsuite><testcase name='a'>", "1:31: the file ends before its XML is complete"),
        ("hello <<", "1:1: not XML: text or markup where an XML tag was expected"),
        (
            "<testsuite>\n<testcase name='a'>\n</testsuit>",
            "3:3: a closing tag that does not match the element it closes",
        ),
        ("<testsuite/><testsuite/>", "1:13: more after the end of the report's root element"),
        ("<testsuite name='&x;'/>", "1:1: an undefined entity (an & not written as &amp;?)"),
        ("<testsuite a='1' a='2'/>", "1:18: an attribute given twice in one tag"),
    ],
    ids=["truncated", "not-xml", "mismatched", "two-roots", "entity", "duplicate"],
)
def test_bad_xml_is_said_in_plain_words_with_line_and_column(
    tmp_path: Path, content: str, message: str
) -> None:
    assert _error(tmp_path, content).startswith(f"{tmp_path / 'report.xml'}:{message}")


def test_empty_file_and_missing_file(tmp_path: Path) -> None:
    assert _error(tmp_path, b"") == f"{tmp_path / 'report.xml'}: empty file"
    with pytest.raises(ReportError, match="cannot read"):
        list(iter_cases(tmp_path / "absent.xml"))


def test_truncated_file_fails_midway_after_streaming_earlier_cases(tmp_path: Path) -> None:
    many = "".join(f'<testcase classname="c" name="t{i}"/>' for i in range(5000))
    path = _write(tmp_path, f"<testsuites><testsuite>{many}<testcase name='cut")
    assert path.stat().st_size > 2 * junit.CHUNK_BYTES
    seen: list[str] = []
    with pytest.raises(ReportError, match=r"report\.xml:1:\d+: the file ends inside a tag"):
        for case in iter_cases(path):
            seen.append(case.test_id)
    assert seen[:2] == ["c::t0", "c::t1"]  # streamed before the bad end was reached


# ---- hostile input -------------------------------------------------------------------------------

REFUSED = "refused: DTDs and entities are not allowed"
HOSTILE = {
    "billion_laughs": """<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">
        <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>
        <testsuite><testcase name="&lol2;"/></testsuite>""",
    "external_entity": """<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "{secret}">]>
        <testsuite><testcase name="&x;"/></testsuite>""",
    "external_parameter_entity": """<?xml version="1.0"?><!DOCTYPE t [
        <!ENTITY % p SYSTEM "http://127.0.0.1:9/evil.dtd"> %p;]><testsuite/>""",
    "external_dtd": """<?xml version="1.0"?><!DOCTYPE testsuite SYSTEM "http://127.0.0.1:9/x.dtd">
        <testsuite/>""",
    "plain_doctype": "<!DOCTYPE testsuite><testsuite/>",
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_dtds_and_entities_are_refused(tmp_path: Path, kind: str) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    content = HOSTILE[kind].replace("{secret}", secret.as_uri())
    assert _error(tmp_path, content) == f"{tmp_path / 'report.xml'}: {REFUSED}"
    with pytest.raises(ReportError, match=REFUSED):
        report_timestamp(tmp_path / "report.xml")


def test_undeclared_entity_is_a_parse_error(tmp_path: Path) -> None:
    assert "undefined entity" in _error(tmp_path, '<testsuite><testcase name="&x;"/></testsuite>')


# ---- timestamps ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-03T12:27:54", datetime(2024, 1, 3, 12, 27, 54, tzinfo=UTC)),
        ("2024-01-03T12:27:54+02:00", datetime(2024, 1, 3, 10, 27, 54, tzinfo=UTC)),
        ("2024-01-03T12:27:54Z", datetime(2024, 1, 3, 12, 27, 54, tzinfo=UTC)),
        ("2024-01-03 12:27:54Z", datetime(2024, 1, 3, 12, 27, 54, tzinfo=UTC)),
        ("2021-03-07T10:36:56 UTC", datetime(2021, 3, 7, 10, 36, 56, tzinfo=UTC)),
        ("2024-01-03T 12:40:13", datetime(2024, 1, 3, 12, 40, 13, tzinfo=UTC)),
        ("Sat, 03 Dec 2022 23:10:07 GMT", datetime(2022, 12, 3, 23, 10, 7, tzinfo=UTC)),
        ("2024-01-03", datetime(2024, 1, 3, tzinfo=UTC)),
        ("2022-07-19T13:52:03.777000", datetime(2022, 7, 19, 13, 52, 3, 777000, tzinfo=UTC)),
        ("2024-01-09T07:50:12.664+00:00", datetime(2024, 1, 9, 7, 50, 12, 664000, tzinfo=UTC)),
        ("2024-01-09T07:50:12.123456789Z", datetime(2024, 1, 9, 7, 50, 12, 123456, tzinfo=UTC)),
        ("yesterday", None),
        ("", None),
    ],
)
def test_timestamp_spellings(text: str, expected: datetime | None) -> None:
    assert parse_report_timestamp(text) == expected


def test_report_timestamp_skips_implausible_suites(tmp_path: Path) -> None:
    future = (datetime.now(UTC) + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%S")
    path = _write(
        tmp_path,
        f"""<testsuites><testsuite timestamp="0001-01-01T00:00:00Z"/>
        <testsuite timestamp="1970-01-01T00:00:00"/><testsuite timestamp="{future}"/>
        <testsuite timestamp="garbage"/><testsuite timestamp="2023-05-06T07:08:09Z"/>
        </testsuites>""",
    )
    assert report_timestamp(path) == datetime(2023, 5, 6, 7, 8, 9, tzinfo=UTC)


def test_report_timestamp_none_and_early_stop(tmp_path: Path) -> None:
    none = _write(tmp_path, '<testsuite timestamp="1970-01-01T00:00:00"/>', "none.xml")
    assert report_timestamp(none) is None
    # The malformed tail is never read: the first plausible timestamp is enough.
    early = _write(tmp_path, '<testsuite timestamp="2020-02-02"><testcase time="<<x>>"/>', "e.xml")
    assert report_timestamp(early) == datetime(2020, 2, 2, tzinfo=UTC)


# ---- robustness property -------------------------------------------------------------------------

SEED_REPORT = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="pytest"><testsuite name="s" '
    b'timestamp="2024-01-01T00:00:00Z"><testcase classname="a.test_b.TestC" name="t[x]" '
    b'time="0.1"><flakyFailure message="m"/><properties><property name="worker_id" '
    b'value="gw0"/></properties></testcase><testcase name="u"><failure>f<![CDATA[g]]></failure>'
    b"<rerunError/></testcase><testcase name='v' status='disabled'/></testsuite></testsuites>\n"
)


@st.composite
def mutated_reports(draw: st.DrawFn) -> bytes:
    """Truncated, spliced, byte-flipped or deeply nested variants of a small valid report."""
    kind = draw(st.sampled_from(["truncate", "splice", "flip", "nest", "random"]))
    if kind == "random":
        return draw(st.binary(max_size=300))
    if kind == "nest":
        depth = draw(st.integers(1, 3000))
        tag = draw(st.sampled_from([b"testsuite", b"testcase", b"failure", b"x"]))
        closing = draw(st.integers(0, depth))
        return b"<testsuites>" + (b"<" + tag + b">") * depth + (b"</" + tag + b">") * closing
    data = bytearray(SEED_REPORT)
    position = draw(st.integers(0, len(data)))
    if kind == "truncate":
        return bytes(data[:position])
    if kind == "splice":
        insert = draw(
            st.sampled_from(
                [
                    b"<",
                    b"&",
                    b"]]>",
                    b"\x00",
                    b"\xff\xfe",
                    b"<!DOCTYPE a>",
                    b"<testcase>",
                    b"</testsuite>",
                    b"&#0;",
                    b"\xf0\x9f",
                ]
            )
        )
        return bytes(data[:position] + insert + data[position:])
    for index in draw(st.lists(st.integers(0, len(data) - 1), min_size=1, max_size=5)):
        data[index] = draw(st.integers(0, 255))
    return bytes(data)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=mutated_reports())
def test_any_input_yields_cases_or_raises_report_error(tmp_path: Path, content: bytes) -> None:
    path = _write(tmp_path, content)
    try:
        for case in iter_cases(path):
            assert isinstance(case, CaseResult) and case.attempts
            assert all(isinstance(a, Attempt) and a.outcome in OUTCOMES for a in case.attempts)
        report_timestamp(path)
    except ReportError as exc:
        assert "\n" not in exc.message and exc.message.startswith(str(path))


# ---- event bookkeeping (ends counted in C, text only inside captures) ---------------------------


def test_text_is_kept_only_inside_the_open_capture(tmp_path: Path) -> None:
    (case,) = _cases(
        tmp_path,
        "<testsuite><testcase name='t'>before<failure>in <trace>deep</trace>"
        "<system-out>muted</system-out> after-mute</failure>after<system-out>out</system-out>"
        "tail<failure message=''> second </failure>end</testcase></testsuite>",
    )
    assert case.attempts[0].message == "in deep after-mute\nsecond"


def test_elements_after_a_case_belong_to_its_suite_not_to_it(tmp_path: Path) -> None:
    cases = _cases(
        tmp_path,
        "<testsuite name='s'><testcase name='a'/><system-out>x</system-out>"
        "<error message='suite boom'/><properties><property name='worker_id' value='gw9'/>"
        "</properties><testcase name='b'><skipped/></testcase><failure/></testsuite>",
    )
    assert [(c.test_id, _outcomes(c), c.attempts[0].worker_id) for c in cases] == [
        ("s::a", ["pass"], None),
        ("s::b", ["skipped"], None),
    ]


def test_pytest_suite_scope_ends_with_its_suite(tmp_path: Path) -> None:
    cases = _cases(
        tmp_path,
        "<testsuites><testsuite name='pytest'><testsuite name='inner'>"
        "<testcase classname='tests.test_a' name='t'/></testsuite>"
        "<testcase classname='tests.test_b' name='u'/></testsuite>"
        "<testsuite name='other'><testcase classname='x.y' name='t'/></testsuite></testsuites>",
    )
    assert [c.test_id for c in cases] == ["tests/test_a.py::t", "tests/test_b.py::u", "x.y::t"]


def test_testcase_as_root_is_refused(tmp_path: Path) -> None:
    assert "not a JUnit report" in _error(tmp_path, "<testcase name='t'/>")


def test_cases_and_captures_spanning_chunks(tmp_path: Path) -> None:
    """Cases end in one chunk and are finished after it; a failure's text crosses chunks."""
    filler = "".join(f"<testcase classname='c' name='p{n}' time='0.5'/>" for n in range(3000))
    long_text = "line\n" * (junit.CHUNK_BYTES // 4)
    path = _write(
        tmp_path,
        f"<testsuite>{filler}<testcase classname='c' name='f'><failure>{long_text}</failure>"
        f"<system-out>{'o' * junit.CHUNK_BYTES}</system-out></testcase>{filler}</testsuite>",
    )
    cases = list(iter_cases(path))
    assert len(cases) == 6001
    failed = cases[3000]
    assert failed.test_id == "c::f"
    assert failed.attempts[0].message == long_text.strip()[: junit.MESSAGE_CAP_CHARS]
    assert all(c.attempts == [Attempt("pass", 500)] for c in cases[:3000] + cases[3001:])
    rows = list(junit.iter_case_rows(path))
    assert [(r[0], r[1], [Attempt(*a) for a in r[2]]) for r in rows] == [
        (c.test_id, c.test_file, c.attempts) for c in cases
    ]
