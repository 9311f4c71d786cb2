"""Response documents of the topic routes."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

from api.schemas import Document


class PartitionedMetadata(Document):
    """Pulsar's ``PartitionedTopicMetadata``: 0 partitions for a non-partitioned topic."""

    partitions: int


class OwnedPartition(Document):
    """Where a partition is served: its owning worker and the lease it holds."""

    brokerUrl: str
    httpUrl: str
    owner: str
    leaseToken: str


class UnownedPartition(Document):
    """A partition no live worker holds a lease on yet."""

    owner: None
    leaseToken: None


class TopicStats(Document):
    """Pulsar's ``TopicStats`` as the owning worker publishes it (the main fields; workers
    may add more, passed through as they are)."""

    model_config = ConfigDict(extra="allow")

    msgRateIn: float
    msgThroughputIn: float
    msgRateOut: float
    msgThroughputOut: float
    subscriptions: dict[str, dict[str, Any]]


class PartitionedTopicStats(TopicStats):
    """Pulsar's ``PartitionedTopicStats``: sums over the partitions, and each partition's
    stats (empty unless ``perPartition``)."""

    metadata: PartitionedMetadata
    partitions: dict[str, dict[str, Any]]


Lookup = OwnedPartition | dict[str, OwnedPartition | UnownedPartition]
