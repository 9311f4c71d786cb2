"""The Redis key layout of the data plane, shared by clients, workers and the admin service.

Every key of one topic partition carries the hash tag ``{tenant/ns/topic-partition-N~K}``
(``{tenant/ns/topic}`` for a non-partitioned topic), so a partition's stream, its
subscriptions' state and its counters live in one Redis Cluster slot and one Lua call can
touch them all.  ``K`` (``tag``) spreads a topic's partitions over the slot space: partition
N's slot lies within 128 slots of the topic's own slot plus N times 16384 divided by the golden
ratio, so the partitions of a topic are far apart in slot order, and from 5 partitions on every
third of the slot space (every master of an evenly balanced 3-master cluster) holds at least
one of them, which plain hashing would leave to chance.  Keys::

    sl:{P}:log                     stream of entries (one per message or batch); with level
                                   streams, of the default priority's (4) only
    sl:{P}:log:{L}                 stream of the entries of priority L (0..9 but 4), once the
                                   partition uses level streams (lib/levels.lua: ids
                                   "<ms>-1L<14 digits>", so an id names its stream)
    sl:{P}:levels                  hash: level L -> last id written to sl:{P}:log:{L}, one
                                   field per level stream that exists
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
    sl:{P}:s:{S}:delayed           zset: the held entries waiting for their delivery time
                                   (entry id -> due time), until handed on: msgDelayed
    sl:{P}:s:{S}:waitp             flag: the dispatcher waits for permits
    sl:{P}:s:{S}:waitack           flag: the dispatcher waits for acks (max unacked reached)
    sl:{P}:s:{S}:stats             hash: msg_out, bytes_out, redelivered, acked, throttled_*
    sl:{P}:s:{S}:lim               hash: the subscription's SUBSCRIPTION limiter
    sl:{P}:s:{S}:q:{C}             list: consumer C's receiver queue (packed entries)
    sl:{P}:s:{S}:ks                hash: Key_Shared state (dispatch.lua): m the consumers the
                                   ring was built for, r the ring, u the ring's one owner
                                   (0 = several) with the ring's length and the consumers, so
                                   a ring of one owner is not parsed every call, j:{C} the
                                   position consumer C joined at while it is "recently joined"
    sl:{P}:lease                   fencing token <worker>:<epoch> of the partition's owner (no
                                   TTL: another worker takes it once the holder's heartbeat
                                   in the registry has lapsed)
    sl:{P}:epoch                   counter the fencing tokens are numbered from (outlives a
                                   deleted topic: one made again never repeats a token)
    sl:{P}:lim                     hash: the partition's TOPIC limiter (see dispatch.lua)
    sl:{P}:doc                     JSON stats document published by the owning worker (zlib-
                                   compressed JSON, kept, while the partition is dormant)
    sl:{P}:dormant                 set while the owning worker does not watch the partition (it
                                   was quiet): the time (ms) of its next scheduled check, or 0.
                                   Every script a client calls deletes it and then wakes the
                                   worker, so its presence means nothing happened since
    sl:{P}:quota                   "policy<TAB>reason" while the backlog quota refuses producers
    sl:{P}:limits                  hash: the partition's abuse limits, written by its owning worker
                                   (``sluice.protocol.abuse``); absent while they are the defaults
    sl:{P}:producers               zset: producer id -> last heartbeat (ms of Redis time)
    sl:{P}:pubrate                 hash: the publish rate's current window (produce.lua);
                                   expires when the window ends
    sl:{P}:pq:{L}                  zset: the entries of priority L, oldest first, while the
                                   backlog quota is lowest_priority_eviction (produce.lua)
    sl:{P}:subrate:{H}/{N}         counter: subscribe requests of consumer name N from client
                                   host H in its current subscribe-rate period; expires with
                                   the period

Cluster-wide keys (no partition) share the hash tag ``{meta}``, so that the scripts and
transactions that touch several of them stay in one Redis Cluster slot: ``sl:{meta}:topics``
(hash: base topic -> JSON with its partitions), ``sl:{meta}:namespaces`` (set of
``tenant/ns``), ``sl:{meta}:config`` (hash: broker settings clients need),
``sl:{meta}:maxtopics`` (hash: ``tenant/ns`` -> the namespace's own ``maxTopicsPerNamespace``;
the broker's is in ``sl:{meta}:config``), ``sl:{meta}:unsubscribed`` (hash:
``topic#subscription`` -> time, for subscriptions deleted by their consumers),
``sl:{meta}:dropped`` (hash: ``topic#subscription`` -> time, for subscriptions the admin API
deleted, whose consumer groups no worker records as a client's for a while), the worker
registry ``sl:{meta}:workers`` (zset: worker id -> heartbeat expiry, ms of Redis time),
``sl:{meta}:applied`` (hash: worker id -> position in the change-event stream up to which it
enforces every change) with its pub/sub channel ``sl:applied``, and the pub/sub channel
``sl:wake`` that wakes workers.  Per worker, ``sl:worker:{id}`` (hash: how to reach it) and
``sl:worker:{id}:leases`` (set of the partitions whose lease it holds) and
``sl:worker:{id}:unloaded`` (set of the partitions an unload took from it) share the worker's
own tag.  ``LEGACY`` maps the names they had before the tag to these;
``dataplane.legacy_keys`` renames them on a single server.
"""

