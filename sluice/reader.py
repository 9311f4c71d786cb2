"""``Client.create_reader``: ``pulsar-client``'s ``Reader`` on Sluice.

A reader reads a topic from a position it chooses (``MessageId.earliest``,
``MessageId.latest`` or the id of a message) without a durable subscription: as Pulsar's
readers do, it reads through a subscription of its own (``reader-<random>``, Exclusive)
that it acknowledges as it reads and deletes when it closes.  From a message id it starts at
the earliest entry the topic keeps and passes over (acknowledging) what comes before the id,
as Sluice's WebSocket reader does; the subscription's dispatch limits apply to it like to
any other.  ``has_message_available`` compares, per partition, the newest entry of the
stream with where the reader stands.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from typing import TYPE_CHECKING, cast

from sluice.consumer import Consumer, InitialPosition
from sluice.errors import AlreadyClosed, SluiceException
from sluice.message import Message, MessageId
from sluice.protocol.text import as_text

if TYPE_CHECKING:
    from sluice.client import Client

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
        # Where the reader stands on each partition (stream entry id): what it returned last,
        # or for a reader from latest the newest entry when it was made.
        self._position = {part.index_in_topic: BEGINNING for part in consumer._parts}
        if start is MessageId.latest:
            for part in consumer._parts:
                self._position[part.index_in_topic] = self._newest(part.log) or BEGINNING
        elif self._mark is not None:
            for part in consumer._parts:
                if self._mark.part in (-1, part.index_in_topic):
                    self._position[part.index_in_topic] = self._before_mark()

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
            self._position[message_id.part] = message_id.stream_id
            return message

    def has_message_available(self) -> bool:
        """True when a message after the reader's position is in the topic."""
        if self._consumer._buffer:
            return True
        for part in self._consumer._parts:
            newest = self._newest(part.log)
            if newest is not None and _order(newest) > _order(self._position[part.index_in_topic]):
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

    def _newest(self, log: str) -> str | None:
        entries = self._client.redis.xrevrange(log, count=1)
        return as_text(cast(bytes, entries[0][0])) if entries else None


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
