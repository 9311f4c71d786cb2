"""What the admin service reads from and projects into the data plane (Redis).

After a commit, and before it answers, the admin service writes namespaces, topic metadata
and consumer groups, so a client that connects right after the admin call sees them (workers
reconcile the same state from the database, so a failure here only delays it).  Stats come
from the documents the owning workers publish every second; for a partition no worker has
published yet, a document is assembled from the raw counters.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from redis.asyncio import Redis

from dataplane.catalog import CatalogProjection
from dataplane.scripts import register_scripts
from models.errors import PreconditionFailed
from sluice.protocol import keys
from sluice.protocol.frames import partitions_of
from sluice.protocol.names import TopicName


class DataPlane(CatalogProjection):
    """Redis access of the admin service: the catalog projection the workers share
    (``dataplane.catalog``), and what only the admin service reads."""

    def __init__(self, redis: Redis, consumer_timeout_ms: int) -> None:
        super().__init__(redis, register_scripts(redis), consumer_timeout_ms)

    async def require_no_consumers(self, topic: TopicName, partitions: int, name: str) -> None:
        """412 while a consumer is connected to the subscription on any partition."""
        cutoff = int(time.time() * 1000) - self.consumer_timeout_ms
        for partition in partitions_of(topic, partitions):
            alive = keys.sub_key(partition, name, "alive")
            if await self.redis.zcount(alive, cutoff, "+inf"):
                raise PreconditionFailed("Subscription has active connected consumers")

    # --- stats ----------------------------------------------------------------------------

    async def partition_stats(self, partition: TopicName) -> dict[str, Any]:
        """The owning worker's stats document, or one assembled from raw counters."""
        raw = await self.redis.get(keys.doc(partition))
        if raw is not None:
            return orjson.loads(raw)
        return await self._assemble(partition)

    async def _assemble(self, partition: TopicName) -> dict[str, Any]:
        subs = sorted(s.decode() for s in await self.redis.smembers(keys.subs(partition)))
        pipe = self.redis.pipeline(transaction=False)
        pipe.hgetall(keys.partition_stats(partition))
        pipe.xinfo_groups(keys.log(partition))
        for name in subs:
            pipe.hgetall(keys.sub_key(partition, name, "stats"))
            pipe.hget(keys.sub_key(partition, name, "meta"), "type")
        replies = await pipe.execute(raise_on_error=False)
        counters = replies[0] if isinstance(replies[0], dict) else {}
        groups = replies[1] if isinstance(replies[1], list) else []
        backlog = {
            _text(g["name"]): int(g.get("lag") or 0) + int(g.get("pending") or 0) for g in groups
        }
        unacked = {_text(g["name"]): int(g.get("pending") or 0) for g in groups}
        msg_in = int(counters.get(b"msg_in", 0))
        bytes_in = int(counters.get(b"bytes_in", 0))
        avg = bytes_in / msg_in if msg_in else 0.0
        subscriptions = {}
        for i, name in enumerate(subs):
            stats, sub_type = replies[2 + 2 * i], replies[3 + 2 * i]
            stats = stats if isinstance(stats, dict) else {}
            subscriptions[name] = {
                "msgRateOut": 0.0,
                "msgThroughputOut": 0.0,
                "bytesOutCounter": int(stats.get(b"bytes_out", 0)),
                "msgOutCounter": int(stats.get(b"msg_out", 0)),
                "msgRateRedeliver": 0.0,
                "msgBacklog": backlog.get(name, 0),
                "msgBacklogNoDelayed": backlog.get(name, 0),
                "backlogSize": int(backlog.get(name, 0) * avg),
                "unackedMessages": unacked.get(name, 0),
                "msgAckCounter": int(stats.get(b"acked", 0)),
                "totalMsgExpired": int(stats.get(b"expired", 0)),
                "type": _text(sub_type) if sub_type else "Shared",
                "isDurable": True,
                "blockedSubscriptionOnUnackedMsgs": False,
                "consumers": [],
                **{name: 0 for name in THROTTLED_COUNTERS},
            }
        return {
            "msgRateIn": 0.0,
            "msgThroughputIn": 0.0,
            "msgRateOut": 0.0,
            "msgThroughputOut": 0.0,
            "bytesInCounter": bytes_in,
            "msgInCounter": msg_in,
            "bytesOutCounter": sum(s["bytesOutCounter"] for s in subscriptions.values()),
            "msgOutCounter": sum(s["msgOutCounter"] for s in subscriptions.values()),
            "averageMsgSize": avg,
            "backlogSize": sum(s["backlogSize"] for s in subscriptions.values()),
            "msgExpiredCounter": sum(s["totalMsgExpired"] for s in subscriptions.values()),
            "publishers": [],
            "subscriptions": subscriptions,
            "replication": {},
            "owner": None,
            "updatedAt": int(time.time() * 1000),
        }


