"""Everything a worker does for one partition it owns.

A ``PartitionRunner`` holds the partition's resolved TOPIC limit (whose quota, shared by its
subscriptions, ``dispatch.lua`` keeps in Redis), one ``Dispatcher`` per subscription, the
measured publish rate (for relative limits), and the housekeeping: releasing consumers that
stopped heartbeating, expiring entries past the message TTL (``workers.flow``) and trimming
entries every subscription has acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import TYPE_CHECKING

from models import keys
from models.names import TopicName
from models.protocol import LimitArgs, release_call
from models.resolution import PublishRate, ResolvedRate
from workers.dispatcher import Dispatcher, limit_args
from workers.flow import PartitionFlow

if TYPE_CHECKING:
    from workers.worker import Worker

log = logging.getLogger(__name__)

RATE_WINDOW_SECONDS = 5.0
TRIM_EVERY_SECONDS = 10.0


class RateMeter:
    """A rate from cumulative counters sampled over time (window of a few seconds)."""

    def __init__(self) -> None:
        self.samples: deque[tuple[float, int, int]] = deque()

    def add(self, now: float, messages: int, size: int) -> None:
        """Record the counters' values at ``now``."""
        self.samples.append((now, messages, size))
        while len(self.samples) > 2 and now - self.samples[0][0] > RATE_WINDOW_SECONDS:
            self.samples.popleft()

    def rate(self) -> PublishRate:
        """Messages and bytes per second over the window."""
        if len(self.samples) < 2:
            return PublishRate()
        (t0, m0, b0), (t1, m1, b1) = self.samples[0], self.samples[-1]
        span = t1 - t0
        if span <= 0:
            return PublishRate()
        return PublishRate(max(m1 - m0, 0) / span, max(b1 - b0, 0) / span)


