"""The data-plane protocol: entry fields, packets, dispatch frames and wake-up messages.

Clients and workers talk only through Redis.  A producer appends *entries* to a partition's
stream (``produce.lua``); a worker moves entries into consumers' receiver queues as *packets*
(``dispatch.lua``); consumers acknowledge with ``ack.lua``.  Each script's header names its
KEYS, ARGV and return value; ``sluice.protocol.scripts`` registers the scripts and builds their
calls.  Workers are woken through the pub/sub channel ``sl:wake`` with
messages ``d<TAB>partition`` (new data), ``s<TAB>partition<TAB>subscription`` (consumers
joined or left), ``p<TAB>partition<TAB>subscription`` (permits, acks or redeliveries: the
same consumers may take more) and ``t<TAB>topic`` (topic created or changed).

Entry fields: ``d`` payload, ``n`` messages in a batch entry (absent = 1), ``k`` partition
key, ``p`` properties (JSON), ``e`` event time (ms), ``t`` publish time (ms, server clock),
``pr`` producer name, ``sq`` sequence id, ``a`` deliver-at time (ms, the producer's clock;
delayed delivery), ``o`` ordering key (Key_Shared).  A batch entry's payload is a msgpack list of
``[payload, key, properties JSON, event time]`` per message.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, cast

import msgpack

from sluice.protocol.names import TopicName


def holder_prefix(worker: str) -> str:
    """What every fencing token of ``worker`` starts with (``lease_fence.lua`` takes it).

    A partition's lease holds the fencing token ``<worker>:<epoch>`` (``lease_acquire.lua``
    makes it); this function and ``lease_holder`` are the one place that reads it."""
    return worker + ":"


def lease_holder(token: str) -> str:
    """The worker a fencing token ``<worker>:<epoch>`` belongs to."""
    return token.rpartition(":")[0]


class DispatchReason(IntEnum):
    """Why a dispatch call stopped."""

    MORE = 0  # a read cap was reached; more may follow at once
    NO_DATA = 1  # nothing to hand out; producers will wake the worker
    NO_PERMITS = 2  # consumers have no room; a flow will wake the worker
    MSG_BUDGET = 3  # the message budget ran out
    BYTE_BUDGET = 4  # the byte budget ran out
    UNACKED = 5  # a max-unacked limit is reached; an ack will wake the worker


@dataclass(frozen=True, slots=True)
class DispatchResult:
    """What one ``dispatch.lua`` call handed out."""

    entries: int
    messages: int  # real messages (a batch entry holds several)
    bytes: int
    redelivered: int  # entries among them that were redeliveries
    reason: DispatchReason
    unthrottled: bool  # a caught-up subscription skipped the budgets
    next_due_ms: int  # when the next scheduled redelivery is due, -1 = none
    units: int  # what the message budget counted: messages, or entries
    unacked: int = -1  # the subscription's pending entries afterwards; -1 = not counted
    exhausted: int = 0  # Redis-side limiters left without quota (bits, see dispatch.lua)
    wait_ms: int = 0  # until every exhausted Redis-side limiter has quota again

    @classmethod
    def from_reply(cls, reply: list[int]) -> DispatchResult:
        """Parse the script's reply."""
        entries, messages, size, redelivered, reason, unthrottled, due, units, *rest = reply
        return cls(
            int(entries),
            int(messages),
            int(size),
            int(redelivered),
            DispatchReason(int(reason)),
            bool(unthrottled),
            int(due),
            int(units),
            int(rest[0]) if rest else -1,
            int(rest[1]) if len(rest) > 1 else 0,
            int(rest[2]) if len(rest) > 2 else 0,
        )


RANGE_NOTICE = b"R"


def range_notice(raw: bytes) -> tuple[bytes, bytes] | None:
    """A receiver-queue element that announces consecutive new entries as (first, last) ids,
    or None when the element is a packet of entries."""
    if raw[:1] != RANGE_NOTICE:
        return None
    first, _, last = raw[1:].partition(b" ")
    return first, last


def unpack_packets(raw: bytes) -> list[list[Any]]:
    """One element of a receiver queue as ``(entry id, flat field list, delivery count)``
    triples (redeliveries, the priority index's entries) or ``(entry id, flat field list)``
    pairs (new entries of the dispatch's fast path, first deliveries), undecoded: what the
    consumer's hot path reads."""
    return cast(list[list[Any]], msgpack.unpackb(raw, raw=True))


