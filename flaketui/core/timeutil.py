"""Timestamps: parse user and report spellings, store and print ISO 8601 UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flaketui.core.errors import FlaketuiError

# The times flaketui computes with: a moment's window reaches back from it and an expiry forward,
# so a time must leave room for both, and its stored form has a four-digit year. Before 1970
# there was no CI to record; 0001-01-01 is the zero time some exporters write for "unknown".
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 12, 31, 23, 59, 59, tzinfo=UTC)
TIME_RANGE = "years 1970 to 9000"
# The longest span of days flaketui computes with (a window, a retention, a look back): a century
# reaches past any CI history and, from any time above, stays within the calendar.
MAX_DAYS = 36_500
# The longest a quarantine may run before its entry expires: ten years.
MAX_EXPIRY_DAYS = 3_650


def utc_now() -> datetime:
    """The current time, aware, in UTC, to the second."""
    return datetime.now(UTC).replace(microsecond=0)


def to_iso(moment: datetime) -> str:
    """Format an aware datetime as 'YYYY-MM-DDTHH:MM:SSZ' (the stored form)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    # isoformat, not strftime: strftime drops the leading zeros of a year before 1000.
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="seconds") + "Z"


def parse_iso(text: str, *, bounded: bool = True) -> datetime:
    """Parse an ISO 8601 timestamp (naive means UTC); raise FlaketuiError if it is not one or,
    when `bounded`, falls outside the years flaketui computes with (EARLIEST to LATEST). A time
    that is only compared with others (a skip file's expiry) need not be bounded."""
    cleaned = text.strip()
    if cleaned.endswith(("Z", "z")):
        cleaned = cleaned[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(cleaned)
    except ValueError as exc:
        raise FlaketuiError(f"not an ISO 8601 timestamp: {text!r}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        utc: datetime | None = moment.astimezone(UTC)
    except OverflowError:  # an offset that moves it past year 1 or 9999
        utc = None
    if utc is None or (bounded and not EARLIEST <= utc <= LATEST):
        raise FlaketuiError(f"timestamp out of range: {text!r} (flaketui handles {TIME_RANGE})")
    return utc


def days_between(earlier: datetime, later: datetime) -> float:
    """Fractional days from earlier to later."""
    return (later - earlier) / timedelta(days=1)
