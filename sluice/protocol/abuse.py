"""Abuse limits on the data plane: what the owning worker writes and what the scripts check.

The worker that owns a partition writes the partition's resolved limits into ``sl:{P}:limits``
(``limits.lua``, refused once its lease is lost) when it starts the partition and on every
policy change, before it confirms the change; so a limit the admin service answered for is in
force.  The scripts read the hash atomically with what they check:

* ``subscribe.lua``: a new subscription against ``maxSubscriptionsPerTopic``
  (``NotAllowed``), a new consumer against ``maxConsumersPerTopic`` and
  ``maxConsumersPerSubscription`` (``ConsumerBusy``);
* ``producer.lua``: a new producer against ``maxProducersPerTopic`` (``ProducerBusy``); it
  answers the ``maxMessageSize`` the client checks its sends against, and the durable
  acknowledgements the producer waits for (``durableAckReplicas``, ``durableAckTimeoutMs``);
* ``produce.lua``: each entry against ``maxMessageSize`` (``MessageTooBig``), and each call
  against the publish rate (``PublishRateLimited``: not written, try again after the wait it
  names), and each call that does not promise to wait for ``durableAckReplicas`` replicas
  (``DurableAcks``: not written, the producer learns the policy and sends again), and each
  entry whose delivery time is further ahead than ``delayedDeliveryMaxDelayInMillis``
  (``NotAllowed`` "Exceeds max allowed delivery delay of N milliseconds": not written);
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

from sluice.protocol.errors import NotFound
from sluice.protocol.frames import Call
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import TOPIC_CREATE

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
    # Durable acknowledgements (``sluice.durable``): replicas a send waits for (0 = none),
    # and for how long.
    "durableAckReplicas",
    "durableAckTimeoutMs",
    # The longest delay a send may ask for (``delayedDelivery``'s maxDeliveryDelayInMillis
    # while the policy is active; 0 = no limit): produce.lua refuses a send asking more.
    "delayedDeliveryMaxDelayInMillis",
    # The partition's resource group when it limits publishing (its id, 0 = none), and the
    # group's publish rates per second (0 = no limit): what ``sluice.group_publish`` reads.
    "resourceGroupId",
    "resourceGroupPublishInMsg",
    "resourceGroupPublishInByte",
    # The backlog quota's limitMessages plus one when its policy is lowest_priority_eviction,
    # which produce.lua enforces itself (0 = off; docs/priority.md).
    "priorityEvictionLimit",
    # 1 = the partition keeps priorities in its own stream (the priority index) when it has no
    # level stream yet (broker priorityLevelStreams false); 0 = it starts keeping each level in
    # a stream of its own with its first message of a priority other than 4 (produce.lua).
    "priorityIndexOnly",
)
# Fields that mean nothing while another is 0 (a period without a rate, a timeout without
# replicas): not compared with the defaults.
_DEPENDENT = ("subscribeRatePeriodPerConsumerInSecond", "durableAckTimeoutMs")
# What produce.lua and producer.lua assume while a partition has no limits written yet.
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024

# The first word of the scripts' error replies, by kind of refusal.
NOT_ALLOWED = "NotAllowed"
PRODUCER_BUSY = "ProducerBusy"
CONSUMER_BUSY = "ConsumerBusy"
MESSAGE_TOO_BIG = "MessageTooBig"
# Followed by the milliseconds to wait before trying again.
PUBLISH_RATE_LIMITED = "PublishRateLimited"
# Followed by the replicas and the timeout (ms) the partition's sends must wait for.
DURABLE_ACKS_REQUIRED = "DurableAcks"
SUBSCRIBE_RATE_LIMITED = "SubscribeRateLimited"


def is_default(values: Mapping[str, int]) -> bool:
    """True when ``values`` are what the scripts assume without a limits hash: no limit, and
    the default ``maxMessageSize`` (the subscribe period means nothing without a rate, the
    durable-ack timeout nothing without replicas)."""
    return all(
        int(values[name]) == (DEFAULT_MAX_MESSAGE_SIZE if name == "maxMessageSize" else 0)
        for name in LIMIT_FIELDS
        if name not in _DEPENDENT
    )


def limit_pairs(values: Mapping[str, int]) -> list[str | int]:
    """``limits.lua``'s field/value pairs for ``values`` (by ``LIMIT_FIELDS`` name); none for
    the defaults, which deletes the hash (thousands of quiet partitions need no copy of them)."""
    pairs: list[str | int] = []
    if not is_default(values):
        for name in LIMIT_FIELDS:
            pairs += [name, int(values[name])]
    return pairs


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
    return TOPIC_CREATE.call(topic, partitions, record)
