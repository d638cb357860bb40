"""`flaketui report --format html` and `-o`: one inert, self-contained file; CI data as text.

The page is also opened in a real browser by tests/browser/test_report_browser.py.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from flaketui.cli.commands import cli
from tests.connections import open_history
from tests.core.history_builder import HistoryBuilder, utc

T0 = utc(2026, 10, 1)
NOW = "2026-11-01T00:00:00Z"
SCRIPT_ID = "tests/test_x.py::test_y[<script>window.pwned=1</script>]"
IMG_MESSAGE = 'Timeout <img src=x onerror="window.pwned=2"> waiting for "db"'
IMG_OWNER = "<img src=y onerror=alert(3)>"
BENCH = Path(__file__).resolve().parents[2] / "bench"
MAX_BYTES_1000_TESTS = 2_000_000


def hostile_history(path: Path) -> Path:
    """A flaky test with markup in its id and message, a regression, a healthy test, 2 workers."""
    db = open_history(path)
    hb = HistoryBuilder(db)
    for day in range(25):
        run = hb.run(ts=T0 + timedelta(days=day), commit=f"c{day:02d}", worker_count=2)
        worker = f"gw{day % 2}"
        flaky = ["fail", "pass"] if day % 3 == 0 else ["pass"]
        run.result(SCRIPT_ID, flaky, message=IMG_MESSAGE, worker_id=worker)
        run.result("tests/test_z.py::test_pool", ["fail", "pass"] if day % 5 == 0 else ["pass"])
        run.result("tests/test_c.py::test_sum", ["fail"] if day >= 20 else ["pass"])
        run.result("tests/test_d.py::test_ok", ["pass"])
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.conn.close()
    return path


VICTIM_ID = "tests/test_v.py::test_victim[<b>x</b>]"


def cause_history(path: Path) -> Path:
    """Two tests failing in the same runs (one leak, two victims) and a test that fails only
    under four workers, beside steady tests."""
    db = open_history(path)
    hb = HistoryBuilder(db)
    for day in range(40):
        workers = 4 if day % 2 else 1
        run = hb.run(ts=T0 + timedelta(hours=12 * day), worker_count=workers)
        leak = ["fail", "pass"] if day % 5 == 2 else ["pass"]
        run.result("tests/test_leak.py::test_reads_cache", leak, message="stale cache entry")
        run.result(VICTIM_ID, leak, message="stale cache entry: <b>")
        crowded = ["fail", "pass"] if workers == 4 and day % 5 != 2 else ["pass"]
        run.result("tests/test_w.py::test_port", crowded, message="address already in use")
        for steady in range(6):
            run.result(f"tests/test_s.py::test_{steady}", ["pass"])
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.conn.close()
    return path


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    work = tmp_path / "work"
    work.mkdir()
    (work / "pyproject.toml").write_text(f"[tool.flaketui]\nowner_fallback = '{IMG_OWNER}'\n")
    monkeypatch.chdir(work)
    return CliRunner()


def render_html(runner: CliRunner, history: Path, *args: str) -> str:
    result = runner.invoke(cli, ["report", str(history), "--now", NOW, "--format", "html", *args])
    assert result.exit_code == 0, result.output
    return result.output


class Page(HTMLParser):
    """Every tag with its attributes, the text outside scripts and styles, the script bodies."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._raw: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in ("script", "style"):
            self._raw = tag

    def handle_endtag(self, tag: str) -> None:
        if tag == self._raw:
            self._raw = None

    def handle_data(self, data: str) -> None:
        if self._raw == "script":
            self.scripts.append(data)
        elif self._raw is None:
            self.text.append(data)


def parse(page: str) -> Page:
    parser = Page()
    parser.feed(page)
    parser.close()
    return parser


def test_a_one_day_window_is_one_day(runner: CliRunner, tmp_path: Path) -> None:
    Path("pyproject.toml").write_text("[tool.flaketui]\nwindow_days = 1\n")
    page = parse(render_html(runner, hostile_history(tmp_path / "h.db")))
    assert "As of 2026-11-01T00:00:00Z, window 1 day." in "".join(page.text)


def test_ci_data_shows_as_text_never_as_markup(runner: CliRunner, tmp_path: Path) -> None:
    page = parse(render_html(runner, hostile_history(tmp_path / "h.db")))
    names = [tag for tag, _attrs in page.tags]
    assert names.count("script") == 1  # the page's own sorting and filtering
    assert "img" not in names
    assert not any(key.startswith("on") for _tag, attrs in page.tags for key in attrs)
    text = "".join(page.text)
    assert SCRIPT_ID in text
    assert 'Timeout <img src=x onerror="window.pwned=2"> waiting for "db"' in text
    assert IMG_OWNER in text


