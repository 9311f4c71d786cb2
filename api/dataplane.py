"""What the admin service reads from and projects into the data plane (Redis).

After a commit, and before it answers, the admin service writes namespaces, topic metadata
and consumer groups, so a client that connects right after the admin call sees them (workers
reconcile the same state from the database, so a failure here only delays it).  Stats come
from the documents the owning workers publish every second; for a partition no worker has
published yet, a document is assembled from the raw counters; counters and backlogs are read
live from Redis at the request in either case.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Set as AbstractSet
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from dataplane.backlog import Backlog, read_backlogs
from dataplane.batches import get_many, in_batches
from dataplane.catalog import CatalogProjection
from dataplane.scripts import register_scripts
from dataplane.stats_document import (
    THROTTLED_COUNTERS,
    counter,
    subscription_document,
    topic_document,
)
from models.errors import PreconditionFailed
from sluice.protocol import keys
from sluice.protocol.frames import lease_holder, partitions_of
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import STATS_LIVE
from sluice.protocol.text import as_text


class DataPlane(CatalogProjection):
    """Redis access of the admin service: the catalog projection the workers share
    (``dataplane.catalog``), and what only the admin service reads."""

    def __init__(self, redis: Redis, consumer_timeout_ms: int) -> None:
        super().__init__(redis, register_scripts(redis), consumer_timeout_ms)

    async def require_no_consumers(self, topic: TopicName, partitions: int, name: str) -> None:
        """412 while a consumer is connected to the subscription on any partition."""
        cutoff = int(time.time() * 1000) - self.consumer_timeout_ms
        alive = await in_batches(
            self.redis,
            partitions_of(topic, partitions),
            lambda pipe, p: pipe.zcount(keys.sub_key(p, name, "alive"), cutoff, "+inf"),
        )
        if any(alive):
            raise PreconditionFailed("Subscription has active connected consumers")

    # --- stats ----------------------------------------------------------------------------

    async def partition_stats(self, partition: TopicName) -> dict[str, Any]:
        """The owning worker's stats document, or one assembled from raw counters."""
        return (await self.partitions_stats([partition]))[partition.full]

    async def partitions_stats(self, partitions: list[TopicName]) -> dict[str, dict[str, Any]]:
        """``partition_stats`` of many partitions, read in bounded batches.

        Every counter and the backlog are read from Redis now, in one atomic reading per
        partition (``stats_live.lua``: the partition's counters, its consumer groups and its
        subscriptions' counters), so they reflect every produce, dispatch and
        acknowledgement that completed before the request and agree with each other; rates,
        consumers, throttling events and the backlog quota state come from the owning
        worker's document (at most a second old).  Two pipelined round trips per batch of
        partitions (their documents and subscription sets, then the readings)."""

        def documents(pipe: Pipeline, partition: TopicName) -> None:
            pipe.get(keys.doc(partition))
            pipe.smembers(keys.subs(partition))

        first = await in_batches(self.redis, partitions, documents, raise_on_error=False)
        raws, members = first[0::2], first[1::2]
        docs = {p.full: _load_document(raw) for p, raw in zip(partitions, raws, strict=True) if raw}
        docs.update(
            await self._assemble([p for p, raw in zip(partitions, raws, strict=True) if not raw])
        )
        names = {
            p.full: sorted(
                {as_text(m) for m in (found if isinstance(found, set) else ())}
                | set(docs[p.full].get("subscriptions", {}))
            )
            for p, found in zip(partitions, members, strict=True)
        }
        # A plain EVALSHA: a script object would have the pipeline check first that Redis
        # holds the script, a round trip more (``in_batches`` loads it on NOSCRIPT instead).
        sha = STATS_LIVE.sha

        def reading(pipe: Pipeline, partition: TopicName) -> Any:
            script_keys, args = STATS_LIVE.call(partition, names[partition.full])
            return pipe.evalsha(sha, len(script_keys), *script_keys, *args)

        readings = await in_batches(self.redis, partitions, reading, raise_on_error=False)
        readings = [r if isinstance(r, list) else [[], []] for r in readings]
        groups = [[_fields(g) for g in reading[1]] for reading in readings]
        backlogs = await read_backlogs(self.redis, self.scripts, partitions, groups_replies=groups)
        return {
            p.full: _live(
                docs[p.full],
                reading[0],
                dict(zip(names[p.full], reading[2:], strict=False)),
                backlogs.get(p.full, {}),
            )
            for p, reading in zip(partitions, readings, strict=True)
        }

    async def _assemble(self, partitions: list[TopicName]) -> dict[str, dict[str, Any]]:
        """Stats documents built from raw counters, for partitions no worker published."""

        def counters(pipe: Pipeline, partition: TopicName) -> None:
            pipe.hgetall(keys.partition_stats(partition))
            pipe.smembers(keys.subs(partition))

        raw = await in_batches(self.redis, partitions, counters, raise_on_error=False)
        subs = {
            p.full: sorted(as_text(s) for s in members) if isinstance(members, set) else []
            for p, members in zip(partitions, raw[1::2], strict=True)
        }
        pairs = [(p, name) for p in partitions for name in subs[p.full]]

        def per_subscription(pipe: Pipeline, pair: tuple[TopicName, str]) -> None:
            pipe.hgetall(keys.sub_key(pair[0], pair[1], "stats"))
            pipe.hget(keys.sub_key(pair[0], pair[1], "meta"), "type")

        replies = iter(await in_batches(self.redis, pairs, per_subscription, raise_on_error=False))
        return {
            p.full: _document(raw[2 * i], subs[p.full], replies) for i, p in enumerate(partitions)
        }


