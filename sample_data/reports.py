"""Simulate one CI run of the demo project and write it as pytest-style JUnit XML (xunit1)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from catalogue import BILLING_PARENT, TestDef

RETRY_ATTEMPTS = {"unit": 3, "nightly": 3, "integration": 1}  # `--reruns 2`; integration: none
BACKGROUND_FAIL_PROBABILITY = 0.0015
# Rare one-off failures; naming the test keeps each one its own signature (no accidental group).
BACKGROUND_MESSAGES = (
    "AssertionError: {name}: assert 200 == 502",
    "TimeoutError: {name} timed out after 10.0 seconds",
    "AssertionError: {name}: expected event 'order.created' within 2s",
)
OUTAGE_MESSAGE = (
    "requests.exceptions.HTTPError: 503 Service Unavailable from provider api.paygate.example "
    "for url: https://api.paygate.example/v2/{endpoint}?req={req}"
)
CONN_REFUSED = (
    "ConnectionRefusedError: [Errno 111] connect to 127.0.0.1:{port} failed "
    "(socket /tmp/pytest-of-ci/pytest-{n}/db.sock)"
)
POOL_TIMEOUT = (
    "TimeoutError: QueuePool limit of size 5 overflow 10 reached, connection timed out, "
    "timeout 30.00"
)
DISK_FULL = "OSError: [Errno 28] No space left on device: '/tmp/pytest-of-ci/pytest-{n}/blob.bin'"
CACHE_DOWN = (
    "redis.exceptions.ConnectionError: Error 111 connecting to cache-7d9f8b6c5-{pod}:6379. "
    "Connection refused."
)
ONSET_MESSAGE = (
    "AssertionError: results with equal score came back in a different order "
    "(doc-{a} before doc-{b})"
)
RARE_MESSAGE = "ConnectionResetError: [Errno 104] Connection reset by peer (auth-db handshake)"
ALIAS_MESSAGE = "AssertionError: alias 'products' points to index products-v2, expected products-v1"
TAX_MESSAGE = "AssertionError: assert Decimal('10.24') == Decimal('10.25') (half-even rounding)"
POLLUTED_MESSAGE = (
    "AssertionError: cache entry for order {key} expired before it was invalidated "
    "(ttl 0 s, expected the default 300 s)"
)


@dataclass(frozen=True)
class Run:
    """One CI run of one suite, with the code state it tested."""

    run_id: str
    suite: str
    branch: str
    branch_kind: str
    commit: str
    ts: datetime
    worker_count: int
    changed_files: tuple[str, ...]
    runner_host: str
    code_ts: datetime  # commit time of the main commit whose code ran (a PR's base)
    incident: str | None = None
    flags: frozenset[str] = frozenset()  # 'disk-full', 'edits-tax-test', 'tax-broken'
    ci_url: str = ""


@dataclass
class RunState:
    """Cross-run memory of the simulation (runs are simulated in time order)."""

    alternating_executions: int = 0
    new_test_executions: int = 0
    rare_flake_executions: int = 0  # its runs in suites that retry


@dataclass
class Case:
    """One test case of a report: attempts as (outcome, message, exception type)."""

    test: TestDef
    attempts: list[tuple[str, str | None, str | None]]
    worker_id: str | None
    durations: list[int] = field(default_factory=list)


def _fail(message: str, kind: str = "fail") -> tuple[str, str, str]:
    return (kind, message, message.split(":", 1)[0])


def _flaky(rng: random.Random, message: str, attempts: int, kind: str = "fail") -> list[Any]:
    """A first attempt that fails, then (with retries) a pass, sometimes after a second failure."""
    if attempts == 1:
        return [_fail(message, kind)]
    if attempts >= 3 and rng.random() < 0.15:
        return [_fail(message, kind), _fail(message, kind), ("pass", None, None)]
    return [_fail(message, kind), ("pass", None, None)]


def _billing_plan(run: Run, rng: random.Random, story: dict[str, Any], params: list[str]) -> dict:
    """Which billing params the leaked fixture row breaks in this run, with their messages."""
    billing = story["billing_family"]
    if run.code_ts < billing["leak_at"] or not params:
        return {}
    odds = billing["run_fail_probability_by_workers"].get(str(run.worker_count), 0.0)
    if rng.random() >= odds:
        return {}
    victims = [p for p in params if p != billing["writer_param"]]
    count = 2 if run.worker_count >= 16 and rng.random() < 0.25 else 1
    chosen: list[str] = []
    while len(chosen) < count:
        pick = billing["hot_param"] if rng.random() < 0.15 else rng.choice(victims)
        if pick not in chosen:
            chosen.append(pick)
    plan = {}
    for pick in chosen:
        expected = rng.randint(4, 60)
        plan[pick] = (
            f"AssertionError: assert {expected + rng.randint(1, 3)} == {expected}: "
            "rollup row count mismatch in warehouse.daily_rollups"
        )
    return plan


def simulate_run(
    run: Run, tests: list[TestDef], story: dict[str, Any], state: RunState, seed: int
) -> list[Case]:
    """The outcome of every test of the run's suite, from a random stream seeded by run id."""
    rng = random.Random(f"{seed}:{run.run_id}")
    attempts_max = RETRY_ATTEMPTS[run.suite]
    in_suite = [t for t in tests if run.suite in t.suites]
    if run.code_ts < story["new_test"]["added_at"]:
        new_file = story["new_test"]["test_id"].split("::")[0]
        in_suite = [t for t in in_suite if t.file != new_file]
    if run.branch_kind == "pr":  # PR jobs run `-m "not warehouse"`: the family is deselected
        in_suite = [t for t in in_suite if not t.node_id.startswith(BILLING_PARENT + "[")]
    params = [t.node_id for t in in_suite if t.node_id.startswith(BILLING_PARENT + "[")]
    billing = _billing_plan(run, rng, story, params)
    shared = story["shared_signature"]
    shared_event = run.suite != "integration" and rng.random() < shared["run_event_probability"]
    shared_hit = {t for t in shared["test_ids"] if shared_event and rng.random() < 0.5}
    if shared_event and not shared_hit:
        shared_hit = {rng.choice(shared["test_ids"])}
    cases = []
    for test in in_suite:
        worker = f"gw{rng.randrange(run.worker_count)}" if run.worker_count > 1 else None
        attempts = _attempts_for(run, test, story, state, rng, attempts_max, billing, shared_hit)
        cases.append(Case(test, attempts, worker))
    _separate_billing_workers(cases, story, run)
    for case in cases:
        case.durations = [_duration(rng, case.test, outcome) for outcome, _, _ in case.attempts]
    _later_stories(run, tests, cases, story, state, seed)
    if records_order(run, story):
        _order_story(run, cases, story, seed)
    return cases