class PartitionRunner:
    """The dispatchers and limiters of one owned partition."""

    def __init__(self, worker: Worker, partition: TopicName, fencing_token: str = "") -> None:
        self.worker = worker
        self.partition = partition
        self.fencing_token = fencing_token
        self.topic_rate: ResolvedRate | None = None  # the TOPIC limit in force
        self.topic_args = LimitArgs()  # the same, as dispatch.lua takes it
        self.dispatchers: dict[str, Dispatcher] = {}
        self.publish = RateMeter()
        self.flow = PartitionFlow(self)
        self.msg_in = 0
        self.bytes_in = 0
        self.quota_rejected = 0  # sends refused by the backlog quota (counter)
        self._last_trim = 0.0
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """Resolve the limits and start a dispatcher per subscription.

        The limiters' periods live in Redis, so a partition that changes owner continues them
        where the previous owner left off."""
        self.apply_limits()
        await self.sync_subscriptions()

    async def stop(self) -> None:
        """Stop every dispatcher."""
        async with self._lock:
            dispatchers, self.dispatchers = list(self.dispatchers.values()), {}
        await asyncio.gather(*(d.stop() for d in dispatchers))

    def fenced(self) -> None:
        """A dispatcher found the lease gone: give the partition up."""
        self.worker.partition_lost(self.partition)

    # --- subscriptions --------------------------------------------------------------------

    async def sync_subscriptions(self) -> None:
        """Start dispatchers for new subscriptions, stop those of deleted ones."""
        names = {s.decode() for s in await self.worker.redis.smembers(keys.subs(self.partition))}
        async with self._lock:
            for name in names - set(self.dispatchers):
                self._add(name)
            gone = [self.dispatchers.pop(n) for n in set(self.dispatchers) - names]
        await asyncio.gather(*(d.stop() for d in gone))

    def _add(self, subscription: str) -> Dispatcher:
        dispatcher = Dispatcher(self, subscription)
        limits = self.worker.policy.limits(self.partition, subscription, self.publish.rate())
        assert limits.subscription is not None
        dispatcher.apply(limits.subscription)
        self.worker.catalog.note_subscription(self.partition.base.full, subscription)
        self.dispatchers[subscription] = dispatcher
        dispatcher.start()
        return dispatcher

    def wake_all(self) -> None:
        """New entries: every dispatcher looks again, but for those waiting for quota (they
        have backlog already)."""
        for dispatcher in self.dispatchers.values():
            if not dispatcher.waiting_for_quota:
                dispatcher.wake.set()

    async def wake_subscription(self, subscription: str, consumers_changed: bool = True) -> None:
        """Consumers joined or left (read them again), or permits, acks or redeliveries of
        one subscription changed (just look again)."""
        dispatcher = self.dispatchers.get(subscription)
        if dispatcher is None:
            await self.sync_subscriptions()
            dispatcher = self.dispatchers.get(subscription)
            if dispatcher is None:
                return
        if consumers_changed:
            dispatcher.refresh_needed = True
        dispatcher.wake.set()

    # --- limits ---------------------------------------------------------------------------

    def apply_limits(self) -> None:
        """Re-resolve the TOPIC and SUBSCRIPTION limiters (policy change or new rate)."""
        rate = self.publish.rate()
        policy = self.worker.policy
        self.topic_rate = policy.limits(self.partition, None, rate).topic
        self.topic_args = limit_args(self.topic_rate)
        for name, dispatcher in self.dispatchers.items():
            resolved = policy.limits(self.partition, name, rate).subscription
            assert resolved is not None
            dispatcher.apply(resolved)

    @property
    def relative(self) -> bool:
        """True when a limiter of this partition follows the publish rate."""
        rates = [self.topic_rate] + [d.rate for d in self.dispatchers.values()]
        return any(rate is not None and rate.rate.relative for rate in rates)

    # --- housekeeping ---------------------------------------------------------------------

    async def housekeeping(self) -> None:
        """Release dead consumers; expire entries past the TTL; trim acknowledged entries now
        and then."""
        redis = self.worker.redis
        now_ms = int(time.time() * 1000)
        cutoff = now_ms - self.worker.consumer_timeout_ms
        dispatchers = list(self.dispatchers.items())
        async with redis.pipeline(transaction=False) as pipe:
            for name, _dispatcher in dispatchers:
                alive = keys.sub_key(self.partition, name, "alive")
                pipe.zrangebyscore(alive, "-inf", f"({cutoff}")
            silent = await pipe.execute()
        for (name, dispatcher), dead in zip(dispatchers, silent, strict=True):
            for consumer in dead:
                consumer_id = consumer.decode()
                log.info("releasing consumer %s of %s/%s", consumer_id, self.partition.full, name)
                script_keys, args = release_call(self.partition, name, consumer_id, now_ms)
                await self.worker.scripts["release"](keys=script_keys, args=args)
                dispatcher.refresh_needed = True
                dispatcher.wake.set()
        await self.flow.expire(now_ms)
        if time.monotonic() - self._last_trim >= TRIM_EVERY_SECONDS:
            self._last_trim = time.monotonic()
            await self.trim(now_ms)

    async def trim(self, now_ms: int) -> None:
        """Delete entries every subscription has acknowledged (older than the grace period)."""
        redis = self.worker.redis
        floor = now_ms - int(self.worker.settings.retention_grace_seconds * 1000)
        stream = keys.log(self.partition)
        for name in list(self.dispatchers):
            pipe = redis.pipeline(transaction=False)
            pipe.xpending(stream, name)
            pipe.get(keys.sub_key(self.partition, name, "cursor"))
            pending, cursor = await pipe.execute()
            if pending and pending.get("pending"):
                first = (
                    pending["min"].decode() if isinstance(pending["min"], bytes) else pending["min"]
                )
                floor = min(floor, _ms(first))
            elif cursor:
                # Entries in the cursor's millisecond may still be undelivered: keep them.
                floor = min(floor, _ms(cursor.decode()))
            else:
                floor = min(floor, 0)
        if floor > 0:
            await redis.xtrim(stream, minid=f"{floor}-0", approximate=True)


def _ms(stream_id: str) -> int:
    return int(stream_id.split("-")[0])
