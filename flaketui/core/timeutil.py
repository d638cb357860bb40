"""Timestamps: parse user and report spellings, store and print ISO 8601 UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flaketui.core.errors import FlaketuiError


def utc_now() -> datetime:
    """The current time, aware, in UTC, to the second."""
    return datetime.now(UTC).replace(microsecond=0)


def to_iso(moment: datetime) -> str:
    """Format an aware datetime as 'YYYY-MM-DDTHH:MM:SSZ' (the stored form)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> datetime:
    """Parse an ISO 8601 timestamp (naive means UTC); raise FlaketuiError if it is not one."""
    cleaned = text.strip()
    if cleaned.endswith(("Z", "z")):
        cleaned = cleaned[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(cleaned)
    except ValueError as exc:
        raise FlaketuiError(f"not an ISO 8601 timestamp: {text!r}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def days_between(earlier: datetime, later: datetime) -> float:
    """Fractional days from earlier to later."""
    return (later - earlier) / timedelta(days=1)
