"""Abuse limits on the data plane: what the owning worker writes and what the scripts check.

The worker that owns a partition writes the partition's resolved limits into ``sl:{P}:limits``
(``limits.lua``, refused once its lease is lost) when it starts the partition and on every
policy change, before it confirms the change; so a limit the admin service answered for is in
force.  The scripts read the hash atomically with what they check:

* ``subscribe.lua``: a new subscription against ``maxSubscriptionsPerTopic``
  (``NotAllowed``), a new consumer against ``maxConsumersPerTopic`` and
  ``maxConsumersPerSubscription`` (``ConsumerBusy``);
* ``producer.lua``: a new producer against ``maxProducersPerTopic`` (``ProducerBusy``); it
  answers the ``maxMessageSize`` the client checks its sends against;
* ``produce.lua``: each entry against ``maxMessageSize`` (``MessageTooBig``), and each call
  against the publish rate (``PublishRateLimited``: not written, try again after the wait it
  names);
* ``subscribe.lua`` again: each subscribe request of a consumer name from a client host
  against the subscribe rate (``SubscribeRateLimited``, Pulsar's ``NotAllowed`` "Subscribe
  limited by subscribe rate limit per consumer.").

``topic_create.lua`` checks ``maxTopicsPerNamespace`` when a client creates a topic on first
use: the namespace's own value in ``sl:{meta}:maxtopics``, else the broker's in
``sl:{meta}:config`` (both written by the workers).  Until a worker has written a partition's
limits, no count limit applies there and the size limit is Pulsar's default, 5 MB.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from sluice.protocol import keys
from sluice.protocol.errors import NotFound
from sluice.protocol.frames import Call, wake_topic
from sluice.protocol.names import TopicName

# Fields of ``sl:{P}:limits`` (named as the broker settings; 0 = no limit, but the size and
# the subscribe-rate period).
LIMIT_FIELDS = (
    "maxSubscriptionsPerTopic",
    "maxProducersPerTopic",
    "maxConsumersPerTopic",
    "maxConsumersPerSubscription",
    "maxMessageSize",
    # The publish and subscribe rates (0 = no limit), named as Pulsar's JSON fields and the
    # broker's period setting.
    "publishThrottlingRateInMsg",
    "publishThrottlingRateInByte",
    "subscribeThrottlingRatePerConsumer",
    "subscribeRatePeriodPerConsumerInSecond",
)
# What produce.lua and producer.lua assume while a partition has no limits written yet.
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024

# The first word of the scripts' error replies, by kind of refusal.
NOT_ALLOWED = "NotAllowed"
PRODUCER_BUSY = "ProducerBusy"
CONSUMER_BUSY = "ConsumerBusy"
MESSAGE_TOO_BIG = "MessageTooBig"
# Followed by the milliseconds to wait before trying again.
PUBLISH_RATE_LIMITED = "PublishRateLimited"
SUBSCRIBE_RATE_LIMITED = "SubscribeRateLimited"


def is_default(values: Mapping[str, int]) -> bool:
    """True when ``values`` are what the scripts assume without a limits hash: no limit, and
    the default ``maxMessageSize`` (the subscribe period means nothing without a rate)."""
    return all(
        int(values[name]) == (DEFAULT_MAX_MESSAGE_SIZE if name == "maxMessageSize" else 0)
        for name in LIMIT_FIELDS
        if name != "subscribeRatePeriodPerConsumerInSecond"
    )


def limits_call(partition: TopicName, fencing_token: str, values: Mapping[str, int]) -> Call:
    """``limits.lua``: replace the partition's limits (``values`` by ``LIMIT_FIELDS`` name);
    defaults delete the hash (thousands of quiet partitions need no copy of them)."""
    pairs: list[str | int] = []
    if not is_default(values):
        for name in LIMIT_FIELDS:
            pairs += [name, int(values[name])]
    return [keys.lease(partition), keys.limits(partition)], [fencing_token, *pairs]


def producer_call(partition: TopicName, producer_id: str, expiry_ms: int) -> Call:
    """``producer.lua``: register or renew ``producer_id`` on the partition."""
    return (
        [keys.producers(partition), keys.limits(partition)],
        [producer_id, expiry_ms, partition.full],
    )


def auto_create_call(topic: TopicName, namespaces: set[bytes], config: dict[bytes, bytes]) -> Call:
    """``topic_create.lua``'s call for a topic created on first use, from the registered
    namespaces (``sl:{meta}:namespaces``) and the broker settings (``sl:{meta}:config``);
    ``NotFound`` when the namespace does not exist ("Namespace ...") or auto-creation is off
    ("Topic ...").  The topic gets ``defaultNumPartitions`` partitions when
    ``allowAutoTopicCreationType`` is ``partitioned``."""
    if namespaces and topic.namespace_name.encode() not in namespaces:
        raise NotFound(f"Namespace {topic.namespace_name} does not exist")
    settings = {k.decode(): v.decode() for k, v in config.items()}
    if settings.get("allowAutoTopicCreation", "true") != "true":
        raise NotFound(f"Topic {topic.full} does not exist")
    partitions = 0
    if settings.get("allowAutoTopicCreationType", "non-partitioned") == "partitioned":
        partitions = int(settings.get("defaultNumPartitions", "1"))
    fields = {"partitions": partitions, "autoCreated": True}
    record = json.dumps(fields, separators=(",", ":")).encode()
    # Registered atomically within the namespace's maxTopicsPerNamespace; a topic another
    # client registered first wins.
    return topic_create_call(topic, partitions, record, wake_topic(topic.full))


def topic_create_call(topic: TopicName, partitions: int, record: bytes, wake: str) -> Call:
    """``topic_create.lua``: register a topic a client creates on first use (``record`` is its
    registry JSON; a partitioned topic counts its partitions against the namespace limit)."""
    return (
        [keys.TOPICS, keys.TOPIC_LIMITS, keys.CLIENT_CONFIG],
        [topic.full, record, max(partitions, 1), topic.namespace_name, keys.WAKE_CHANNEL, wake],
    )
