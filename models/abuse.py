"""Abuse limits: Pulsar's caps on topics, subscriptions, producers, consumers and message size.

Every value is a bare integer, stored per level as a ``FlowPolicy`` row of its own kind (the
broker setting of the same name is the lowest level).  For the counts 0 means "no limit" and,
stored at a level, wins over the levels below it, as in Pulsar.  Levels:

* ``maxTopicsPerNamespace``: namespace > broker (a partitioned topic counts its partitions).
* ``maxSubscriptionsPerTopic``, ``maxProducersPerTopic``, ``maxConsumersPerTopic``,
  ``maxConsumersPerSubscription``: topic > namespace > broker, each partition on its own.
* ``maxMessageSize`` (bytes): topic > broker; a topic value of 0 means the broker's, and a topic
  value may not exceed the broker's.

Negative values are refused with 412 and Pulsar's reason texts; a body that is not an integer
is 400.
"""

from __future__ import annotations

from models.errors import InvalidInput, PreconditionFailed
from models.json_body import INT32_MAX
from sluice.protocol.abuse import DEFAULT_MAX_MESSAGE_SIZE

# Stored policy kinds (the ``kind`` column of ``flow_policies``), named as the broker settings.
MAX_TOPICS_PER_NAMESPACE = "maxTopicsPerNamespace"
MAX_SUBSCRIPTIONS_PER_TOPIC = "maxSubscriptionsPerTopic"
MAX_PRODUCERS_PER_TOPIC = "maxProducersPerTopic"
MAX_CONSUMERS_PER_TOPIC = "maxConsumersPerTopic"
MAX_CONSUMERS_PER_SUBSCRIPTION = "maxConsumersPerSubscription"
MAX_MESSAGE_SIZE = "maxMessageSize"

COUNT_KINDS = (
    MAX_TOPICS_PER_NAMESPACE,
    MAX_SUBSCRIPTIONS_PER_TOPIC,
    MAX_PRODUCERS_PER_TOPIC,
    MAX_CONSUMERS_PER_TOPIC,
    MAX_CONSUMERS_PER_SUBSCRIPTION,
)

# The most a broker may set maxMessageSize to (Java's int minus the frame padding Pulsar keeps
# for metadata); the default is Pulsar's 5 MB (``DEFAULT_MAX_MESSAGE_SIZE``).
MESSAGE_SIZE_FRAME_PADDING = 10 * 1024
MAX_MESSAGE_SIZE_CEILING = INT32_MAX - MESSAGE_SIZE_FRAME_PADDING

# Pulsar's reason when a topic would exceed maxTopicsPerNamespace (admin 412, client
# NotAllowedError).
TOPICS_EXCEEDED = "Exceed maximum number of topics in namespace."

# Pulsar's 412 reasons for a negative value, by path (namespace and topic paths differ).
_NEGATIVE = {
    "maxProducers": "maxProducers must be 0 or more",
    "maxConsumers": "maxConsumers must be 0 or more",
    "topic.maxConsumersPerSubscription": "Invalid value for maxConsumersPerSubscription",
}
MESSAGE_SIZE_REFUSED = (
    "topic-level maxMessageSize must be greater than or equal to 0 "
    "and must be smaller than that in the broker-level"
)


def _integer(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidInput(f"{what} must be an integer")
    return value


def check_count(value: object, path: str, level: str) -> int:
    """A count limit posted to ``.../{path}`` at ``level`` ("namespace" or "topic"): an int
    >= 0; 400 for a non-int, 412 (Pulsar's text) if negative."""
    number = _integer(value, path)
    if number < 0 or number > INT32_MAX:
        reason = _NEGATIVE.get(f"{level}.{path}") or _NEGATIVE.get(path)
        raise PreconditionFailed(reason or f"{path} must be 0 or more")
    return number


def check_message_size(value: object, broker_max: int) -> int:
    """A topic ``maxMessageSize``: 0 (the broker's) up to the broker's own value."""
    number = _integer(value, "maxMessageSize")
    if number < 0 or number > broker_max:
        raise PreconditionFailed(MESSAGE_SIZE_REFUSED)
    return number


__all__ = [
    "COUNT_KINDS",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "MAX_CONSUMERS_PER_SUBSCRIPTION",
    "MAX_CONSUMERS_PER_TOPIC",
    "MAX_MESSAGE_SIZE",
    "MAX_MESSAGE_SIZE_CEILING",
    "MAX_PRODUCERS_PER_TOPIC",
    "MAX_SUBSCRIPTIONS_PER_TOPIC",
    "MAX_TOPICS_PER_NAMESPACE",
    "TOPICS_EXCEEDED",
    "check_count",
    "check_message_size",
]
