"""User-facing errors: each carries a one-line message and never a traceback."""

from __future__ import annotations

import sqlite3


class FlaketuiError(Exception):
    """An error caused by user input, shown to the user as one line."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        # Keep the message to one line whatever the cause looked like.
        super().__init__(" ".join(str(message).split()))

    @property
    def message(self) -> str:
        """The one-line message."""
        return str(self.args[0])


class ReportError(FlaketuiError):
    """A report file that cannot be ingested (not XML, truncated, hostile, unknown shape)."""


class HistoryError(FlaketuiError):
    """A history database that cannot be opened or used (not SQLite, newer schema, read-only)."""


# Also an OperationalError: callers that shrug off a busy history (best-effort stamps, the
# recording plugin's retries) keep catching it as they did.
class HistoryLockedError(HistoryError, sqlite3.OperationalError):
    """A history another connection kept locked past the busy timeout."""


class SkipFileError(FlaketuiError):
    """A skip file that cannot be read or written."""


class ConfigError(FlaketuiError):
    """An invalid `[tool.flaketui]` configuration value."""
