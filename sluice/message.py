"""Messages and message ids, with the accessors of ``pulsar-client``'s ``Message``."""

from __future__ import annotations

from typing import ClassVar

import orjson


class MessageId:
    """Where a message lives: stream entry ``ms-seq``, partition and index in a batch.

    The accessors are ``pulsar-client``'s: ``ledger_id()`` is the entry id's millisecond
    part, ``entry_id()`` its sequence part.  Ids compare in stream order within a partition.
    """

    __slots__ = ("batch", "part", "stream_id", "topic")

    # Where a reader may start (``Client.create_reader``): the first and the next message.
    earliest: ClassVar[MessageId]
    latest: ClassVar[MessageId]

    def __init__(self, stream_id: str, part: int = -1, batch: int = -1, topic: str = "") -> None:
        self.stream_id = stream_id
        self.part = part
        self.batch = batch
        self.topic = topic

    @classmethod
    def from_stream_id(cls, stream_id: str, partition: int, batch: int, topic: str) -> MessageId:
        """Build from a Redis stream entry id."""
        return cls(stream_id, partition, batch, topic)

    def _key(self) -> tuple[int, int, int, int]:
        ms, seq = self.stream_id.split("-")
        return (self.part, int(ms), int(seq), self.batch)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return (self.stream_id, self.part, self.batch) == (other.stream_id, other.part, other.batch)

    def __hash__(self) -> int:
        return hash((self.stream_id, self.part, self.batch))

    def __lt__(self, other: MessageId) -> bool:
        return self._key() < other._key()

    def ledger_id(self) -> int:
        """The millisecond part of the entry id."""
        return int(self.stream_id.split("-")[0])

    def entry_id(self) -> int:
        """The sequence part of the entry id."""
        return int(self.stream_id.split("-")[1])

    def partition(self) -> int:
        """Partition index, -1 for a non-partitioned topic."""
        return self.part

    def batch_index(self) -> int:
        """Index in a batch entry, -1 when the entry holds one message."""
        return self.batch

    def serialize(self) -> bytes:
        """Bytes that ``deserialize`` turns back into this id."""
        return orjson.dumps([self.stream_id, self.part, self.batch, self.topic])

    @classmethod
    def deserialize(cls, data: bytes) -> MessageId:
        """Inverse of ``serialize``."""
        stream_id, part, batch, topic = orjson.loads(data)
        return cls(stream_id, part, batch, topic)

    def __str__(self) -> str:
        ms, seq = self.stream_id.split("-")
        return f"({ms},{seq},{self.part},{self.batch})"

    def __repr__(self) -> str:
        return f"MessageId({self.stream_id!r}, partition={self.part}, batch={self.batch})"


# The start positions of a reader (``pulsar-client``'s ``MessageId.earliest``/``latest``).
MessageId.earliest = MessageId("0-0")
MessageId.latest = MessageId(f"{2**64 - 1}-{2**64 - 1}")

EMPTY_PROPERTIES: dict[str, str] = {}


class Message:
    """A received message.

    Built on the consumer's hot path, so it keeps what arrived as it arrived: the entry id
    as a string, the publish time as bytes, and makes the ``MessageId`` only when asked."""

    __slots__ = (
        "_batch",
        "_data",
        "_entry",
        "_event_time",
        "_id",
        "_index",
        "_key",
        "_priority",
        "_properties",
        "_publish_time",
        "_redelivery_count",
        "_topic",
        "batch_size",
    )

    def __init__(
        self,
        data: bytes,
        entry: str,
        index: int,
        topic: str,
        publish_time: bytes | int,
        redelivery_count: int = 0,
        key: str | None = None,
        properties: dict[str, str] = EMPTY_PROPERTIES,
        event_time: int = 0,
        batch: int = -1,
        batch_size: int = 1,
        priority: int = 4,
    ) -> None:
        self._data = data
        self._entry = entry
        self._index = index
        self._topic = topic
        self._publish_time = publish_time
        self._redelivery_count = redelivery_count
        self._key = key
        self._properties = properties
        self._event_time = event_time
        self._batch = batch
        self.batch_size = batch_size
        self._priority = priority
        self._id: MessageId | None = None

    def data(self) -> bytes:
        """The payload."""
        return self._data

    def priority(self) -> int:
        """The message's priority, 0 (lowest) to 9 (highest); 4 when it was sent with none
        (Sluice, ``sluice.priority``)."""
        return self._priority

    def value(self) -> bytes:
        """The payload (no schema: bytes)."""
        return self._data

    def properties(self) -> dict[str, str]:
        """Application properties."""
        return dict(self._properties)

    def partition_key(self) -> str:
        """The routing key, or "" when the message has none."""
        return self._key or ""

    def ordering_key(self) -> str:
        """Same as ``partition_key``."""
        return self._key or ""

    def publish_timestamp(self) -> int:
        """When the message was stored, ms since the epoch (server clock)."""
        return int(self._publish_time)

    def event_timestamp(self) -> int:
        """The application's event time in ms, 0 when not set."""
        return self._event_time

    def message_id(self) -> MessageId:
        """This message's id."""
        if self._id is None:
            self._id = MessageId(self._entry, self._index, self._batch, self._topic)
        return self._id

    def topic_name(self) -> str:
        """Full name of the partition (or topic) the message came from."""
        return self._topic

    def redelivery_count(self) -> int:
        """How many times this message was delivered before."""
        return self._redelivery_count

    def __repr__(self) -> str:
        return f"Message(id={self.message_id()}, topic={self._topic!r}, size={len(self._data)})"
