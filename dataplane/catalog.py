"""The catalog as Redis holds it: topic registry, namespace set, subscriptions' groups.

The admin service projects its committed writes here before it answers; the workers
reconcile the same state from the database, periodically and on change events.  Both write
through ``CatalogProjection``, so a subscription is created and dropped the same way whoever
does it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

import orjson
from redis.asyncio import Redis

from dataplane.scripts import Scripts
from sluice.protocol import keys
from sluice.protocol.frames import partitions_of, subscribe_call, unsubscribe_call
from sluice.protocol.names import TopicName


def topic_record(partitions: int) -> bytes:
    """A topic's entry in the registry, as clients read it."""
    return orjson.dumps({"partitions": partitions})


class CatalogProjection:
    """Writes topics, namespaces and subscriptions into the data plane."""

    def __init__(self, redis: Redis, scripts: Scripts, consumer_timeout_ms: int) -> None:
        self.redis = redis
        self.scripts = scripts
        self.consumer_timeout_ms = consumer_timeout_ms

    # --- topics and namespaces ------------------------------------------------------------

    async def register_topic(self, topic: TopicName, partitions: int) -> None:
        """Publish a topic's partition count to clients."""
        await self.redis.hset(keys.TOPICS, topic.full, topic_record(partitions))

    async def register_topics(self, partitions: Mapping[str, int]) -> None:
        """Publish several topics (full name -> partitions) at once."""
        if partitions:
            mapping = {name: topic_record(count) for name, count in partitions.items()}
            await self.redis.hset(keys.TOPICS, mapping=mapping)

    async def unregister_topic(self, topic: TopicName) -> None:
        """Stop clients from using a topic (its data is dropped separately)."""
        await self.redis.hdel(keys.TOPICS, topic.full)

    async def register_namespace(self, namespace: str) -> None:
        """Let clients auto-create topics in a namespace (``tenant/ns``)."""
        await self.redis.sadd(keys.NAMESPACES, namespace)

    async def unregister_namespaces(self, namespaces: Iterable[str]) -> None:
        """Stop clients from using namespaces."""
        namespaces = list(namespaces)
        if namespaces:
            await self.redis.srem(keys.NAMESPACES, *namespaces)

    async def replace_catalog(self, topics: Mapping[str, int], namespaces: Iterable[str]) -> None:
        """Publish every topic and exactly these namespaces, in one transaction."""
        namespaces = list(namespaces)
        pipe = self.redis.pipeline(transaction=True)
        for name, count in topics.items():
            pipe.hset(keys.TOPICS, name, topic_record(count))
        pipe.delete(keys.NAMESPACES)
        if namespaces:
            pipe.sadd(keys.NAMESPACES, *namespaces)
        await pipe.execute()

    # --- subscriptions --------------------------------------------------------------------

    async def ensure_subscription(self, topic: TopicName, partitions: int, name: str) -> None:
        """Create a subscription's consumer group on every partition (at the latest entry)."""
        now_ms = int(time.time() * 1000)
        for partition in partitions_of(topic, partitions):
            script_keys, args = subscribe_call(
                partition, name, "", "", "latest", now_ms, "{}", self.consumer_timeout_ms
            )
            await self.scripts["subscribe"](keys=script_keys, args=args)

    async def drop_subscription(self, topic: TopicName, partitions: int, name: str) -> None:
        """Delete a subscription from every partition (administrative delete)."""
        now_ms = int(time.time() * 1000)
        for partition in partitions_of(topic, partitions):
            script_keys, args = unsubscribe_call(partition, name, "", now_ms, 0)
            await self.scripts["unsubscribe"](keys=script_keys, args=args)

    async def drop_topic_data(self, topic: TopicName, partitions: int) -> None:
        """Delete every Redis key of a deleted topic and its registry record."""
        redis = self.redis
        for partition in partitions_of(topic, max(partitions, 0)):
            for sub in await redis.smembers(keys.subs(partition)):
                await self.drop_subscription(partition, 0, sub.decode())
            await redis.delete(
                keys.log(partition),
                keys.partition_stats(partition),
                keys.idle(partition),
                keys.subs(partition),
                keys.doc(partition),
                keys.quota(partition),
                keys.limiter(partition),
                keys.limits(partition),
                keys.producers(partition),
            )
        await redis.hdel(keys.TOPICS, topic.full)
