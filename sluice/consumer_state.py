"""A consumer's bookkeeping: its keys per partition and what it has not acknowledged yet."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

from sluice.message import Message, MessageId
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import ACK, FLOW


@dataclass(eq=False)
class Part:
    """One partition (or non-partitioned topic) of a consumer, with its Redis keys."""

    index: int
    name: TopicName
    subscription: str
    consumer_id: str
    pending_acks: deque[str] = field(default_factory=deque)
    pending_permits: deque[int] = field(default_factory=deque)  # to give back in a flow
    received: int = 0

    def __post_init__(self) -> None:
        sub = self.subscription
        self.log = keys.log(self.name)
        self.queue = keys.queue(self.name, sub, self.consumer_id)
        # The KEYS of the scripts a consumer calls most, built once.
        self.flow_keys = FLOW.keys(self.name, sub)
        self.ack_keys = ACK.keys(self.name, sub)
        self.index_in_topic = self.name.partition_index
        self.topic = self.name.full


INFINITY = float("inf")


def _order(stream_id: str) -> tuple[int, int]:
    ms, seq = stream_id.split("-")
    return int(ms), int(seq)


class AckTracker:
    """Entries received and not acknowledged, batch progress, and ack-timeout deadlines.

    The per-message paths (``track``, ``ack``) rely on single dict operations, which are
    atomic in CPython; the background paths copy before iterating.
    """

    def __init__(self, ack_timeout_ms: int, tracking: bool = True) -> None:
        self.timeout = ack_timeout_ms / 1000 if ack_timeout_ms else None
        self.tracking = tracking  # keep received messages (ack timeout, dead letters)
        self._lock = threading.Lock()
        self._batches: dict[tuple[int, str], tuple[int, set[int]]] = {}
        self._unacked: dict[tuple[int, str], tuple[float, list[Message]]] = {}

    def expect_batch(self, part: Part, stream_id: str, size: int) -> None:
        """An entry of ``size`` messages arrived; it is acknowledged when all of them are."""
        with self._lock:
            self._batches[(part.index, stream_id)] = (size, set())

    def track(self, part: Part, message: Message) -> None:
        """The application received ``message``."""
        if not self.tracking:
            return
        key = (part.index, message.message_id().stream_id)
        tracked = self._unacked.get(key)
        if tracked is not None:
            tracked[1].append(message)
            return
        deadline = time.monotonic() + self.timeout if self.timeout is not None else INFINITY
        self._unacked[key] = (deadline, [message])

    def ack(self, part: Part, message_id: MessageId) -> bool:
        """Record an ack; True when the whole entry is now acknowledged."""
        key = (part.index, message_id.stream_id)
        if message_id.batch >= 0:
            batch = self._batches.get(key)
            if batch is not None:
                size, acked = batch
                acked.add(message_id.batch)
                if len(acked) < size:
                    return False
                self._batches.pop(key, None)
        if self.tracking:
            self._unacked.pop(key, None)
        return True

    def cumulative(self, part: Part, message_id: MessageId) -> str:
        """Forget everything up to ``message_id``; return the XPENDING end bound to ack."""
        upto = message_id.stream_id
        bound = upto
        with self._lock:
            batch = self._batches.get((part.index, upto))
            if batch is not None and message_id.batch_index() < batch[0] - 1:
                bound = "(" + upto  # the batch is not complete: stop before it
            limit = _order(upto)
            for key in [k for k in list(self._unacked) if k[0] == part.index]:
                inside = _order(key[1]) < limit or (key[1] == upto and not bound.startswith("("))
                if inside:
                    self._unacked.pop(key, None)
                    self._batches.pop(key, None)
        return bound

    def forget(self, part: Part, stream_id: str) -> list[Message] | None:
        """Stop tracking an entry (it is being redelivered); return its messages."""
        with self._lock:
            self._batches.pop((part.index, stream_id), None)
            tracked = self._unacked.pop((part.index, stream_id), None)
        return tracked[1] if tracked else None

    def all_unacked(self) -> list[MessageId]:
        """One id per entry received and not acknowledged."""
        return [messages[0].message_id() for _deadline, messages in list(self._unacked.values())]

    def expired(self, now: float) -> list[MessageId]:
        """Entries whose ack timeout has passed."""
        return [
            messages[0].message_id()
            for deadline, messages in list(self._unacked.values())
            if deadline <= now
        ]
