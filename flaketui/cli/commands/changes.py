"""`flaketui changes`: the days a test's or family's verdict changed, over the window."""

from __future__ import annotations

import json
from pathlib import Path

import click

from flaketui.cli import cli
from flaketui.cli.echo import echo_line, echo_text
from flaketui.cli.history_address import READ_ADDRESS, local_history
from flaketui.core.config import load_config
from flaketui.core.history.store import history_file
from flaketui.core.scoring.report import effective_now
from flaketui.core.scoring.series import verdict_changes
from flaketui.core.timeutil import MAX_DAYS, parse_iso, to_iso
from flaketui.core.words import plural


@cli.command("changes")
@click.argument("db", type=READ_ADDRESS)
@click.argument("test_or_parent")
@click.option("--now", metavar="ISO", help="Judge as of this time (default: now).")
@click.option(
    "--days",
    type=click.IntRange(min=1, max=MAX_DAYS),
    help="How many days back (default: the scoring window).",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def changes_command(
    db: Path, test_or_parent: str, now: str | None, days: int | None, fmt: str
) -> None:
    """Verdict changes of TEST (or a family parent): the day each new verdict first held, and
    its reason. Each day is judged as of its end, by the report's rules.
    DB may be a postgresql:// URL: its replica in the cache directory is synced and read.
    """
    db = local_history(db)
    config = load_config()
    span = days or int(config.window_days)
    with history_file(db, create=False, readonly=True) as history:
        moment, clamped = effective_now(history, parse_iso(now) if now else None, config)
        found = verdict_changes(history, test_or_parent, now=moment, days=span, config=config)
    if fmt == "json":
        payload = {
            "key": test_or_parent,
            "now": to_iso(moment),
            "now_was_clamped": clamped,
            "days": span,
            "changes": [
                {"day": c.day.isoformat(), "before": c.before, "after": c.after, "reason": c.reason}
                for c in found
            ],
        }
        click.echo(json.dumps(payload, indent=2))
        return
    clock = " (history is older than the window: shown as of its newest run)" if clamped else ""
    echo_line(
        f"{test_or_parent}: verdict changes over {plural(span, 'day')} to {to_iso(moment)}{clock}"
    )
    if not found:
        echo_text("none")
    for change in found:
        echo_line(f"{change.day.isoformat()}  {change.before} -> {change.after}  {change.reason}")
