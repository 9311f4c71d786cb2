"""Everything a worker does for one partition it owns.

A ``PartitionRunner`` holds the partition's TOPIC limiter (shared by its subscriptions), one
``Dispatcher`` per subscription, the measured publish rate (for relative limits), and the
housekeeping: releasing consumers that stopped heartbeating, expiring entries past the
message TTL (``workers.flow``) and trimming entries every subscription has acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import TYPE_CHECKING

import orjson

from models import keys
from models.names import TopicName
from models.protocol import release_call
from models.resolution import Limiter, PublishRate
from workers.dispatcher import Dispatcher
from workers.flow import PartitionFlow
from workers.limiter import RateLimiter

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
        self.topic_limiter = RateLimiter(Limiter.TOPIC, time.monotonic())
        self.dispatchers: dict[str, Dispatcher] = {}
        self.publish = RateMeter()
        self.flow = PartitionFlow(self)
        self.msg_in = 0
        self.bytes_in = 0
        self.quota_rejected = 0  # sends refused by the backlog quota (counter)
        self._last_trim = 0.0
        self._lock = asyncio.Lock()
        self._handover: dict = {}
        self._handover_elapsed = 0.0

    async def start(self) -> None:
        """Apply the limits, continue a previous owner's limiter periods, start dispatchers."""
        self.apply_limits()
        await self._take_handover()
        await self.sync_subscriptions()

    def handover_note(self, now: float) -> tuple[str, int]:
        """The limiters' current periods as a note for the next owner, and its lifetime (ms).

        Without it, a partition moved mid-period would start fresh periods on its new owner
        and could deliver up to one extra period's worth in that second.
        """
        state: dict = {"topic": self.topic_limiter.export(now), "subs": {}}
        for name, dispatcher in self.dispatchers.items():
            exported = dispatcher.limiter.export(now)
            if exported:
                state["subs"][name] = exported
        lefts = [
            left for part in (state["topic"], *state["subs"].values()) for _, left in part.values()
        ]
        if not lefts:
            return "", 0
        life_ms = int(max(lefts) * 1000) + 1
        return orjson.dumps({"life": life_ms, **state}).decode(), life_ms

    async def _take_handover(self) -> None:
        """Read (and consume) the note a previous owner left, if it is still current."""
        key = keys.handover(self.partition)
        async with self.worker.redis.pipeline(transaction=True) as pipe:
            pipe.get(key)
            pipe.pttl(key)
            pipe.delete(key)
            note, ttl_ms, _ = await pipe.execute()
        self._handover = {}
        if not note or ttl_ms is None or ttl_ms <= 0:
            return
        state = orjson.loads(note)
        self._handover_elapsed = (state.get("life", ttl_ms) - ttl_ms) / 1000
        now = time.monotonic()
        self.topic_limiter.restore(state.get("topic", {}), self._handover_elapsed, now)
        self._handover = state.get("subs", {})

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
        carried = self._handover.pop(subscription, None)
        if carried:
            dispatcher.limiter.restore(carried, self._handover_elapsed, time.monotonic())
        self.dispatchers[subscription] = dispatcher
        dispatcher.start()
        return dispatcher

    def wake_all(self) -> None:
        """New entries: every parked dispatcher looks again."""
        for dispatcher in self.dispatchers.values():
            dispatcher.wake.set()

    async def wake_subscription(self, subscription: str) -> None:
        """Consumers, permits or redeliveries of one subscription changed."""
        dispatcher = self.dispatchers.get(subscription)
        if dispatcher is None:
            await self.sync_subscriptions()
            dispatcher = self.dispatchers.get(subscription)
            if dispatcher is None:
                return
        dispatcher.refresh_needed = True
        dispatcher.wake.set()

    # --- limits ---------------------------------------------------------------------------

    def apply_limits(self) -> None:
        """Re-resolve the TOPIC and SUBSCRIPTION limiters (policy change or new rate)."""
        rate = self.publish.rate()
        now = time.monotonic()
        policy = self.worker.policy
        self.topic_limiter.apply(policy.limits(self.partition, None, rate).topic, now)
        for name, dispatcher in self.dispatchers.items():
            resolved = policy.limits(self.partition, name, rate).subscription
            assert resolved is not None
            dispatcher.apply(resolved)

    @property
    def relative(self) -> bool:
        """True when a limiter of this partition follows the publish rate."""
        limiters = [self.topic_limiter] + [d.limiter for d in self.dispatchers.values()]
        return any(lim.resolved is not None and lim.resolved.rate.relative for lim in limiters)

    # --- housekeeping ---------------------------------------------------------------------

    async def housekeeping(self) -> None:
        """Release dead consumers; expire entries past the TTL; trim acknowledged entries now
        and then."""
        redis = self.worker.redis
        now_ms = int(time.time() * 1000)
        cutoff = now_ms - self.worker.consumer_timeout_ms
        for name, dispatcher in list(self.dispatchers.items()):
            alive_key = keys.sub_key(self.partition, name, "alive")
            dead = await redis.zrangebyscore(alive_key, "-inf", f"({cutoff}")
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
