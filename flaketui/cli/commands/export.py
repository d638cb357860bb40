"""`flaketui export`: the quarantine decisions (skip file + current verdicts) in five formats."""

from __future__ import annotations

from pathlib import Path

import click

from flaketui.cli import cli
from flaketui.cli.commands.quarantine import NOW_OPTION, SKIP_FILE_READ_OPTION, read_skip_for
from flaketui.cli.history_address import READ_ADDRESS, local_history
from flaketui.cli.options import CODEOWNERS_OPTION
from flaketui.cli.outputs import OutputPath, output_file, refuse_reading_into
from flaketui.core.atomic import write_atomically
from flaketui.core.history.store import history_file
from flaketui.core.output.exports import FORMATS, decisions, render_decisions
from flaketui.core.owners import locate_codeowners
from flaketui.core.quarantine.skipfile import SkipMode
from flaketui.core.timeutil import parse_iso, utc_now
from flaketui.core.words import plural

# deselect and list feed a test runner's exclusions, so by default they hold only `skip` entries.
DEFAULT_MODE: dict[str, str] = {"deselect": SkipMode.SKIP, "list": SkipMode.SKIP}


@cli.command("export")
@click.argument("db", type=READ_ADDRESS)
@click.option("--format", "fmt", type=click.Choice(FORMATS), required=True, help="Output format.")
@click.option("--owner", help="Only decisions for this owner (exact match).")
@click.option(
    "--mode",
    type=click.Choice([*(mode.value for mode in SkipMode), "all"]),
    help="Only entries of this mode (default: skip for deselect and list, else all).",
)
@click.option(
    "-o",
    "--output",
    type=OutputPath(),
    metavar="PATH",
    help="Write here (atomically) instead of standard output (`-`: standard output).",
)
@SKIP_FILE_READ_OPTION
@NOW_OPTION
@CODEOWNERS_OPTION
def export_command(
    db: Path | str,
    fmt: str,
    owner: str | None,
    mode: str | None,
    output: Path | str | None,
    skip_file: str | None,
    now: str | None,
    codeowners: Path | None,
) -> None:
    """Export the quarantine decisions: skip-file entries with their current verdict and owner.
    DB may be a postgresql:// URL: its replica in the cache directory is synced and read.
    """
    from flaketui.core.scoring.report import build_report, effective_now

    path, skip, config = read_skip_for(skip_file)
    output = output_file(output)
    refuse_reading_into(
        output, "--output", history=db, skip_file=path, codeowners=codeowners, cwd=path.parent
    )
    db = local_history(db)
    requested = parse_iso(now) if now else None
    expiry_now = requested or utc_now()
    report = None
    with history_file(db, create=False, readonly=True) as history:
        # Verdicts as of the effective now; expiry against the real clock (or --now).
        moment, _clamped = effective_now(history, requested, config)
        if skip is not None and skip.entries:
            report = build_report(
                history,
                now=moment,
                config=config,
                repo_root=locate_codeowners(db, cwd=path.parent, explicit=codeowners),
                groups=False,  # the tests' verdicts and owners alone
            )
    chosen = mode or DEFAULT_MODE.get(fmt, "all")
    found = decisions(
        skip,
        report,
        now=expiry_now,
        owner=owner,
        mode=None if chosen == "all" else SkipMode(chosen),
    )
    text = render_decisions(found, fmt, now=expiry_now)
    if output is None:
        click.echo(text, nl=False)
        return
    write_atomically(output.absolute(), text.encode("utf-8"))
    click.echo(f"exported {plural(len(found), 'decision')} as {fmt} to {output}", err=True)
