"""The Redis key layout of the data plane, shared by clients, workers and the admin service.

Every key of one topic partition carries the hash tag ``{tenant/ns/topic-partition-N~K}``
(``{tenant/ns/topic}`` for a non-partitioned topic), so a partition's stream, its
subscriptions' state and its counters live in one Redis Cluster slot and one Lua call can
touch them all.  ``K`` (``tag``) spreads a topic's partitions over the slot space: partition
N's slot lies within 128 slots of the topic's own slot plus N times 16384 divided by the golden
ratio, so the partitions of a topic are far apart in slot order, and from 5 partitions on every
third of the slot space (every master of an evenly balanced 3-master cluster) holds at least
one of them, which plain hashing would leave to chance.  Keys::

    sl:{P}:log                     stream of entries (one per message or batch)
    sl:{P}:stats                   hash: msg_in, bytes_in (written by producers)
    sl:{P}:idle                    set of subscriptions waiting for new entries
    sl:{P}:subs                    set of subscription names
    sl:{P}:s:{S}:meta              hash: type, created (subscription settings)
    sl:{P}:s:{S}:cursor            last entry id handed out (mirror of the group's cursor)
    sl:{P}:s:{S}:permits           hash: consumer -> flow permits (messages)
    sl:{P}:s:{S}:alive             zset: consumer -> last heartbeat (ms)
    sl:{P}:s:{S}:info              hash: consumer -> JSON (name, receiver queue, since)
    sl:{P}:s:{S}:redeliver         zset: entry id -> due time (ms); also entries held back
                                   (delayed, or waiting for their Key_Shared consumer), which
                                   the group's pending list has under the consumer "~held"
    sl:{P}:s:{S}:waitp             flag: the dispatcher waits for permits
    sl:{P}:s:{S}:waitack           flag: the dispatcher waits for acks (max unacked reached)
    sl:{P}:s:{S}:stats             hash: msg_out, bytes_out, redelivered, acked, throttled_*
    sl:{P}:s:{S}:lim               hash: the subscription's SUBSCRIPTION limiter
    sl:{P}:s:{S}:q:{C}             list: consumer C's receiver queue (packed entries)
    sl:{P}:s:{S}:ks                hash: Key_Shared state (dispatch.lua): m the consumers the
                                   ring was built for, r the ring, j:{C} the position consumer
                                   C joined at while it is "recently joined"
    sl:{P}:lease                   fencing token of the worker that owns the partition
    sl:{P}:epoch                   counter the fencing tokens are numbered from
    sl:{P}:lim                     hash: the partition's TOPIC limiter (see dispatch.lua)
    sl:{P}:doc                     JSON stats document published by the owning worker
    sl:{P}:quota                   "policy<TAB>reason" while the backlog quota refuses producers
    sl:{P}:limits                  hash: the partition's abuse limits, written by its owning worker
                                   (``sluice.protocol.abuse``)
    sl:{P}:producers               zset: producer id -> last heartbeat (ms of Redis time)
    sl:{P}:pubrate                 hash: the publish rate's current window (produce.lua);
                                   expires when the window ends
    sl:{P}:subrate:{H}/{N}         counter: subscribe requests of consumer name N from client
                                   host H in its current subscribe-rate period; expires with
                                   the period

Cluster-wide keys (no partition) share the hash tag ``{meta}``, so that the scripts and
transactions that touch several of them stay in one Redis Cluster slot: ``sl:{meta}:topics``
(hash: base topic -> JSON with its partitions), ``sl:{meta}:namespaces`` (set of
``tenant/ns``), ``sl:{meta}:config`` (hash: broker settings clients need),
``sl:{meta}:maxtopics`` (hash: ``tenant/ns`` -> the namespace's own ``maxTopicsPerNamespace``;
the broker's is in ``sl:{meta}:config``), ``sl:{meta}:unsubscribed`` (hash:
``topic#subscription`` -> time, for subscriptions deleted by their consumers), the worker
registry ``sl:{meta}:workers`` (zset: worker id -> heartbeat expiry, ms of Redis time),
``sl:{meta}:applied`` (hash: worker id -> position in the change-event stream up to which it
enforces every change) with its pub/sub channel ``sl:applied``, and the pub/sub channel
``sl:wake`` that wakes workers.  Per worker, ``sl:worker:{id}`` (hash: how to reach it) and
``sl:worker:{id}:leases`` (set of the partitions whose lease it holds) share the worker's own
tag.  ``LEGACY`` maps the names they had before the tag to these;
``dataplane.legacy_keys`` renames them on a single server.
"""