from __future__ import annotations

import re
from binascii import crc_hqx
from collections.abc import Iterable
from functools import lru_cache

from sluice.protocol.names import TopicName

PREFIX = "sl"
META = "sl:{meta}:"
TOPICS = META + "topics"
NAMESPACES = META + "namespaces"
TOMBSTONES = META + "unsubscribed"
# Subscriptions the admin API deletes: "<topic>#<subscription>" -> when (ms since the epoch).
# A worker records no consumer group of such a subscription as a client's for a while.
ADMIN_DROPS = META + "dropped"
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


def worker_unloaded(worker_id: str) -> str:
    """Partitions whose lease the admin service released (unload) while the worker held it:
    read and cleared by the worker's next heartbeat, which then takes them again."""
    return f"sl:worker:{worker_id}:unloaded"


def group_budget(group: str) -> str:
    """A resource group's dispatch limiter (``group_budget.lua``), in the group's own slot."""
    return f"sl:{{rg:{group}}}:budget"


def group_members(group: str) -> str:
    """A resource group's members (weights, use in the current period), in the group's slot."""
    return f"sl:{{rg:{group}}}:members"


def group_publish(group_id: str) -> str:
    """A resource group's publish window (``group_publish.lua``), by the group's id."""
    return f"sl:{{rg:{group_id}}}:publish"


SLOTS = 16384
SPREAD_STRIDE = 10127  # SLOTS / golden ratio: consecutive partitions land far apart
SPREAD_WINDOW = 256  # a partition's slot is within half of this of its target


def slot_of(text: str) -> int:
    """The Redis Cluster slot of a hash tag's content."""
    return crc_hqx(text.encode(), 0) % SLOTS


def tag(partition: TopicName) -> str:
    """The hash tag of a partition (or non-partitioned topic)."""
    return _tag(partition.tenant, partition.namespace, partition.local)


# ``_tag`` tries the suffixes 0, 1, 2, ... until "body~suffix" hashes into the partition's
# window of SPREAD_WINDOW slots, about SLOTS / SPREAD_WINDOW tries.  The same first suffix is
# found without hashing each try: a CRC without final XOR is linear, so the CRC of "body~"
# continued over a suffix's digits is the CRC of those digits from 0 (``code``) XOR the CRC of
# as many zero bytes continued from the CRC of "body~" (``continued``).  The window covers the
# end of one block of 256 slots and the start of the next, and a slot's block and place in its
# block are those of ``code`` XOR those of ``continued``; so, per number of digits, the
# suffixes are indexed by their code's block: only those of the two blocks that can land in
# the window are looked at, in order.
_BLOCK = 256
_BLOCKS = SLOTS // _BLOCK
assert SPREAD_WINDOW == _BLOCK


