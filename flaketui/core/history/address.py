"""History addresses: a SQLite file path, or a `postgresql://` URL naming a shared server.

A URL's password is never shown: `mask_url` is the only form in which a URL reaches a message,
a log line or a stored value.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

SERVER_SCHEMES = ("postgresql://", "postgres://")
MASK = "****"
# key=value parameters (password=...) in a URL's query string
_QUERY_PASSWORD = re.compile(r"(?i)(password=)[^&]*")


def is_server_url(address: object) -> bool:
    """Whether a history address names a PostgreSQL server rather than a SQLite file."""
    return isinstance(address, str) and address.lower().startswith(SERVER_SCHEMES)


def mask_url(url: str) -> str:
    """The URL with any password (in its user part or its query string) replaced by ****."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return f"{url.split('://', 1)[0]}://{MASK}"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostinfo = netloc.rpartition("@")
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":" + MASK
        netloc = f"{userinfo}@{hostinfo}"
    query = _QUERY_PASSWORD.sub(rf"\g<1>{MASK}", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def url_password(url: str) -> str | None:
    """The password a URL carries (user part or query string), to scrub it from driver text."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.password:
        return parts.password
    match = re.search(r"(?i)password=([^&]*)", parts.query)
    return match.group(1) if match and match.group(1) else None


def scrub(text: str, url: str) -> str:
    """Driver text with the URL's password (raw or percent-decoded) replaced by ****."""
    from urllib.parse import unquote

    password = url_password(url)
    if password:
        for form in {password, unquote(password)}:
            if form:
                text = text.replace(form, MASK)
    return text