def _load_document(raw: bytes) -> dict[str, Any]:
    """A worker's stats document: JSON, or zlib-compressed JSON (a dormant partition's)."""
    return orjson.loads(raw if raw[:1] == b"{" else zlib.decompress(raw))


def _subscription_document(stats: Any = None, sub_type: Any = None) -> dict[str, Any]:
    """A subscription's stats from its raw counters (backlog filled in by ``_with_backlog``)."""
    return subscription_document(
        stats if isinstance(stats, dict) else {}, as_text(sub_type) if sub_type else "Shared"
    )


def _document(counters: Any, subs: list[str], replies: Any) -> dict[str, Any]:
    """One partition's document; ``replies`` yields each subscription's stats and type.
    No worker runs the partition: no rates, no stats interval in progress."""
    counters = counters if isinstance(counters, dict) else {}
    return topic_document(
        counter(counters, b"msg_in"),
        counter(counters, b"bytes_in"),
        {name: _subscription_document(next(replies), next(replies)) for name in subs},
        publish_limited_total=counter(counters, b"publish_throttled"),
    )


def _pairs(flat: Any) -> dict[bytes, Any]:
    """A flat ``HGETALL`` reply (as a script returns it) as a dict."""
    items = iter(flat if isinstance(flat, list) else ())
    return dict(zip(items, items, strict=True))


def _fields(group: Any) -> dict[str, Any]:
    """One ``XINFO GROUPS`` entry of a script's reply as ``read_backlogs`` takes it."""
    return {as_text(k): v for k, v in _pairs(group).items()}


# Subscription counters of a document read live, with the stats hash field each comes from.
_LIVE_SUBSCRIPTION = (
    ("msgOutCounter", b"msg_out"),
    ("bytesOutCounter", b"bytes_out"),
    ("msgAckCounter", b"acked"),
    ("totalMsgExpired", b"expired"),
    ("msgEvictedCounter", b"evicted"),
)