def test_ci_data_shows_in_the_order_it_is_written(runner: CliRunner, tmp_path: Path) -> None:
    # A right-to-left override would show "test_\u202elive" as "test_evil"; ESC and BEL are not
    # text, and a browser shows a CR in an id as a space. Each shows as its escape; a message
    # keeps its lines.
    db = open_history(tmp_path / "h.db")
    hb = HistoryBuilder(db)
    for day in range(25):
        run = hb.run(ts=T0 + timedelta(days=day), commit=f"c{day:02d}")
        outcomes = ["fail", "pass"] if day % 3 == 0 else ["pass"]
        run.result("t.py::test_\u202elive\x1b[31m\rz", outcomes, message="one\ntwo \u2066x\x07")
    db.conn.close()
    page = parse(render_html(runner, tmp_path / "h.db"))
    text = "".join(page.text)
    assert "t.py::test_\\u202elive\\x1b[31m\\rz" in text  # an id is one line: CR too
    assert "one\ntwo \\u2066x\\x07" in text
    bidi = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    assert not [c for c in text if c not in "\n\t" and (ord(c) < 32 or c in bidi)]


def test_self_contained_and_offline(runner: CliRunner, tmp_path: Path) -> None:
    raw = render_html(runner, hostile_history(tmp_path / "h.db"))
    page = parse(raw)
    for tag, attrs in page.tags:
        assert "src" not in attrs, tag
        assert attrs.get("href") is None or str(attrs["href"]).startswith("#"), attrs
    assert "url(" not in raw and "@import" not in raw
    assert "http://" not in raw and "https://" not in raw
    policy = next(a["content"] for t, a in page.tags if a.get("http-equiv"))
    assert "default-src 'none'" in str(policy)


def test_header_lists_and_sections(runner: CliRunner, tmp_path: Path) -> None:
    page = parse(render_html(runner, hostile_history(tmp_path / "h.db")))
    counts = {a["data-count"]: None for _t, a in page.tags if "data-count" in a}
    assert set(counts) == {"flaky", "regression", "insufficient", "healthy"}
    text = "".join(page.text)
    assert "As of 2026-11-01T00:00:00Z, window 90 days." in text
    ids = {a.get("id") for _t, a in page.tags}
    assert {"tests", "regressions", "heatmap", "details", "t0", "t1", "t2"} <= ids
    assert "bad on main for the last 5 runs since commit c20 (last good c19)" in text
    # The interval plots name each worker; the heatmap has a cell per run of each test.
    assert "worker gw0: " in text and "worker count 2: " in text
    assert sum(1 for t, a in page.tags if t == "rect") == 3 * 25
    assert sum(1 for t, a in page.tags if t == "svg" and a.get("class") == "spark") == 3


@pytest.mark.parametrize("fmt", ["table", "json", "csv", "markdown", "html"])
def test_output_option_writes_the_same_bytes(runner: CliRunner, tmp_path: Path, fmt: str) -> None:
    history = hostile_history(tmp_path / "h.db")
    shown = runner.invoke(cli, ["report", str(history), "--now", NOW, "--format", fmt])
    target = tmp_path / f"report.{fmt}"
    written = runner.invoke(
        cli, ["report", str(history), "--now", NOW, "--format", fmt, "-o", str(target)]
    )
    assert shown.exit_code == written.exit_code == 0, written.output
    assert written.output == ""
    assert target.read_text(encoding="utf-8") == shown.output


def test_output_to_a_directory_is_one_line(runner: CliRunner, tmp_path: Path) -> None:
    history = hostile_history(tmp_path / "h.db")
    result = runner.invoke(cli, ["report", str(history), "--format", "html", "-o", str(tmp_path)])
    assert result.exit_code == 1
    assert "is a directory" in result.output


