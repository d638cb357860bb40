"""The HTML report in a real headless Chromium (Debian's `chromium`, driven by Playwright).

The page is opened from disk with every request outside that file refused and recorded: the
test fails if the page asks the network for anything. It reads the counts, sorts and filters the
table, checks that markup in CI data shows as text and never runs, that a notice under the header
shows as a warning, and that the page fits a phone's width and hides its controls in print.

`python tests/browser/test_report_browser.py` rewrites docs/report-html.png from the sample
history.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script
    sys.path.insert(0, str(ROOT))

from flaketui.cli.commands import cli  # noqa: E402
from tests.cli.test_report_default_branch_cli import NOW as BRANCH_NOW  # noqa: E402
from tests.cli.test_report_default_branch_cli import branch_history  # noqa: E402
from tests.cli.test_report_html import (  # noqa: E402
    IMG_MESSAGE,
    IMG_OWNER,
    NOW,
    SCRIPT_ID,
    T0,
    hostile_history,
)
from tests.connections import open_history  # noqa: E402
from tests.core.history_builder import HistoryBuilder  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# With headless=True Playwright adds --headless itself.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = ROOT / "docs" / "report-html.png"
SAMPLE_NOW = "2026-11-30T18:00:00Z"  # the sample history as its README describes it

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


class Browser:
    """One fresh Chromium profile; pages whose requests outside their own file are refused."""

    def __init__(self, context: Any) -> None:
        self.context = context
        self.foreign: list[str] = []
        self.console_errors: list[str] = []

    def open(self, path: Path, *, width: int = 1100, height: int = 900) -> Any:
        page = self.context.new_page()
        page.set_viewport_size({"width": width, "height": height})
        own = path.resolve().as_uri()

        def route(request_route: Any) -> None:
            url = request_route.request.url
            if url == own:
                request_route.continue_()
            else:
                self.foreign.append(url)
                request_route.abort()

        page.route("**/*", route)
        page.on("request", lambda r: None if r.url == own else self.foreign.append(r.url))
        page.on(
            "console", lambda m: self.console_errors.append(m.text) if m.type == "error" else None
        )
        page.goto(own)
        return page


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    yield from _browser(tmp_path)


@pytest.fixture
def desktop_browser(tmp_path: Path) -> Iterator[Browser]:
    """A browser drawing classic scrollbars, as desktop Chrome on Linux and Windows does: the
    page's width is the window's less the scrollbar, its media queries still the window's."""
    yield from _browser(tmp_path, scrollbars=True)


def _browser(tmp_path: Path, *, scrollbars: bool = False) -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_FLAGS,
            ignore_default_args=["--hide-scrollbars"] if scrollbars else None,
            offline=True,
        )
        try:
            yield Browser(context)
        finally:
            context.close()