def _live(
    doc: dict[str, Any],
    partition_counters: Any,
    subscription_counters: dict[str, Any],
    backlogs: dict[str, Backlog],
) -> dict[str, Any]:
    """``doc`` with every counter and backlog as one reading of Redis found them now: the
    partition's counters (``partition_counters``, a flat ``HGETALL``), each subscription's
    (``subscription_counters``: name -> flat ``HGETALL``) and backlog (a subscription the
    document does not know yet is added); rates and the rest stay the document's."""
    counters = _pairs(partition_counters)
    msg_in, bytes_in = counter(counters, b"msg_in"), counter(counters, b"bytes_in")
    average = bytes_in / msg_in if msg_in else 0.0
    doc["msgInCounter"], doc["bytesInCounter"] = msg_in, bytes_in
    doc["averageMsgSize"] = average
    doc["totalPublishRateLimitedCounter"] = counter(counters, b"publish_throttled")
    if "publishRejectedByBacklogQuota" in doc:
        doc["publishRejectedByBacklogQuota"] = counter(counters, b"quota_rejected")
    subscriptions = doc.setdefault("subscriptions", {})
    for name in backlogs.keys() - subscriptions.keys():
        subscriptions[name] = _subscription_document()
    for name, sub in subscriptions.items():
        stats = _pairs(subscription_counters.get(name))
        delayed = int(stats.pop(b"msg_delayed", 0))  # stats_live.lua's, not a stored counter
        # (A subscription with neither counters nor a group is being deleted: as it was.)
        if stats or name in backlogs:
            for field, raw in _LIVE_SUBSCRIPTION:
                if field in sub or field == "totalMsgExpired":
                    sub[field] = counter(stats, raw)
            sub["msgDelayed"] = delayed
        backlog = backlogs.get(name)
        if backlog is not None:
            sub["msgBacklog"] = backlog.entries
            sub["msgBacklogNoDelayed"] = max(backlog.entries - sub.get("msgDelayed", 0), 0)
            sub["unackedMessages"] = backlog.pending
            sub["backlogSize"] = int(backlog.entries * average)
    subs = subscriptions.values()
    doc["msgOutCounter"] = sum(s.get("msgOutCounter", 0) for s in subs)
    doc["bytesOutCounter"] = sum(s.get("bytesOutCounter", 0) for s in subs)
    doc["msgExpiredCounter"] = sum(s.get("totalMsgExpired", 0) for s in subs)
    doc["backlogSize"] = sum(s.get("backlogSize", 0) for s in subs)
    return doc


async def live_workers(redis: Redis) -> list[dict[str, Any]]:
    """Workers whose heartbeat has not expired (by Redis time), with their registration."""
    seconds, micros = await redis.time()
    now_ms = seconds * 1000 + micros // 1000
    ids = sorted(as_text(w) for w in await redis.zrangebyscore(keys.WORKERS, now_ms, "+inf"))
    async with redis.pipeline(transaction=False) as pipe:
        for worker_id in ids:
            pipe.hgetall(keys.worker_info(worker_id))
        raw_infos = await pipe.execute()
    workers = []
    for worker_id, raw in zip(ids, raw_infos, strict=True):
        info = {as_text(k): as_text(v) for k, v in raw.items()}
        workers.append(
            {
                "id": worker_id,
                "host": info.get("host", ""),
                "httpUrl": info.get("httpUrl", ""),
                "startedAt": int(info["startedAt"]) if info.get("startedAt") else None,
                "ownedPartitions": int(info.get("partitions", 0)),
            }
        )
    return workers


async def lookup(redis: Redis, partitions: list[TopicName]) -> dict[str, dict[str, Any]]:
    """The owner of each partition: the live worker holding its lease, and how to reach it
    (a lease has no TTL: one a dead worker left until a live one takes it over is no
    owner)."""
    tokens = await get_many(redis, [keys.lease(p) for p in partitions])
    seconds, micros = await redis.time()
    now_ms = seconds * 1000 + micros // 1000
    live = {as_text(w) for w in await redis.zrangebyscore(keys.WORKERS, now_ms, "+inf")}
    infos: dict[str, dict[str, str]] = {}
    answer = {}
    for partition, token in zip(partitions, tokens, strict=True):
        owner = lease_holder(as_text(token)) if token is not None else None
        if owner is None or owner not in live:
            answer[partition.full] = {"owner": None, "leaseToken": None}
            continue
        token = as_text(token)
        if owner not in infos:
            raw = await redis.hgetall(keys.worker_info(owner))
            infos[owner] = {as_text(k): as_text(v) for k, v in raw.items()}
        info = infos[owner]
        answer[partition.full] = {
            "brokerUrl": f"sluice://{owner}",
            "httpUrl": info.get("httpUrl", ""),
            "owner": owner,
            "leaseToken": token,
        }
    return answer


