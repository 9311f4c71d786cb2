"""Domain errors raised below the HTTP layer (the server's name for them).

The classes are those of ``sluice.protocol.errors`` (the client raises them too), re-exported
here so the server's code reads ``models.errors``; see that module for the tree and the HTTP
status each stands for.
"""

from __future__ import annotations

from sluice.protocol.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    NotAcceptable,
    NotAllowed,
    NotFound,
    PayloadTooLarge,
    PreconditionFailed,
    SluiceError,
    Unauthorized,
    Unavailable,
)

__all__ = [
    "Conflict",
    "Forbidden",
    "InvalidInput",
    "NotAcceptable",
    "NotAllowed",
    "NotFound",
    "PayloadTooLarge",
    "PreconditionFailed",
    "SluiceError",
    "Unauthorized",
    "Unavailable",
]