def records_order(run: Run, story: dict[str, Any]) -> bool:
    """Whether the run is a PR `unit` run recorded by the pytest plugin, in a shuffled order."""
    return (
        run.suite == "unit"
        and run.branch_kind == "pr"
        and run.ts >= story["order_polluter"]["plugin_from"]
    )


def order_seed(run: Run, seed: int) -> int:
    """The pytest-randomly seed of a shuffled run (`-p randomly --randomly-seed=N`)."""
    return random.Random(f"{seed}:{run.run_id}:order").getrandbits(32)


def _order_story(run: Run, cases: list[Case], story: dict[str, Any], seed: int) -> None:
    """Put a shuffled run's cases in the order they ran, and let the polluter break its
    victim where it ran first on their shared worker.

    pytest-randomly shuffles the modules, then the tests of each module; xdist deals them to the
    workers in that order, keeping each `xdist_group` on one worker. The victim's retries run
    right after it on the same worker, where the state is still broken: they fail too.
    """
    polluter, victim = story["order_polluter"]["polluter"], story["order_polluter"]["victim"]
    shuffle = random.Random(order_seed(run, seed))
    by_file: dict[str, list[Case]] = {}
    for case in cases:
        by_file.setdefault(case.test.file, []).append(case)
    files = sorted(by_file)
    shuffle.shuffle(files)
    ordered: list[Case] = []
    for file in files:
        module = by_file[file]
        shuffle.shuffle(module)
        ordered += module
    cases[:] = ordered
    at = {case.test.node_id: i for i, case in enumerate(cases)}
    first, second = cases[at[polluter]], cases[at[victim]]
    second.worker_id = first.worker_id  # both are in xdist_group("cache-db")
    if at[polluter] < at[victim]:
        rng = random.Random(f"{seed}:{run.run_id}:polluted")
        message = POLLUTED_MESSAGE.format(key=rng.randint(1000, 9999))
        second.attempts = [_fail(message)] * RETRY_ATTEMPTS[run.suite]
        second.durations = [_duration(rng, second.test, "fail") for _ in second.attempts]


