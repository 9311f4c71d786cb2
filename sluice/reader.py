"""``Client.create_reader``: ``pulsar-client``'s ``Reader`` on Sluice.

A reader reads a topic from a position it chooses (``MessageId.earliest``,
``MessageId.latest`` or the id of a message) without a durable subscription: as Pulsar's
readers do, it reads through a subscription of its own (``reader-<random>``, Exclusive)
that it acknowledges as it reads and deletes when it closes.  From a message id it starts at
the earliest entry the topic keeps and passes over (acknowledging) what comes before the id,
as Sluice's WebSocket reader does; the subscription's dispatch limits apply to it like to
any other.  ``has_message_available`` compares, per partition, the newest entry of each of
its streams with where the reader stands on that stream: a partition with priority level
streams (``sluice.protocol.keys``) has one per level, each read in order, while the
subscription hands them out highest priority first, as it does to consumers
(docs/priority.md).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from typing import TYPE_CHECKING, cast

from sluice.consumer import Consumer, InitialPosition
from sluice.errors import AlreadyClosed, SluiceException
from sluice.message import Message, MessageId
from sluice.protocol import keys
from sluice.protocol.text import as_text

if TYPE_CHECKING:
    from sluice.client import Client
    from sluice.consumer_state import Part

READER_PREFIX = "reader-"
BEGINNING = "0-0"


def reader_subscription() -> str:
    """A reader's own subscription name (Pulsar's readers use ``reader-<random>``)."""
    return f"{READER_PREFIX}{uuid.uuid4().hex[:10]}"


def _order(stream_id: str) -> tuple[int, int]:
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq or 0)


class Reader:
    """Reads a topic from a chosen position; made by ``Client.create_reader``."""

    def __init__(
        self, client: Client, consumer: Consumer, start: MessageId, inclusive: bool
    ) -> None:
        self._client = client
        self._consumer = consumer
        self._mark = None if start in (MessageId.earliest, MessageId.latest) else start
        self._inclusive = inclusive
        # Where the reader stands on each stream of each partition (partition, level of the
        # stream, None for its log) as an entry id: what it returned last from it, or for a
        # reader from latest the newest entry when it was made; a stream not there yet
        # starts at its partition's start.
        self._start = {part.index_in_topic: BEGINNING for part in consumer._parts}
        self._position: dict[tuple[int, int | None], str] = {}
        if start is MessageId.latest:
            for part in consumer._parts:
                for level, newest in self._newest(part).items():
                    self._position[(part.index_in_topic, level)] = newest
        elif self._mark is not None:
            for part in consumer._parts:
                if self._mark.part in (-1, part.index_in_topic):
                    self._start[part.index_in_topic] = self._before_mark()

    # --- pulsar-client API ----------------------------------------------------------------

    def topic(self) -> str:
        """The topic this reader reads."""
        return self._consumer.topic()

    def read_next(self, timeout_millis: int | None = None) -> Message:
        """The next message; ``Timeout`` when none arrives within ``timeout_millis``."""
        deadline = None if timeout_millis is None else time.monotonic() + timeout_millis / 1000
        while True:
            left = None if deadline is None else max(int((deadline - time.monotonic()) * 1000), 0)
            message = self._consumer.receive(left)
            self._consumer.acknowledge(message)  # its own subscription: read is done
            if self._before_start(message.message_id()):
                continue
            message_id = message.message_id()
            stream = (message_id.part, keys.level_of(message_id.stream_id))
            self._position[stream] = message_id.stream_id
            return message

    def has_message_available(self) -> bool:
        """True when a message after the reader's position is in the topic."""
        if self._consumer._buffer:
            return True
        for part in self._consumer._parts:
            index = part.index_in_topic
            for level, newest in self._newest(part).items():
                stands = self._position.get((index, level), self._start[index])
                if _order(newest) > _order(stands):
                    return True
        return False

    def is_connected(self) -> bool:
        """True until closed."""
        return self._consumer.is_connected()

    def close(self) -> None:
        """Stop reading; the reader's subscription goes with it."""
        if not self._consumer.is_connected():
            return
        with contextlib.suppress(AlreadyClosed, SluiceException):
            self._consumer.unsubscribe()
        self._consumer.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- internals ------------------------------------------------------------------------

    def _before_start(self, message_id: MessageId) -> bool:
        mark = self._mark
        if mark is None or (mark.part not in (-1, message_id.part)):
            return False
        return message_id < mark or (message_id == mark and not self._inclusive)

    def _before_mark(self) -> str:
        assert self._mark is not None
        ms, seq = _order(self._mark.stream_id)
        if self._inclusive:
            return f"{ms}-{seq - 1}" if seq else f"{max(ms - 1, 0)}-{2**63 - 1}"
        return self._mark.stream_id

    def _newest(self, part: Part) -> dict[int | None, str]:
        """The newest entry of each stream of a partition that has one, by level (None: the
        partition's log); its levels hash is read with the log, and its level streams after
        it when it has some."""
        redis = self._client.redis
        pipe = redis.pipeline(transaction=False)
        pipe.xrevrange(part.log, count=1)
        pipe.hkeys(keys.levels(part.name))
        entries, levels = pipe.execute()
        found: dict[int | None, list] = {None: entries}
        if levels:
            sides = sorted(int(level) for level in levels)
            pipe = redis.pipeline(transaction=False)
            for level in sides:
                pipe.xrevrange(keys.level_log(part.name, level), count=1)
            found.update(zip(sides, pipe.execute(), strict=True))
        return {level: as_text(cast(bytes, rows[0][0])) for level, rows in found.items() if rows}


def reader_consumer(
    client: Client,
    topic: str,
    start: MessageId,
    receiver_queue_size: int,
    reader_name: str | None,
) -> Consumer:
    """The consumer a reader reads through: its own Exclusive subscription, from the newest
    entry for ``MessageId.latest``, else from the earliest one."""
    from sluice.consumer import ConsumerType

    return client.subscribe(
        topic,
        reader_subscription(),
        consumer_type=ConsumerType.Exclusive,
        receiver_queue_size=receiver_queue_size,
        consumer_name=reader_name,
        initial_position=(
            InitialPosition.Latest if start is MessageId.latest else InitialPosition.Earliest
        ),
    )