from __future__ import annotations

from binascii import crc_hqx
from functools import lru_cache

from sluice.protocol.names import TopicName

PREFIX = "sl"
META = "sl:{meta}:"
TOPICS = META + "topics"
NAMESPACES = META + "namespaces"
TOMBSTONES = META + "unsubscribed"
CLIENT_CONFIG = META + "config"
TOPIC_LIMITS = META + "maxtopics"
WAKE_CHANNEL = "sl:wake"
WORKERS = META + "workers"
APPLIED = META + "applied"
APPLIED_CHANNEL = "sl:applied"
# The consumer name under which a group's pending list keeps entries held back by dispatch.lua
# (delayed, or waiting for their Key_Shared consumer); real consumer ids are name:pid:nonce.
HELD_CONSUMER = "~held"

# The cluster-wide keys' names before they shared the ``{meta}`` tag: old name -> new name.
LEGACY = {
    "sl:meta:topics": TOPICS,
    "sl:meta:namespaces": NAMESPACES,
    "sl:meta:unsubscribed": TOMBSTONES,
    "sl:meta:config": CLIENT_CONFIG,
    "sl:meta:maxtopics": TOPIC_LIMITS,
    "sl:workers": WORKERS,
    "sl:meta:applied": APPLIED,
}


def worker_info(worker_id: str) -> str:
    """A live worker's registration: host, HTTP URL, start time, owned partitions."""
    return f"sl:worker:{worker_id}"


def worker_leases(worker_id: str) -> str:
    """The partitions a worker holds leases on (so a worker can be fenced off as a whole)."""
    return f"sl:worker:{worker_id}:leases"


SLOTS = 16384
SPREAD_STRIDE = 10127  # SLOTS / golden ratio: consecutive partitions land far apart
SPREAD_WINDOW = 256  # a partition's slot is within half of this of its target


def slot_of(text: str) -> int:
    """The Redis Cluster slot of a hash tag's content."""
    return crc_hqx(text.encode(), 0) % SLOTS


def tag(partition: TopicName) -> str:
    """The hash tag of a partition (or non-partitioned topic)."""
    return _tag(partition.tenant, partition.namespace, partition.local)


@lru_cache(maxsize=65536)
def _tag(tenant: str, namespace: str, local: str) -> str:
    name = TopicName(tenant, namespace, local)
    body = f"{tenant}/{namespace}/{local}"
    index = name.partition_index
    if index < 0:
        return "{" + body + "}"
    base = name.base
    target = (slot_of(f"{tenant}/{namespace}/{base.local}") + index * SPREAD_STRIDE) % SLOTS
    return "{" + f"{body}~{_spread_suffix(body, target - SPREAD_WINDOW // 2)}" + "}"


def _spread_suffix(body: str, low: int) -> int:
    """The smallest K whose ``body~K`` hashes within ``SPREAD_WINDOW`` slots from ``low``.

    CRC-16 is linear: the CRC of ``body~`` followed by the digits of K is the digits' own CRC
    (tabulated once) XOR the CRC of as many zero bytes started from the CRC of ``body~``.  So
    each candidate costs two integer operations instead of formatting and hashing the whole
    name (about 64 candidates are tried per partition)."""
    prefix = crc_hqx(f"{body}~".encode(), 0)
    table = _suffix_crcs()
    for start, end, digits in _DIGIT_RANGES:
        shift = crc_hqx(bytes(digits), prefix)
        for suffix in range(start, end):
            if ((table[suffix] ^ shift) % SLOTS - low) % SLOTS < SPREAD_WINDOW:
                return suffix
    suffix = _DIGIT_RANGES[-1][1]
    while (slot_of(f"{body}~{suffix}") - low) % SLOTS >= SPREAD_WINDOW:
        suffix += 1
    return suffix


