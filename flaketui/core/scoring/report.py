"""Build the ranked, explained triage report of a history as of `now`.

Choices made here:
- A test is listed when it has at least one counted run in the window; a test seen only in
  skipped, edited or incident runs is treated like a dead one and not listed.
- A test's `suite` is the suite of most of its counted runs (ties: alphabetical). It "retries"
  when any suite it ran in showed an attempt > 1 for any test in the window.
- A test's `signature` is its most frequent first-failure signature in the window (ties: the
  most recent, then the hash).
- Families are the parents with at least one parametrized member (`test_x[...]`); signature
  groups are the tests sharing their most frequent signature; co-failure groups are flaky
  tests failing in the same runs (flaketui.core.scoring.cofailure). All are pooled by run
  (see flaketui.core.rollups.evidence) and ranked like tests among their own kind.
- Order of `tests`: flaky by rank, regressions by regression_rank, then insufficient and
  healthy by damage, recency score and id. `rank` orders flaky entries by damage desc, then
  recency score desc, then id; `regression_rank` orders regressions the same way.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Collection, Generator, Sequence
from contextlib import closing
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from flaketui.core.config import Config
from flaketui.core.history.dbhandle import Connected
from flaketui.core.history.outages import proposed_outages
from flaketui.core.rollups.evidence import Evidence, counted_runs_cte
from flaketui.core.rollups.read import DayCounts, GroupUnits
from flaketui.core.scoring.aggregates import (
    evidence_pass,
    per_family_evidence,
    per_signature_evidence,
    pooled_units,
    rate_changes,
    signature_counts,
    suite_counts,
)
from flaketui.core.scoring.results import GroupVerdict, Report, Scores, TestVerdict, Verdict
from flaketui.core.scoring.verdicts import Current, compute_scores, current_of, judge, settle
from flaketui.core.timeutil import parse_iso, utc_now

DAILY_DAYS = 30
FIRST_SERIES = 100  # daily series computed in report_stages' first step (list order)
VERDICT_ORDER = {
    Verdict.FLAKY: 0,
    Verdict.REGRESSION: 1,
    Verdict.INSUFFICIENT: 2,
    Verdict.HEALTHY: 3,
}
T = TypeVar("T")


def effective_now(
    db: Connected, requested: datetime | None, config: Config
) -> tuple[datetime, bool]:
    """The clock: `requested`, else now, else the newest run when the history is older
    than the window; the flag says the clock was moved back to the newest run."""
    if requested is not None:
        # A naive time means UTC, like every timestamp flaketui reads.
        if requested.tzinfo is None:
            requested = requested.replace(tzinfo=UTC)
        return requested.astimezone(UTC), False
    current = utc_now()
    row = db.conn.execute("SELECT max(ts) FROM runs WHERE source <> 'diagnose'").fetchone()
    if row is None or row[0] is None:
        return current, False
    newest = parse_iso(str(row[0]))
    if newest < current - timedelta(days=config.window_days):
        return newest, True
    return current, False


@dataclass(slots=True)
class _TestInfo:
    pk: int
    test_id: str
    parent: str
    test_file: str | None
    first_seen: datetime
    suite: str
    retries: bool
    signature: str | None = None
    signature_text: str | None = None


def _test_infos(
    db: Connected,
    evidence: dict[int, Evidence],
    now: datetime,
    config: Config,
    suite: str | None,
    branch_kind: str | None,
    only: Collection[str] | None = None,
    *,
    retry_suites: set[str] | None = None,
) -> dict[int, _TestInfo]:
    """Identity, main suite, retry status and top signature of every listed test (of those
    named in `only`, when given). Whether a suite retries is read from every test's evidence,
    unless `retry_suites` says (evidence of some tests only)."""
    per_suite: dict[int, dict[str, int]] = {}
    retrying: set[str] = set()
    multi_suite = []
    for pk, ev in evidence.items():
        if ev.suites:
            per_suite[pk] = {name: runs for name, (runs, _attempts) in ev.suites.items()}
            retrying.update(name for name, (_runs, most) in ev.suites.items() if most > 1)
        elif ev.suite_min == ev.suite_max and ev.suite_min is not None:
            per_suite[pk] = {ev.suite_min: ev.runs}
            if ev.max_attempts > 1:
                retrying.add(ev.suite_min)
        else:
            multi_suite.append(pk)
    # Only tests seen in several suites need the per-suite split (a focused query).
    if multi_suite:
        for pk, name, runs, attempts in suite_counts(
            db, now, config, suite, branch_kind, test_pks=multi_suite
        ):
            per_suite.setdefault(pk, {})[name] = runs
            if attempts > 1:
                retrying.add(name)
    if retry_suites is not None:
        retrying = retry_suites
    infos: dict[int, _TestInfo] = {}
    rows = db.conn.execute("SELECT id, test_id, parent, test_file, first_seen FROM tests")
    for pk, test_id, parent, test_file, first_seen in rows:
        if pk not in evidence or (only is not None and test_id not in only):
            continue
        suites = per_suite.get(pk, {})
        main_suite = min(suites, key=lambda s: (-suites[s], s)) if suites else "default"
        infos[pk] = _TestInfo(
            pk,
            test_id,
            parent,
            test_file,
            parse_iso(first_seen),
            main_suite,
            any(s in retrying for s in suites),
        )
    failing = [pk for pk in infos if evidence[pk].last_failure_at is not None]
    best: dict[int, tuple[int, str, str, str]] = {}
    if failing:
        for pk, sig_hash, text, runs, last in signature_counts(
            db, now, config, suite, branch_kind, test_pks=failing
        ):
            key = (runs, last, sig_hash, text)
            if pk in infos and (pk not in best or key > best[pk]):
                best[pk] = key
    for pk, (_runs, _last, sig_hash, text) in best.items():
        infos[pk].signature, infos[pk].signature_text = sig_hash, text
    return infos


def _rank_key(scores: Scores, name: str) -> tuple[float, float, str]:
    return (-scores.damage, -scores.recency_score, name)


def assign_ranks(
    items: Sequence[T],
    verdict: Callable[[T], Verdict],
    scores: Callable[[T], Scores],
    name: Callable[[T], str],
    set_rank: Callable[[T, int], None],
    set_regression_rank: Callable[[T, int], None],
) -> list[T]:
    """Rank flaky and regression items (1 = fix first) and return all items in list order."""
    ordered = sorted(
        items, key=lambda it: (VERDICT_ORDER[verdict(it)], *_rank_key(scores(it), name(it)))
    )
    flaky_rank = regression_rank = 0
    for item in ordered:
        if verdict(item) == Verdict.FLAKY:
            flaky_rank += 1
            set_rank(item, flaky_rank)
        elif verdict(item) == Verdict.REGRESSION:
            regression_rank += 1
            set_regression_rank(item, regression_rank)
    return ordered


def _owner_lookup(
    repo_root: Path | None, config: Config
) -> Callable[[str | None, str], str | None]:
    """owner_of(test_file, suite) from the CODEOWNERS resolver, cached per file and suite."""
    try:
        from flaketui.core.owners import OwnerResolver
    except ImportError:  # pragma: no cover - the resolver ships with flaketui
        return lambda _file, _suite: None
    resolver = OwnerResolver(repo_root, config)
    cache: dict[tuple[str | None, str], str | None] = {}

    def owner_of(test_file: str | None, suite: str) -> str | None:
        if (test_file, suite) not in cache:
            cache[(test_file, suite)] = resolver.owner_of(test_file, suite)
        return cache[(test_file, suite)]

    return owner_of


def _daily_scores(
    db: Connected, test_ids: list[str], now: datetime, config: Config
) -> dict[str, tuple[float, ...]]:
    """Daily recency scores (oldest first) from flaketui.core.scoring.series, when present.

    As tuples at once: the garbage collector soon stops walking a tuple of floats, where a
    list per failing test stayed in every full collection while the rest of the report was
    computed (at 10 000 tests, a tenth of what the app's worst one walked)."""
    try:
        from flaketui.core.scoring.series import daily_recency_scores
    except ImportError:
        return {}
    if not test_ids:
        return {}
    series = daily_recency_scores(db, test_ids, now=now, days=DAILY_DAYS, config=config)
    return {test_id: tuple(scores) for test_id, scores in series.items()}


def _currents(
    db: Connected,
    now: datetime,
    config: Config,
    kind: str,
    failing: dict[Any, Evidence],
    test_pks: Sequence[int],
    suite: str | None,
    branch_kind: str | None,
    members: dict[int, str] | None = None,
    units: GroupUnits | None = None,
    days: DayCounts | None = None,
) -> dict[Any, Current]:
    """The current regime of every key with a failure in the window (see current_of);
    `units`: the groups' pooled_units, when the caller read them for their evidence; `days`:
    the tests' days, when the caller read them with their evidence (rate_changes)."""
    if not failing:
        return {}
    changes = rate_changes(
        db, now, config, kind, test_pks, suite, branch_kind, members, units, days
    )
    return {key: current_of(changes[key], config) for key in failing if key in changes}


def _onset(verdict: str, current: Current | None) -> str | None:
    return current.onset if verdict == "flaky" and current is not None else None


def _group(
    key: str,
    label: str,
    members: list[_TestInfo],
    ev: Evidence,
    now: datetime,
    config: Config,
    owner_of: Callable[[str | None, str], str | None],
    current: Current | None = None,
) -> GroupVerdict:
    first_seen = min(m.first_seen for m in members)
    retries = any(m.retries for m in members)
    scores = compute_scores(
        ev, retries=retries, first_seen=first_seen, now=now, config=config, current=current
    )
    judgement = judge(ev, scores, retries=retries, first_seen=first_seen, now=now, config=config)
    first = min(members, key=lambda m: m.test_id)
    return GroupVerdict(
        key=key,
        label=label,
        members=sorted(m.test_id for m in members),
        scores=settle(scores, judgement.verdict),
        verdict=judgement.verdict,
        reason=judgement.reason,
        flags=tuple(judgement.flags),
        owner=owner_of(first.test_file, first.suite),
        onset=_onset(judgement.verdict, current),
    )


def _rank_groups(groups: list[GroupVerdict]) -> list[GroupVerdict]:
    def set_rank(g: GroupVerdict, rank: int) -> None:
        g.rank = rank

    def set_regression_rank(g: GroupVerdict, rank: int) -> None:
        g.regression_rank = rank

    return assign_ranks(
        groups,
        lambda g: g.verdict,
        lambda g: g.scores,
        lambda g: g.key,
        set_rank,
        set_regression_rank,
    )


def build_report(
    db: Connected,
    *,
    now: datetime | None = None,
    config: Config | None = None,
    suite: str | None = None,
    branch_kind: str | None = None,
    repo_root: Path | None = None,
    groups: bool = True,
    only: Collection[str] | None = None,
) -> Report:
    """Score, judge and rank every live test, family and signature group as of `now`.

    `groups=False`: the tests alone (report_stages' first step), scored, judged and ranked the
    same, with no families, signature or co-failure groups, and daily scores for the first
    FIRST_SERIES failing tests only: for a caller that reads nothing else (the CI gate), since
    the groups are most of a big history's report. `only` (with groups=False): the tests of
    these ids alone, each scored and judged as in the whole report (ranked among themselves),
    for a caller that needs a few tests' verdicts (the gate's, as of the previous run)."""
    if only is not None and groups:
        raise ValueError("build_report: `only` needs groups=False")
    stages = report_stages(
        db,
        now=now,
        config=config,
        suite=suite,
        branch_kind=branch_kind,
        repo_root=repo_root,
        only=only,
    )
    with closing(stages):
        if not groups:
            return next(stages)
        *_, report = stages
    return report


def report_stages(
    db: Connected,
    *,
    now: datetime | None = None,
    config: Config | None = None,
    suite: str | None = None,
    branch_kind: str | None = None,
    repo_root: Path | None = None,
    only: Collection[str] | None = None,
) -> Generator[Report, None, None]:
    """The report in two steps read from one snapshot: its tests alone, then all of it.

    The first report has every test scored, judged and ranked (what a ranked list needs), the
    daily scores of the first FIRST_SERIES failing tests in list order (the others' are empty
    until then), and no families or signature groups. The second is build_report's: the
    groups, and every daily series. An app shows the first while the second is computed
    (the app's first ranked screen). `only`: see build_report (the first step alone).
    """
    conn = db.conn
    # Inside a caller's transaction (or on a connection-like without one), read as given.
    own = not getattr(conn, "in_transaction", True)
    # One read snapshot for every query of both steps: an ingest committing between two of
    # them would show a test to one and not to the next (a KeyError, or a report mixing runs).
    if own:
        conn.execute("BEGIN")
    try:
        partial = _rank_tests(db, now, config or Config(), suite, branch_kind, repo_root, only)
        yield partial.report
        complete = _complete(db, partial)
        # What only the first step needed (each test's evidence, the first report's own tests)
        # is not kept alive by this frame while the caller goes on with the complete report.
        del partial
        yield complete
    finally:
        if own and conn.in_transaction:
            conn.execute("COMMIT")


@dataclass(slots=True)
class _Partial:
    """The tests-only report, and what its second step is built from."""

    report: Report
    config: Config
    evidence: dict[int, Evidence]
    infos: dict[int, _TestInfo]
    suite: str | None
    branch_kind: str | None
    owner_of: Callable[[str | None, str], str | None]
    pending: list[TestVerdict]  # failing tests whose daily scores the second step fills
    # The families' run sets of a suite or branch-kind restricted request, pooled in the
    # tests' pass (aggregates.evidence_pass); None when the families read their own.
    family_units: GroupUnits | None = None


def _rank_tests(
    db: Connected,
    now: datetime | None,
    config: Config,
    suite: str | None,
    branch_kind: str | None,
    repo_root: Path | None,
    only: Collection[str] | None = None,
) -> _Partial:
    now, clamped = effective_now(db, now, config)
    keys = None
    if only is not None:
        keys = [
            int(pk)
            for (pk,) in db.conn.execute(
                "SELECT id FROM tests WHERE test_id IN (SELECT value FROM json_each(?))",
                (json.dumps(sorted(only)),),
            )
        ]
    found = evidence_pass(db, now, config, suite, branch_kind, keys=keys)
    evidence = found.tests
    infos = _test_infos(
        db, evidence, now, config, suite, branch_kind, only, retry_suites=found.retry_suites
    )
    if only is not None:
        evidence = {pk: ev for pk, ev in evidence.items() if pk in infos}
    owner_of = _owner_lookup(repo_root, config)
    bad = {pk: ev for pk, ev in evidence.items() if ev.failed_runs}
    currents = _currents(
        db, now, config, "test", bad, list(bad), suite, branch_kind, days=found.bad_days
    )
    tests: list[TestVerdict] = []
    for pk, ev in evidence.items():
        info = infos[pk]
        current = currents.get(pk)
        scores = compute_scores(
            ev,
            retries=info.retries,
            first_seen=info.first_seen,
            now=now,
            config=config,
            current=current,
        )
        judgement = judge(
            ev, scores, retries=info.retries, first_seen=info.first_seen, now=now, config=config
        )
        scores = settle(scores, judgement.verdict)
        tests.append(
            TestVerdict(
                test_id=info.test_id,
                parent=info.parent,
                suite=info.suite,
                test_file=info.test_file,
                scores=scores,
                verdict=judgement.verdict,
                reason=judgement.reason,
                flags=tuple(judgement.flags),
                signature=info.signature,
                signature_text=info.signature_text,
                owner=owner_of(info.test_file, info.suite),
                first_bad_commit=judgement.first_bad_commit,
                last_good_commit=judgement.last_good_commit,
                onset=_onset(judgement.verdict, current),
            )
        )

    def set_rank(t: TestVerdict, rank: int) -> None:
        t.rank = rank

    def set_regression_rank(t: TestVerdict, rank: int) -> None:
        t.regression_rank = rank

    tests = assign_ranks(
        tests,
        lambda t: t.verdict,
        lambda t: t.scores,
        lambda t: t.test_id,
        set_rank,
        set_regression_rank,
    )
    # A test without a failure in the window scores 0 on every day of the series (its older
    # failures weigh under 5 % each by then), so only failing tests are asked for: the first
    # FIRST_SERIES of them in list order now (a screenful and more), the rest in step two.
    failing = [t for t in tests if t.scores.last_failure_at is not None]
    first, pending = failing[:FIRST_SERIES], failing[FIRST_SERIES:]
    daily = _daily_scores(db, [t.test_id for t in first], now, config)
    waiting = {t.test_id for t in pending}
    for test in tests:
        if test.test_id not in waiting:
            test.daily_scores = tuple(daily.get(test.test_id, [0.0] * DAILY_DAYS))
    report = Report(
        now=now,
        window_days=config.window_days,
        config=config.as_dict(),
        tests=tests,
        families=[],
        signatures=[],
        now_was_clamped=clamped,
        proposed_incidents=proposed_outages(
            db.conn,
            now=now,
            window_days=config.window_days,
            suite=suite,
            branch_kind=branch_kind,
        ),
        interrupted_runs=_interrupted_runs(db, now, config, suite, branch_kind),
        no_default_branch_runs=_no_default_branch_runs(db, now, config),
    )
    return _Partial(
        report, config, evidence, infos, suite, branch_kind, owner_of, pending, found.group_units
    )


def _interrupted_runs(
    db: Connected, now: datetime, config: Config, suite: str | None, branch_kind: str | None
) -> int:
    """Counted runs of the window whose recording never finished."""
    cte, params = counted_runs_cte(now, config, suite=suite, branch_kind=branch_kind)
    sql = (
        f"WITH {cte} SELECT count(*) FROM counted_runs c JOIN runs r ON r.id = c.id "
        "WHERE r.finished = 0"
    )
    return int(db.conn.execute(sql, params).fetchone()[0])


def _no_default_branch_runs(db: Connected, now: datetime, config: Config) -> bool:
    """Whether the window has counted runs and none of them on the default branch.

    The whole window's runs, whatever suite or branch kind the report is restricted to: it
    says how the history records branches, which a filter does not change.
    """
    cte, params = counted_runs_cte(now, config)
    sql = f"WITH {cte} SELECT count(*) > 0 AND total(is_main) = 0 FROM counted_runs"
    return bool(db.conn.execute(sql, params).fetchone()[0])


def _complete(db: Connected, partial: _Partial) -> Report:
    """The second step: the pending daily scores, the families and the signature groups.

    Tests that gain their daily scores are new objects: the first report may be on screen.
    """
    first, config, infos = partial.report, partial.config, partial.infos
    now, suite, branch_kind, owner_of = (
        first.now,
        partial.suite,
        partial.branch_kind,
        partial.owner_of,
    )
    daily = _daily_scores(db, [t.test_id for t in partial.pending], now, config)
    waiting = {t.test_id for t in partial.pending}
    tests = [
        replace(t, daily_scores=tuple(daily.get(t.test_id, [0.0] * DAILY_DAYS)))
        if t.test_id in waiting
        else t
        for t in first.tests
    ]
    by_parent: dict[str, list[_TestInfo]] = defaultdict(list)
    by_signature: dict[str, list[_TestInfo]] = defaultdict(list)
    for info in infos.values():
        by_parent[info.parent].append(info)
        if info.signature is not None:
            by_signature[info.signature].append(info)
    # Each group kind's run sets are read once for its evidence and its onsets.
    units = partial.family_units
    family_evidence = per_family_evidence(
        db, now, config, suite, branch_kind, tests=partial.evidence, units=units
    )
    bad = {k: ev for k, ev in family_evidence.items() if ev.failed_runs and by_parent.get(k)}
    pks = [info.pk for parent in bad for info in by_parent[parent]]
    currents = _currents(db, now, config, "family", bad, pks, suite, branch_kind, units=units)
    families = [
        _group(parent, parent, by_parent[parent], ev, now, config, owner_of, currents.get(parent))
        for parent, ev in family_evidence.items()
        if by_parent.get(parent)
    ]
    members = {info.pk: info.signature for info in infos.values() if info.signature}
    units = pooled_units(db, members, now, config) if members else None
    signature_evidence = per_signature_evidence(
        db, members, now, config, suite, branch_kind, tests=partial.evidence, units=units
    )
    bad = {k: ev for k, ev in signature_evidence.items() if ev.failed_runs}
    wanted = {pk: sig for pk, sig in members.items() if sig in bad}
    currents = _currents(
        db, now, config, "signature", bad, list(wanted), suite, branch_kind, wanted, units
    )
    signatures = [
        _group(
            sig,
            by_signature[sig][0].signature_text or sig,
            by_signature[sig],
            ev,
            now,
            config,
            owner_of,
            currents.get(sig),
        )
        for sig, ev in signature_evidence.items()
        if by_signature.get(sig)
    ]
    _add_group_series(db, families, signatures, infos, now, config)
    cofailures = _cofailures(db, partial, tests)
    return replace(
        first,
        tests=tests,
        families=_rank_groups(families),
        signatures=_rank_groups(signatures),
        cofailures=_rank_groups(cofailures),
    )


def _cofailures(db: Connected, partial: _Partial, tests: list[TestVerdict]) -> list[GroupVerdict]:
    """The co-failure groups of the flaky tests, pooled and judged like signature groups.

    Their suspects (the first is the cause the tests share, which then names the group) come
    with the tests' and families', from causes.attach_causes: they read the raw rows.
    """
    from flaketui.core.scoring.cofailure import cofailure_groups, group_key, group_label
    from flaketui.core.scoring.series import daily_group_scores

    config, now = partial.config, partial.report.now
    suite, branch_kind = partial.suite, partial.branch_kind
    pk_of = {info.test_id: pk for pk, info in partial.infos.items()}
    flaky = {pk_of[t.test_id]: t.test_id for t in tests if t.verdict == Verdict.FLAKY}
    groups = cofailure_groups(db, flaky, now, config, suite, branch_kind)
    if not groups:
        return []
    members = {pk: group_key([flaky[p] for p in pks]) for pks in groups for pk in pks}
    units = pooled_units(db, members, now, config)
    evidence = per_signature_evidence(
        db, members, now, config, suite, branch_kind, tests=partial.evidence, units=units
    )
    failing = {key: ev for key, ev in evidence.items() if ev.failed_runs}
    currents = _currents(
        db, now, config, "signature", failing, list(members), suite, branch_kind, members, units
    )
    daily = daily_group_scores(db, members, now=now, days=DAILY_DAYS, config=config)
    out = []
    for pks in groups:
        ids = [flaky[pk] for pk in pks]
        key = members[pks[0]]
        if key not in evidence:
            continue
        infos = [partial.infos[pk] for pk in pks]
        group = _group(
            key,
            group_label(ids, None),
            infos,
            evidence[key],
            now,
            config,
            partial.owner_of,
            currents.get(key),
        )
        group.daily_scores = tuple(daily.get(key, [0.0] * DAILY_DAYS))
        out.append(group)
    return out


def _add_group_series(
    db: Connected,
    families: list[GroupVerdict],
    signatures: list[GroupVerdict],
    infos: dict[int, _TestInfo],
    now: datetime,
    config: Config,
) -> None:
    """The pooled daily scores of the groups with a failure in the window (zeros otherwise).

    As for tests, a group without a failure in the window scores 0 on every day of the series.
    """
    from flaketui.core.scoring.series import daily_group_scores, daily_recency_scores

    zeros = [0.0] * DAILY_DAYS
    # A family's series pools its runs as its evidence does (family_day_seq from the rollups).
    failing_families = sorted(g.key for g in families if g.scores.last_failure_at is not None)
    daily = (
        daily_recency_scores(
            db, failing_families, now=now, days=DAILY_DAYS, config=config, family=True
        )
        if failing_families
        else {}
    )
    for group in families:
        group.daily_scores = tuple(daily.get(group.key, zeros))
    failing_signatures = {g.key for g in signatures if g.scores.last_failure_at is not None}
    members = {
        info.pk: info.signature
        for info in infos.values()
        if info.signature is not None and info.signature in failing_signatures
    }
    daily = daily_group_scores(db, members, now=now, days=DAILY_DAYS, config=config)
    for group in signatures:
        group.daily_scores = tuple(daily.get(group.key, zeros))
