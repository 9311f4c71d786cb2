"""What the admin service reads from and projects into the data plane (Redis).

After a commit, and before it answers, the admin service writes namespaces, topic metadata
and consumer groups, so a client that connects right after the admin call sees them (workers
reconcile the same state from the database, so a failure here only delays it).  Stats come
from the documents the owning workers publish every second; for a partition no worker has
published yet, a document is assembled from the raw counters.
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

        Counters and rates come from the owning worker's document (at most a second old);
        backlog and unacknowledged entries are read from Redis now, so they reflect every
        produce and acknowledgement that completed before the request."""
        raws = await get_many(self.redis, [keys.doc(p) for p in partitions])
        read = list(zip(partitions, raws, strict=True))
        docs = {p.full: _load_document(raw) for p, raw in read if raw is not None}
        docs.update(await self._assemble([p for p, raw in read if raw is None]))
        backlogs = await read_backlogs(self.redis, self.scripts, partitions)
        return {p.full: _with_backlog(docs[p.full], backlogs.get(p.full, {})) for p in partitions}

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


def _with_backlog(doc: dict[str, Any], backlogs: dict[str, Backlog]) -> dict[str, Any]:
    """``doc`` with every subscription's backlog as Redis holds it now (a subscription the
    document does not know yet is added)."""
    subscriptions = doc.setdefault("subscriptions", {})
    average = float(doc.get("averageMsgSize") or 0.0)
    for name, backlog in backlogs.items():
        sub = subscriptions.get(name)
        if sub is None:
            sub = subscriptions[name] = _subscription_document()
        sub["msgBacklog"] = sub["msgBacklogNoDelayed"] = backlog.entries
        sub["unackedMessages"] = backlog.pending
        sub["backlogSize"] = int(backlog.entries * average)
    doc["backlogSize"] = sum(s.get("backlogSize", 0) for s in subscriptions.values())
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
