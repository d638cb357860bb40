"""History addresses: a SQLite file path, or a `postgresql://` URL naming a shared server.

A URL's password is never shown: `mask_url` is the only form in which a URL reaches a message,
a log line or a stored value, and a command flaketui suggests names the URL without it
(`command_address`), libpq finding it in ~/.pgpass or PGPASSWORD.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

SERVER_SCHEMES = ("postgresql://", "postgres://")
MASK = "****"
# key=value parameters (password=...) in a URL's query string
_QUERY_PASSWORD = re.compile(r"(?i)(password=)[^&]*")


def is_server_url(address: object) -> bool:
    """Whether a history address names a PostgreSQL server rather than a SQLite file."""
    return isinstance(address, str) and address.lower().startswith(SERVER_SCHEMES)


def mask_url(url: str) -> str:
    """The URL with any password (in its user part or its query string) replaced by ****."""
    return _replace_password(url, MASK)


def _replace_password(url: str, mask: str | None) -> str:
    """The URL with its password (user part and `password=` query parameter) replaced by mask,
    or left out when mask is None."""
    scheme = url.split("://", 1)[0]
    try:
        parts = urlsplit(url)
    except ValueError:
        return f"{scheme}://{MASK}"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostinfo = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        if colon:
            userinfo = user if mask is None else f"{user}:{mask}"
        netloc = f"{userinfo}@{hostinfo}"
    if mask is None:
        query = "&".join(
            item
            for item in parts.query.split("&")
            if item and item.split("=", 1)[0].lower() != "password"
        )
    else:
        query = _QUERY_PASSWORD.sub(rf"\g<1>{mask}", parts.query)
    # Put together by hand: urlunsplit writes a URL with no host (`postgresql:///db`, libpq's
    # local socket) as `postgresql:/db`, which names a file, and lowercases the scheme.
    return (
        f"{scheme}://{netloc}{parts.path}"
        + (f"?{query}" if query else "")
        + (f"#{parts.fragment}" if parts.fragment else "")
    )


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


# Said after a suggested command whose URL had a password: a masked one fails to authenticate.
PASSWORD_LEFT_OUT = "the URL leaves its password out: give it in ~/.pgpass or PGPASSWORD"


def without_password(url: str) -> str:
    """The URL with its password, masked or not, left out (user part and `password=` query
    parameter)."""
    return _replace_password(url, None)


def command_address(address: str) -> tuple[str, str | None]:
    """A history address as a command flaketui suggests names it (a URL without its password,
    masked or not), and PASSWORD_LEFT_OUT when that left a password out."""
    if not is_server_url(address):
        return address, None
    return without_password(address), (PASSWORD_LEFT_OUT if url_password(address) else None)
