"""Connection URLs made safe to print (the password is replaced by ``***``), and given
credentials.

Redis and database URLs may carry credentials (``redis://user:secret@host/0``); logs and
error messages show them through ``redact_url`` only.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit, urlunsplit


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


def with_credentials(url: str, username: str, password: str) -> str:
    """``url`` carrying ``username`` and ``password`` (percent-encoded), replacing any it had."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    user = f"{quote(username, safe='')}:{quote(password, safe='')}"
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))