def write_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, Any]]:
    """The hostile history's HTML report and its JSON twin."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "pyproject.toml").write_text(f"[tool.flaketui]\nowner_fallback = '{IMG_OWNER}'\n")
    monkeypatch.chdir(work)
    history = hostile_history(tmp_path / "h.db")
    target = tmp_path / "report.html"
    runner = CliRunner()
    base = ["report", str(history), "--now", NOW]
    made = runner.invoke(cli, [*base, "--format", "html", "-o", str(target)])
    assert made.exit_code == 0, made.output
    as_json = runner.invoke(cli, [*base, "--format", "json"])
    return target, json.loads(as_json.output)


def column(page: Any, index: int) -> list[str]:
    """The visible cells of one column of the tests table, top to bottom."""
    return list(
        page.eval_on_selector_all(
            "#tests tbody tr:not([hidden])",
            f"rows => rows.map(r => r.cells[{index}].textContent)",
        )
    )


def test_counts_sort_filter_and_no_network(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, data = write_report(tmp_path, monkeypatch)
    page = browser.open(path)
    expected = {v: sum(t["verdict"] == v for t in data["tests"]) for v in ("flaky", "regression")}
    assert expected == {"flaky": 2, "regression": 1}
    for verdict in ("flaky", "regression", "insufficient", "healthy"):
        shown = page.inner_text(f'[data-count="{verdict}"]')
        assert int(shown) == sum(t["verdict"] == verdict for t in data["tests"])
    assert column(page, 1)[0] == data["tests"][0]["test_id"]
    # As the page opens, before any choice: the tests needing attention.
    shown = {t["test_id"] for t in data["tests"] if t["verdict"] != "healthy"}
    assert set(column(page, 1)) == shown
    assert page.inner_text("#shown") == str(len(shown))

    damage = page.locator("#tests th", has_text="Damage")
    damage.click()
    ascending = [float(v) for v in column(page, 3)]
    assert ascending == sorted(ascending) and ascending[0] < ascending[-1]
    assert damage.get_attribute("aria-sort") == "ascending"
    damage.click()
    descending = [float(v) for v in column(page, 3)]
    assert descending == sorted(ascending, reverse=True)
    page.locator("#tests th", has_text="Test").click()
    names = column(page, 1)
    assert names == sorted(names, key=str.lower)

    page.fill("#filter", "test_pool")
    assert column(page, 1) == ["tests/test_z.py::test_pool"]
    assert page.inner_text("#shown") == "1"
    page.fill("#filter", "")
    page.select_option("#verdict", "regression")
    assert column(page, 1) == ["tests/test_c.py::test_sum"]

    # Healthy tests wait hidden until chosen, or until a search names them.
    healthy = [t["test_id"] for t in data["tests"] if t["verdict"] == "healthy"]
    assert healthy
    page.select_option("#verdict", "")
    assert not set(healthy) & set(column(page, 1))
    assert int(page.inner_text("#shown")) == len(data["tests"]) - len(healthy)
    page.fill("#filter", healthy[0])
    assert healthy[0] in column(page, 1)
    page.fill("#filter", "")
    page.select_option("#verdict", "all")
    assert sorted(column(page, 1)) == sorted(t["test_id"] for t in data["tests"])
    page.select_option("#verdict", "healthy")
    assert sorted(column(page, 1)) == sorted(healthy)

    assert browser.foreign == []
    assert browser.console_errors == []


def test_markup_in_ci_data_shows_as_text(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _data = write_report(tmp_path, monkeypatch)
    page = browser.open(path)
    assert page.evaluate("window.pwned") is None
    assert page.locator("#tests td.id", has_text=SCRIPT_ID).count() == 1
    assert page.locator("#details pre", has_text=IMG_MESSAGE).count() == 1
    assert page.locator("#tests td", has_text=IMG_OWNER).count() == 4
    assert page.locator("img").count() == 0
    assert page.locator("script").count() == 1
    assert browser.foreign == []


def sample_report(tmp_path: Path) -> Path:
    """The sample history's HTML report, with its owners (they widen the tests table)."""
    history = tmp_path / "history.db"
    shutil.copyfile(ROOT / "sample_data" / "history.db", history)
    shutil.copyfile(ROOT / "sample_data" / "CODEOWNERS", tmp_path / "CODEOWNERS")
    target = tmp_path / "report.html"
    args = ["report", str(history), "--now", SAMPLE_NOW, "--format", "html", "-o", str(target)]
    made = CliRunner().invoke(cli, args)
    assert made.exit_code == 0, made.output
    assert "@acme/platform" in target.read_text()
    return target