def _later_stories(
    run: Run,
    tests: list[TestDef],
    cases: list[Case],
    story: dict[str, Any],
    state: RunState,
    seed: int,
) -> None:
    """The stories added after the others: the cache outage, the recent onset, the rare flake.

    They draw from a random stream of their own and rewrite the cases they touch once every
    other story has drawn, so the other stories' runs stay exactly as they were.
    """
    rng = random.Random(f"{seed}:{run.run_id}:later")
    attempts_max = RETRY_ATTEMPTS[run.suite]
    onset, cache, rare = story["recent_onset"], story["cache_outage"], story["rare_flake"]
    if run.suite == "integration":
        # The login smoke test also runs against the integration stack (no retries there).
        smoke = next(t for t in tests if t.node_id == rare["test_id"])
        at = next((i for i, c in enumerate(cases) if c.test.node_id > smoke.node_id), len(cases))
        attempts: list[Any] = [("pass", None, None)]
        if run.incident and rng.random() < 0.85:  # the provider outage fails it as the rest
            attempts = [_fail(OUTAGE_MESSAGE.format(endpoint="tokens", req="0" * 12))]
        durations = [_duration(rng, smoke, outcome) for outcome, _, _ in attempts]
        cases.insert(at, Case(smoke, attempts, None, durations))
    spared = {onset["test_id"], rare["test_id"], story["resolved_incident"]["test_id"]}
    outage = cache["start"] <= run.ts < cache["end"] and run.suite != "nightly"
    for case in cases:
        node = case.test.node_id
        new: list[Any] | None = None
        if case.attempts[0][0] == "skipped":
            continue
        if outage and node not in spared and not _quiet(node, story):
            if rng.random() < cache["share"]:
                pod = "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
                new = _flaky(rng, CACHE_DOWN.format(pod=pod), attempts_max)
        elif node == onset["test_id"] and run.ts >= onset["since"]:
            if rng.random() < onset["fail_probability"]:
                a, b = rng.sample(range(1, 60), 2)
                new = _flaky(rng, ONSET_MESSAGE.format(a=a, b=b), attempts_max)
        elif node == rare["test_id"] and run.suite != "integration" and not run.incident:
            if "disk-full" in run.flags:
                continue
            execution = state.rare_flake_executions
            state.rare_flake_executions += 1
            new = (
                _flaky(rng, RARE_MESSAGE, attempts_max)
                if execution in rare["flaky_executions"]
                else [("pass", None, None)]
            )
        if new is not None:
            case.attempts = new
            case.durations = [_duration(rng, case.test, outcome) for outcome, _, _ in new]


def _separate_billing_workers(cases: list[Case], story: dict[str, Any], run: Run) -> None:
    """The leak crosses processes: a broken param never shares the writer param's worker."""
    writer = next(
        (c for c in cases if c.test.node_id == story["billing_family"]["writer_param"]), None
    )
    if writer is None or writer.worker_id is None:
        return
    for case in cases:
        broken = case.test.node_id.startswith(BILLING_PARENT) and case.attempts[0][0] == "fail"
        if broken and case.worker_id == writer.worker_id:
            number = (int(writer.worker_id[2:]) + 1) % run.worker_count
            case.worker_id = f"gw{number}"


def _duration(rng: random.Random, test: TestDef, outcome: str) -> int:
    if outcome == "skipped":
        return 0
    return max(1, int(test.base_ms * rng.uniform(0.7, 1.5)))


