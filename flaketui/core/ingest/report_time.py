"""Suite timestamps of JUnit reports: the spellings producers write, and what is plausible."""

from __future__ import annotations

import email.utils
import re
from datetime import UTC, datetime, timedelta

_ZONE_WORDS = re.compile(r"\s*(UTC|GMT|Z)$", re.IGNORECASE)
# Time zones lie whole quarter hours apart: a report dated this far or more ahead of the clock
# was most likely written in local time without its zone, in a zone ahead of UTC.
ZONE_STEP = timedelta(minutes=15)


def parse_report_timestamp(text: str) -> datetime | None:
    """Parse a suite timestamp in any spelling seen in reports; aware UTC, or None."""
    cleaned = text.strip()
    if not cleaned:
        return None
    moment: datetime | None = None
    if cleaned[:1].isalpha():  # RFC 1123: 'Sat, 03 Dec 2022 23:10:07 GMT'
        try:
            moment = email.utils.parsedate_to_datetime(cleaned)
        except (TypeError, ValueError, IndexError):
            return None
    else:
        iso = _ZONE_WORDS.sub("+00:00", cleaned)
        iso = re.sub(r"T\s+", "T", iso)
        # Python 3.11 rejects fractions longer than 6 digits; keep microseconds.
        iso = re.sub(r"(\.\d{6})\d+", r"\1", iso)
        try:
            moment = datetime.fromisoformat(iso)
        except ValueError:
            return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except (OverflowError, ValueError):
        return None


def plausible(moment: datetime | None) -> bool:
    """Whether a report time can be real: year 2000 or later and at most a day ahead of now."""
    if moment is None:
        return False
    return moment.year >= 2000 and moment <= datetime.now(UTC) + timedelta(days=1)
