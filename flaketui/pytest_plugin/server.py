"""Recording into a history server (``--flaketui-db postgresql://...``).

The recorder writes its batches to a private staging history as usual; when the session ends
the whole run is pushed to the server in one transaction, so a killed session leaves nothing
there and many sessions can record at once. A push that fails keeps the staging file and
says how to send it later (``flaketui merge URL FILE``).

PYTEST_DONT_REWRITE: a session that names the plugin with `-p flaketui.pytest_plugin` has
pytest rewrite the asserts of this package's modules as it imports them; this one has none,
and the marker spares that walk where no cached rewrite is found (a fresh CI environment,
PYTHONDONTWRITEBYTECODE). Loaded through pytest-flaketui's entry point, nothing is marked.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from flaketui.core.history import journal
from flaketui.core.history.address import mask_url
from flaketui.core.history.pg.connect import connect, server_errors
from flaketui.core.history.pg.push import PushSummary, push_history
from flaketui.core.history.pg.staging import Staging
from flaketui.core.history.store import transaction


class ServerTarget:
    """A server to push the session's run to, and the staging history it is recorded in."""

    def __init__(self, url: str) -> None:
        self.url = url
        connect(url).close()  # a bad address or credentials fail at start-up, in one line
        self.staging = Staging()
        self.conn = self.staging.conn
        self.kept: Path | None = None

    def publish(self) -> PushSummary:
        """Push the recorded run; what it added, and left untidy after its commit. Raises
        FlaketuiError (URL masked)."""
        with transaction(self.conn):
            journal.land(self.conn)  # the staged attempts become the rows pushed
        pg = connect(self.url)
        try:
            with server_errors(self.url, "writing the run"):
                return push_history(pg, self.conn, append=True)
        finally:
            pg.close()

    def keep(self) -> Path:
        """Keep the staging history after a failed push; its new path."""
        self.conn.close()
        kept = Path(tempfile.mkdtemp(prefix="flaketui-unsent-")) / "run.db"
        shutil.move(self.staging.dir / "staging.db", kept)
        shutil.rmtree(self.staging.dir, ignore_errors=True)
        self.kept = kept
        return kept

    def close(self) -> None:
        self.staging.close()

    @property
    def shown(self) -> str:
        return mask_url(self.url)
