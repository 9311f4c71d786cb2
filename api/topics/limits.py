"""Abuse limits on the admin path: a topic that would exceed ``maxTopicsPerNamespace``, or a
subscription that would exceed ``maxSubscriptionsPerTopic``, is refused (412).

Counted as Pulsar counts: each partition of a partitioned topic and each non-partitioned
topic, those the database holds and those clients auto-created that the workers have not
recorded yet (the topic registry).  Resolution is ``models.flow_resolution.resolve_abuse``:
the namespace's own value, else the broker's.  Clients that create topics on first use are
checked by ``topic_create.lua`` against the same limit.  The rules only: what they count is
read by ``api.topics.service``.
"""

from __future__ import annotations

from typing import Any

from models.abuse import TOPICS_EXCEEDED
from models.broker_config import BrokerConfig
from models.errors import PreconditionFailed
from models.flow_resolution import FlowInputs, resolve_abuse
from sluice.protocol.names import TopicName


def topics_limit(broker: BrokerConfig, namespace: dict[str, Any]) -> int:
    """``maxTopicsPerNamespace`` in force (0 = no limit), from the values stored at the
    namespace (as ``FlowInputs`` takes them) and the broker's."""
    return int(
        resolve_abuse(FlowInputs(broker=broker, namespace=namespace)).max_topics_per_namespace.value
    )


def subscriptions_limit(
    broker: BrokerConfig, namespace: dict[str, Any], topic: dict[str, Any]
) -> int:
    """``maxSubscriptionsPerTopic`` in force (0 = no limit): topic > namespace > broker."""
    inputs = FlowInputs(broker=broker, namespace=namespace, topic=topic)
    return int(resolve_abuse(inputs).max_subscriptions_per_topic.value)


def check_topics(limit: int, known: dict[str, int], topic: TopicName, partitions: int) -> None:
    """412 when ``topic`` with ``partitions`` (0: non-partitioned) would take the namespace,
    whose topics are ``known`` (full name -> partitions), over ``limit`` (0: none)."""
    if limit <= 0:
        return
    existing = sum(max(count, 1) for name, count in known.items() if name != topic.full)
    if existing + max(partitions, 1) > limit:
        raise PreconditionFailed(TOPICS_EXCEEDED)


def check_subscriptions(limit: int, names: set[str], base: TopicName) -> None:
    """412 when one more subscription would take ``base``, which has ``names``, over
    ``limit`` (0: none)."""
    if 0 < limit <= len(names):
        raise PreconditionFailed(
            f"Exceed the maximum number of subscriptions of the topic: {base.full}"
        )
