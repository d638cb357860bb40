"""The demo project's CI calendar: main pushes, nightlies and PR branches, as runs."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from reports import Run

Commit = tuple[datetime, str, tuple[str, ...], str]  # time, sha, changed files, story key


@dataclass(frozen=True)
class Scenario:
    """The story constants the calendar is built around (defined in generate.py)."""

    story: dict[str, Any]
    anchor: datetime
    days: int
    repo: str
    ci_url: str

    def day_at(self, day: int, hhmm: str) -> datetime:
        """The moment at HH:MM UTC on day `day` (0 = the anchor's date)."""
        hours, minutes = (int(x) for x in hhmm.split(":"))
        midnight = self.anchor.replace(hour=0, minute=0)
        return midnight + timedelta(days=day, hours=hours, minutes=minutes)


SOURCE_FILES = (
    "src/acme/api/auth.py",
    "src/acme/api/orders.py",
    "src/acme/api/webhooks.py",
    "src/acme/billing/invoice.py",
    "src/acme/billing/rollup.py",
    "src/acme/notifications/email.py",
    "src/acme/notifications/sms.py",
    "src/acme/search/query.py",
    "src/acme/search/ranking.py",
    "src/acme/storage/cache.py",
    "src/acme/storage/db.py",
    "src/acme/storage/bulk_import.py",
    "docs/changelog.md",
)
# Test files PRs may edit: none of them hosts a story test, so no story run is 'edited'.
EDITABLE_TEST_FILES = (
    "tests/api/test_auth.py",
    "tests/notifications/test_sms.py",
    "tests/search/test_ranking.py",
)
AUTHORS = ("alice", "bob", "chen", "dana", "gus", "hana", "ivan", "jo")
TOPICS = (
    "refund-api",
    "search-facets",
    "cache-ttl",
    "sms-unicode",
    "invoice-pdf",
    "auth-rotation",
    "bulk-dedup",
    "ranking-decay",
    "webhook-batching",
    "order-notes",
    "replica-routing",
    "email-digest",
    "rate-limit-docs",
    "checkout-guest",
    "tax-tables",
    "pagination-cursor",
)
# Which story each forced main push belongs to, and where its changed files are kept.
STORY_COMMITS = {
    "regression": ("regression", "break_at"),
    "billing_leak": ("billing_family", "leak_at"),
    "new_test": ("new_test", "added_at"),
    "tax_merge": ("pr_edits_test", "merged_at"),
}


def sha(repo: str, *parts: object) -> str:
    """A fake but stable 40-hex commit id."""
    return hashlib.sha1(":".join(str(p) for p in (repo, *parts)).encode()).hexdigest()


def _in_outage(sc: Scenario, moment: datetime, margin_minutes: int = 30) -> bool:
    outage = sc.story["provider_outage"]
    margin = timedelta(minutes=margin_minutes)
    return bool(outage["start"] - margin <= moment <= outage["end"] + margin)


def main_commits(sc: Scenario, rng: random.Random) -> list[Commit]:
    """Main pushes as (time, sha, changed files, story key), oldest first; index 0 predates."""
    forced = {sc.story[story][when]: key for key, (story, when) in STORY_COMMITS.items()}
    for moment in sc.story["provider_outage"]["main_pushes"]:
        forced[moment] = "outage"
    times: dict[datetime, str] = dict(forced)
    for day in range(-(sc.days - 1), 1):
        weekday = sc.day_at(day, "00:00").weekday() < 5
        for _ in range(rng.randint(4, 6) if weekday else rng.randint(0, 1)):
            moment = sc.day_at(day, "07:30") + timedelta(minutes=rng.randint(0, 12 * 60))
            clash = any(abs((moment - f).total_seconds()) < 1200 for f in forced)
            if moment > sc.anchor - timedelta(minutes=20) or _in_outage(sc, moment) or clash:
                continue
            times.setdefault(moment, "")
    commits: list[Commit] = [
        (
            sc.day_at(-sc.days, "23:00"),
            sha(sc.repo, "main", 0),
            ("src/acme/__init__.py",),
            "initial",
        )
    ]
    for index, moment in enumerate(sorted(times), start=1):
        key = times[moment]
        if key in STORY_COMMITS:
            files = tuple(sc.story[STORY_COMMITS[key][0]]["changed_files"])
        else:
            files = tuple(sorted(rng.sample(SOURCE_FILES, rng.randint(1, 3))))
        commits.append((moment, sha(sc.repo, "main", index), files, key))
    return commits


def _latest(commits: list[Commit], moment: datetime) -> int:
    """Index of the newest main commit at or before `moment`."""
    return max(i for i, c in enumerate(commits) if c[0] <= moment)


def _runner(rng: random.Random) -> str:
    return f"ci-runner-{rng.randint(1, 12):02d}"


def _push_runs(
    sc: Scenario,
    rng: random.Random,
    *,
    key: str,
    branch: str,
    kind: str,
    commit: str,
    moment: datetime,
    code_ts: datetime,
    files: tuple[str, ...],
    flags: frozenset[str] = frozenset(),
) -> list[Run]:
    """The unit and integration runs of one push (and sometimes a re-run of unit)."""
    incident = sc.story["provider_outage"]["incident"] if _in_outage(sc, moment, 0) else None
    workers = 4 if rng.random() < 0.75 else 1
    common: dict[str, Any] = {
        "branch": branch,
        "branch_kind": kind,
        "commit": commit,
        "changed_files": files,
        "code_ts": code_ts,
        "incident": incident,
    }
    unit_flags = flags
    if "disk-full" in flags:
        flags = frozenset(flags - {"disk-full"})
    runs = [
        Run(
            run_id=f"{key}-{commit[:10]}-unit",
            suite="unit",
            ts=moment,
            worker_count=workers,
            runner_host=_runner(rng),
            flags=unit_flags,
            **common,
        ),
        Run(
            run_id=f"{key}-{commit[:10]}-integration",
            suite="integration",
            ts=moment + timedelta(minutes=4),
            worker_count=1,
            runner_host=_runner(rng),
            flags=flags,
            **common,
        ),
    ]
    rerun_at = sc.story["disk_full"]["rerun_at"] if "disk-full" in unit_flags else None
    if rerun_at is None and kind == "pr" and rng.random() < 0.08 and incident is None:
        rerun_at = moment + timedelta(minutes=rng.randint(15, 45))
    if rerun_at is not None and rerun_at < sc.anchor:
        runs.append(
            Run(
                run_id=f"{key}-{commit[:10]}-unit-rerun",
                suite="unit",
                ts=rerun_at,
                worker_count=workers,
                runner_host=_runner(rng),
                flags=flags,
                **common,
            )
        )
    return runs


def pr_branches(
    sc: Scenario, rng: random.Random, commits: list
) -> list[tuple[str, datetime, list[datetime], int]]:
    """PR branches as (name, created, push times, base commit index)."""
    branches = []
    used: set[str] = set()
    for day in range(-(sc.days - 1), 1):
        weekday = sc.day_at(day, "00:00").weekday() < 5
        count = 1 + int(rng.random() < 0.25) if weekday else int(rng.random() < 0.2)
        for _ in range(count):
            name = f"{rng.choice(AUTHORS)}/{rng.choice(TOPICS)}"
            while name in used:
                name += "-2"
            used.add(name)
            created = sc.day_at(day, "08:00") + timedelta(minutes=rng.randint(0, 10 * 60))
            base_at = created
            if rng.random() < 0.3:  # an older base: the branch was cut days ago, never rebased
                base_at = created - timedelta(hours=rng.randint(36, 120))
            pushes, moment = [], created
            for _ in range(rng.randint(1, 4)):
                if moment < sc.anchor - timedelta(minutes=15) and not _in_outage(sc, moment):
                    pushes.append(moment)
                moment += timedelta(minutes=rng.randint(60, 20 * 60))
            if pushes:
                branches.append((name, created, pushes, _latest(commits, base_at)))
    return branches


def build_runs(sc: Scenario, rng: random.Random) -> tuple[list[Run], list]:
    """Every run of the demo history, sorted by time then run id."""
    commits = main_commits(sc, rng)
    runs: list[Run] = []
    for moment, commit, files, _key in commits[1:]:
        runs += _push_runs(
            sc,
            rng,
            key="main",
            branch="main",
            kind="main",
            commit=commit,
            moment=moment,
            code_ts=moment,
            files=files,
        )
    for day in range(-(sc.days - 1), 1):
        moment = sc.day_at(day, "02:30")
        moment_commit = commits[_latest(commits, moment)]
        runs.append(
            Run(
                run_id=f"nightly-{moment:%Y-%m-%d}",
                suite="nightly",
                branch="main",
                branch_kind="main",
                commit=moment_commit[1],
                ts=moment,
                worker_count=16,
                changed_files=(),
                runner_host="ci-bigmem-01",
                code_ts=moment_commit[0],
            )
        )
    for name, _created, pushes, base in pr_branches(sc, rng, commits):
        for number, moment in enumerate(pushes):
            files = tuple(sorted(rng.sample(SOURCE_FILES, rng.randint(1, 3))))
            if rng.random() < 0.3:
                files = tuple(sorted({*files, rng.choice(EDITABLE_TEST_FILES)}))
            runs += _push_runs(
                sc,
                rng,
                key="pr",
                branch=name,
                kind="pr",
                commit=sha(sc.repo, name, number),
                moment=moment,
                code_ts=commits[base][0],
                files=files,
            )
    runs += _story_pr_runs(sc, rng, commits)
    runs.sort(key=lambda r: (r.ts, r.run_id))
    numbered = [_with_url(sc, r, 48000 + i) for i, r in enumerate(runs)]
    return numbered, commits


def _with_url(sc: Scenario, run: Run, pipeline: int) -> Run:
    return replace(run, ci_url=f"{sc.ci_url}/{pipeline}")


def _story_pr_runs(sc: Scenario, rng: random.Random, commits: list) -> list[Run]:
    """The PR runs that carry a story: the tax PR, the outage PR, the disk-full PR."""
    runs: list[Run] = []
    tax = sc.story["pr_edits_test"]
    base = commits[_latest(commits, tax["pushes"][0] - timedelta(hours=1))]
    for number, moment in enumerate(tax["pushes"]):
        flags = {"edits-tax-test"} | ({"tax-broken"} if number < tax["failing_pushes"] else set())
        runs += _push_runs(
            sc,
            rng,
            key="pr",
            branch=tax["branch"],
            kind="pr",
            commit=sha(sc.repo, tax["branch"], number),
            moment=moment,
            code_ts=base[0],
            files=tuple(tax["changed_files"]),
            flags=frozenset(flags),
        )
    regression = sc.story["regression"]
    base = commits[_latest(commits, regression["old_base_cut_at"])]
    for number, moment in enumerate(regression["old_base_pushes"]):
        runs += _push_runs(
            sc,
            rng,
            key="pr",
            branch=regression["old_base_branch"],
            kind="pr",
            commit=sha(sc.repo, regression["old_base_branch"], number),
            moment=moment,
            code_ts=base[0],
            files=("src/acme/search/query.py",),
        )
    outage = sc.story["provider_outage"]
    name, moment = outage["pr_branch"], outage["pr_push"]
    base = commits[_latest(commits, moment - timedelta(days=1))]
    runs += _push_runs(
        sc,
        rng,
        key="pr",
        branch=name,
        kind="pr",
        commit=sha(sc.repo, name, 0),
        moment=moment,
        code_ts=base[0],
        files=("src/acme/api/webhooks.py",),
    )
    disk = sc.story["disk_full"]
    base = commits[_latest(commits, disk["at"])]
    runs += _push_runs(
        sc,
        rng,
        key="pr",
        branch=disk["branch"],
        kind="pr",
        commit=sha(sc.repo, disk["branch"], 0),
        moment=disk["at"],
        code_ts=base[0],
        files=("src/acme/storage/bulk_import.py",),
        flags=frozenset({"disk-full"}),
    )
    return runs
