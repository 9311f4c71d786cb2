"""Request bodies and response documents of the operations, with Pulsar's field names."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from api.schemas import Document
from api.topics.schemas import PartitionedMetadata

LONG_MAX = 2**63 - 1


class ResetCursorData(BaseModel):
    """Pulsar's ``ResetCursorData``: a position as ``ledgerId:entryId``, which for Sluice is a
    stream id ``ms-seq``.  ``ledgerId`` -1 means the earliest position and ``Long.MAX_VALUE``
    the latest, as in Pulsar."""

    model_config = ConfigDict(strict=True, extra="forbid")

    ledgerId: int = Field(ge=-1, le=LONG_MAX)
    entryId: int = Field(ge=-1, le=LONG_MAX)
    partitionIndex: int = Field(-1, ge=-1, le=LONG_MAX)
    isExcluded: bool = False
    batchIndex: int = Field(-1, ge=-1, le=LONG_MAX)
    properties: dict[str, str] | None = None


# What the Python client's ``MessageId.serialize()`` writes: [stream id, partition, batch
# index, topic].
SerializedMessageId = tuple[StrictStr, StrictInt, StrictInt, StrictStr]
ResetCursorBody = ResetCursorData | Literal["earliest", "latest"] | SerializedMessageId


class ConsumerInternals(Document):
    """A consumer of a consumer group, as Redis knows it."""

    name: str
    pendingCount: int
    idleMs: int


class CursorInternals(Document):
    """A subscription on one partition: its consumer group's cursor and pending entries."""

    lastDeliveredId: str
    messagesConsumedCounter: int | None
    lag: int | None
    pendingCount: int
    firstPendingId: str | None
    lastPendingId: str | None
    scheduledRedeliveries: int
    consumers: list[ConsumerInternals]


class TopicInternalStats(Document):
    """Pulsar's ``PersistentTopicInternalStats`` for a Redis stream: its length and entry ids,
    its owner, and every subscription's cursor."""

    entriesAddedCounter: int
    numberOfEntries: int
    firstEntryId: str | None
    lastEntryId: str | None
    lastConfirmedEntry: str | None
    lastGeneratedId: str
    owner: str | None
    leaseToken: str | None
    cursors: dict[str, CursorInternals]


class PartitionedTopicInternalStats(Document):
    """Pulsar's ``PartitionedTopicInternalStats``: each partition's internal stats."""

    metadata: PartitionedMetadata
    partitions: dict[str, TopicInternalStats]


class LookupData(Document):
    """Pulsar's ``LookupData``: where the topic is served."""

    brokerUrl: str
    httpUrl: str