def _attempts_for(
    run: Run,
    test: TestDef,
    story: dict[str, Any],
    state: RunState,
    rng: random.Random,
    attempts_max: int,
    billing: dict[str, str],
    shared_hit: set[str],
) -> list[Any]:
    """The attempts of one test in one run: the first matching story decides."""
    node = test.node_id
    if node in story["skipped"]["test_ids"]:
        reason = "SAML IdP fixture not available on CI" if "saml" in node else "requires ICU 74"
        return [("skipped", reason, "pytest.skip")]
    if node == story["alternating"]["test_id"]:
        if run.branch_kind != "main" or run.suite != "integration":
            return [
                ("skipped", "needs the shared search cluster (main pushes only)", "pytest.skip")
            ]
        state.alternating_executions += 1
        if state.alternating_executions % 2 == 1:
            return [_fail(ALIAS_MESSAGE)]
        return [("pass", None, None)]
    spared = _quiet(node, story) or node == story["resolved_incident"]["test_id"]
    if "disk-full" in run.flags and not spared and rng.random() < 0.85:
        message = DISK_FULL.format(n=rng.randint(100, 999))
        return [_fail(message, "error")] * attempts_max
    if run.incident and node != story["resolved_incident"]["test_id"] and rng.random() < 0.85:
        message = OUTAGE_MESSAGE.format(
            endpoint=rng.choice(("charges", "refunds", "customers", "tokens")),
            req=f"{rng.getrandbits(48):012x}",
        )
        return _flaky(rng, message, attempts_max)
    if node == story["pr_edits_test"]["test_id"] and "tax-broken" in run.flags:
        return [_fail(TAX_MESSAGE)] * attempts_max
    if node == story["regression"]["test_id"] and run.code_ts >= story["regression"]["break_at"]:
        return [_fail(story["regression"]["message"])] * attempts_max
    return _flakes(run, test, story, state, rng, attempts_max, billing, shared_hit)


def _flakes(
    run: Run,
    test: TestDef,
    story: dict[str, Any],
    state: RunState,
    rng: random.Random,
    attempts_max: int,
    billing: dict[str, str],
    shared_hit: set[str],
) -> list[Any]:
    """Intermittent failures: the flaky stories, then rare background noise."""
    node = test.node_id
    passed = [("pass", None, None)]
    if node in billing:
        return _flaky(rng, billing[node], attempts_max)
    if node in shared_hit:
        port, n = rng.randint(50000, 59999), rng.randint(100, 999)
        return _flaky(rng, CONN_REFUSED.format(port=port, n=n), attempts_max)
    if node == story["shared_signature"]["other_cause_test_id"]:
        odds = story["shared_signature"]["other_cause_probability"]
        return _flaky(rng, POOL_TIMEOUT, attempts_max) if rng.random() < odds else passed
    if node == story["flaky_no_retry"]["test_id"]:
        # One independent coin per attempt: flips where there is no retry.
        out: list[Any] = []
        for _ in range(attempts_max):
            if rng.random() < story["flaky_no_retry"]["fail_probability"]:
                sku, expected = rng.randint(1000, 9999), rng.randint(2, 40)
                out.append(
                    _fail(
                        f"AssertionError: inventory for SKU-{sku} not synced after 5.0s "
                        f"(expected {expected}, got {expected - 1})"
                    )
                )
            else:
                out.append(("pass", None, None))
                break
        return out
    if node == story["resolved_incident"]["test_id"]:
        incident = story["resolved_incident"]
        active = incident["flaky_from"] <= run.ts < incident["fixed_at"]
        if active and rng.random() < incident["fail_probability"]:
            used = rng.randint(2040, 2047)
            return _flaky(
                rng, f"MemoryError: cache eviction stalled at {used} MiB of 2048 MiB", attempts_max
            )
        return passed
    if node == story["crash"]["test_id"]:
        odds = story["crash"]["fail_probability_by_workers"].get(str(run.worker_count), 0.0)
        if rng.random() < odds:
            message = f"Worker crashed: signal 9 (OOM) - rss {rng.randint(3500, 4096)} MB"
            return _flaky(rng, message, attempts_max, kind="error")
        return passed
    if node == story["new_test"]["test_id"]:
        execution = state.new_test_executions
        state.new_test_executions += 1
        if execution in story["new_test"]["flaky_executions"]:
            return _flaky(
                rng, "AssertionError: 429 not raised after 20 requests in 1.0s", attempts_max
            )
        return passed
    for key in ("nightly_only", "main_low_rate", "mild_flaky"):
        if node == story[key]["test_id"]:
            if rng.random() < story[key]["fail_probability"]:
                return _flaky(rng, _story_message(key, rng), attempts_max)
            return passed
    if _quiet(node, story):
        return passed
    if rng.random() < BACKGROUND_FAIL_PROBABILITY:
        message = rng.choice(BACKGROUND_MESSAGES).format(name=test.name)
        return _flaky(rng, message, attempts_max)
    return passed