def pack_batch(messages: list[tuple[bytes, str | None, str | None, int | None]]) -> bytes:
    """Payload of a batch entry: ``[payload, key, properties JSON, event time]`` per message."""
    return cast(bytes, msgpack.packb([list(m) for m in messages], use_bin_type=True))


def unpack_batch(payload: bytes) -> list[tuple[bytes, str | None, str | None, int | None]]:
    """Inverse of ``pack_batch``."""
    return [tuple(m) for m in msgpack.unpackb(payload, raw=False)]


def parse_position(entry_id: str) -> tuple[int, int]:
    """A stream entry id (``ms-seq``) as a tuple that orders like the stream does."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def wake_data(partition: str) -> str:
    """Wake-up: new entries on ``partition`` (full name)."""
    return f"d\t{partition}"


def wake_subscription(partition: str, subscription: str) -> str:
    """Wake-up: consumers, permits or redeliveries of a subscription changed."""
    return f"s\t{partition}\t{subscription}"


def wake_dispatch(partition: str, subscription: str) -> str:
    """Wake-up: a subscription's consumers may take more (permits, acks, redeliveries)."""
    return f"p\t{partition}\t{subscription}"


def wake_topic(topic: str) -> str:
    """Wake-up: a topic was created or its partitions changed."""
    return f"t\t{topic}"


# (KEYS, ARGV) of one script call (``sluice.protocol.scripts`` builds them).
Call = tuple[list[str], list[Any]]


@dataclass(frozen=True, slots=True)
class LimitArgs:
    """A TOPIC or SUBSCRIPTION limit as ``dispatch.lua`` takes it (<= 0 = unlimited)."""

    msg: int = -1
    byte: int = -1
    period: int = 1  # seconds
    relative: bool = False


@dataclass(frozen=True, slots=True)
class DispatchArgs:
    """ARGV of ``dispatch.lua`` (see its header)."""

    subscription: str
    queue_prefix: str
    now_ms: int
    max_entries: int = 100
    broker_msg: int = -1
    broker_byte: int = -1
    read_cap: int = 5 * 1024 * 1024
    count_entries: bool = False
    active: str = ""
    rr_chunk: int = 20
    rr_offset: int = 0
    skip_when_caught_up: bool = False
    fencing_token: str = ""
    max_unacked_subscription: int = 0
    max_unacked_consumer: int = 0
    topic: LimitArgs = LimitArgs()
    sub: LimitArgs = LimitArgs()
    reads: int = 1  # reads of up to ``max_entries`` one call may make (unthrottled fast path)
    clock_ms: float | None = None  # the limiters' clock; None = Redis's TIME
    # Delayed delivery: -1 = deliver at once (Exclusive, Failover, or turned off), else how
    # many ms before its deliver-at time a delayed entry may go (0 = strictly at its time).
    delay_margin_ms: int = -1
    key_shared: bool = False  # entries go by key (a Key_Shared subscription)
    priority_lookahead: int = 10_000  # entries a subscription reads ahead to order by priority
    priority_oldest_every: int = 0  # starvation guard: every N-th is the oldest (0 = strict)
    # The limiters (exhausted flags) the previous call of this subscription left without
    # quota: their periods first used late stay on their grid up to half a period late.
    renewing: int = 0

    def argv(self) -> list[Any]:
        """The script's ARGV."""
        argv = [
            self.subscription,
            self.queue_prefix,
            self.now_ms,
            self.max_entries,
            self.broker_msg,
            self.broker_byte,
            self.read_cap,
            1 if self.count_entries else 0,
            self.active,
            self.rr_chunk,
            self.rr_offset,
            1 if self.skip_when_caught_up else 0,
            self.fencing_token,
            self.max_unacked_subscription,
            self.max_unacked_consumer,
            self.topic.msg,
            self.topic.byte,
            self.topic.period,
            self.sub.msg,
            self.sub.byte,
            self.sub.period,
            1 if self.topic.relative else 0,
            1 if self.sub.relative else 0,
            self.reads,
        ]
        argv.append("" if self.clock_ms is None else repr(float(self.clock_ms)))
        argv.append(self.delay_margin_ms)
        argv.append(1 if self.key_shared else 0)
        argv.append(self.priority_lookahead)
        argv.append(self.priority_oldest_every)
        argv.append(self.renewing)
        return argv


def partitions_of(topic: TopicName, count: int) -> list[TopicName]:
    """The partitions of a topic, or the topic itself when non-partitioned."""
    return [topic.partition(i) for i in range(count)] if count else [topic]
