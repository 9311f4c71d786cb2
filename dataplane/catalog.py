"""The catalog as Redis holds it: topic registry, namespace set, subscriptions' groups.

The admin service projects its committed writes here before it answers; the workers
reconcile the same state from the database, periodically and on change events.  Both write
through ``CatalogProjection``, so a subscription is created and dropped the same way whoever
does it.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any, NamedTuple

import orjson
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from dataplane.batches import in_batches
from dataplane.scripts import Scripts
from sluice.protocol import keys
from sluice.protocol.frames import partitions_of, wake_subscription
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import SUBSCRIBE, UNSUBSCRIBE

# How long an admin delete's mark keeps the workers from recording the subscription's consumer
# groups as a client's: far longer than the delete takes (its row, then its groups).
DROP_MARK_SECONDS = 60.0


def drop_mark(topic: str, subscription: str) -> str:
    """The field of ``keys.ADMIN_DROPS`` for a subscription (``topic`` its full name)."""
    return f"{topic}#{subscription}"


def _fresh_since_ms(now: float | None) -> float:
    """The time (ms) from which a mark is still in force."""
    return ((time.time() if now is None else now) - DROP_MARK_SECONDS) * 1000


async def drop_marks(redis: Redis, fields: list[str], now: float | None = None) -> dict[str, int]:
    """The marks (ms) of those of ``fields`` (``drop_mark``) that the admin API deleted in the
    last ``DROP_MARK_SECONDS``."""
    if not fields:
        return {}
    since_ms = _fresh_since_ms(now)
    marks = await redis.hmget(keys.ADMIN_DROPS, fields)
    return {f: int(at) for f, at in zip(fields, marks, strict=True) if at and int(at) > since_ms}


async def marked_dropped(redis: Redis, fields: list[str], now: float | None = None) -> set[str]:
    """Those of ``fields`` (``drop_mark``) that the admin API deleted in the last
    ``DROP_MARK_SECONDS``."""
    return set(await drop_marks(redis, fields, now))


class Recorded(NamedTuple):
    """A subscription as the database holds it: its topic, the topic's partitions, its name,
    and when its row was made (ms since the epoch)."""

    topic: TopicName
    partitions: int
    name: str
    created_ms: int

    def deleted_by(self, mark_ms: int | None) -> bool:
        """Whether a delete mark is this row's: one set before the row was made is an earlier
        subscription's of the same name (deleted, then made again)."""
        return mark_ms is not None and mark_ms >= self.created_ms


async def forget_old_drop_marks(redis: Redis, now: float | None = None) -> None:
    """Delete the marks older than ``DROP_MARK_SECONDS``."""
    since_ms = _fresh_since_ms(now)
    marks = await redis.hgetall(keys.ADMIN_DROPS)
    old = [field for field, at in marks.items() if int(at) <= since_ms]
    if old:
        await redis.hdel(keys.ADMIN_DROPS, *old)


def topic_record(partitions: int) -> bytes:
    """A topic's entry in the registry, as clients read it."""
    return orjson.dumps({"partitions": partitions})


async def subscription_names(redis: Redis, topic: TopicName, partitions: int) -> set[str]:
    """Subscriptions present in Redis on any partition of ``topic``."""
    return (await subscriptions_by_topic(redis, {topic: partitions}))[topic.full]


