"""Build the committed demo history (sample_data/history.db) through flaketui's real ingest path.

Usage: python sample_data/generate.py [--out-dir DIR]

Deterministic: a fixed seed, a fixed "now" anchor, per-run random streams seeded by run id and
sorted iteration, so the same code always writes the same database. The stories it tells are
described in sample_data/README.md; their facts are written to stories.json beside the database.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # run as a script or loaded by path from the tests
    sys.path.insert(0, str(HERE))

from catalogue import billing_ids, build_catalogue, codeowners_text  # noqa: E402
from reports import (  # noqa: E402
    Case,
    Run,
    RunState,
    order_seed,
    records_order,
    simulate_run,
    write_report,
)
from schedule import Scenario, build_runs, sha  # noqa: E402

SEED = 20261130
ANCHOR = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)  # the demo's "now"
DAYS = 66  # days -65 .. 0, day 0 being the anchor's date
REPO = "acme/shop"
# What the pytest plugin records of the CI runners it runs on (runs.os, python, platform).
PLUGIN_RUNNER = {"os": "Linux", "python": "3.12.7", "platform": "linux-x86_64"}
CI_URL = "https://ci.example.com/acme/shop/pipelines"


def day_at(day: int, hhmm: str) -> datetime:
    """The moment at HH:MM UTC on day `day` (0 = the anchor's date, negative = earlier)."""
    hours, minutes = (int(x) for x in hhmm.split(":"))
    midnight = ANCHOR.replace(hour=0, minute=0)
    return midnight + timedelta(days=day, hours=hours, minutes=minutes)


# ---- the stories: every fact later tests assert on lives here -----------------------
STORY: dict[str, dict[str, Any]] = {
    "regression": {
        "test_id": "tests/api/test_orders.py::test_order_total_includes_discount",
        "break_at": day_at(-12, "10:42"),
        "message": (
            "AssertionError: order total ignores discount code SPRING10: assert 100.0 == 90.0"
        ),
        "changed_files": ["src/acme/orders/pricing.py"],
        # A PR cut before the break and never rebased: test A still passes there.
        "old_base_branch": "chen/search-synonyms",
        "old_base_cut_at": day_at(-14, "12:00"),
        "old_base_pushes": [day_at(-11, "10:00"), day_at(-9, "16:00")],
    },
    "flaky_no_retry": {
        "test_id": (
            "tests/integration/test_inventory_sync.py::test_inventory_sync_eventually_consistent"
        ),
        "fail_probability": 0.5,
    },
    "billing_family": {
        "parent": "tests/billing/test_rollup.py::test_billing_rollup",
        "leak_at": day_at(-45, "11:05"),
        "changed_files": ["src/acme/billing/warehouse.py", "tests/billing/conftest.py"],
        "writer_param": "tests/billing/test_rollup.py::test_billing_rollup[currency-EUR-window-1h]",
        "hot_param": "tests/billing/test_rollup.py::test_billing_rollup[currency-USD-window-7d]",
        "run_fail_probability_by_workers": {"1": 0.0, "4": 0.07, "16": 0.4},
    },
    "resolved_incident": {
        "test_id": "tests/storage/test_cache.py::test_cache_eviction_under_pressure",
        "flaky_from": day_at(-52, "00:00"),
        "fixed_at": day_at(-41, "09:00"),  # runner memory limit raised (infra, no commit)
        "fail_probability": 0.35,
    },
    "alternating": {
        "test_id": "tests/integration/test_search_cluster.py::test_reindex_preserves_aliases",
    },
    "nightly_only": {
        "test_id": "tests/e2e/test_full_export.py::test_full_export_roundtrip",
        "fail_probability": 0.35,
    },
    "main_low_rate": {
        "test_id": "tests/api/test_webhooks.py::test_webhook_retry_backoff",
        "fail_probability": 0.04,
    },
    "mild_flaky": {
        "test_id": "tests/notifications/test_email.py::test_digest_sends_once",
        "fail_probability": 0.02,
    },
    "provider_outage": {
        "incident": "provider-outage",
        "start": day_at(-20, "13:00"),
        "end": day_at(-20, "16:30"),
        "main_pushes": [day_at(-20, t) for t in ("13:10", "14:00", "14:50", "15:40", "16:20")],
        "pr_branch": "dana/refund-webhooks",
        "pr_push": day_at(-20, "14:35"),
    },
    "crash": {
        "test_id": "tests/storage/test_bulk_import.py::test_bulk_import_large_csv",
        "fail_probability_by_workers": {"1": 0.0, "4": 0.05, "16": 0.12},
    },
    "new_test": {
        "test_id": "tests/api/test_rate_limit.py::test_burst_limit_per_token",
        "added_at": day_at(-3, "10:20"),
        "changed_files": ["src/acme/api/rate_limit.py", "tests/api/test_rate_limit.py"],
        "flaky_executions": [4, 13],  # 0-based executions that fail once, then pass
    },
    "pr_edits_test": {
        "test_id": "tests/billing/test_tax.py::test_vat_rounding_half_even",
        "branch": "farah/vat-half-even",
        "pushes": [
            day_at(-10, "09:40"),
            day_at(-10, "15:20"),
            day_at(-7, "09:05"),
            day_at(-7, "11:30"),
        ],
        "failing_pushes": 3,
        "merged_at": day_at(-7, "13:00"),
        "changed_files": ["src/acme/billing/tax.py", "tests/billing/test_tax.py"],
    },
    "shared_signature": {
        "test_ids": [
            "tests/billing/test_invoice.py::test_invoice_saved",
            "tests/api/test_orders.py::test_order_persists",
            "tests/search/test_query.py::test_query_uses_db_cache",
            "tests/storage/test_db.py::test_transaction_isolation",
        ],
        "run_event_probability": 0.05,
        "other_cause_test_id": "tests/storage/test_db.py::test_pool_exhaustion",
        "other_cause_probability": 0.03,
    },
    "disk_full": {
        "branch": "erik/csv-export-speedup",
        "at": day_at(-60, "10:15"),
        "rerun_at": day_at(-60, "10:48"),
    },
    "cache_outage": {
        # The shared cache's pods restarted: in the runs between, each non-billing test failed
        # its first attempt with one message at this rate (a fifth of the suite), then passed.
        "start": day_at(-6, "11:30"),
        "end": day_at(-6, "13:30"),
        "share": 0.45,
    },
    "recent_onset": {
        "test_id": "tests/search/test_ranking.py::test_rank_ties_stable",
        "since": day_at(-5, "00:00"),  # a search client upgrade on the runners (no commit)
        "fail_probability": 0.35,
    },
    "rare_flake": {
        "test_id": "tests/api/test_auth.py::test_login_ok",
        # Also the integration suite's smoke test: the most-run test of the history.
        "flaky_executions": [150, 420],  # of its unit and nightly runs: fail once, then pass
    },
    "order_polluter": {
        # From then on the PR `unit` job records with the pytest plugin (--flaketui-db) instead
        # of uploading JUnit, and shuffles its order with pytest-randomly.
        "plugin_from": day_at(-19, "00:00"),
        # test_cache_ttl sets the cache's default TTL to 0 and never restores it; the victim,
        # run after it on their shared worker (xdist_group "cache-db"), sees its entry expire.
        # In the fixed order of every other run the victim runs first and passes.
        "polluter": "tests/storage/test_cache.py::test_cache_ttl",
        "victim": "tests/storage/test_cache.py::test_cache_invalidate_on_write",
    },
    "interrupted": {
        "run_id": "nightly-2026-11-25",
        "recorded_share": 0.6,  # the job's timeout killed it after this share of its tests
    },
    "skipped": {
        "test_ids": [
            "tests/api/test_auth.py::test_sso_saml_roundtrip",
            "tests/search/test_query.py::test_query_unicode_collation",
        ],
    },
}

# The intended reading of each story by the app (design intent for later tests, not a result).
EXPECT: dict[str, str] = {
    "regression": "verdict regression; first_bad_commit/last_good_commit as listed; never flaky",
    "flaky_no_retry": "verdict flaky from flips alone (integration suite never retries)",
    "billing_family": "family verdict flaky; each param alone thin (<= a handful of bad runs); "
    "worker pivot: 1 worker none, 4 workers occasional, 16 workers several times as often",
    "resolved_incident": "verdict healthy (failures all in the past, >= 30 days clean)",
    "alternating": "flag alternating (flip rate ~1.0 over its main integration runs)",
    "nightly_only": "verdict flaky, blast radius 1, ranks below main_low_rate by damage",
    "main_low_rate": "verdict flaky, blast radius 4, damage above nightly_only",
    "mild_flaky": "low-rate flaky on main (retries hide it)",
    "provider_outage": "runs tagged provider-outage at ingest: excluded from scoring, greyed",
    "crash": "verdict flaky; its failures are errors (flakyError), passing on retry",
    "new_test": "first seen on added_at; inside the 7-day grace (flag new), a flake or two",
    "pr_edits_test": "not flaky: outside the outage it fails only where the commit edited its file",
    "shared_signature": "the listed tests share one signature; other_cause_test_id does not",
    "disk_full": "untagged run where most unit tests errored: an incident proposal",
    "skipped": "always skipped: no counted runs",
    "cache_outage": "a suspected outage proposed at ingest: excluded, awaiting review (o)",
    "recent_onset": "flaky since its onset day, ranked near the top on its current rate",
    "rare_flake": "healthy with the flag rare-flake: two rescued failures in ~900 runs",
    "interrupted": "one interrupted run, counted for the tests it recorded",
    "order_polluter": "victim flaky with the likely cause 'after test_cache_ttl'; the order view "
    "ranks the polluter first (in every bad run, in no good one); nothing else has an order cause",
}

# ---- writing -----------------------------------------------------------------------------------

# A run the pytest plugin records: its cases in the order they ran, and whether it finished.
Recorded = tuple[Run, list[Case], bool]


def manifest_entry(run: Run, files: list[str]) -> dict[str, object]:
    """One manifest.jsonl line for a run."""
    entry: dict[str, object] = {"files": files} if len(files) > 1 else {"file": files[0]}
    entry.update(
        {
            "run_id": run.run_id,
            "suite": run.suite,
            "branch": run.branch,
            "branch_kind": run.branch_kind,
            "commit": run.commit,
            "timestamp": run.ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "worker_count": run.worker_count,
            "changed_files": list(run.changed_files),
            "incident": run.incident,
            "runner_host": run.runner_host,
            "ci_url": run.ci_url,
        }
    )
    return entry


def write_reports(
    runs: list[Run], folder: Path
) -> tuple[Path, dict[str, Run], int, list[Recorded]]:
    """Simulate every run; write the reports of those uploaded as JUnit plus manifest.jsonl.
    Return samples, the count of attempts and the runs the pytest plugin records instead (the
    interrupted one with the cases it recorded before it was killed): see record_session."""
    tests = build_catalogue()
    state = RunState()
    samples: dict[str, Run] = {}
    results = 0
    lines = []
    sessions: list[Recorded] = []
    for run in runs:
        cases = simulate_run(run, tests, STORY, state, SEED)
        if run.run_id == STORY["interrupted"]["run_id"]:
            kept = cases[: round(len(cases) * STORY["interrupted"]["recorded_share"])]
            results += sum(len(c.attempts) for c in kept)
            sessions.append((run, kept, False))
            continue
        results += sum(len(c.attempts) for c in cases)
        if records_order(run, STORY):
            sessions.append((run, cases, True))
            continue
        if run.suite == "nightly":  # two shards, as a sharded CI job would upload them
            halves = [cases[0::2], cases[1::2]]
            names = [f"{run.run_id}-shard{i + 1}.xml" for i in range(2)]
        else:
            halves, names = [cases], [f"{run.run_id}.xml"]
        for name, part in zip(names, halves, strict=True):
            write_report(folder / name, run, part)
        lines.append(json.dumps(manifest_entry(run, names), sort_keys=True))
        _pick_sample(samples, run, cases)
    if not any(not finished for _, _, finished in sessions):
        raise SystemExit(f"no run {STORY['interrupted']['run_id']} in the schedule")
    manifest = folder / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return manifest, samples, results, sessions


def _pick_sample(samples: dict[str, Run], run: Run, cases: list) -> None:
    """Keep the first outage unit run, a recent nightly, a recent main unit run with retries
    and the last PR unit run with retries uploaded as JUnit (later ones the plugin records)."""
    retried = any(len(c.attempts) > 1 and c.attempts[-1][0] == "pass" for c in cases)
    if run.incident and run.suite == "unit":
        samples.setdefault("outage-unit.xml", run)
    elif run.suite == "nightly" and run.ts > ANCHOR - timedelta(days=3):
        samples.setdefault("nightly-16-workers.xml", run)
    elif run.suite == "unit" and run.branch_kind == "pr" and retried:
        samples["pr-unit-retries.xml"] = run
    elif (
        run.suite == "unit"
        and run.branch_kind == "main"
        and run.worker_count == 4
        and retried
        and run.ts > ANCHOR - timedelta(days=6)
    ):
        samples.setdefault("main-unit.xml", run)


def copy_samples(samples: dict[str, Run], source: Path, target: Path) -> None:
    """Copy the sample reports and write a manifest that ingests exactly them."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    lines = []
    for name in sorted(samples):
        run = samples[name]
        if run.suite == "nightly":
            files = [f"{run.run_id}-shard{i}.xml" for i in (1, 2)]
            names = [name.replace(".xml", f"-shard{i}.xml") for i in (1, 2)]
        else:
            files, names = [f"{run.run_id}.xml"], [name]
        for src, dst in zip(files, names, strict=True):
            shutil.copyfile(source / src, target / dst)
        lines.append(json.dumps(manifest_entry(run, names), sort_keys=True))
    (target / "manifest.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _frozen_clock() -> None:
    """Freeze flaketui's clock at the anchor so ingest-time stamps (incident created_at) repeat."""
    import flaketui.core.timeutil as timeutil

    original = timeutil.utc_now
    for name, module in sorted(sys.modules.items()):
        if name.startswith("flaketui") and getattr(module, "utc_now", None) is original:
            module.utc_now = lambda: ANCHOR  # type: ignore[attr-defined]


def record_session(db: Any, run: Run, cases: list[Case], finished: bool) -> None:
    """Record a run as the pytest plugin does (`--flaketui-db`): each attempt with its position
    on its worker and the test that ran just before it there, the run with its platform and,
    when pytest-randomly shuffled it, its seed.

    Cases come in the order they ran; a retry runs right after the attempt it repeats. A killed
    session wrote the tests it ran before the job's timeout and never called finish(): the run
    stays marked unfinished, as a killed session leaves it.
    """
    from flaketui.core.ingest.writer import RunRecorder
    from flaketui.core.models import Attempt, CaseResult, RunMeta

    meta = RunMeta(
        run_id=run.run_id,
        suite=run.suite,
        branch=run.branch,
        branch_kind=run.branch_kind,
        commit_sha=run.commit,
        ts=run.ts,
        worker_count=run.worker_count,
        runner_host=run.runner_host,
        ci_url=run.ci_url,
        changed_files=list(run.changed_files),
        os=PLUGIN_RUNNER["os"],
        python=PLUGIN_RUNNER["python"],
        platform=PLUGIN_RUNNER["platform"],
        order_seed=f"randomly:{order_seed(run, SEED)}" if records_order(run, STORY) else None,
    )
    last: dict[str | None, tuple[str, int]] = {}  # per worker: the test that ran last, position
    recorded = []
    for case in cases:
        attempts = []
        for (outcome, message, _kind), duration in zip(case.attempts, case.durations, strict=True):
            before, position = last.get(case.worker_id, (None, 0))
            attempts.append(
                Attempt(outcome, duration, message, case.worker_id, before, position + 1)
            )
            last[case.worker_id] = (case.test.node_id, position + 1)
        recorded.append(CaseResult(case.test.node_id, case.test.file, attempts))
    recorder = RunRecorder(db, meta)
    recorder.add(recorded)
    if finished:
        recorder.finish()


def ingest(manifest: Path, db_path: Path, sessions: list[Recorded]) -> None:
    """Ingest the manifest through flaketui's real path, record the plugin's sessions, propose
    the suspected outages as `flaketui ingest` does after a write, then compact the file."""
    from flaketui.core.config import Config
    from flaketui.core.history.outages import record_outages
    from flaketui.core.history.store import open_history
    from flaketui.core.ingest.manifest import ingest_manifest
    from flaketui.core.scoring.report import effective_now

    _frozen_clock()
    if db_path.exists():
        db_path.unlink()
    db = open_history(db_path)
    # A throwaway build: no fsync per run (the file is rewritten by VACUUM at the end anyway).
    db.conn.execute("PRAGMA synchronous = OFF")
    try:
        summary = ingest_manifest(db, manifest)
        if summary.refused:
            raise SystemExit(f"ingest refused manifest lines: {summary.refused[:3]}")
        for run, cases, finished in sessions:
            record_session(db, run, cases, finished)
        config = Config()
        moment, _clamped = effective_now(db, None, config)
        record_outages(db, now=moment, config=config)
        db.conn.execute("PRAGMA journal_mode = DELETE")
        db.conn.execute("VACUUM")
    finally:
        db.conn.close()


def stories_json(commits: list, runs: list[Run], results: int) -> dict[str, object]:
    """The facts later tests read: story constants plus what the schedule made of them."""

    def iso(value: object) -> object:
        if isinstance(value, datetime):
            return value.strftime("%Y-%m-%dT%H:%M:%SZ")
        if isinstance(value, dict):
            return {k: iso(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [iso(v) for v in value]
        return value

    by_key = {key: (i, c) for i, c in enumerate(commits) if (key := c[3]) and key != "outage"}
    facts: dict[str, Any] = iso(STORY)  # type: ignore[assignment]
    reg_index, reg_commit = by_key["regression"]
    facts["regression"]["first_bad_commit"] = reg_commit[1]
    facts["regression"]["last_good_commit"] = commits[reg_index - 1][1]
    facts["billing_family"]["leak_commit"] = by_key["billing_leak"][1][1]
    facts["billing_family"]["params"] = billing_ids()
    facts["new_test"]["commit"] = by_key["new_test"][1][1]
    facts["pr_edits_test"]["merge_commit"] = by_key["tax_merge"][1][1]
    facts["pr_edits_test"]["commits"] = [
        sha(REPO, STORY["pr_edits_test"]["branch"], i) for i in range(4)
    ]
    old_base = STORY["regression"]["old_base_branch"]
    facts["regression"]["old_base_run_ids"] = sorted(
        r.run_id for r in runs if r.branch == old_base and r.suite == "unit"
    )
    outage_runs = sorted(r.run_id for r in runs if r.incident)
    facts["provider_outage"]["run_ids"] = outage_runs
    disk_run = next(r for r in runs if "disk-full" in r.flags)
    facts["disk_full"]["run_id"] = disk_run.run_id
    facts["disk_full"]["rerun_id"] = disk_run.run_id + "-rerun"
    facts["disk_full"]["commit"] = disk_run.commit
    facts["pr_edits_test"]["run_ids"] = sorted(
        r.run_id for r in runs if "edits-tax-test" in r.flags and r.suite == "unit"
    )
    facts["pr_edits_test"]["failing_run_ids"] = sorted(
        r.run_id for r in runs if "tax-broken" in r.flags and r.suite == "unit"
    )
    cache = STORY["cache_outage"]
    facts["cache_outage"]["run_ids"] = sorted(
        r.run_id for r in runs if cache["start"] <= r.ts < cache["end"] and r.suite != "nightly"
    )
    for key, expectation in EXPECT.items():
        facts[key]["expect"] = expectation
    tests = build_catalogue()
    return {
        "anchor": iso(ANCHOR),
        "seed": SEED,
        "days": DAYS,
        "first_run": iso(runs[0].ts),
        "last_run": iso(runs[-1].ts),
        "runs": len(runs),
        "results": results,
        "tests": len(tests),
        "suites": sorted({r.suite for r in runs}),
        "worker_counts": sorted({r.worker_count for r in runs}),
        "stories": facts,
    }


def build(out_dir: Path) -> dict[str, object]:
    """Write history.db, stories.json, CODEOWNERS and reports/ into out_dir."""
    rng = random.Random(SEED)
    scenario = Scenario(story=STORY, anchor=ANCHOR, days=DAYS, repo=REPO, ci_url=CI_URL)
    runs, commits = build_runs(scenario, rng)
    out_dir.mkdir(parents=True, exist_ok=True)
    # ~900 small scratch files: a RAM-backed folder, where there is one, is much faster.
    ram = Path("/dev/shm")
    scratch_root = str(ram) if ram.is_dir() and os.access(ram, os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="flaketui-sample-", dir=scratch_root) as scratch:
        folder = Path(scratch)
        manifest, samples, results, sessions = write_reports(runs, folder)
        built = folder / "history.db"
        ingest(manifest, built, sessions)
        shutil.copyfile(built, out_dir / "history.db")
        copy_samples(samples, folder, out_dir / "reports")
    facts = stories_json(commits, runs, results)
    (out_dir / "stories.json").write_text(json.dumps(facts, indent=2, sort_keys=True) + "\n")
    (out_dir / "CODEOWNERS").write_text(codeowners_text())
    return facts


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out-dir", type=Path, default=HERE, help="where to write (default: here)")
    args = parser.parse_args(argv)
    facts = build(args.out_dir)
    size = (args.out_dir / "history.db").stat().st_size
    print(f"{facts['runs']} runs, {facts['results']} results, {facts['tests']} tests, {size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
