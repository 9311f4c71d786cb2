"""The data-plane scripts' refusals as the client's exceptions.

A script refuses with an error reply whose first word names the kind of refusal
(``sluice.protocol.abuse``); ``refusal`` turns it into the ``pulsar-client``-named exception.
"""

from __future__ import annotations

from redis.exceptions import NoPermissionError, ResponseError

from sluice.errors import (
    AuthenticationError,
    AuthorizationError,
    ConsumerBusy,
    MessageTooBig,
    NotAllowedError,
    ProducerBusy,
    SluiceException,
    SubscribeRateLimited,
    SubscriptionBusy,
)
from sluice.protocol.abuse import (
    CONSUMER_BUSY,
    MESSAGE_TOO_BIG,
    NOT_ALLOWED,
    PRODUCER_BUSY,
    SUBSCRIBE_RATE_LIMITED,
)

_KINDS: dict[str, type[SluiceException]] = {
    NOT_ALLOWED: NotAllowedError,
    PRODUCER_BUSY: ProducerBusy,
    CONSUMER_BUSY: ConsumerBusy,
    "SubscriptionBusy": SubscriptionBusy,
    MESSAGE_TOO_BIG: MessageTooBig,
}


def refusal(
    exc: ResponseError, topic: str | None = None, action: str | None = None
) -> SluiceException | None:
    """The client exception for a script's refusal, or None for any other error reply.

    Redis's ACL refusal (``NOPERM``, the session's grants do not cover a key or command)
    becomes ``AuthorizationError`` naming ``topic`` and ``action`` when given."""
    if isinstance(exc, NoPermissionError):
        return denied(topic, action, exc)
    kind, _, reason = str(exc).partition(" ")
    if kind == SUBSCRIBE_RATE_LIMITED:
        wait_ms, _, text = reason.partition(" ")
        wait = int(wait_ms) / 1000 if wait_ms.isdigit() else 0.0
        return SubscribeRateLimited(f"{text}; try again in {wait:.1f} s", wait)
    error = _KINDS.get(kind)
    return error(reason) if error is not None else None


def denied(
    topic: str | None, action: str | None, exc: Exception | str | None = None
) -> AuthorizationError:
    """``AuthorizationError`` for a refused ``action`` (``produce``, ``consume``) on ``topic``."""
    preposition = {"produce": "to", "consume": "from"}.get(action or "", "on")
    what = f"{action} {preposition} {topic}" if topic and action else "this operation"
    detail = f" ({exc})" if exc is not None else ""
    return AuthorizationError(f"Not authorized to {what}: the role has no such grant{detail}")


def session_ended(exc: Exception) -> AuthenticationError:
    """Redis refused to let the client reconnect: its credentials are no longer valid (the
    data-plane session ended, because its token expired or was not renewed)."""
    return AuthenticationError(
        f"Redis refused the client's credentials: the data-plane session has ended ({exc})"
    )