async def subscriptions_by_topic(
    redis: Redis, topics: Mapping[TopicName, int]
) -> dict[str, set[str]]:
    """Subscriptions present in Redis on any partition, per topic (full name -> names), read
    for all the topics in one pipelined pass."""
    every = [(t.full, p) for t, partitions in topics.items() for p in partitions_of(t, partitions)]
    members = await in_batches(
        redis, [p for _, p in every], lambda pipe, p: pipe.smembers(keys.subs(p))
    )
    found: dict[str, set[str]] = {t.full: set() for t in topics}
    for (name, _partition), names in zip(every, members, strict=True):
        found[name].update(s.decode() if isinstance(s, bytes) else s for s in names)
    return found


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
        """Publish these topics and exactly these namespaces, in one transaction."""
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
        await self.ensure_subscriptions([(topic, partitions, name)])

    async def ensure_subscriptions(self, wanted: Iterable[tuple[TopicName, int, str]]) -> None:
        """``ensure_subscription`` for each (topic, partitions, name), every partition of
        them in bounded pipelined batches: a batch of catalog events that records thousands
        of subscriptions costs a few round trips, not one (and one loop turn) each."""
        now_ms = int(time.time() * 1000)
        # A plain EVALSHA: a script object would have every batch's pipeline check first
        # that Redis holds the script (``in_batches`` loads it on NOSCRIPT instead).
        sha = SUBSCRIBE.sha

        async def queue(pipe: Pipeline, pair: tuple[TopicName, str]) -> None:
            partition, name = pair
            script_keys, args = SUBSCRIBE.call(
                partition, name, "", "", "latest", now_ms, "{}", self.consumer_timeout_ms
            )
            queued = pipe.evalsha(sha, len(script_keys), *script_keys, *args)
            if inspect.isawaitable(queued) and queued is not pipe:
                await queued  # an asyncio cluster pipeline queues script calls so
            # The owning worker starts dispatching (and reporting) it now, not at its next
            # full pass: a consumer's subscribe sends the same wake-up.
            pipe.publish(keys.WAKE_CHANNEL, wake_subscription(partition.full, name))

        pairs = [
            (partition, name)
            for topic, partitions, name in wanted
            for partition in partitions_of(topic, partitions)
        ]
        if pairs:
            await in_batches(self.redis, pairs, queue)

    async def ensure_recorded_subscriptions(self, wanted: Iterable[Recorded]) -> None:
        """``ensure_subscriptions`` for subscriptions a worker found in the database, but not
        one the admin API is deleting: a fresh delete mark skips it (a client or the admin
        API that makes it again makes its groups itself), and one whose mark appears while
        its groups are being made has them dropped again (the delete read the row before,
        dropped the groups before this made them: without this the subscription would come
        back in Redis without its row).  A mark older than the row is an earlier
        subscription's of that name: a subscription deleted and made again over the admin
        API gets its groups here even when neither call reached Redis."""
        recorded = {drop_mark(sub.topic.full, sub.name): sub for sub in wanted}
        marks = await drop_marks(self.redis, list(recorded))
        kept = {f: sub for f, sub in recorded.items() if not sub.deleted_by(marks.get(f))}
        await self.ensure_subscriptions([sub[:3] for sub in kept.values()])
        since = await drop_marks(self.redis, list(kept))
        undone = [
            (partition, sub.name)
            for field, sub in kept.items()
            if sub.deleted_by(since.get(field))
            for partition in partitions_of(sub.topic, sub.partitions)
        ]
        if undone:
            await self.drop_subscriptions(undone)

    async def mark_dropped(self, topic: TopicName, name: str) -> None:
        """Before an admin delete of a subscription commits, mark it deleted, so that no
        worker records its consumer groups, seen before they are dropped, as a client's
        subscription."""
        await self.redis.hset(
            keys.ADMIN_DROPS, drop_mark(topic.full, name), int(time.time() * 1000)
        )

    async def drop_subscription(self, topic: TopicName, partitions: int, name: str) -> None:
        """Delete a subscription from every partition (administrative delete)."""
        await self.drop_subscriptions([(p, name) for p in partitions_of(topic, partitions)])

    async def drop_subscriptions(self, pairs: list[tuple[TopicName, str]]) -> None:
        """Delete each (partition, subscription) pair, in bounded pipelined batches."""
        now_ms = int(time.time() * 1000)
        script = self.scripts[UNSUBSCRIBE.name]

        def queue(pipe: Pipeline, pair: tuple[TopicName, str]) -> Awaitable[Any]:
            script_keys, args = UNSUBSCRIBE.call(pair[0], pair[1], "", now_ms, 0)
            return script(keys=script_keys, args=args, client=pipe)

        await in_batches(self.redis, pairs, queue)

    async def drop_topic_data(self, topic: TopicName, partitions: int) -> None:
        """Delete every Redis key of a deleted topic and its registry record."""
        every = partitions_of(topic, max(partitions, 0))
        subs = await in_batches(self.redis, every, lambda pipe, p: pipe.smembers(keys.subs(p)))
        await self.drop_subscriptions(
            [(p, s.decode()) for p, names in zip(every, subs, strict=True) for s in names]
        )

        def queue(pipe: Pipeline, partition: TopicName) -> Any:
            return pipe.delete(
                # Its stream and each priority level's that may exist (a missing key is free).
                *keys.level_logs(partition, range(10)),
                keys.levels(partition),
                keys.partition_stats(partition),
                keys.idle(partition),
                keys.subs(partition),
                keys.doc(partition),
                keys.quota(partition),
                keys.limiter(partition),
                keys.limits(partition),
                keys.producers(partition),
                keys.publish_window(partition),
                *keys.eviction_index(partition),
            )

        await in_batches(self.redis, every, queue)
        await self.redis.hdel(keys.TOPICS, topic.full)