def test_phone_width_and_print(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _data = write_report(tmp_path, monkeypatch)
    # The sample's details hold interval plots and a regression's full commit ids.
    sample = browser.open(sample_report(tmp_path), width=390, height=844)
    for shown in (sample, browser.open(path, width=390, height=844)):
        assert shown.locator("#details svg.plot").count() > 0
        for width in range(320, 701, 20):  # the smallest phones' width up
            shown.set_viewport_size({"width": width, "height": 844})
            overflow = shown.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, width  # wide tables scroll inside their own box, the page not
    sample.close()
    page = shown
    page.set_viewport_size({"width": 390, "height": 844})
    assert not page.locator("#tests th", has_text="Trend").is_visible()
    page.emulate_media(media="print")
    assert not page.locator("#filter").is_visible()
    assert page.locator("#details").is_visible()
    page.set_viewport_size({"width": 794, "height": 1123})  # A4 at 96 dpi
    assert page.evaluate("document.documentElement.scrollWidth") <= 794
    screenshot = tmp_path / "phone.png"
    page.screenshot(path=str(screenshot), full_page=True)
    assert screenshot.stat().st_size > 0


# A message with no space to break at, as Java's `expected:<[...]>` prints a list.
UNBROKEN_MESSAGE = (
    "AssertionError: expected:<[" + "alpha,bravo,charlie,delta,echo,foxtrot,golf,mike," * 4 + "]>"
)


def test_a_failure_signature_without_spaces_wraps_inside_the_page(
    browser: Browser, tmp_path: Path
) -> None:
    """A signature with no space to break at (a list a message prints) wraps within its test's
    section: neither a phone nor a wide window scrolls the page sideways to read it."""
    db = open_history(tmp_path / "h.db")
    hb = HistoryBuilder(db)
    hb.sequence(
        "tests/test_io.py::test_reads_cache",
        "PRPPRPPPRPPRPP",
        start=T0,
        step=timedelta(hours=12),
        message=UNBROKEN_MESSAGE,
    )
    db.conn.close()
    target = tmp_path / "report.html"
    args = ["report", str(tmp_path / "h.db"), "--now", NOW, "--format", "html", "-o", str(target)]
    made = CliRunner().invoke(cli, args)
    assert made.exit_code == 0, made.output
    for width in (390, 1400):
        page = browser.open(target, width=width, height=900)
        signature = page.locator("#details li", has_text="mike,alpha").first
        assert signature.is_visible()
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0, width
        page.close()


def test_a_laptop_width_shows_every_column_but_the_wide_ones_without_scrolling(
    desktop_browser: Browser, tmp_path: Path
) -> None:
    """At 1100 px the tests table fits its box, the reasons in view, the score, bad-run and
    trend columns left out; with room for them (1400 px) they are shown and it still fits. No
    width between leaves them shown without that room (a 1280 px laptop's window included),
    and below it (half a 1920 px screen) each test is a card, its reason in view."""
    target = sample_report(tmp_path)
    box = "document.querySelector('#tests').parentElement"
    browser = desktop_browser
    for width, trend in ((1100, False), (1400, True)):
        page = browser.open(target, width=width, height=900)
        assert page.evaluate(f"{box}.scrollWidth - {box}.clientWidth") <= 0, width
        assert page.locator("#tests th", has_text="Reason").is_visible()
        assert page.locator("#tests th", has_text="Trend").is_visible() is trend
        page.close()
    page = browser.open(target, width=1100, height=900)
    for width in range(700, 1401, 10):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate(f"{box}.scrollWidth - {box}.clientWidth") <= 0, width
    page.set_viewport_size({"width": 960, "height": 900})
    first = page.locator("#tests tbody tr").first
    assert first.evaluate("row => getComputedStyle(row).display") == "flex"  # a card
    assert first.locator("td.reason").is_visible()
    page.close()


def test_a_notice_shows_as_a_warning_under_the_header(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A history without a run on the default branch: the warning between the header's line
    and its counts, on its own background, within a phone's width."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    history = branch_history(tmp_path, None)
    target = tmp_path / "report.html"
    args = ["report", str(history), "--now", BRANCH_NOW, "--format", "html", "-o", str(target)]
    made = CliRunner().invoke(cli, args)
    assert made.exit_code == 0, made.output
    for width in (1100, 390):
        page = browser.open(target, width=width, height=844)
        notice = page.locator("header p.notice")
        assert notice.count() == 1 and notice.is_visible()
        assert notice.inner_text().startswith("⚠ No run of the window is on the default branch")
        meta, counts = page.locator("header p.meta"), page.locator("#counts")
        top = notice.bounding_box()
        assert meta.bounding_box()["y"] < top["y"] < counts.bounding_box()["y"]
        colour = notice.evaluate("n => getComputedStyle(n).backgroundColor")
        assert colour == "rgb(255, 248, 197)"
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
        page.screenshot(path=str(tmp_path / f"notice-{width}.png"))
    assert browser.foreign == []
    assert browser.console_errors == []


def write_docs_screenshot() -> None:
    """Screenshot the top of the sample history's report (six tests listed) for the docs."""
    from playwright.sync_api import sync_playwright

    os.chdir(ROOT)  # the page's notices name the history as a reader of the docs would give it
    history = Path("sample_data") / "history.db"
    target = ROOT / "bench" / "out" / "report-html-sample.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    args = ["report", str(history), "--now", SAMPLE_NOW, "--format", "html", "--limit", "6"]
    args += ["-o", str(target)]
    made = CliRunner().invoke(cli, args)
    assert made.exit_code == 0, made.output
    with sync_playwright() as driver:
        browser = driver.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1700})
        page.goto(target.resolve().as_uri())
        page.screenshot(path=str(SCREENSHOT))
        browser.close()
    print(SCREENSHOT)


if __name__ == "__main__":
    write_docs_screenshot()
