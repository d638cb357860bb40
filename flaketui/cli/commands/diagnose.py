"""`flaketui diagnose`: re-run a flaky test in the repository under experiments, classify it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from flaketui.cli import cli
from flaketui.cli.echo import echo_line
from flaketui.cli.params import FilePath, FiniteFloatRange
from flaketui.core.config import load_config
from flaketui.core.diagnosis.experiments import Diagnoser, Diagnosis
from flaketui.core.diagnosis.sessions import PytestSessions, check_node_id, check_repository
from flaketui.core.history.store import history_file
from flaketui.core.scoring.detail import resolve_target
from flaketui.core.scoring.report import effective_now
from flaketui.core.timeutil import utc_now
from flaketui.core.words import plural


def diagnosis_json(diagnosis: Diagnosis) -> dict[str, Any]:
    """The diagnosis as a JSON-ready dict."""
    return {
        "test_id": diagnosis.test_id,
        "label": diagnosis.label,
        "summary": diagnosis.summary,
        "polluter": diagnosis.polluter,
        "rate": diagnosis.rate,
        "rate_low": diagnosis.rate_low,
        "rate_high": diagnosis.rate_high,
        "command": diagnosis.command,
        "replay": diagnosis.replay,
        "replay_run": diagnosis.replay_run,
        "experiments": [
            {
                "name": e.name,
                "sessions": e.sessions,
                "failed": e.failed,
                "not_run": e.not_run,
                "not_run_reason": e.not_run_reason or None,
            }
            for e in diagnosis.experiments
        ],
        "skipped": diagnosis.skipped,
        "stored_runs": diagnosis.stored_runs,
        "cancelled": diagnosis.cancelled,
    }


@cli.command("diagnose")
@click.argument(
    "db",
    type=FilePath(
        what="history file",
        dir_okay=False,
        path_type=Path,
        server_hint="diagnose records its experiment runs into a history file: sync one "
        "(flaketui sync URL FILE) and diagnose in it",
    ),
)
@click.argument("test_id")
@click.option(
    "--repo",
    type=click.Path(path_type=Path),
    default=".",
    show_default=True,
    help="The repository whose pytest runs the test.",
)
@click.option(
    "--runs",
    type=click.IntRange(min=2, max=1000),
    default=10,
    show_default=True,
    help="Sessions per experiment.",
)
@click.option(
    "--minutes",
    type=FiniteFloatRange(min=0, min_open=True, unit="minutes"),
    help="Stop the experiments after this long (what ran is still classified).",
)
@click.option(
    "--python", metavar="PATH", help="Interpreter to run pytest with (default: this one)."
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def diagnose_command(
    db: Path,
    test_id: str,
    repo: Path,
    runs: int,
    minutes: float | None,
    python: str | None,
    fmt: str,
) -> None:
    """Re-run TEST_ID of history DB in the repository: alone, after its recorded predecessors,
    at one and at many workers and in random orders; say why it is flaky.

    The sessions are stored in DB under the source `diagnose`, which scoring ignores.
    """
    root = check_repository(repo)
    with history_file(db, create=False) as history:
        # The history first: it names the tests like a mistyped id, the repository does not.
        resolve_target(history, test_id)
        check_node_id(root, test_id)
        config = load_config(root)
        moment, _ = effective_now(history, None, config)
        sessions = PytestSessions(root, python)
        interactive = fmt == "text" and sys.stderr.isatty()
        shown = False  # whether a progress line waits for its end

        def progress(done: int, planned: int, what: str) -> None:
            nonlocal shown
            if interactive:
                click.echo(f"\r[{done}/{planned}] {what:<30}", nl=False, err=True)
                shown = True

        diagnoser = Diagnoser(
            history, sessions, runs=runs, minutes=minutes, config=config, now=moment,
            progress=progress,
        )  # fmt: skip
        try:
            diagnosis = diagnoser.diagnose(test_id)
        finally:
            if shown:
                click.echo("", err=True)  # ends the progress line, before an error's line too
    if fmt == "json":
        click.echo(json.dumps(diagnosis_json(diagnosis), indent=2))
        return
    echo_line(f"{diagnosis.test_id}: {diagnosis.label}")
    echo_line(f"  {diagnosis.summary}")
    for experiment in diagnosis.experiments:
        echo_line(f"  {experiment.name}: {experiment.counts()}")
    for note in diagnosis.skipped:
        echo_line(f"  skipped {note}")
    echo_line(f"  reproduce: {' '.join(diagnosis.command)}")
    if diagnosis.replay is not None and diagnosis.replay != diagnosis.command:
        echo_line(f"  replay the order of run {diagnosis.replay_run}: {' '.join(diagnosis.replay)}")
    echo_line(
        f"  {plural(diagnosis.stored_runs, 'session')} stored in {db} under source 'diagnose' "
        f"(not scored; run at {utc_now():%Y-%m-%d %H:%M} UTC)"
    )
