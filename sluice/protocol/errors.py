"""Errors shared by the client and the server: one class per kind of refusal.

The admin service maps each class to an HTTP status once (``api.errors``); the client and the
CLI read ``reason``.  Name checks in ``sluice.protocol.names`` raise them.  The tree::

    SluiceError
    ├── InvalidInput          malformed request (400)
    ├── Unauthorized          no or bad credentials (401)
    ├── Forbidden             authenticated but not allowed (403)
    ├── NotFound              entity does not exist (404)
    ├── NotAllowed            operation disabled by configuration (405)
    ├── NotAcceptable         value out of the accepted range, e.g. partition count (406)
    ├── Conflict              already exists / not empty / concurrent change (409)
    ├── PreconditionFailed    invalid name or value (412)
    ├── PayloadTooLarge       request body over the limit (413)
    └── Unavailable           a backing service is down (503)
"""

from __future__ import annotations


class SluiceError(Exception):
    """Base of every domain error; ``reason`` is the text a user sees."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InvalidInput(SluiceError):
    """The request itself is malformed (bad JSON, wrong types)."""


class Unauthorized(SluiceError):
    """Credentials are missing, malformed, expired or badly signed."""


class Forbidden(SluiceError):
    """The caller's role may not perform this operation."""


class NotFound(SluiceError):
    """The addressed entity does not exist."""


class NotAllowed(SluiceError):
    """The operation exists but is disabled by configuration."""


class NotAcceptable(SluiceError):
    """A value is outside what the server accepts (Pulsar answers 406 for these)."""


class Conflict(SluiceError):
    """The entity already exists, is not empty, or changed concurrently."""


class PreconditionFailed(SluiceError):
    """A name or value fails validation (Pulsar answers 412 for these)."""


class PayloadTooLarge(SluiceError):
    """The request body exceeds the configured limit."""


class Unavailable(SluiceError):
    """A backing service (database, Redis) cannot be reached right now."""