async def live_workers(redis: Redis) -> list[dict[str, Any]]:
    """Workers whose heartbeat has not expired (by Redis time), with their registration."""
    seconds, micros = await redis.time()
    now_ms = seconds * 1000 + micros // 1000
    ids = sorted(_text(w) for w in await redis.zrangebyscore(keys.WORKERS, now_ms, "+inf"))
    async with redis.pipeline(transaction=False) as pipe:
        for worker_id in ids:
            pipe.hgetall(keys.worker_info(worker_id))
        raw_infos = await pipe.execute()
    workers = []
    for worker_id, raw in zip(ids, raw_infos, strict=True):
        info = {_text(k): _text(v) for k, v in raw.items()}
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
    """The owner of each partition: the worker holding its lease, and how to reach it."""
    async with redis.pipeline(transaction=False) as pipe:
        for partition in partitions:
            pipe.get(keys.lease(partition))
        tokens = await pipe.execute()
    infos: dict[str, dict[str, str]] = {}
    answer = {}
    for partition, token in zip(partitions, tokens, strict=True):
        if token is None:
            answer[partition.full] = {"owner": None, "leaseToken": None}
            continue
        token = _text(token)
        owner = token.rpartition(":")[0]
        if owner not in infos:
            raw = await redis.hgetall(keys.worker_info(owner))
            infos[owner] = {_text(k): _text(v) for k, v in raw.items()}
        info = infos[owner]
        answer[partition.full] = {
            "brokerUrl": f"sluice://{owner}",
            "httpUrl": info.get("httpUrl", ""),
            "owner": owner,
            "leaseToken": token,
        }
    return answer


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


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
)
THROTTLED_COUNTERS = tuple(
    f"dispatchThrottled{dim}EventsBy{level}Limit"
    for level in ("Subscription", "Topic", "Broker")
    for dim in ("Msg", "Bytes")
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


def aggregate(docs: dict[str, dict[str, Any]], per_partition: bool) -> dict[str, Any]:
    """Pulsar's ``PartitionedTopicStats``: sums over partitions, optionally each partition."""
    total: dict[str, Any] = {name: 0 for name in SUMMED_TOPIC}
    subscriptions: dict[str, dict[str, Any]] = {}
    for doc in docs.values():
        for name in SUMMED_TOPIC:
            total[name] += doc.get(name, 0)
        for sub_name, sub in doc.get("subscriptions", {}).items():
            merged = subscriptions.setdefault(
                sub_name,
                {**{k: 0 for k in SUMMED_SUBSCRIPTION}, "type": sub.get("type"), "consumers": []},
            )
            for name in SUMMED_SUBSCRIPTION:
                merged[name] += sub.get(name, 0)
            merged["consumers"].extend(sub.get("consumers", []))
    total["averageMsgSize"] = (
        total["bytesInCounter"] / total["msgInCounter"] if total["msgInCounter"] else 0.0
    )
    total["publishers"] = []
    total["subscriptions"] = subscriptions
    total["replication"] = {}
    total["metadata"] = {"partitions": len(docs)}
    total["partitions"] = docs if per_partition else {}
    return total


async def registry_topics(redis: Redis, namespace: str) -> dict[str, int]:
    """Topics of ``tenant/namespace`` in the registry (includes ones clients auto-created)."""
    prefix = f"persistent://{namespace}/"
    found = {}
    async for name, record in redis.hscan_iter(keys.TOPICS, match=f"{prefix}*"):
        found[_text(name)] = int(orjson.loads(record)["partitions"])
    return found


async def subscription_names(redis: Redis, topic: TopicName, partitions: int) -> set[str]:
    """Subscriptions present in Redis on any partition of ``topic``."""
    names: set[str] = set()
    for partition in partitions_of(topic, partitions):
        names |= {_text(s) for s in await redis.smembers(keys.subs(partition))}
    return names
