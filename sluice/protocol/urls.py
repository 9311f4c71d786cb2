"""Connection URLs made safe to print: the password is replaced by ``***``.

Redis and database URLs may carry credentials (``redis://user:secret@host/0``); logs and
error messages show them through ``redact_url`` only.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def redact_url(url: str) -> str:
    """``url`` with any password masked; unchanged when it has none or does not parse."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    if not password:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