def _story_message(key: str, rng: random.Random) -> str:
    if key == "nightly_only":
        rows = rng.randint(90000, 99999)
        return f"AssertionError: export row count {rows} != source row count 100000"
    if key == "main_low_rate":
        return f"AssertionError: retry 3 fired after {rng.uniform(0.2, 0.9):.2f}s, expected >= 1.0s"
    return "AssertionError: digest email sent 2 times, expected 1"


def _quiet(node: str, story: dict[str, Any]) -> bool:
    """Story tests whose record must hold only their story: no background noise."""
    quiet = {
        story["regression"]["test_id"],
        story["alternating"]["test_id"],
        story["pr_edits_test"]["test_id"],
    }
    return node in quiet or node.startswith(story["billing_family"]["parent"] + "[")


# ---- JUnit XML ------------------------------------------------------------------------------


def _case_xml(case: Case) -> str:
    test = case.test
    seconds = sum(case.durations) / 1000
    head = (
        f'<testcase classname="{test.classname}" name={quoteattr(test.name)} '
        f'file="{test.file}" line="{test.line}" time="{seconds:.3f}"'
    )
    parts = []
    if case.worker_id:
        parts.append(
            f'<properties><property name="worker_id" value="{case.worker_id}"/></properties>'
        )
    outcomes = [a[0] for a in case.attempts]
    final = case.attempts[-1]
    if outcomes == ["skipped"]:
        parts.append(f'<skipped type="pytest.skip" message={quoteattr(final[1] or "")}/>')
    elif final[0] == "pass":
        # Surefire-style: each failed attempt before the final pass.
        for outcome, message, kind in case.attempts[:-1]:
            tag = "flakyError" if outcome == "error" else "flakyFailure"
            parts.append(_failure_xml(tag, message or "", kind or "", test))
    else:
        first = case.attempts[0]
        tag = "error" if first[0] == "error" else "failure"
        parts.append(_failure_xml(tag, first[1] or "", first[2] or "", test))
        for outcome, message, kind in case.attempts[1:]:
            tag = "rerunError" if outcome == "error" else "rerunFailure"
            parts.append(_failure_xml(tag, message or "", kind or "", test))
    if not parts:
        return head + "/>"
    return head + ">" + "".join(parts) + "</testcase>"


def _failure_xml(tag: str, message: str, kind: str, test: TestDef) -> str:
    body = escape(f"{test.file}:{test.line}: {kind}\nE   {message}")
    return f"<{tag} message={quoteattr(message)} type={quoteattr(kind)}>{body}</{tag}>"


def write_report(path: Path, run: Run, cases: list[Case]) -> None:
    """Write one JUnit file of pytest's xunit1 shape with Surefire-style retry elements."""
    failures = sum(1 for c in cases if c.attempts[-1][0] == "fail")
    errors = sum(1 for c in cases if c.attempts[-1][0] == "error")
    skipped = sum(1 for c in cases if c.attempts[-1][0] == "skipped")
    seconds = sum(sum(c.durations) for c in cases) / 1000 / max(1, run.worker_count)
    stamp = run.ts.strftime("%Y-%m-%dT%H:%M:%S.000000+00:00")
    lines = [
        '<?xml version="1.0" encoding="utf-8"?>',
        '<testsuites name="pytest tests">',
        f'<testsuite name="pytest" errors="{errors}" failures="{failures}" '
        f'skipped="{skipped}" tests="{len(cases)}" time="{seconds:.3f}" '
        f'timestamp="{stamp}" hostname="{run.runner_host}">',
    ]
    lines += [_case_xml(c) for c in cases]
    lines += ["</testsuite>", "</testsuites>", ""]
    path.write_text("\n".join(lines), encoding="utf-8")
