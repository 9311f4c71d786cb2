"""The stats snapshot: what workers emit every interval and reporting lands as Parquet.

One snapshot per (topic partition, subscription) per interval.  Partition-level figures (what
was published) are repeated on every subscription row of that partition; a partition without
subscriptions emits one row with ``subscription`` = "".  Counters cover the interval that ends
at ``ts``; gauges (backlog, unacked, consumers) are read at ``ts``.  The effective limits are
those in force at ``ts`` with the limiter that binds and the level its value came from, and
what they allowed over the interval, exact to the moment a limit changed.

Workers append snapshots to the Redis stream ``SNAPSHOT_STREAM`` as one JSON field ``json``.
A report run asks for the interval so far by setting ``SNAPSHOT_REQUEST`` (the request time,
ms since the epoch); each worker snapshots at its next tick after a request newer than its
last snapshot, and notes the time of every snapshot it appends in ``SNAPSHOT_TAKEN`` (hash:
worker id -> ms), so a run knows up to when every worker's data reaches.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import orjson

SNAPSHOT_STREAM = "sluice:stats"
SNAPSHOT_FIELD = "json"
SNAPSHOT_REQUEST = "sluice:stats:request"
SNAPSHOT_TAKEN = "sluice:stats:taken"
SNAPSHOT_REQUEST_TTL_SECONDS = 60


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    """One row of the stats lake (field names are the Parquet column names)."""

    ts: int  # end of the interval, epoch milliseconds (UTC)
    interval_ms: int  # length of the interval
    worker: str  # id of the emitting worker
    tenant: str
    namespace: str  # namespace local name
    topic: str  # base topic full name, persistent://t/ns/topic
    partition: int  # partition index, -1 for a non-partitioned topic
    subscription: str  # "" for a partition-level row without subscriptions
    msg_in: int = 0  # messages published to the partition in the interval
    bytes_in: int = 0
    msg_out: int = 0  # messages dispatched to the subscription in the interval
    bytes_out: int = 0
    msg_redelivered: int = 0  # of msg_out, redeliveries (nack, ack timeout, failover)
    throttled_broker: int = 0  # dispatch attempts cut short by each limiter in the interval
    throttled_topic: int = 0
    throttled_subscription: int = 0
    backlog_msgs: int = 0  # messages not yet acknowledged by the subscription, at ts
    backlog_bytes: int = 0
    unacked: int = 0  # dispatched but not acknowledged, at ts
    consumers: int = 0  # connected consumers, at ts
    limit_msg_per_s: float | None = None  # effective combined limit in force, None = no limit
    limit_byte_per_s: float | None = None
    limit_msg_limiter: str | None = None  # broker | topic | subscription
    limit_byte_limiter: str | None = None
    limit_msg_source: str | None = None  # broker | namespace | topic | subscription
    limit_byte_source: str | None = None
    # What the limit allowed over the interval: the limit integrated over time, so a change
    # inside the interval counts from when it was applied (None: no limit at any time; absent
    # in snapshots of older workers, where the report takes the limit at ts x interval_ms).
    allowed_msgs: float | None = None
    allowed_bytes: float | None = None
    # Per message priority, for a subscription that saw one (None otherwise): JSON text
    # {"<priority>": [messages dispatched in the interval, messages waiting in its priority
    # index at ts]}, the levels with either above 0.
    priority_levels: str | None = None

    def to_json(self) -> bytes:
        """The stream field value (orjson writes the dataclass's fields in order, as
        ``asdict`` would, without building the dict)."""
        return orjson.dumps(self)

    @classmethod
    def from_json(cls, data: bytes | str) -> StatsSnapshot:
        """Parse a stream field value, ignoring fields this version does not know."""
        raw: dict[str, Any] = orjson.loads(data)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in known})


SNAPSHOT_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(StatsSnapshot))