_DIGIT_RANGES = ((0, 10, 1), (10, 100, 2), (100, 1000, 3), (1000, 10000, 4))


@lru_cache(maxsize=1)
def _suffix_crcs() -> list[int]:
    """CRC-16 (from 0) of the decimal digits of every K below 10,000."""
    return [crc_hqx(b"%d" % suffix, 0) for suffix in range(_DIGIT_RANGES[-1][1])]


def partition_prefix(partition: TopicName) -> str:
    """``sl:{P}:`` — every key of the partition starts with it."""
    return f"{PREFIX}:{tag(partition)}:"


def log(partition: TopicName) -> str:
    """The partition's stream."""
    return partition_prefix(partition) + "log"


def partition_stats(partition: TopicName) -> str:
    """Producer-side counters of the partition."""
    return partition_prefix(partition) + "stats"


def idle(partition: TopicName) -> str:
    """Subscriptions that found no entries and want a wake-up on the next produce."""
    return partition_prefix(partition) + "idle"


def subs(partition: TopicName) -> str:
    """Names of the partition's subscriptions."""
    return partition_prefix(partition) + "subs"


def lease(partition: TopicName) -> str:
    """The partition's ownership lease (holds the owner's fencing token)."""
    return partition_prefix(partition) + "lease"


def lease_epoch(partition: TopicName) -> str:
    """The counter fencing tokens of the partition are numbered from (never reset)."""
    return partition_prefix(partition) + "epoch"


def limiter(partition: TopicName) -> str:
    """The partition's TOPIC limiter state (quota periods kept by ``dispatch.lua``)."""
    return partition_prefix(partition) + "lim"


def doc(partition: TopicName) -> str:
    """The stats document the owning worker publishes."""
    return partition_prefix(partition) + "doc"


def quota(partition: TopicName) -> str:
    """Set by the owning worker while the partition's backlog quota refuses producers."""
    return partition_prefix(partition) + "quota"


def limits(partition: TopicName) -> str:
    """The partition's abuse limits, written by its owning worker, read by the scripts."""
    return partition_prefix(partition) + "limits"


def producers(partition: TopicName) -> str:
    """Producers registered on the partition, by last heartbeat."""
    return partition_prefix(partition) + "producers"


def publish_window(partition: TopicName) -> str:
    """The publish rate's current window on the partition (``produce.lua``)."""
    return partition_prefix(partition) + "pubrate"


def subscribe_counter(partition: TopicName, consumer_name: str, client_host: str = "") -> str:
    """Subscribe requests of one consumer name from one client host in its current period
    (``subscribe.lua``); a host has no "/", so no two (host, name) pairs share a key."""
    return f"{partition_prefix(partition)}subrate:{client_host}/{consumer_name}"


def sub_prefix(partition: TopicName, subscription: str) -> str:
    """``sl:{P}:s:{S}:`` — every key of one subscription on one partition starts with it."""
    return f"{partition_prefix(partition)}s:{subscription}:"


def sub_key(partition: TopicName, subscription: str, name: str) -> str:
    """One of a subscription's keys: meta, cursor, permits, alive, info, redeliver, ..."""
    return sub_prefix(partition, subscription) + name


def queue(partition: TopicName, subscription: str, consumer: str) -> str:
    """A consumer's receiver queue on one partition."""
    return sub_prefix(partition, subscription) + "q:" + consumer


SUB_KEYS = (
    "meta",
    "cursor",
    "permits",
    "alive",
    "info",
    "redeliver",
    "waitp",
    "waitack",
    "stats",
    "lim",
    "ks",
)
