"""The HISTORY argument of commands that also write to a server: a file path or a
`postgresql://` URL (kept as typed: a Path would fold its `//`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from flaketui.cli.params import FilePath
from flaketui.core.history.address import is_server_url, mask_url

if TYPE_CHECKING:  # ParamType is generic only in recent click releases
    _AddressType = click.ParamType[Path | str, Any]
else:
    _AddressType = click.ParamType


class HistoryAddress(_AddressType):
    """A history file (as a Path) or a server URL (as a str)."""

    name = "HISTORY"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, Path) or (isinstance(value, str) and is_server_url(value)):
            return value
        return Path(value)


HISTORY_ADDRESS = HistoryAddress()


class ReadAddress(FilePath):
    """A history file (FilePath's checks), or a server URL (as a str) that the command reads
    through its replica in the cache directory (`local_history`)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and is_server_url(value):
            return value
        return super().convert(value, param, ctx)


READ_ADDRESS = ReadAddress(what="history file", dir_okay=False, path_type=Path)


def shown(address: str | Path) -> str:
    """An address as messages show it (a URL's password masked)."""
    return mask_url(address) if isinstance(address, str) else str(address)


AUDIT_SENT = "replica_audit_sent"  # replica meta: the last local audit row id sent to the server


def local_history(address: Path | str, *, quiet: bool = True, sync: bool = True) -> Path:
    """The file a command reads and writes for a history address.

    A file is itself. A postgresql:// URL is its replica in the user's cache directory, synced
    now (with a progress line on stderr unless quiet); the audit rows the command adds to it
    (quarantine, release, lifecycle --apply, the app's quarantine) are sent to the server when
    the command ends. sync=False: the replica as it is (a command that synced it already).
    """
    if isinstance(address, Path):
        return address
    from flaketui.cli.commands.sync import replica_path, run_sync

    path = replica_path(address)
    if not sync:
        return path
    # stdout is the command's; the outages it proposes are reviewed through the URL. The cache
    # folder is made once the server answers: one that cannot be reached leaves nothing.
    run_sync(address, path, quiet=quiet, notes_err=True, shown_as=shown(address), make_folder=True)
    click.get_current_context().call_on_close(lambda: send_audit(address, path))
    return path


def send_audit(url: str, replica: Path) -> int:
    """Send the replica's audit rows the server has not had from it; how many landed."""
    from flaketui.core.history.pg.admin import push_audit
    from flaketui.core.history.pg.columns import AUDIT_COLUMNS
    from flaketui.core.history.pg.connect import connect, server_errors
    from flaketui.core.history.store import get_meta, history_file, set_meta, transaction

    with history_file(replica, create=False) as db:
        sent = int(get_meta(db, AUDIT_SENT) or 0)
        rows = db.conn.execute(
            f"SELECT id, {', '.join(AUDIT_COLUMNS)} FROM audit_log WHERE id > ? ORDER BY id",
            (sent,),
        ).fetchall()
        if not rows:
            return 0
        pg = connect(url)
        try:
            with server_errors(url, "sending audit rows", note="they stay in the replica"):
                landed = push_audit(pg, [row[1:] for row in rows])
        finally:
            pg.close()
        with transaction(db.conn):
            set_meta(db, AUDIT_SENT, str(rows[-1][0]))
        return landed