def _suffix_index(digits: int) -> tuple[int, int, list[list[tuple[int, int]]]]:
    first = 10 ** (digits - 1) if digits > 1 else 0
    blocks: list[list[tuple[int, int]]] = [[] for _ in range(_BLOCKS)]
    for suffix in range(first, 10**digits):
        code = crc_hqx(str(suffix).encode(), 0) % SLOTS
        blocks[code // _BLOCK].append((suffix, code % _BLOCK))
    return digits, first, blocks


_SUFFIXES = [_suffix_index(digits) for digits in (1, 2, 3, 4)]


def _first_suffix(head: int, low: int) -> int | None:
    """The first suffix whose "body~suffix" lands in the SPREAD_WINDOW slots from ``low``,
    ``head`` being the CRC of "body~": what trying 0, 1, 2, ... with ``slot_of`` finds."""
    low %= SLOTS
    start_block, start_place = divmod(low, _BLOCK)
    for digits, _first, blocks in _SUFFIXES:
        continued = crc_hqx(bytes(digits), head) % SLOTS
        block, place = divmod(continued, _BLOCK)
        found = None
        # Slots from ``low`` to the end of its block.
        for suffix, code_place in blocks[start_block ^ block]:
            if code_place ^ place >= start_place:
                found = suffix
                break
        # Slots of the next block, before ``low + SPREAD_WINDOW``.
        if start_place:
            for suffix, code_place in blocks[((start_block + 1) % _BLOCKS) ^ block]:
                if found is not None and suffix > found:
                    break
                if code_place ^ place < start_place:
                    found = suffix
                    break
        if found is not None:
            return found
    return None


@lru_cache(maxsize=1 << 18)
def _tag(tenant: str, namespace: str, local: str) -> str:
    name = TopicName(tenant, namespace, local)
    body = f"{tenant}/{namespace}/{local}"
    index = name.partition_index
    if index < 0:
        return "{" + body + "}"
    base = name.base
    target = (slot_of(f"{tenant}/{namespace}/{base.local}") + index * SPREAD_STRIDE) % SLOTS
    low = target - SPREAD_WINDOW // 2
    suffix = _first_suffix(crc_hqx(f"{body}~".encode(), 0), low)
    if suffix is None:  # none of the first 10,000 (never seen): the plain search goes on
        suffix = 10_000
        while (slot_of(f"{body}~{suffix}") - low) % SLOTS >= SPREAD_WINDOW:
            suffix += 1
    return "{" + f"{body}~{suffix}" + "}"


def partition_prefix(partition: TopicName) -> str:
    """``sl:{P}:`` — every key of the partition starts with it."""
    return f"{PREFIX}:{tag(partition)}:"


def log(partition: TopicName) -> str:
    """The partition's stream."""
    return partition_prefix(partition) + "log"


# An id of a level stream: its 16-digit sequence number starts with 1, then the level.
_LEVEL_ID = re.compile(rb"^\d+-1(\d)\d{14}$")
DEFAULT_LEVEL = 4  # the priority kept in the partition's own stream


def level_log(partition: TopicName, level: int) -> str:
    """The stream of one priority level of the partition (its own stream for the default
    level, 4; ``lib/levels.lua``)."""
    base = log(partition)
    return base if level == DEFAULT_LEVEL else f"{base}:{level}"


def levels(partition: TopicName) -> str:
    """The partition's hash of level streams: level -> the last id written to its stream."""
    return partition_prefix(partition) + "levels"


def level_of(entry_id: str | bytes) -> int | None:
    """The priority level whose stream holds an entry of this id, None for the partition's
    own stream."""
    raw = entry_id.encode() if isinstance(entry_id, str) else entry_id
    found = _LEVEL_ID.match(raw)
    return int(found.group(1)) if found else None


def level_logs(partition: TopicName, levels_found: Iterable[str | bytes | int]) -> list[str]:
    """Every stream of the partition, highest level first, given the fields of its levels
    hash (``levels``)."""
    found = {int(level) for level in levels_found}
    return [
        level_log(partition, level)
        for level in range(9, -1, -1)
        if level in found or level == DEFAULT_LEVEL
    ]


def stream_of(base_log: str, entry_id: str | bytes) -> str:
    """The stream (of the partition whose stream is ``base_log``) that holds the entry."""
    level = level_of(entry_id)
    return base_log if level is None else f"{base_log}:{level}"


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


def dormant(partition: TopicName) -> str:
    """Set while the partition is dormant (see ``workers.dormancy``); clients' scripts delete it
    and wake the worker."""
    return partition_prefix(partition) + "dormant"


def quota(partition: TopicName) -> str:
    """Set by the owning worker while the partition's backlog quota refuses producers."""
    return partition_prefix(partition) + "quota"


def limits(partition: TopicName) -> str:
    """The partition's abuse limits, written by its owning worker, read by the scripts."""
    return partition_prefix(partition) + "limits"


def producers(partition: TopicName) -> str:
    """Producers registered on the partition, by last heartbeat."""
    return partition_prefix(partition) + "producers"


def eviction_index(partition: TopicName) -> list[str]:
    """The partition's lowest-priority eviction index, one zset per priority
    (``produce.lua``)."""
    return [partition_prefix(partition) + f"pq:{level}" for level in range(10)]


def publish_window(partition: TopicName) -> str:
    """The publish rate's current window on the partition (``produce.lua``)."""
    return partition_prefix(partition) + "pubrate"


def subscribe_counter(partition: TopicName, consumer_name: str, client_host: str = "") -> str:
    """Subscribe requests of one consumer name from one client host in its current period
    (``subscribe.lua``); a host has no "/", so no two (host, name) pairs share a key."""
    return f"{partition_prefix(partition)}subrate:{client_host}/{consumer_name}"


def subscriptions_prefix(partition: TopicName) -> str:
    """``sl:{P}:s:`` — every key of the partition's subscriptions starts with it."""
    return f"{partition_prefix(partition)}s:"


def sub_prefix(partition: TopicName, subscription: str) -> str:
    """``sl:{P}:s:{S}:`` — every key of one subscription on one partition starts with it."""
    return f"{subscriptions_prefix(partition)}{subscription}:"


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
    "delayed",
    "waitp",
    "waitack",
    "stats",
    "lim",
    "ks",
)