def test_size_for_a_thousand_tests(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    __import__("generate")
    generate = sys.modules["generate"].generate
    history = tmp_path / "big.db"
    shape = generate(history, 40_000, tests_count=1000)
    assert shape["tests"] == 1000
    target = tmp_path / "big.html"
    result = runner.invoke(cli, ["report", str(history), "--format", "html", "-o", str(target)])
    assert result.exit_code == 0, result.output
    page = target.read_bytes()
    assert page.count(b"<tr data-verdict=") >= 950  # every listed test is in the table
    assert len(page) <= MAX_BYTES_1000_TESTS


def section(raw: str, name: str) -> Page:
    """One `<section id=name>` of the page, parsed."""
    start = raw.index(f'<section id="{name}">')
    return parse(raw[start : raw.index("</section>", start) + len("</section>")])


def test_likely_causes_and_tests_failing_together(runner: CliRunner, tmp_path: Path) -> None:
    raw = render_html(runner, cause_history(tmp_path / "h.db"))
    # The ranked list names each test's first suspect, its figures in the tooltip.
    ranked = raw[raw.index('<section id="ranked">') : raw.index('<section id="regressions">')]
    rows = ranked.split("<tr data-verdict=")[1:]
    port = next(row for row in rows if "test_port" in row)
    assert ">4 workers</td>" in port and 'title="' in port and "bad of" in port
    leak = next(row for row in rows if "test_reads_cache" in row)
    assert 'data-label="cause" class="nocause">-</td>' in leak
    # The two victims of one leak are one group; the crowded test is not in it.
    together = section(raw, "cofailures")
    text = "".join(together.text)
    assert "tests/test_leak.py::test_reads_cache" in text
    assert VICTIM_ID in text
    assert "test_port" not in text
    assert "b" not in [tag for tag, _attrs in together.tags]  # an id's markup stays text
    # The detail of the crowded test lists its suspect in words.
    details = "".join(section(raw, "details").text)
    assert "Likely causes" in details and "4 workers: " in details


def test_nothing_failing_together_says_so(runner: CliRunner, tmp_path: Path) -> None:
    together = section(render_html(runner, hostile_history(tmp_path / "h.db")), "cofailures")
    assert "No flaky tests fail together." in "".join(together.text)


def limit_history(path: Path) -> Path:
    """Two pairs of flaky tests, each pair failing in the same runs, a regression, a healthy
    test: ranked a1, a2, b1, b2, then R1, then the healthy one."""
    db = open_history(path)
    hb = HistoryBuilder(db)
    for day in range(40):
        run = hb.run(ts=T0 + timedelta(hours=12 * day), commit=f"c{day:02d}")
        for pair, when in (("a", 1), ("b", 4)):
            outcome = ["fail", "pass"] if day % 6 == when else ["pass"]
            for member in (1, 2):
                run.result(f"tests/test_{pair}.py::test_{member}", outcome)
        run.result("tests/test_r.py::test_broken", ["fail"] if day >= 30 else ["pass"])
        run.result("tests/test_ok.py::test_ok", ["pass"])
    db.conn.close()
    return path


def test_limit_cuts_each_section_to_its_first_n(runner: CliRunner, tmp_path: Path) -> None:
    history = limit_history(tmp_path / "h.db")

    def rows(raw: str, name: str) -> int:
        return sum(tag == "tr" for tag, _attrs in section(raw, name).tags) - 1  # the head's

    def names(raw: str, name: str, marker: str) -> list[str]:
        """The test id after each `marker` (the tag it is in) of a section, in order."""
        blocks = raw.split(f'<section id="{name}">')[1].split("</section>")[0].split(marker)[1:]
        return ["".join(parse(block.split("</")[0]).text) for block in blocks]

    raw = render_html(runner, history, "--limit", "1")
    assert rows(raw, "ranked") == 1 and rows(raw, "regressions") == 1
    assert rows(raw, "cofailures") == 1  # the first group, as JSON lists it
    # The heatmap and the details show the tests listed: the regression, then the ranked test.
    listed = ["tests/test_r.py::test_broken", "tests/test_a.py::test_1"]
    assert names(raw, "heatmap", '<div class="id">') == names(raw, "details", "<h3>") == listed
    # The header counts every test, and the ranked list says it is cut.
    counts = "".join(parse(raw[: raw.index("</header>")]).text)
    assert "4flaky" in counts and "1regression" in counts
    assert "The first 1 test (--limit): each section below lists as many at most" in raw
    raw = render_html(runner, history, "--limit", "2")
    assert rows(raw, "ranked") == 2 and rows(raw, "cofailures") == 2
    expected = [
        "tests/test_r.py::test_broken",
        "tests/test_a.py::test_1",
        "tests/test_a.py::test_2",
    ]
    assert names(raw, "heatmap", '<div class="id">') == names(raw, "details", "<h3>") == expected
    # A limit that takes every test changes nothing.
    assert render_html(runner, history, "--limit", "6") == render_html(runner, history)
