"""Exceptions raised by the client, named as in the ``pulsar-client`` package.

::

    SluiceException
    ├── Timeout                 receive() or send() gave up waiting
    ├── AlreadyClosed           the client, producer or consumer was closed
    ├── ConsumerBusy            an Exclusive subscription already has a consumer, or a
    │                           consumer limit (maxConsumersPerTopic/-PerSubscription) is reached
    ├── ProducerBusy            the topic has maxProducersPerTopic producers already
    ├── NotAllowedError         over maxTopicsPerNamespace or maxSubscriptionsPerTopic
    │   └── SubscribeRateLimited    the consumer name (from this host) used up its subscribe rate
    ├── MessageTooBig           the message (or batch) is over the topic's maxMessageSize
    ├── SubscriptionBusy        the subscription has another type, or active consumers
    ├── TopicNotFound           the topic does not exist and auto-creation is off
    ├── NamespaceNotFound       the topic's namespace does not exist
    ├── InvalidConfiguration    a bad argument
    ├── NotSupported            an operation this subscription type does not allow, or a
    │                           pulsar-client argument Sluice does not implement (named)
    ├── ProducerQueueIsFull     send_async found the pending queue full (block_if_queue_full off)
    ├── ConnectError            Redis (or the admin service) cannot be reached
    ├── UnsupportedVersionError the deployment requires a newer data-plane protocol than
    │                           this client speaks (sluice.protocol.version)
    ├── AuthenticationError     the token was refused (malformed, expired, wrong key)
    ├── AuthorizationError      the role may not produce to or consume from the topic (named)
    └── ProducerBlockedQuotaExceededException   the backlog quota refused the send
        └── ProducerBlockedQuotaExceededError   held by the quota past the send timeout
                                                (also a Timeout)
"""

from __future__ import annotations


class SluiceException(Exception):
    """Base of every client error."""


class Timeout(SluiceException):
    """An operation did not complete in time."""


class AlreadyClosed(SluiceException):
    """The object was closed."""


class ConsumerBusy(SluiceException):
    """An Exclusive subscription already has a connected consumer, or the topic or the
    subscription has as many consumers as its limit allows."""


class ProducerBusy(SluiceException):
    """The topic (each partition on its own) has as many producers as
    ``maxProducersPerTopic`` allows."""


class NotAllowedError(SluiceException):
    """The operation is refused by a limit: a new topic over ``maxTopicsPerNamespace``, a new
    subscription over ``maxSubscriptionsPerTopic``."""


class SubscribeRateLimited(NotAllowedError):
    """The consumer name made as many subscribe requests from this client's host to a
    partition as the topic's subscribe rate allows per period (Pulsar's ``NotAllowed``
    "Subscribe limited by subscribe rate limit per consumer.").  ``retry_after_seconds`` says
    when the period ends."""

    def __init__(self, message: str, retry_after_seconds: float = 0.0) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class MessageTooBig(SluiceException):
    """The message (with batching: the batch) is larger than the topic's ``maxMessageSize``;
    nothing was sent."""


class SubscriptionBusy(SluiceException):
    """The subscription is of another type, or still has consumers."""


class TopicNotFound(SluiceException):
    """The topic does not exist and auto-creation is disabled."""


class NamespaceNotFound(SluiceException):
    """The topic's namespace does not exist."""


class InvalidConfiguration(SluiceException):
    """An argument is invalid."""


class NotSupported(SluiceException):
    """The operation is not available for this subscription type, or an argument of
    pulsar-client's API that Sluice does not implement was given (the message names it):
    nothing is silently ignored."""


class ProducerQueueIsFull(SluiceException):
    """The producer's pending queue (``max_pending_messages``) is full and
    ``block_if_queue_full`` is off."""


class ConnectError(SluiceException):
    """Redis could not be reached."""


class AuthenticationError(SluiceException):
    """The admin service refused the client's token, or its data-plane session has ended."""


class AuthorizationError(SluiceException):
    """The client's role may not do this: the message names the topic and the action
    (``produce`` or ``consume``) it lacks."""


class ProducerBlockedQuotaExceededException(SluiceException):
    """The backlog quota of the topic is exceeded (``producer_exception``): the send was
    refused on every attempt ("TOO_MANY_REQUESTS: backlog quota exceeded for ...")."""


class ProducerBlockedQuotaExceededError(ProducerBlockedQuotaExceededException, Timeout):
    """The backlog quota held the send (``producer_request_hold``) until the send timeout."""


# RocketMQ's name for a refusal by throttling.
TooManyRequests = ProducerBlockedQuotaExceededException


class UnsupportedVersionError(SluiceException):
    """The deployment requires a newer data-plane protocol than this client speaks: upgrade
    the client (pulsar-client's name for a broker that does not support the client's
    version)."""
