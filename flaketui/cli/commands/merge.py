"""`flaketui merge`: gather histories published by CI jobs into one."""

from __future__ import annotations

from pathlib import Path

import click

from flaketui.cli import cli
from flaketui.cli.commands.incident import propose_outages
from flaketui.cli.echo import echo_line, echo_text
from flaketui.cli.history_address import HISTORY_ADDRESS, shown
from flaketui.core.config import load_config
from flaketui.core.errors import FlaketuiError
from flaketui.core.history.address import mask_url
from flaketui.core.history.merge import copy_to_new, merge_histories
from flaketui.core.history.store import history_file, open_connection
from flaketui.core.ingest.resign import has_runs, is_current, resign, stamp
from flaketui.core.words import plural


@cli.command("merge")
@click.argument("dest", type=HISTORY_ADDRESS)
@click.argument("sources", nargs=-1, required=True, type=HISTORY_ADDRESS)
def merge_command(dest: Path | str, sources: tuple[Path | str, ...]) -> None:
    """Copy into history DEST the runs of each SRC history it does not have yet (idempotent).

    DEST or SRC may be a postgresql:// URL: files merge into a server, a server into a file.
    A SRC given twice (under any name) is merged once.
    """
    sources = _distinct(sources)
    if isinstance(dest, str):
        _merge_into_server(dest, sources)
        return
    servers = [source for source in sources if isinstance(source, str)]
    files = [source for source in sources if isinstance(source, Path)]
    if len(servers) > 1:
        raise FlaketuiError(
            "give one server URL: a history file follows one server (sync each server into"
            " a file of its own)"
        )
    if files:
        _merge_files(dest, files)
    for url in servers:
        from flaketui.cli.commands.sync import run_sync

        summary = run_sync(url, dest, quiet=True)
        echo_line(
            f"merged {mask_url(url)}: {plural(summary.runs_added, 'run')} added, "
            f"{plural(summary.results_added, 'result')}, "
            f"{plural(summary.audit_rows_added, 'audit row')} added"
        )
        for tag in summary.decisions_kept:
            echo_line(f"outage {tag}: decided otherwise on the server; kept as decided here")


def _distinct(sources: tuple[Path | str, ...]) -> tuple[Path | str, ...]:
    """The sources in their order, each once: a file by its resolved path, a URL as written."""
    seen: set[Path | str] = set()
    distinct: list[Path | str] = []
    for source in sources:
        key = source if isinstance(source, str) else source.resolve()
        if key not in seen:
            seen.add(key)
            distinct.append(source)
    return tuple(distinct)


def _check_exists(source: Path | str) -> None:
    """A source that is not there is named as such (not as a history to ingest into)."""
    if not Path(source).exists():
        raise FlaketuiError(f"{source}: no such history to merge")


def _merge_into_server(url: str, sources: tuple[Path | str, ...]) -> None:
    """Push each history file to the server, each in one transaction."""
    from flaketui.core.history.pg.connect import connect, server_errors
    from flaketui.core.history.pg.push import PushSummary, push_history, untidy_line

    if any(isinstance(source, str) for source in sources):
        raise FlaketuiError(
            "merging one server into another is not supported: sync the source into a file"
            " (flaketui sync URL FILE), then merge that file into the other server"
        )
    for source in sources:  # refuse a bad source before anything is written
        _check_exists(source)
        open_connection(source, create=False, readonly=True).close()
    total = PushSummary()
    pg = connect(url)
    try:
        for source in sources:
            with (
                history_file(source, create=False, readonly=True) as src,
                server_errors(url, f"merging {source}"),
            ):
                done = push_history(pg, src.conn)
            for name in vars(total):
                setattr(total, name, getattr(total, name) + getattr(done, name))
    finally:
        pg.close()
    echo_line(
        f"merged {plural(len(sources), 'history', 'histories')} into {mask_url(url)}: "
        f"{plural(total.runs_added, 'run')} "
        f"added, {total.runs_extended} extended, {total.runs_unchanged} already present; "
        f"{plural(total.results_added, 'result')}, {plural(total.incidents_added, 'incident')}, "
        f"{plural(total.audit_rows_added, 'audit row')} added"
    )
    for tag in total.decisions_kept:
        echo_line(f"outage {tag}: decided otherwise in a merged history; kept as decided here")
    if total.left_untidy:
        echo_text(untidy_line(total.left_untidy))


def _merge_files(dest: Path, sources: list[Path]) -> None:
    patterns = load_config().mask_patterns
    foreign = False
    for source in sources:  # refuse a bad source before DEST is created
        _check_exists(source)
        with history_file(source, create=False, readonly=True) as source_db:
            foreign |= not is_current(source_db, patterns)
    # A new file takes the first source whole (a CI job's first merge), then the others.
    copied = copy_to_new(dest, sources[0])
    with history_file(dest) as history:
        was_empty = copied is None and not has_runs(history)
        rest = sources if copied is None else sources[1:]
        summary = merge_histories(history, rest, copied=copied)
        if was_empty and not foreign:
            stamp(history, patterns)
        # A source signed with another scheme would split groups: sign everything with this one.
        elif foreign or not is_current(history, patterns):
            summary_resign = resign(history, patterns)
            echo_text(
                f"re-signed {plural(summary_resign.messages, 'failure message')} for this scheme"
            )
        echo_text(
            f"merged {plural(summary.sources, 'history', 'histories')}: "
            f"{plural(summary.runs_added, 'run')} added, "
            f"{summary.runs_extended} extended, {summary.runs_unchanged} already present; "
            f"{plural(summary.results_added, 'result')}, "
            f"{plural(summary.incidents_added, 'incident')}, "
            f"{plural(summary.audit_rows_added, 'audit row')} added"
        )
        for tag in summary.decisions_kept:
            echo_line(f"outage {tag}: decided otherwise in a merged history; kept as decided here")
        propose_outages(history, load_config(), shown(dest))
