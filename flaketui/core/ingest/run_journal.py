"""The pytest recorder's writer: one run's complete attempts appended to the attempt journal.

A test session loads this module and what it needs (the journal and the run row; masking and
signing once a failure message comes), not the result writer: the next flaketui process that
opens the history stores the attempts (flaketui.core.history.journal). RunRecorder
(flaketui.core.ingest.writer) extends it with direct writes.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Sequence
from typing import cast

from flaketui.core.config import Config
from flaketui.core.errors import ReportError
from flaketui.core.history import journal
from flaketui.core.history.journal import FullRow, JournalRow
from flaketui.core.history.runs import create_run, find_run
from flaketui.core.history.store import transaction
from flaketui.core.ingest.runmeta import apply_defaults
from flaketui.core.models import OUTCOMES, RunMeta
from flaketui.core.timeutil import to_iso


class RunJournal:
    """One run (finished=0 until finish()) whose attempts are appended to the attempt journal.

    The run row is created by the first append() with attempts (an empty session leaves no
    run); a run id that already exists is appended to (sharded sessions sharing a CI run id)
    and marked unfinished until finish().
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        meta: RunMeta,
        *,
        source: str = "pytest",
        config: Config = Config(),  # noqa: B008 - frozen dataclass, safe as a default
    ) -> None:
        self.conn = conn  # plain sqlite3: the pytest plugin never imports sqlite-utils
        self.config = config
        self.source = source
        self.meta = apply_defaults(meta, config, fallback_run_id=f"pytest-{uuid.uuid4().hex[:16]}")
        self.run_id: str = self.meta.run_id or ""
        self.run_pk: int | None = None  # once the run row exists
        self.results = 0

    def _start_run(self, conn: sqlite3.Connection) -> tuple[int, str]:
        """Create the run row (finished = 0), or mark an existing one unfinished."""
        found = find_run(conn, self.run_id)
        if found is None:
            assert self.meta.ts is not None
            first_run = conn.execute("SELECT 1 FROM runs LIMIT 1").fetchone() is None
            run_pk, ts = create_run(conn, self.meta, self.source, finished=0), to_iso(self.meta.ts)
            if first_run:
                # Every stored message will be signed by this recorder: record the scheme in
                # the run's first transaction, as ingest does (loaded only here; no signing
                # code comes with it).
                from flaketui.core.ingest.scheme import record_scheme

                record_scheme(conn, self.config.mask_patterns)
        else:
            run_pk, ts = found
            conn.execute("UPDATE runs SET finished = 0 WHERE id = ?", (run_pk,))
        self.run_pk = run_pk
        return run_pk, ts

    def append(self, rows: Sequence[JournalRow]) -> None:
        """Append complete attempts to the attempt journal in one transaction; the next writer
        or reader stores them (flaketui.core.history.journal). Later attempts of a test append.

        Rows come with the raw failure message (a short row has none) and no signature: a row
        with a message gets the masked, capped message and, for a failure or an error, its
        signature under this recorder's mask patterns, as the writer would store them.
        """
        if not rows:
            return
        for row in rows:
            if row[1] not in OUTCOMES:
                raise ReportError(f"{row[0]}: unknown outcome {row[1]!r}")
        signed = [
            row if len(row) < 10 or (full := cast(FullRow, row))[7] is None else self._signed(full)
            for row in rows
        ]
        conn = self.conn
        with transaction(conn):
            run_pk = self.run_pk if self.run_pk is not None else self._start_run(conn)[0]
            journal.append(conn, run_pk, signed)
        self.results += len(rows)

    def _signed(self, row: FullRow) -> FullRow:
        # Loaded with the first message: a session whose tests all pass neither masks nor
        # signs, and spares their patterns' compiling and hashlib's loading.
        from flaketui.core.ingest.redact import clean_message
        from flaketui.core.ingest.signatures import sign

        message = clean_message(row[7])
        signature = None
        if message is not None and row[1] in ("fail", "error"):
            signature = sign(message, self.config.mask_patterns)
        if signature is None:
            return (*row[:7], message, None, None)
        return (*row[:7], message, signature.hash, signature.text)

    def finish(self) -> None:
        """Mark the run finished (a session that never calls this stays 'interrupted')."""
        if self.run_pk is None:
            return
        conn = self.conn
        with transaction(conn):
            conn.execute("UPDATE runs SET finished = 1 WHERE id = ?", (self.run_pk,))