SUMMED_TOPIC = (
    "msgRateIn",
    "msgThroughputIn",
    "msgRateOut",
    "msgThroughputOut",
    "bytesInCounter",
    "msgInCounter",
    "bytesOutCounter",
    "msgOutCounter",
    "backlogSize",
    "msgExpiredCounter",
    "publishRateLimitedTimes",
    "totalPublishRateLimitedCounter",
)
SUMMED_SUBSCRIPTION = (
    "msgRateOut",
    "msgThroughputOut",
    "bytesOutCounter",
    "msgOutCounter",
    "msgRateRedeliver",
    "msgBacklog",
    "msgBacklogNoDelayed",
    "msgDelayed",
    "backlogSize",
    "unackedMessages",
    "msgAckCounter",
    "totalMsgExpired",
    *THROTTLED_COUNTERS,
)


def _merge_levels(into: dict[str, dict[str, Any]], levels: dict[str, dict[str, Any]]) -> None:
    """Sum one partition's ``priorityLevels`` into the topic's (highest priority first)."""
    for level, fields in levels.items():
        merged = into.setdefault(level, dict.fromkeys(fields, 0))
        for name, value in fields.items():
            merged[name] = merged.get(name, 0) + value
    ordered = sorted(into.items(), key=lambda item: -int(item[0]))
    into.clear()
    into.update(ordered)


def aggregate(docs: dict[str, dict[str, Any]], per_partition: bool) -> dict[str, Any]:
    """Pulsar's ``PartitionedTopicStats``: sums over partitions, optionally each partition."""
    total: dict[str, Any] = {name: 0 for name in SUMMED_TOPIC}
    subscriptions: dict[str, dict[str, Any]] = {}
    for doc in docs.values():
        get = doc.get
        for name in SUMMED_TOPIC:
            total[name] += get(name, 0)
        for sub_name, sub in get("subscriptions", {}).items():
            merged = subscriptions.get(sub_name)
            if merged is None:  # the first partition's type stands for the topic's
                merged = subscriptions[sub_name] = {
                    **dict.fromkeys(SUMMED_SUBSCRIPTION, 0),
                    "type": sub.get("type"),
                    "consumers": [],
                }
            for name in SUMMED_SUBSCRIPTION:
                merged[name] += sub.get(name, 0)
            merged["consumers"].extend(sub.get("consumers", ()))
            if "priorityLevels" in sub:
                _merge_levels(merged.setdefault("priorityLevels", {}), sub["priorityLevels"])
    total["averageMsgSize"] = (
        total["bytesInCounter"] / total["msgInCounter"] if total["msgInCounter"] else 0.0
    )
    total["publishers"] = []
    total["subscriptions"] = subscriptions
    total["replication"] = {}
    total["metadata"] = {"partitions": len(docs)}
    total["partitions"] = docs if per_partition else {}
    return total


REGISTRY_SCAN = 5_000  # registry entries Redis looks at per HSCAN call (about a ms of work)


async def registry_topics(
    redis: Redis, namespace: str, skip: AbstractSet[str] = frozenset()
) -> dict[str, int]:
    """Topics of ``tenant/namespace`` in the registry (includes ones clients auto-created),
    except those named in ``skip``: those are set apart in bulk (set operations on the raw
    names) and their records are not decoded."""
    prefix = f"persistent://{namespace}/"
    skipped = {name.encode() for name in skip}
    found = {}
    cursor = 0
    while True:
        cursor, chunk = await redis.hscan(
            keys.TOPICS, cursor, match=f"{prefix}*", count=REGISTRY_SCAN
        )
        assert isinstance(chunk, dict)  # names with their records
        for name in chunk.keys() - skipped - skip:
            found[as_text(name)] = int(orjson.loads(chunk[name])["partitions"])
        if not cursor:
            return found
