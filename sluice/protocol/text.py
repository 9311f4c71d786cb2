"""Redis answers as text: redis-py returns ``bytes`` unless a connection decodes responses,
and the same code reads through both kinds."""

from __future__ import annotations


def as_text(value: bytes | str) -> str:
    """``value`` decoded as UTF-8 when Redis returned bytes, as is when already text."""
    return value.decode() if isinstance(value, bytes) else value
