"""The report as one self-contained HTML file: to attach to a CI run and open from anywhere.

Everything is inline (CSS, SVG, a few lines of JavaScript that sort and filter the tables) and a
Content-Security-Policy forbids the page any request, so it opens offline and leaks nothing.
Every string from CI (test ids, messages, owners, reasons, commits, run ids) goes through
`html.escape` and shows as text. Contents: the header (as of, window, a warning for each thing
the ranking leaves out or counts in part, tests per verdict); every listed test, ranked, with
its owner, likely cause, reason and a 30-day sparkline of its score (the healthy ones hidden
until chosen or searched for); the regressions with their
change point; the flaky tests that fail in the same runs, grouped, with the cause they share; a
heatmap of the outcomes of the regressed tests and the top flaky tests (HEATMAP_TESTS in all)
over their last HEATMAP_RUNS runs; and for the first DETAIL_TESTS of them, their suspects,
failure signatures and the Wilson interval of their failure rate per worker count and worker
id. The page grows by under a kilobyte per listed test (a 1 000-test
history is well under 2 MB); the per-test and per-group sections are capped.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from flaketui.core.config import Config
from flaketui.core.history.dbhandle import Connected
from flaketui.core.output.notices import report_notices
from flaketui.core.output.text import visible, visible_lines
from flaketui.core.scoring.detail import (
    RunOutcome,
    SignatureCount,
    outcome_sequence,
    signatures_of,
)
from flaketui.core.scoring.pivot import Pivot, PivotRow, worker_pivot
from flaketui.core.scoring.report import VERDICT_ORDER
from flaketui.core.scoring.results import GroupVerdict, Report, Suspect, TestVerdict, Verdict
from flaketui.core.timeutil import to_iso
from flaketui.core.words import plural

HEATMAP_TESTS = 40
REGRESSIONS_SHOWN = 10  # of HEATMAP_TESTS
HEATMAP_RUNS = 60
DETAIL_TESTS = 25
SIGNATURES_SHOWN = 5
CAUSES_SHOWN = 5
COFAILURE_MEMBERS_SHOWN = 8
EXAMPLE_CHARS = 600
COMMIT_CHARS = 12
SPARK_WIDTH, SPARK_HEIGHT = 90, 18
CELL, CELL_GAP = 8, 2
PLOT_WIDTH, PLOT_LABEL, PLOT_ROW = 360, 90, 18
OUTCOME_CLASSES = {"pass": "p", "flaky": "k", "fail": "f", "skipped": "s"}

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)

STYLE = """
:root{--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--bg:#fff;--alt:#f6f8fa;
--flaky:#d97706;--regression:#cf222e;--healthy:#1a7f37;--insufficient:#8c959f;
--pass:#2da44e;--fail:#cf222e;--kflaky:#e8a317;--skip:#d0d7de;
--warn-bg:#fff8c5;--warn-line:#d4a72c;--warn-fg:#4d2d00}
*{box-sizing:border-box}
body{margin:0 auto;max-width:1400px;padding:1rem;font:14px/1.45 system-ui,-apple-system,
"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
h1{font-size:1.4rem;margin:.2rem 0}h2{font-size:1.15rem;margin:1.6rem 0 .5rem;
border-bottom:1px solid var(--line);padding-bottom:.2rem}h3{font-size:1rem;margin:1rem 0 .3rem;
word-break:break-all}
.meta{color:var(--muted);margin:.2rem 0 .6rem;overflow-wrap:anywhere}
.notice{margin:.4rem 0;padding:.4rem .7rem;border:1px solid var(--warn-line);
border-left-width:4px;border-radius:6px;background:var(--warn-bg);color:var(--warn-fg)}
.counts{display:flex;flex-wrap:wrap;gap:.5rem;margin:.5rem 0;padding:0;list-style:none}
.counts li{border:1px solid var(--line);border-radius:6px;padding:.3rem .7rem;min-width:7rem}
.counts b{display:block;font-size:1.3rem}
.v-flaky{color:var(--flaky)}.v-regression{color:var(--regression)}
.v-healthy{color:var(--healthy)}.v-insufficient{color:var(--insufficient)}
.controls{display:flex;flex-wrap:wrap;gap:.5rem;margin:.5rem 0}
.controls input,.controls select{font:inherit;padding:.3rem .5rem;border:1px solid var(--line);
border-radius:6px}.controls input{flex:1 1 14rem}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch}
table{border-collapse:collapse;width:100%}
th,td{padding:.3rem .45rem;border-bottom:1px solid var(--line);text-align:left;
vertical-align:top}
th{background:var(--alt);position:sticky;top:0;white-space:nowrap}
th[data-sort]{cursor:pointer}th[data-sort]::after{content:" \\2195";color:var(--muted)}
th[aria-sort=ascending]::after{content:" \\2191"}th[aria-sort=descending]::after{content:" \\2193"}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td.id{overflow-wrap:anywhere;min-width:12rem;font-family:ui-monospace,SFMono-Regular,Menlo,monospace;
font-size:.92em}
tr:nth-child(even) td{background:var(--alt)}
.reason{color:var(--muted);min-width:10rem;overflow-wrap:anywhere}
svg{display:block}svg.spark polyline{fill:none;stroke:var(--flaky);stroke-width:1.5}
svg.spark line{stroke:var(--line);stroke-dasharray:2 2}
.heat{display:grid;grid-template-columns:minmax(8rem,22rem) 1fr;gap:.15rem .6rem;
align-items:center}
.heat .id{font-size:.85em;overflow-wrap:anywhere}
rect.p{fill:var(--pass)}rect.k{fill:var(--kflaky)}rect.f{fill:var(--fail)}rect.s{fill:var(--skip)}
rect.x{opacity:.35}
.legend{display:flex;flex-wrap:wrap;gap:.8rem;color:var(--muted);margin:.3rem 0}
.legend i{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:-.1rem}
.detail{border:1px solid var(--line);border-radius:6px;padding:.5rem .8rem;margin:.8rem 0;
break-inside:avoid}
.detail li{overflow-wrap:anywhere}
.detail pre{white-space:pre-wrap;word-break:break-all;background:var(--alt);padding:.4rem;
margin:.2rem 0;max-height:12rem;overflow:auto;font-size:.85em}
svg.plot{max-width:100%;height:auto}.plot line.axis{stroke:var(--line)}
.plot line.ci{stroke:var(--fg);stroke-width:2}
.plot circle{fill:var(--regression)}.plot text{font-size:11px;fill:var(--muted)}
.empty{color:var(--muted);font-style:italic}
ul.members{margin:0;padding-left:1rem}ul.suspects{margin:.2rem 0;padding-left:1.2rem}
.plots{display:flex;flex-wrap:wrap;gap:0 2rem}h4{margin:.6rem 0 .2rem;font-size:.92rem}
@media (max-width:1320px){.wide{display:none}}
@media (max-width:700px){body{padding:.5rem;font-size:13px}
.heat{grid-template-columns:1fr}.counts li{min-width:5.5rem}}
@media screen and (max-width:1090px){#tests thead tr{display:flex;flex-wrap:wrap;gap:.25rem}
#tests th{border:1px solid var(--line);border-radius:4px;padding:.15rem .4rem}
#tests tbody tr{display:flex;flex-wrap:wrap;gap:.1rem .8rem;padding:.45rem .2rem;
border-bottom:1px solid var(--line)}
#tests tbody tr:nth-child(even){background:var(--alt)}
#tests td{border:0;padding:0;background:none}
#tests td.nocause{display:none}
#tests td.id{flex:1 1 calc(100% - 3rem);min-width:0}#tests td.reason{flex-basis:100%;min-width:0}
#tests td[data-label]::before{content:attr(data-label) " ";color:var(--muted)}}
@media print{.controls{display:none}th{position:static}body{max-width:none;padding:0;
font-size:9pt}th[data-sort]::after{content:""}tr,.heat>*{break-inside:avoid}
.scroll{overflow:visible}.wide{display:none}td.id{min-width:16em}.reason{min-width:0}
a{color:inherit;text-decoration:none}}
"""

SCRIPT = """
(function(){
function key(cell,type){var v=cell.getAttribute('data-v');if(v===null)v=cell.textContent;
if(type==='num'){var n=parseFloat(v);return isNaN(n)?Infinity:n}return v.toLowerCase()}
document.querySelectorAll('table.sortable').forEach(function(table){
var heads=table.querySelectorAll('th');
heads.forEach(function(th,index){if(!th.hasAttribute('data-sort'))return;
th.addEventListener('click',function(){
var asc=th.getAttribute('aria-sort')!=='ascending',type=th.getAttribute('data-sort');
heads.forEach(function(h){h.removeAttribute('aria-sort')});
th.setAttribute('aria-sort',asc?'ascending':'descending');
var body=table.tBodies[0],keyed=Array.prototype.map.call(body.rows,function(r,i){
return [key(r.cells[index],type),i,r]}),sign=asc ? 1 : -1;
keyed.sort(function(a,b){return (a[0]<b[0]?-sign:a[0]>b[0]?sign:0)||a[1]-b[1]});
keyed.forEach(function(k){body.appendChild(k[2])})})})});
var box=document.getElementById('filter'),pick=document.getElementById('verdict');
function apply(){var words=box.value.toLowerCase().split(/\\s+/).filter(Boolean),
v=pick.value,shown=0;
document.querySelectorAll('#tests tbody tr').forEach(function(r){
var verdict=r.getAttribute('data-verdict'),text=r.textContent.toLowerCase(),
ok=(v==='all'||v===verdict||(!v&&(words.length>0||verdict!=='healthy')))&&
words.every(function(w){return text.indexOf(w)>=0});r.hidden=!ok;if(ok)shown++});
document.getElementById('shown').textContent=shown}
if(box){box.addEventListener('input',apply);pick.addEventListener('change',apply)}
})();
"""


def e(value: object) -> str:
    """CI data as HTML text (quotes escaped too, so it is safe in attributes), its control and
    bidirectional formatting characters shown as escapes (`visible`): one line, read in the
    order it is written."""
    return html.escape("" if value is None else visible(value), quote=True)


def e_lines(value: str) -> str:
    """`e` for a message shown on its own lines (a <pre>): line breaks and tabs kept."""
    return html.escape(visible_lines(value), quote=True)


def breakable(test_id: str) -> str:
    """A test id as HTML text that may wrap after each `/` and `::` of its path."""
    return e(test_id).replace("/", "/<wbr>").replace("::", "::<wbr>")


@dataclass(slots=True)
class TestDetail:
    """What the per-test sections show for one test."""

    test: TestVerdict
    runs: list[RunOutcome]
    signatures: list[SignatureCount]
    pivot: Pivot | None


def collect_details(
    db: Connected,
    report: Report,
    config: Config,
    *,
    heatmap_tests: int = HEATMAP_TESTS,
    limit: int | None = None,
) -> list[TestDetail]:
    """Outcome sequences of the regressed tests (up to REGRESSIONS_SHOWN), then of the flaky
    ones by rank, heatmap_tests in all; signatures and pivots too for the first DETAIL_TESTS.
    With `limit`, those of the tests the page lists: the first `limit` regressions and the flaky
    tests among the first `limit` ranked."""
    regressions = [t for t in report.tests if t.verdict == "regression"]
    regressions = regressions[
        : REGRESSIONS_SHOWN if limit is None else min(limit, REGRESSIONS_SHOWN)
    ]
    ranked = report.tests if limit is None else report.tests[:limit]
    flaky = [t for t in ranked if t.verdict == "flaky"]
    chosen = [*regressions, *flaky][:heatmap_tests]
    details = []
    for index, test in enumerate(chosen):
        runs = outcome_sequence(db, test.test_id, now=report.now, config=config)
        signatures: list[SignatureCount] = []
        pivot = None
        if index < DETAIL_TESTS:
            signatures = signatures_of(db, test.test_id, now=report.now, config=config)
            pivot = worker_pivot(db, test.test_id, now=report.now, config=config)
        details.append(TestDetail(test, runs, signatures, pivot))
    return details


def render_html(
    report: Report,
    details: Sequence[TestDetail],
    *,
    threshold: float = 0.30,
    limit: int | None = None,
    history: str | None = None,
    now: str | None = None,
) -> str:
    """The whole page; history and now (see report_notices) name the outages' review command in
    its notices. `limit` cuts each list of the page to its first `limit` entries, as it cuts
    each list of the JSON report: the ranked tests, the regressions, the groups failing
    together, and the details (collect_details with the same limit); the header counts every
    test."""
    tests = report.tests if limit is None else report.tests[:limit]
    counts = dict.fromkeys(VERDICT_ORDER, 0)
    for test in report.tests:
        counts[test.verdict] += 1
    anchors = {d.test.test_id: f"t{index}" for index, d in enumerate(details) if d.pivot}
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>flaketui report as of {e(to_iso(report.now))}</title>",
        f"<style>{STYLE}</style></head><body>",
        *_header(report, counts, report_notices(report, history, now)),
        *_test_table(tests, threshold, anchors, limited=len(tests) < len(report.tests)),
        *_regressions(report.tests, anchors, limit),
        *_cofailures(report.cofailures[:limit], anchors),
        *_heatmap(details),
        *_details(details),
        f"<script>{SCRIPT}</script>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _header(report: Report, counts: dict[Verdict, int], notices: list[str]) -> list[str]:
    clamp = (
        " (the history is older than the window: shown as of its newest run)"
        if report.now_was_clamped
        else ""
    )
    items = "".join(
        f'<li class="v-{verdict}" data-verdict="{verdict}"><b data-count="{verdict}">{count}</b>'
        f"{verdict}</li>"
        for verdict, count in counts.items()
    )
    return [
        "<header><h1>flaketui report</h1>",
        f'<p class="meta">As of <time id="as-of">{e(to_iso(report.now))}</time>, '
        f'window <span id="window">{report.window_days}</span> '
        f"day{'' if report.window_days == 1 else 's'}{e(clamp)}.</p>",
        *(
            f'<p class="notice" role="note"><span aria-hidden="true">⚠ </span>{e(notice)}</p>'
            for notice in notices
        ),
        f'<ul class="counts" id="counts">{items}</ul></header>',
    ]


def sparkline_svg(values: Sequence[float], floor_max: float) -> str:
    """An inline SVG sparkline scaled to [0, max(max(values), floor_max)], threshold dashed;
    empty for a series that never left zero."""
    if not values or max(values) <= 0:
        return ""  # a flat zero says nothing a healthy verdict does not
    top = max(max(values), floor_max)
    step = SPARK_WIDTH / max(1, len(values) - 1)

    def y(value: float) -> float:
        return round(SPARK_HEIGHT - 1 - value / top * (SPARK_HEIGHT - 2), 1)

    drawn = [(round(i * step, 1), y(v)) for i, v in enumerate(values)]
    # A point between two at its height adds nothing to the line: days at one score (most of
    # a healthy test's) are drawn as one segment, the page a fraction of the size.
    kept = [
        point
        for i, point in enumerate(drawn)
        if i == 0 or i == len(drawn) - 1 or not drawn[i - 1][1] == point[1] == drawn[i + 1][1]
    ]
    points = " ".join(f"{x},{height}" for x, height in kept)
    limit = y(floor_max)
    return (
        f'<svg class="spark" width="{SPARK_WIDTH}" height="{SPARK_HEIGHT}" role="img" '
        f'aria-label="score over the last {len(values)} days">'
        f'<line x1="0" x2="{SPARK_WIDTH}" y1="{limit}" y2="{limit}"/>'
        f'<polyline points="{points}"/></svg>'
    )


def _rank(test: TestVerdict) -> tuple[str, str]:
    """(shown, sort key): flaky ranks first, regressions after, the rest unranked."""
    if test.rank is not None:
        return str(test.rank), str(test.rank)
    if test.regression_rank is not None:
        return f"R{test.regression_rank}", str(100_000 + test.regression_rank)
    return "-", ""


def _test_table(
    tests: Sequence[TestVerdict], threshold: float, anchors: dict[str, str], *, limited: bool
) -> list[str]:
    """The ranked list of `tests`; `limited`: --limit left tests out of it."""
    rows = []
    for test in tests:
        shown, order = _rank(test)
        name = breakable(test.test_id)
        if test.test_id in anchors:
            name = f'<a href="#{anchors[test.test_id]}">{name}</a>'
        scores = test.scores
        # Healthy tests wait hidden until asked for (see the verdict list): a browser lays
        # out no hidden row, and in a big suite they are most of the table.
        hidden = " hidden" if test.verdict == "healthy" else ""
        rows.append(
            f'<tr data-verdict="{e(test.verdict)}"{hidden}>'
            f'<td class="num" data-v="{order}">{shown}</td>'
            f'<td class="id">{name}</td><td class="v-{e(test.verdict)}">{e(test.verdict)}</td>'
            f'<td class="num" data-label="damage">{scores.damage:.3f}</td>'
            f'<td class="num wide">{scores.recency_score:.3f}</td>'
            f'<td class="num" data-label="runs">{scores.runs}</td>'
            f'<td class="num" data-label="flaky">{scores.flaky_runs}</td>'
            f'<td class="num wide">{scores.failed_runs}</td>'
            f'<td data-label="owner">{e(test.owner or "-")}</td>'
            f"<td{_cause_cell(test.causes)}</td>"
            f'<td class="wide">{sparkline_svg(test.daily_scores, threshold)}</td>'
            f'<td class="reason">{e(test.reason)}</td></tr>'
        )
    verdicts = "".join(f'<option value="{v}">{v}</option>' for v in VERDICT_ORDER)
    attention = sum(test.verdict != "healthy" for test in tests)
    cut = (
        f'<p class="meta">The first {plural(len(tests), "test")} (--limit): each section below '
        "lists as many at most, with the outcomes and details of the tests listed. The counts "
        "above are of every test.</p>"
    )
    return [
        '<section id="ranked"><h2>Tests, ranked by damage</h2>',
        cut if limited else "",
        '<div class="controls"><input id="filter" type="search" placeholder="Filter: test, '
        'owner, reason..." aria-label="Filter the tests"><select id="verdict" '
        'aria-label="Verdict"><option value="">needing attention</option>'
        f'<option value="all">every verdict</option>{verdicts}</select>'
        f'<span class="meta"><span id="shown">{attention}</span> shown</span></div>',
        '<div class="scroll"><table id="tests" class="sortable"><thead><tr>'
        '<th class="num" data-sort="num">Rank</th><th data-sort="text">Test</th>'
        '<th data-sort="text">Verdict</th><th class="num" data-sort="num">Damage</th>'
        '<th class="num wide" data-sort="num">Score</th><th class="num" data-sort="num">Runs</th>'
        '<th class="num" data-sort="num">Flaky</th>'
        '<th class="num wide" data-sort="num">Bad</th><th data-sort="text">Owner</th>'
        '<th data-sort="text">Likely cause</th><th class="wide">Trend (30 d)</th>'
        '<th data-sort="text">Reason</th></tr></thead><tbody>',
        *rows,
        "</tbody></table></div>",
        "" if rows else '<p class="empty">No tests with counted runs in the window.</p>',
        "</section>",
    ]


def suspect_text(suspect: Suspect) -> str:
    """One suspect in words: its rate under the value against the rest of the runs."""
    return (
        f"{suspect.bad} bad of {suspect.runs} runs ({suspect.rate:.0%}) against "
        f"{suspect.rest_rate:.0%} in the other {suspect.rest_runs}, adjusted p "
        f"{suspect.p_value:.2g}"
    )


def _cause_cell(causes: Sequence[Suspect]) -> str:
    """The attributes and text of a "Likely cause" cell: the first suspect, its figures in the
    tooltip; a dash where no dimension stands out."""
    if not causes:
        return ' data-label="cause" class="nocause">-'
    first = causes[0]
    return f' data-label="cause" title="{e(suspect_text(first))}">{e(first.label)}'


def _cofailures(groups: Sequence[GroupVerdict], anchors: dict[str, str]) -> list[str]:
    """Flaky tests that fail in the same runs: one leak or one broken dependency, many victims."""
    head = [
        '<section id="cofailures"><h2>Failing together</h2>',
        '<p class="meta">Flaky tests whose failures fall in the same runs, ranked by the damage '
        "they do together: often one cause (shared state, a service) behind many tests.</p>",
    ]
    if not groups:
        return [*head, '<p class="empty">No flaky tests fail together.</p></section>']
    rows = []
    for group in groups:
        names = []
        for test_id in group.members[:COFAILURE_MEMBERS_SHOWN]:
            name = breakable(test_id)
            if test_id in anchors:
                name = f'<a href="#{anchors[test_id]}">{name}</a>'
            names.append(f"<li>{name}</li>")
        more = len(group.members) - COFAILURE_MEMBERS_SHOWN
        if more > 0:
            names.append(f'<li class="meta">and {more} more</li>')
        shown = "-" if group.rank is None else str(group.rank)
        rows.append(
            f'<tr><td class="num" data-v="{group.rank or ""}">{shown}</td>'
            f'<td class="id"><ul class="members">{"".join(names)}</ul></td>'
            f'<td class="num">{len(group.members)}</td>'
            f'<td class="num">{group.scores.damage:.3f}</td>'
            f'<td class="num">{group.scores.flaky_runs}</td>'
            f"<td{_cause_cell(group.causes)}</td>"
            f'<td class="reason">{e(group.reason)}</td></tr>'
        )
    return [
        *head,
        '<div class="scroll"><table class="sortable"><thead><tr>'
        '<th class="num" data-sort="num">Rank</th><th>Tests</th>'
        '<th class="num" data-sort="num">Size</th><th class="num" data-sort="num">Damage</th>'
        '<th class="num" data-sort="num">Flaky runs</th>'
        '<th data-sort="text">Shared cause</th><th data-sort="text">Reason</th></tr></thead>'
        "<tbody>",
        *rows,
        "</tbody></table></div></section>",
    ]


def _commit(sha: str | None) -> str:
    """A commit cut to COMMIT_CHARS characters, the whole of it in the tooltip."""
    if not sha:
        return "-"
    return f'<code title="{e(sha)}">{e(sha[:COMMIT_CHARS])}</code>'


def _regressions(
    tests: Iterable[TestVerdict], anchors: dict[str, str], limit: int | None
) -> list[str]:
    regressions = [t for t in tests if t.verdict == "regression"][:limit]
    if not regressions:
        return [
            '<section id="regressions"><h2>Regressions</h2>',
            '<p class="empty">No open regressions.</p></section>',
        ]
    rows = []
    for test in regressions:
        name = breakable(test.test_id)
        if test.test_id in anchors:
            name = f'<a href="#{anchors[test.test_id]}">{name}</a>'
        rows.append(
            f'<tr><td class="num">R{test.regression_rank}</td><td class="id">{name}</td>'
            f"<td>{_commit(test.first_bad_commit)}</td><td>{_commit(test.last_good_commit)}</td>"
            f'<td>{e(test.owner or "-")}</td><td class="reason">{e(test.reason)}</td></tr>'
        )
    return [
        '<section id="regressions"><h2>Regressions</h2><div class="scroll">',
        '<table class="sortable"><thead><tr><th class="num" data-sort="num">Rank</th>'
        '<th data-sort="text">Test</th><th data-sort="text">First bad commit</th>'
        '<th data-sort="text">Last good commit</th><th data-sort="text">Owner</th>'
        '<th data-sort="text">Reason</th></tr></thead><tbody>',
        *rows,
        "</tbody></table></div></section>",
    ]


def _cell_title(run: RunOutcome) -> str:
    notes = []
    if run.incident:
        notes.append(f"incident {run.incident}")
    if run.edited:
        notes.append("commit edited the test")
    extra = f" ({', '.join(notes)})" if notes else ""
    return f"{to_iso(run.ts)} {run.run_id} {run.outcome}{extra}"


def heatmap_svg(runs: Sequence[RunOutcome]) -> str:
    """One row of cells, oldest run first: pass, flaky, fail or skipped; faded when not counted."""
    shown = list(runs)[-HEATMAP_RUNS:]
    width = max(1, len(shown) * (CELL + CELL_GAP))
    cells = []
    for index, run in enumerate(shown):
        css = OUTCOME_CLASSES.get(run.outcome, "s") + ("" if run.counted else " x")
        cells.append(
            f'<rect class="{css}" x="{index * (CELL + CELL_GAP)}" y="0" width="{CELL}" '
            f'height="{CELL + 4}"><title>{e(_cell_title(run))}</title></rect>'
        )
    return (
        f'<svg class="heatrow" width="{width}" height="{CELL + 4}" role="img" '
        f'aria-label="outcomes of the last {len(shown)} runs">{"".join(cells)}</svg>'
    )


def _heatmap(details: Sequence[TestDetail]) -> list[str]:
    head = [
        '<section id="heatmap"><h2>Outcomes over the last runs</h2>',
        '<div class="legend"><span><i style="background:var(--pass)"></i>pass</span>'
        '<span><i style="background:var(--kflaky)"></i>flaky (failed, then passed)</span>'
        '<span><i style="background:var(--fail)"></i>failed</span>'
        '<span><i style="background:var(--skip)"></i>skipped</span>'
        "<span>faded: not counted (incident, or the commit edited the test)</span></div>",
    ]
    if not details:
        return [*head, '<p class="empty">No flaky or regressed tests.</p></section>']
    rows = [
        f'<div class="id">{breakable(d.test.test_id)}</div>'
        f'<div class="scroll">{heatmap_svg(d.runs)}</div>'
        for d in details
    ]
    return [*head, '<div class="heat">', *rows, "</div></section>"]


def interval_plot_svg(rows: Sequence[PivotRow], label: str) -> str:
    """Failure rate (dot) and its Wilson interval (bar) per row, on a 0-100 % axis."""
    if not rows:
        return '<p class="empty">No counted runs.</p>'
    span = PLOT_WIDTH - PLOT_LABEL - 24
    height = PLOT_ROW * (len(rows) + 1)

    def x(rate: float) -> float:
        return round(PLOT_LABEL + rate * span, 1)

    parts = [
        f'<svg class="plot" width="{PLOT_WIDTH}" height="{height}" '
        f'viewBox="0 0 {PLOT_WIDTH} {height}" role="img" '
        f'aria-label="failure rate by {e(label)}">'
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(
            f'<line class="axis" x1="{x(tick)}" x2="{x(tick)}" y1="0" y2="{height - PLOT_ROW}"/>'
            f'<text x="{x(tick)}" y="{height - 4}" text-anchor="middle">{round(tick * 100)}%</text>'
        )
    for index, row in enumerate(rows):
        mid = PLOT_ROW * index + PLOT_ROW / 2
        name = row.key or "(unknown)"
        parts.append(
            f"<g><title>{e(label)} {e(name)}: {row.bad_runs} bad of {row.runs} runs, "
            f"{row.fail_rate:.0%} (Wilson {row.wilson_low:.0%}-{row.wilson_high:.0%})</title>"
            f'<text x="0" y="{mid + 4}">{e(name[:14])}</text>'
            f'<line class="ci" x1="{x(row.wilson_low)}" x2="{x(row.wilson_high)}" y1="{mid}" '
            f'y2="{mid}"/><circle cx="{x(row.fail_rate)}" cy="{mid}" r="3.5"/></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _details(details: Sequence[TestDetail]) -> list[str]:
    out = ['<section id="details"><h2>Signatures and worker pivots</h2>']
    shown = [d for d in details if d.pivot is not None]
    if not shown:
        out.append('<p class="empty">No flaky or regressed tests.</p>')
    for index, detail in enumerate(shown):
        test, pivot = detail.test, detail.pivot
        if pivot is None:
            continue
        out.append(
            f'<article class="detail" id="t{index}"><h3>{breakable(test.test_id)}</h3>'
            f'<p class="meta"><span class="v-{e(test.verdict)}">{e(test.verdict)}</span> · '
            f"{e(test.reason)} · owner {e(test.owner or '-')}</p>"
        )
        if test.causes:
            out.append('<h4>Likely causes</h4><ul class="suspects">')
            for suspect in test.causes[:CAUSES_SHOWN]:
                out.append(f"<li><b>{e(suspect.label)}</b>: {e(suspect_text(suspect))}</li>")
            out.append("</ul>")
        if detail.signatures:
            out.append("<h4>Failure signatures</h4><ol>")
            for sig in detail.signatures[:SIGNATURES_SHOWN]:
                example = sig.example[:EXAMPLE_CHARS]
                out.append(
                    f"<li>{sig.runs} run{'' if sig.runs == 1 else 's'}: {e(sig.text)}"
                    f"<pre>{e_lines(example)}</pre></li>"
                )
            out.append("</ol>")
        out.append(
            '<div class="plots"><div><h4>Failure rate per worker count</h4>'
            f"{interval_plot_svg(pivot.by_worker_count, 'worker count')}</div>"
            "<div><h4>Failure rate per worker</h4>"
            f"{interval_plot_svg(pivot.by_worker_id, 'worker')}</div></div></article>"
        )
    out.append("</section>")
    return out
