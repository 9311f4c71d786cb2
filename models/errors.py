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


# Pulsar's 404 reasons name what was not found (``PersistentTopicsBase``'s messages).


def topic_not_found(topic: object) -> NotFound:
    """``Topic persistent://t/ns/x not found``."""
    return NotFound(f"Topic {topic} not found")


def partitioned_topic_not_found(topic: object) -> NotFound:
    """``Partitioned Topic persistent://t/ns/x not found``."""
    return NotFound(f"Partitioned Topic {topic} not found")


def subscription_not_found(subscription: str, topic: object) -> NotFound:
    """``Subscription s not found for topic persistent://t/ns/x``."""
    return NotFound(f"Subscription {subscription} not found for topic {topic}")
