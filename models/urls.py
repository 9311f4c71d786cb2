"""Compatibility shim: the module moved to ``sluice.protocol.urls`` (the wire protocol the client
and the server share).  Import from there; this name stays until every caller has moved.
"""

from sluice.protocol.urls import (
    redact_url,
)

__all__ = [
    "redact_url",
]
