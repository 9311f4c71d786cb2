"""Everything a worker does for one partition it owns.

A ``PartitionRunner`` holds the partition's resolved TOPIC limit (whose quota, shared by its
subscriptions, ``dispatch.lua`` keeps in Redis), one ``Dispatcher`` per subscription, the
measured publish rate (for relative limits), and the housekeeping: releasing consumers that
stopped heartbeating, expiring entries past the message TTL (``workers.flow``) and trimming
entries every subscription has acknowledged.

The runner never reads the worker's policies: the worker hands it a ``PartitionLimits`` when
it starts and on every policy change (``apply_limits``), and the runner resolves and hands
down its dispatchers' limits.  The partition's abuse limits and publish and subscribe rates
go to Redis (``write_limits``, ``sluice.protocol.abuse``), where the scripts clients call check
them; the worker awaits that write before it confirms a change, and the runner writes them
again now and then (a Redis that lost them gets them back).  What the runner reports back
goes through two callbacks: ``on_lost`` (a dispatcher was fenced off: the partition and the
token Redis refused) and ``on_subscription``
(a subscription appeared that the catalog may not have recorded yet).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from redis.exceptions import ResponseError

from models.flow_resolution import FlowLimits, priority_eviction_limit
from models.resolution import EffectiveLimits, PublishRate, ResolvedRate, follows_publish_rate
from models.resource_groups import GroupBinding, GroupRates
from sluice.protocol import keys
from sluice.protocol.abuse import limit_pairs
from sluice.protocol.connection import REDIS_FAULTS
from sluice.protocol.frames import LimitArgs
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import LIMITS, RELEASE, TRIM
from workers.context import SharedDispatch, WorkerContext
from workers.dispatcher import Dispatcher, limit_args
from workers.flow import PartitionFlow
from workers.limit_time import LimitClock
from workers.policy import PartitionLimits
from workers.samples import RateMeter

log = logging.getLogger(__name__)

TRIM_EVERY_SECONDS = 10.0
LIMITS_EVERY_SECONDS = 10.0  # abuse limits are written again this often, changed or not


_INTERNED: dict[tuple, dict[str, int]] = {}


def limit_values(flow: FlowLimits, group: GroupBinding | None = None) -> dict[str, int]:
    """A partition's abuse limits, publish and subscribe rates, durable acknowledgements and
    resource group's publish rates as ``sl:{P}:limits`` holds them (equal values are one
    shared dict: a worker keeps them for every partition)."""
    values = _limit_values(flow)
    rates = group.rates if group is not None else GroupRates()
    limited = rates.publish_limited
    values["resourceGroupId"] = rates.id if limited else 0
    values["resourceGroupPublishInMsg"] = max(rates.publish_msgs, 0) if limited else 0
    values["resourceGroupPublishInByte"] = max(rates.publish_bytes, 0) if limited else 0
    key = tuple(values.values())
    if len(_INTERNED) > 10_000:
        _INTERNED.clear()
    return _INTERNED.setdefault(key, values)


def _limit_values(flow: FlowLimits) -> dict[str, int]:
    abuse, rates, durable = flow.abuse, flow.rates, flow.durable_acks.value
    subscribes, period = rates.subscribes
    return {
        "maxSubscriptionsPerTopic": abuse.max_subscriptions_per_topic.value,
        "maxProducersPerTopic": abuse.max_producers_per_topic.value,
        "maxConsumersPerTopic": abuse.max_consumers_per_topic.value,
        "maxConsumersPerSubscription": abuse.max_consumers_per_subscription.value,
        "maxMessageSize": abuse.max_message_size.value,
        "publishThrottlingRateInMsg": rates.publish_msg,
        "publishThrottlingRateInByte": rates.publish_byte,
        "subscribeThrottlingRatePerConsumer": subscribes,
        "subscribeRatePeriodPerConsumerInSecond": period,
        "durableAckReplicas": durable.replicas,
        "durableAckTimeoutMs": durable.timeoutMs,
        "delayedDeliveryMaxDelayInMillis": flow.delayed_delivery.value.max_delay_ms,
        "priorityEvictionLimit": priority_eviction_limit(flow),
        "priorityIndexOnly": 0 if flow.level_streams else 1,
    }


class PartitionRunner:
    """The dispatchers and limiters of one owned partition."""

    def __init__(
        self,
        context: WorkerContext,
        shared: SharedDispatch,
        partition: TopicName,
        limits: PartitionLimits,
        fencing_token: str = "",
        on_lost: Callable[[TopicName, str], None] = lambda _partition, _token: None,
        on_subscription: Callable[[str, str], None] = lambda _topic, _sub: None,
    ) -> None:
        self.context = context
        self.shared = shared
        self.partition = partition
        self.limits = limits  # as the worker last handed them down
        self.fencing_token = fencing_token
        self.on_lost = on_lost
        self.on_subscription = on_subscription
        self.topic_rate: ResolvedRate | None = None  # the TOPIC limit in force
        self.topic_args = LimitArgs()  # the same, as dispatch.lua takes it
        self.dispatchers: dict[str, Dispatcher] = {}
        self.publish = RateMeter()
        self.limit_clock = LimitClock()  # each subscription's limits over the stats interval
        self.flow = PartitionFlow(context, partition, limits.flow, fencing_token)
        self.msg_in = 0
        self.bytes_in = 0
        self.quota_rejected = 0  # sends refused by the backlog quota (counter)
        self.publish_throttled = 0  # sends the publish rate held back (counter)
        self._last_trim = 0.0
        self._consumers_checked = 0.0
        # When a consumer may have stopped heartbeating at the earliest (ms, wall clock).
        self._heartbeats_due = 0
        self._lock = asyncio.Lock()
        self._stopped = False
        self._limits_at = time.monotonic()
        # Quiet detection (see workers.dormancy): what the stats tick last read, and since when
        # it has not changed; acknowledgements counted when the runner started and since.
        self.fingerprint: object = None
        self.quiet_since = time.monotonic()
        self.acked_first: int | None = None
        self.acked_last = 0
        self.retiring = False
        self.samples: dict | None = None  # what the last stats read found
        self.stats_read_at = 0.0
        self.retire_aborted = False  # a wake-up came while it was going dormant
        self._limits_lock = asyncio.Lock()
        # Resolutions of the limits in force at one publish rate, by subscription (``resolve``).
        self._resolved: tuple[PartitionLimits, PublishRate, dict] | None = None
        self._follows_rate = False  # a limit of ``_resolved``'s follows the publish rate

    async def start(self) -> None:
        """Resolve the limits and start a dispatcher per subscription.

        The limiters' periods live in Redis, so a partition that changes owner continues them
        where the previous owner left off."""
        self.apply_limits()
        await self.write_limits()
        await self.sync_subscriptions()

    async def stop(self) -> None:
        """Stop every dispatcher (none starts after this)."""
        async with self._lock:
            self._stopped = True
            dispatchers, self.dispatchers = list(self.dispatchers.values()), {}
        await asyncio.gather(*(d.stop() for d in dispatchers))

    def fenced(self) -> None:
        """A dispatcher found the lease gone: give the partition up (the lease of this
        runner's token: the worker may hold a newer one by now)."""
        self.on_lost(self.partition, self.fencing_token)

    # --- subscriptions --------------------------------------------------------------------

    async def sync_subscriptions(self) -> None:
        """Start dispatchers for new subscriptions, stop those of deleted ones.

        One read and its changes at a time, each read made under the lock: an older read
        that answers late never stops the dispatcher of a subscription a newer one found."""
        async with self._lock:
            if self._stopped:
                return
            members = await self.context.redis.smembers(keys.subs(self.partition))
            names = {s.decode() for s in members}
            new = [self._add(name) for name in sorted(names - set(self.dispatchers))]
            gone = [self.dispatchers.pop(n) for n in set(self.dispatchers) - names]
            for dispatcher in gone:
                self.limit_clock.forget(dispatcher.subscription)
            # Their consumers read together (one round trip, not one per subscription),
            # before their loops start.
            try:
                await self.read_consumers(new)
            finally:
                for dispatcher in new:
                    dispatcher.start()
        await asyncio.gather(*(d.stop() for d in gone))

    async def read_consumers(self, dispatchers: list[Dispatcher]) -> None:
        """Read the type and live consumers of these subscriptions in one round trip; a
        dispatcher asked to read them again meanwhile reads them itself."""
        if not dispatchers:
            return
        for dispatcher in dispatchers:
            dispatcher.refresh_needed = False  # cleared before reading (see refresh_consumers)
        pipe = self.context.redis.pipeline(transaction=False)
        now_ms = int(time.time() * 1000)
        for dispatcher in dispatchers:
            dispatcher.queue_consumer_read(pipe, now_ms)
        try:
            replies = await pipe.execute()
        except REDIS_FAULTS:
            for dispatcher in dispatchers:
                dispatcher.refresh_needed = True  # each reads them on its first step
            raise
        for i, dispatcher in enumerate(dispatchers):
            dispatcher.take_consumers(replies[2 * i], replies[2 * i + 1])

    async def look_again_now(self) -> None:
        """``look_again``, the consumers of every subscription read in one round trip
        (when Redis does not answer, each dispatcher reads its own on its next step)."""
        with contextlib.suppress(*REDIS_FAULTS):
            await self.read_consumers(list(self.dispatchers.values()))
        self.wake_all()

    def _add(self, subscription: str) -> Dispatcher:
        dispatcher = Dispatcher(
            self.context,
            self.shared,
            self.partition,
            subscription,
            self.fencing_token,
            self.fenced,
        )
        effective = self.limits.resolve(subscription, self.publish.rate())
        assert effective.subscription is not None
        dispatcher.apply(
            effective.subscription, self.topic_args, self.limits.flow, self.limits.group
        )
        self.limit_clock.mark(
            time.monotonic(),
            {subscription: (effective.msg_per_second, effective.byte_per_second)},
        )
        self.on_subscription(self.partition.base.full, subscription)
        self.dispatchers[subscription] = dispatcher
        self._heartbeats_due = 0  # its consumers' heartbeats are read at the next check
        return dispatcher

    def look_at(self, subscription: str) -> Dispatcher:
        """A dispatcher for ``subscription`` that is never started: a runner that only reads
        a dormant partition (``workers.glance``)."""
        return self._add(subscription)

    def look_again(self) -> None:
        """Every dispatcher reads its consumers again and looks again: wake-ups may have been
        missed (the wake-up channel was down, or the runner was starting and the worker did
        not route them to it yet)."""
        for dispatcher in self.dispatchers.values():
            dispatcher.refresh_needed = True
        self.wake_all()

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

    def apply_limits(self, limits: PartitionLimits | None = None) -> list[Dispatcher]:
        """Re-resolve the TOPIC and SUBSCRIPTION limiters and hand them to the dispatchers:
        new ``limits`` (a policy change), or the same ones at a new publish rate.  The
        dispatchers whose limits changed."""
        if limits is not None:
            self.limits = limits
        limits = self.limits
        rate = self.publish.rate()
        self.topic_rate = limits.resolve(None, rate).topic
        self.topic_args = limit_args(self.topic_rate)
        self.flow.limits = limits.flow
        marks = {}
        changed = []
        for name, dispatcher in self.dispatchers.items():
            effective = limits.resolve(name, rate)
            assert effective.subscription is not None
            group = limits.group
            if dispatcher.apply(effective.subscription, self.topic_args, limits.flow, group):
                changed.append(dispatcher)
            marks[name] = (effective.msg_per_second, effective.byte_per_second)
        self.limit_clock.mark(time.monotonic(), marks)
        return changed

    def resolve(self, subscription: str | None) -> EffectiveLimits:
        """The limits in force for ``subscription`` at the current publish rate; the same
        limits at the same rate are resolved once (the stats snapshot of every subscription
        asks, every interval), and limits none of which follows the publish rate once for
        any rate (the measured rate moves at every stats read)."""
        rate = self.publish.rate()
        kept = self._resolved
        if kept is None or kept[0] is not self.limits:
            kept = self._resolved = (self.limits, rate, {})
            self._follows_rate = follows_publish_rate(self.limits.inputs)
        elif kept[1] != rate and self._follows_rate:
            kept = self._resolved = (self.limits, rate, {})
        found = kept[2].get(subscription)
        if found is None:
            found = kept[2][subscription] = self.limits.resolve(subscription, rate)
        return found

    async def write_limits(self, force: bool = False) -> None:
        """Write the abuse limits in force to ``sl:{P}:limits`` when they changed (or when
        ``force``d); computed at the time of writing, one write at a time, so a slower write
        never replaces a newer one.  A lost lease stops the partition."""
        async with self._limits_lock:
            values = limit_values(self.limits.flow, self.limits.group)
            written = self.shared.limits_written
            if values == written.get(self.partition.full) and not force:
                return
            pairs = limit_pairs(values)
            script_keys, args = LIMITS.call(self.partition, self.fencing_token, pairs)
            try:
                await self.context.scripts[LIMITS.name](keys=script_keys, args=args)
            except ResponseError as exc:
                if str(exc).startswith("FENCED"):
                    self.fenced()
                    return
                raise
            written[self.partition.full] = values
            self._limits_at = time.monotonic()

    def note_publish(self, now: float) -> None:
        """Sample the publish counters (read by the stats tick); limits relative to the
        publish rate follow it."""
        self.publish.add(now, self.msg_in, self.bytes_in)
        if self.relative:
            self.apply_limits()

    @property
    def relative(self) -> bool:
        """True when a limiter of this partition follows the publish rate."""
        rates = [self.topic_rate] + [d.rate for d in self.dispatchers.values()]
        return any(rate is not None and rate.rate.relative for rate in rates)

    # --- quiet detection ------------------------------------------------------------------

    def observe(self, fingerprint: object, acked: int, now: float) -> None:
        """What a stats read found (``fingerprint``: every counter and gauge of the partition;
        ``acked``: acknowledgements of all its subscriptions): quiet since it last changed."""
        if self.acked_first is None:
            self.acked_first = acked
        self.acked_last = acked
        if fingerprint != self.fingerprint:
            self.fingerprint = fingerprint
            self.quiet_since = now

    def quiet(self, now: float, seconds: float) -> bool:
        """True when nothing changed for ``seconds`` and nothing is left for the worker to do
        by itself: every dispatcher is parked until a client's event (see
        ``Dispatcher.settled``), no backlog quota is breached, no limit follows the publish
        rate."""
        # A partition nothing was ever published to has no rate to wait out: it may sleep as
        # soon as a second read finds it unchanged (thousands of new, empty partitions).
        if self.msg_in == 0:
            seconds = min(seconds, 1.0)
        if now - self.quiet_since < seconds or self.flow.breach is not None or self.flow.flag_set:
            return False
        if self.relative:
            return False
        return all(
            d.settled and not d.in_call and not d.refresh_needed for d in self.dispatchers.values()
        )

    # --- housekeeping ---------------------------------------------------------------------

    async def housekeeping(self) -> None:
        """Release dead consumers; expire entries past the TTL; trim acknowledged entries now
        and then."""
        redis = self.context.redis
        now_ms = int(time.time() * 1000)
        timeout_ms = self.context.consumer_timeout_ms
        cutoff = now_ms - timeout_ms
        # Heartbeats are checked a few times per consumer timeout (at most every 2.5 s), and
        # only once the oldest heartbeat read last time may have expired (a consumer that
        # joins later expires later; a new subscription's are read at once).
        every = min(2.5, timeout_ms / 4000)
        dispatchers = []
        if now_ms >= self._heartbeats_due and time.monotonic() - self._consumers_checked >= every:
            self._consumers_checked = time.monotonic()
            dispatchers = list(self.dispatchers.items())
        replies = []
        if dispatchers:
            async with redis.pipeline(transaction=False) as pipe:
                for name, _dispatcher in dispatchers:
                    alive = keys.sub_key(self.partition, name, "alive")
                    pipe.zrangebyscore(alive, "-inf", f"({cutoff}")
                    pipe.zrangebyscore(alive, cutoff, "+inf", start=0, num=1, withscores=True)
                replies = await pipe.execute()
            oldest = [int(live[0][1]) for live in replies[1::2] if live]
            self._heartbeats_due = min(oldest, default=now_ms) + timeout_ms
        for (name, dispatcher), dead in zip(dispatchers, replies[0::2], strict=True):
            for consumer in dead:
                consumer_id = consumer.decode()
                log.info("releasing consumer %s of %s/%s", consumer_id, self.partition.full, name)
                script_keys, args = RELEASE.call(self.partition, name, consumer_id, now_ms)
                await self.context.scripts[RELEASE.name](keys=script_keys, args=args)
                dispatcher.refresh_needed = True
                dispatcher.wake.set()
        await self.flow.expire(now_ms, list(self.dispatchers))
        if time.monotonic() - self._limits_at >= LIMITS_EVERY_SECONDS:
            await self.write_limits(force=True)
        if time.monotonic() - self._last_trim >= TRIM_EVERY_SECONDS:
            self._last_trim = time.monotonic()
            await self.trim(now_ms)

    async def trim(self, now_ms: int) -> int:
        """Delete entries every subscription has acknowledged (older than the grace period);
        ``trim.lua`` decides over every consumer group of the stream and trims in one atomic
        call.  Returns the entries deleted."""
        floor = now_ms - int(self.context.settings.retention_grace_seconds * 1000)
        try:
            script_keys, args = TRIM.call(self.partition, floor, self.fencing_token)
            deleted = await self.context.scripts[TRIM.name](keys=script_keys, args=args)
        except ResponseError as exc:
            if str(exc).startswith("FENCED"):
                self.fenced()
                return 0
            raise
        return int(deleted)
