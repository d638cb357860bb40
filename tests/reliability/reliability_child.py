"""Child process for the reliability suite (run as a script, never collected by pytest).

    reliability_child.py ingest REPORT...    ingest each REPORT into a new history REPORT.db with
                                            every socket refused; prints one JSON line per report:
                                            outcome, message, peak RSS (VmHWM, reset before each
                                            report), RSS before the ingest, sockets tried
    reliability_child.py parse REPORT        stream REPORT's test cases through the parser without
                                            keeping them; prints one JSON line: attempts, peak
                                            RSS (VmHWM) and RSS before the parse
    reliability_child.py cli ARGS...        run the flaketui command line

Optional numeric libraries are blocked: sqlite-utils imports pandas when present, which costs a
second per child and tens of MB of RSS that have nothing to do with the code under test.
"""

from __future__ import annotations

import json
import socket
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.modules["pandas"] = None  # type: ignore[assignment]
sys.modules["numpy"] = None  # type: ignore[assignment]

SOCKET_ATTEMPTS: list[str] = []


class _NoSocket(socket.socket):
    """Any socket the parser tries to open is recorded and refused."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        SOCKET_ATTEMPTS.append(repr(args))
        raise OSError("reliability test: network access refused")


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return -1


def ingest(reports: list[str]) -> None:
    """Ingest each report with sockets refused; print what happened as JSON, one line each."""
    socket.socket = _NoSocket  # type: ignore[misc]
    for report in reports:
        _ingest_one(report)


def _ingest_one(report: str) -> None:
    from flaketui.core.errors import FlaketuiError
    from flaketui.core.history.store import open_history
    from flaketui.core.ingest.writer import ingest_reports
    from flaketui.core.models import RunMeta

    SOCKET_ATTEMPTS.clear()
    history = open_history(report + ".db")
    # Writing 5 to clear_refs resets VmHWM, so each report's peak is its own.
    Path("/proc/self/clear_refs").write_text("5")
    before = _status_kib("VmRSS")
    try:
        result = ingest_reports(
            history, [Path(report)], RunMeta(run_id="r", ts=datetime(2026, 11, 1, tzinfo=UTC))
        )
        outcome, message = "landed", f"{result.results} results"
    except FlaketuiError as exc:
        outcome, message = "refused", exc.message
    print(
        json.dumps(
            {
                "outcome": outcome,
                "message": message,
                "rss_before_kib": before,
                "peak_kib": _status_kib("VmHWM"),
                "sockets": SOCKET_ATTEMPTS,
            }
        ),
        flush=True,
    )
    history.conn.close()


def parse(report: str) -> None:
    """Count the attempts its parser (told by content) streams out of report; print them with
    the peak RSS."""
    from flaketui.core.ingest.formats import iter_report_rows

    Path("/proc/self/clear_refs").write_text("5")
    before = _status_kib("VmRSS")
    attempts = sum(len(row[2]) for row in iter_report_rows(Path(report)))
    print(
        json.dumps(
            {"attempts": attempts, "rss_before_kib": before, "peak_kib": _status_kib("VmHWM")}
        ),
        flush=True,
    )


def main() -> None:
    mode, *args = sys.argv[1:]
    if mode == "ingest":
        ingest(args)
    elif mode == "parse":
        parse(args[0])
    elif mode == "cli":
        from flaketui.cli import main as cli_main

        sys.argv = ["flaketui", *args]
        cli_main()
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
