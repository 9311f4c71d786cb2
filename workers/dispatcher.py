"""One dispatcher per subscription per partition: hands entries out under every limiter.

Each step: reserve what the BROKER limiter (this process's) allows, then let ``dispatch.lua``
check and charge the TOPIC and SUBSCRIPTION quotas (kept in Redis, in the partition's slot)
and move at most what all three allow (redeliveries first) into the consumers' receiver
queues, in one atomic round trip; settle the BROKER reservation with what really went out.
When a limiter is exhausted the dispatcher sleeps until its next period (or until a limit
changes); when there is no data or no permit it parks until a producer or consumer wakes it.
A dispatcher held back by its SUBSCRIPTION quota alone, which one call takes whole, sleeps on
the renewal clock (``workers.renewal``), which makes its calls for it, a partition's together,
and wakes it only for another outcome.

The limits a call enforces are handed down (``apply``): the partition runner resolves them
from what the worker gave it, and a policy change is in force for every call made after
``Worker.apply_limits`` returns.  Calls already on their way are counted by the shared
``DispatchGate`` so that a change is confirmed only once none of them remain.  A dispatcher
needs no worker: a ``WorkerContext``, the ``SharedDispatch`` state, its partition and
subscription, the fencing token, and a callback for when the lease is gone.

Max-unacked limits (per subscription, per consumer) are checked inside ``dispatch.lua`` with
an XPENDING summary, but only when they could bind: the dispatcher keeps an upper bound of the
subscription's pending entries (exact after a checked call, plus what it handed out since),
and skips the check while that bound plus one read stays under every limit.  A dispatcher
stopped at a limit parks until an ack wakes it (``ack.lua`` clears the waitack flag).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections.abc import Callable

from redis.exceptions import ResponseError

from models.flow_resolution import FlowLimits
from models.resolution import Limiter, ResolvedRate
from models.resource_groups import GroupBinding
from sluice.protocol import keys
from sluice.protocol.connection import REDIS_FAULTS
from sluice.protocol.frames import (
    DispatchArgs,
    DispatchReason,
    DispatchResult,
    LimitArgs,
)
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import DISPATCH
from workers.alarms import AlarmClock
from workers.context import DispatchSettings, SharedDispatch, WorkerContext
from workers.group_budget import Grant, GroupBudget, Settlement
from workers.scriptcall import Packed, bulk_int, pack_args

log = logging.getLogger(__name__)

PARK_FALLBACK_SECONDS = 5.0  # re-check a parked subscription even without a wake-up
RENEWAL_WINDOW_MS = 25  # a quota renewal served this late at most (see _renewal_window)
SINGLE_CONSUMER_TYPES = ("Exclusive", "Failover")
KEY_SHARED = "Key_Shared"
# Bits of ``DispatchResult.exhausted``: the Redis-side limiters left without quota.
EXHAUSTED_BITS = (
    (1, "msg", Limiter.TOPIC),
    (2, "byte", Limiter.TOPIC),
    (4, "msg", Limiter.SUBSCRIPTION),
    (8, "byte", Limiter.SUBSCRIPTION),
)
GROUP = "group"  # the throttling reason of a resource group's limiter
BUDGET_REASONS = (DispatchReason.MSG_BUDGET, DispatchReason.BYTE_BUDGET)
ARGC = len(DispatchArgs("", "", 0).argv())  # arguments of a dispatch.lua call
# The runs of arguments (slices of ``DispatchArgs.argv``) that _packed_call_args keeps packed,
# between the clock (2), the budgets (4, 5), the round-robin offset (10), the max-unacked
# limits (13, 14) and the limiters the previous call left without quota (the last).
PACKED_SEGMENTS = ((0, 2), (3, 4), (6, 10), (11, 13), (15, ARGC - 1))


class Fenced(Exception):
    """The worker lost the partition's lease; it must stop dispatching it."""


def limit_args(rate: ResolvedRate | None) -> LimitArgs:
    """A resolved TOPIC or SUBSCRIPTION limit as ``dispatch.lua`` takes it."""
    if rate is None:
        return LimitArgs()
    return LimitArgs(
        rate.permits_msg, rate.permits_byte, max(int(rate.period), 1), rate.rate.relative
    )


class Dispatcher:
    """Dispatch loop of one subscription on one partition."""

    def __init__(
        self,
        context: WorkerContext,
        shared: SharedDispatch,
        partition: TopicName,
        subscription: str,
        fencing_token: str = "",
        on_fenced: Callable[[], None] = lambda: None,
    ) -> None:
        self.context = context
        self.shared = shared
        self.partition = partition
        self.subscription = subscription
        self.fencing_token = fencing_token
        self.on_fenced = on_fenced
        self.rate: ResolvedRate | None = None  # the SUBSCRIPTION limit in force
        self._sub_args = LimitArgs()
        # The limiters (exhausted flags) the last call answered left without quota, for the
        # next call only: what waits for their renewal keeps their periods on the grid.
        self._renewing = 0
        self.topic_args = LimitArgs()  # the partition's TOPIC limit in force
        self.flow: FlowLimits | None = None  # the max-unacked limits in force (see apply)
        self.group: GroupBudget | None = None  # the resource group's limiter, if limited
        self.wake = asyncio.Event()
        self.waiting_for_quota = False  # data wake-ups need not wake it: it has backlog
        self.alarm = 0  # number of the current sleep (see workers.alarms)
        self.rang = -1  # the last sleep whose alarm rang
        self.refresh_needed = True
        self.sub_type = "Shared"
        self.active = ""
        self.consumers: list[str] = []
        self.rr_offset = 0
        self.messages_per_entry = 1.0
        self.throttled: dict[tuple[str, str], int] = {}
        self.dispatch_calls = 0
        self.unthrottled_messages = 0
        self.unacked_bound: int | None = None  # upper bound of pending entries; None = unknown
        self.unacked_checks = 0
        self.blocked_on_unacked = False
        # True while the last step parked where only a client's event can give it work (no
        # data, no permits, max unacked reached, no active consumer) and nothing is scheduled:
        # the partition may then go dormant (``workers.dormancy``).
        self.settled = False
        self.in_call = False  # a dispatch call is on its way
        # A call the renewal clock made for it (``workers.renewal``), until answered, and what
        # came of it, for the next step to take when it woke the dispatcher.
        self.renewing: asyncio.Future | None = None
        self.renewed: DispatchResult | BaseException | None = None
        self._stopped = False
        self._task: asyncio.Task | None = None
        self._keys = DISPATCH.keys(partition, subscription)
        self._packed_keys = shared.script.prefix(self._keys)
        self._queue_prefix = keys.sub_prefix(partition, subscription) + "q:"
        self._packed: tuple[tuple, tuple[bytes, ...]] | None = None  # see _packed_call_args
        self.call_group = partition.full  # its calls may run with the partition's others

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the loop as a task."""
        self._task = asyncio.create_task(self._run(), name=f"dispatch {self.subscription}")

    async def stop(self) -> None:
        """Stop the loop and wait for it."""
        self._stopped = True
        self.wake.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task], timeout=5.0)

    def apply(
        self,
        resolved: ResolvedRate,
        topic: LimitArgs,
        flow: FlowLimits,
        group: GroupBinding | None = None,
    ) -> bool:
        """Take new limits (SUBSCRIPTION, the partition's TOPIC, flow control, the resource
        group's): every later call enforces them.  Called before ``start`` and on every
        change, and with the same limits again (a resync): limits equal to those in force are
        kept as they are, the same objects.  True when any of them changed."""
        changed = False
        if resolved != self.rate:
            self.rate = resolved
            self._sub_args = limit_args(resolved)
            changed = True
        if topic != self.topic_args:
            self.topic_args = topic
            changed = True
        if flow != self.flow:
            self.flow = flow
            changed = True
        script = self.shared.group_script
        if group is None or not group.rates.dispatch_limited or script is None:
            changed = changed or self.group is not None
            self.group = None
        elif self.group is None or self.group.binding != group:
            previous, self.group = self.group, GroupBudget(script, group)
            kept = previous.binding if previous is not None else None
            if kept is not None and (kept.group, kept.member_id) == (group.group, group.member_id):
                self.group.pending = previous.pending  # settled with the next reservation
            changed = True
        return changed

    async def _run(self) -> None:
        backoff = 0.05
        while not self._stopped:
            try:
                if self.refresh_needed:
                    await self.refresh_consumers()
                await self.step()
                backoff = 0.05
            except Fenced:
                log.warning("lease lost for %s; stop dispatching", self.partition.full)
                self.on_fenced()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if isinstance(exc, REDIS_FAULTS):
                    log.warning("dispatch %s/%s: %s", self.partition.full, self.subscription, exc)
                else:  # a defect: logged in full and tried again, never a silent end of
                    # this subscription's dispatch while its partition is held
                    log.exception("dispatch %s/%s", self.partition.full, self.subscription)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                self.refresh_needed = True

    # --- consumers ------------------------------------------------------------------------

    async def refresh_consumers(self) -> None:
        """Read the subscription type and live consumers; pick the active one if single."""
        # Cleared before reading: a consumer that joins while the read is on its way asks
        # again, and that request must survive this read.
        self.refresh_needed = False
        pipe = self.context.redis.pipeline(transaction=False)
        self.queue_consumer_read(pipe, int(time.time() * 1000))
        sub_type, alive = await pipe.execute()
        self.take_consumers(sub_type, alive)

    def queue_consumer_read(self, pipe, now_ms: int) -> None:
        """Queue the two reads ``take_consumers`` takes (type, live consumers) on ``pipe``."""
        name, sub = self.partition, self.subscription
        pipe.hget(keys.sub_key(name, sub, "meta"), "type")
        pipe.zrangebyscore(
            keys.sub_key(name, sub, "alive"), now_ms - self.context.consumer_timeout_ms, "+inf"
        )

    def take_consumers(self, sub_type: bytes | None, alive: list[bytes]) -> None:
        """What ``queue_consumer_read`` read: the type, the consumers, the active one."""
        self.sub_type = (sub_type or b"Shared").decode()
        self.consumers = sorted(c.decode() for c in alive)
        if self.sub_type in SINGLE_CONSUMER_TYPES and self.consumers:
            index = max(self.partition.partition_index, 0) if self.sub_type == "Failover" else 0
            self.active = self.consumers[index % len(self.consumers)]
        else:
            self.active = ""

    # --- one step -------------------------------------------------------------------------

    async def step(self) -> None:
        """Dispatch once, then wait as the outcome requires (or, when the renewal clock made
        a call for it, take that call's outcome)."""
        if self.renewing is not None:
            await asyncio.wait([self.renewing])  # answered: its outcome is noted
        renewed, self.renewed = self.renewed, None
        if isinstance(renewed, BaseException):
            if isinstance(renewed, ResponseError) and str(renewed).startswith("FENCED"):
                raise Fenced(str(renewed))
            raise renewed
        if renewed is not None:
            await self._after(renewed)
            return
        config = self.shared.settings
        broker = self.shared.broker_limiter
        now = time.monotonic()
        if broker.enabled and broker.available(now).exhausted and not config.skip_when_caught_up:
            await self._wait_for_broker()
            return
        group = self.group
        if (self.sub_type in SINGLE_CONSUMER_TYPES and not self.active) or (
            group is not None and not self.consumers
        ):
            # Nobody to send to: and a resource group's period is not started for nothing
            # (it would end early in the first second of the consumers that come later).
            self.settled = not self.refresh_needed
            await self._park(-1)
            return
        grant = None
        if group is not None:
            grant = await self._reserve_group(group)
            if grant is None:
                return
            now = time.monotonic()
        reserved = self._reserve_broker(now)
        tracer = self.shared.tracer
        started = time.time_ns() if tracer is not None else 0
        try:
            if self.shared.script.cluster:
                args: DispatchArgs | bytes = self._call_args(reserved, grant)
            else:
                args = self._packed_call_args(reserved, grant)
            result = await self._call(args, reserved)
        except BaseException:
            if group is not None and grant is not None:
                group.pending = Settlement(grant, 0, 0)  # handed back by the next call
            raise
        self.note(result, reserved)
        if tracer is not None:
            tracer.dispatched(self.partition.full, self.subscription, started, result)
        if group is not None and grant is not None:
            await self._settle_group(group, grant, result)
        await self._after(result)

    async def _reserve_group(self, group: GroupBudget) -> Grant | None:
        """Reserve on the resource group's limiter what one call may hand out; None (after
        waiting as the group says) when it gives nothing now."""
        config = self.shared.settings
        per_entry = 1.0 if config.count_entries else self.messages_per_entry
        reads = max(config.reads_per_call, 1)
        want_msgs = max(1, math.ceil(config.max_entries * reads * per_entry * 1.5))
        grant = await group.reserve(want_msgs, max(config.read_cap * reads, 1))
        if grant.granted:
            return grant
        self._count("msg" if grant.messages == 0 else "byte", GROUP)
        self.waiting_for_quota = True
        try:
            await self._sleep(max(grant.wait_ms, 1) / 1000)
        finally:
            self.waiting_for_quota = False
        return None

    async def _settle_group(self, group: GroupBudget, grant: Grant, result: DispatchResult) -> None:
        """Give the group back what the call did not use: with the next reservation when the
        next step follows at once (the member wants more), else now."""
        used_msgs = 0 if result.unthrottled else result.units
        used_bytes = 0 if result.unthrottled else result.bytes
        broker = self.shared.broker_limiter
        at_once = result.reason is DispatchReason.MORE or (
            result.reason in BUDGET_REASONS
            and not result.exhausted
            and not (broker.enabled and broker.available(time.monotonic()).exhausted)
        )
        if at_once:
            group.pending = Settlement(grant, used_msgs, used_bytes)
            return
        # Not hungry for the group: out of data, permits or room, or held back by one of
        # its own limiters; what it leaves this period goes to the group's other members.
        await group.settle(grant, used_msgs, used_bytes, False)

    def _reserve_broker(self, now: float) -> tuple[int | None, int | None]:
        """Reserve on the BROKER limiter what one call may hand out (messages, bytes; None
        where it does not limit)."""
        broker = self.shared.broker_limiter
        if not broker.enabled:
            return None, None
        config = self.shared.settings
        reserve_msgs = reserve_bytes = None
        budget = broker.available(now)
        per_entry = 1.0 if config.count_entries else self.messages_per_entry
        if budget.messages is not None:
            cap = math.ceil(config.max_entries * per_entry * 1.5)
            reserve_msgs = max(0, min(budget.messages, cap))
        if budget.bytes is not None:
            reserve_bytes = max(0, min(budget.bytes, config.read_cap))
        broker.reserve(reserve_msgs, reserve_bytes, now)
        return reserve_msgs, reserve_bytes

    def _call_args(
        self, reserved: tuple[int | None, int | None], grant: Grant | None = None
    ) -> DispatchArgs:
        """What ``dispatch.lua`` is called with: the limits in force and this call's budgets
        (the BROKER reservation and the resource group's grant, the smaller of each)."""
        budgets = self._budgets(reserved, grant)
        sub_limit, consumer_limit = self._unacked_limits(self.shared.settings.max_entries)
        renewing, self._renewing = self._renewing, 0
        return self._args(int(time.time() * 1000), *budgets, sub_limit, consumer_limit, renewing)

    def _packed_call_args(
        self, reserved: tuple[int | None, int | None], grant: Grant | None = None
    ) -> bytes:
        """``_call_args`` packed (``PackedScript.call_packed``): the arguments that change
        from call to call (the clock, the budgets, the round-robin offset, the max-unacked
        limits checked) are packed each time, the others once, until what they come from
        (settings, consumers, limits) is replaced."""
        broker_msg, broker_byte = self._budgets(reserved, grant)
        config = self.shared.settings
        sub_limit, consumer_limit = self._unacked_limits(config.max_entries)
        kept = self._packed
        if (
            kept is None
            or kept[0][0] is not config
            or kept[0][1] is not self.active
            or kept[0][2] is not self.sub_type
            or kept[0][3] is not self.flow
            or kept[0][4] is not self._sub_args
            or kept[0][5] is not self.topic_args
            or kept[0][6] is not self.fencing_token
        ):
            # Other objects than at the last call: packed again unless equal (limits resolved
            # again, unchanged).  Kept with this call's objects, so that the next calls compare
            # them by identity alone and allocate nothing that outlives the call (a tuple a
            # call kept for a period would be walked by every young collection meanwhile).
            key = (
                config,
                self.active,
                self.sub_type,
                self.flow,
                self._sub_args,
                self.topic_args,
                self.fencing_token,
            )
            if kept is None or kept[0] != key:
                argv = self._args(0, 0, 0, 0, 0, 0).argv()
                kept = (key, tuple(pack_args(argv[a:b]) for a, b in PACKED_SEGMENTS))
            self._packed = kept = (key, kept[1])
        s0, s1, s2, s3, s4 = kept[1]
        renewing, self._renewing = self._renewing, 0
        return b"".join(
            (
                s0,
                bulk_int(int(time.time() * 1000)),
                s1,
                bulk_int(broker_msg),
                bulk_int(broker_byte),
                s2,
                bulk_int(self.rr_offset),
                s3,
                bulk_int(sub_limit),
                bulk_int(consumer_limit),
                s4,
                bulk_int(renewing),
            )
        )

    def _budgets(
        self, reserved: tuple[int | None, int | None], grant: Grant | None
    ) -> tuple[int, int]:
        """This call's message and byte budgets (-1 = none): the BROKER reservation and the
        resource group's grant, the smaller of each."""
        reserve_msgs, reserve_bytes = reserved
        if grant is not None:
            reserve_msgs = _smaller(reserve_msgs, grant.messages)
            reserve_bytes = _smaller(reserve_bytes, grant.bytes)
        return (
            -1 if reserve_msgs is None else reserve_msgs,
            -1 if reserve_bytes is None else reserve_bytes,
        )

    def _args(
        self,
        now_ms: int,
        broker_msg: int,
        broker_byte: int,
        sub_limit: int,
        consumer_limit: int,
        renewing: int = 0,
    ) -> DispatchArgs:
        config = self.shared.settings
        max_entries = config.max_entries
        return DispatchArgs(
            subscription=self.subscription,
            queue_prefix=self._queue_prefix,
            now_ms=now_ms,
            max_entries=max_entries,
            broker_msg=broker_msg,
            broker_byte=broker_byte,
            read_cap=config.read_cap,
            count_entries=config.count_entries,
            active=self.active,
            rr_chunk=max_entries if self.active else config.round_robin_chunk,
            rr_offset=self.rr_offset,
            skip_when_caught_up=config.skip_when_caught_up,
            fencing_token=self.fencing_token,
            max_unacked_subscription=sub_limit,
            max_unacked_consumer=consumer_limit,
            topic=self.topic_args,
            sub=self._sub_args,
            reads=config.reads_per_call,
            delay_margin_ms=self._delay_margin(config),
            key_shared=self.sub_type == KEY_SHARED,
            priority_oldest_every=self.flow.priority_oldest_every.value if self.flow else 0,
            renewing=renewing,
        )

    async def _call(
        self, args: DispatchArgs | bytes, reserved: tuple[int | None, int | None]
    ) -> DispatchResult:
        """One ``dispatch.lua`` call (its arguments, or them packed), counted by the gate
        until Redis has answered it; a refused or failed call hands the BROKER reservation
        back."""
        broker = self.shared.broker_limiter
        self.wake.clear()
        self.settled = False
        self.in_call = True
        gate = self.shared.gate
        generation = gate.enter()
        try:
            # The gate counts the call until Redis has answered it, even if this task is
            # cancelled meanwhile (a stopped dispatcher's call may still be running).
            done = functools.partial(gate.leave, generation)
            script = self.shared.script
            if isinstance(args, bytes):
                reply = await script.call_packed(
                    self._packed_keys, ARGC, args, done, self.call_group
                )
            else:
                reply = await script.call(self._packed_keys, args.argv(), done)
        except ResponseError as exc:
            if broker.enabled:
                broker.settle(*reserved, 0, 0)
            if str(exc).startswith("FENCED"):
                raise Fenced(str(exc)) from None
            raise
        except BaseException:
            if broker.enabled:
                broker.settle(*reserved, 0, 0)
            raise
        finally:
            self.in_call = False
        return DispatchResult.from_reply(reply)

    def note(self, result: DispatchResult, reserved: tuple[int | None, int | None]) -> None:
        """Take in what a call did: the pending bound, the BROKER settlement, the counters."""
        broker = self.shared.broker_limiter
        self.dispatch_calls += 1
        if result.unacked >= 0:
            self.unacked_bound = result.unacked
        elif self.unacked_bound is not None:
            self.unacked_bound += result.entries - result.redelivered
        self.blocked_on_unacked = result.reason is DispatchReason.UNACKED
        self._renewing = result.exhausted if result.reason in BUDGET_REASONS else 0
        if broker.enabled:
            if result.unthrottled:
                broker.settle(*reserved, 0, 0)
            else:
                broker.settle(*reserved, result.units, result.bytes)
        if result.unthrottled:
            self.unthrottled_messages += result.messages
        if result.entries:
            self.rr_offset += 1
            self.messages_per_entry = 0.8 * self.messages_per_entry + 0.2 * (
                result.messages / result.entries
            )

    def _delay_margin(self, config: DispatchSettings) -> int:
        """Delayed delivery as ``dispatch.lua`` takes it: -1 = deliver at once (the topic's
        resolved ``delayedDelivery`` inactive, or an Exclusive or Failover subscription, as in
        Pulsar), else how early a delayed entry may go (its tick, or 0 when strict)."""
        policy = self.flow.delayed_delivery.value if self.flow is not None else None
        if policy is None or not policy.active or self.sub_type in SINGLE_CONSUMER_TYPES:
            return -1
        return 0 if config.delayed_strict else policy.tickTime

    def _unacked_limits(self, max_entries: int) -> tuple[int, int]:
        """The (subscription, consumer) limits to check in this call; 0 = do not check."""
        flow = self.flow
        assert flow is not None, "apply() limits before start()"
        sub_limit = flow.max_unacked_per_subscription.value
        consumer_limit = flow.max_unacked_per_consumer.value
        limits = [limit for limit in (sub_limit, consumer_limit) if limit > 0]
        if not limits:
            return 0, 0
        # A consumer never holds more than the whole subscription: while the bound plus one
        # read stays under the smallest limit, no limit can bind in this call.
        if self.unacked_bound is not None and self.unacked_bound + max_entries < min(limits):
            return 0, 0
        self.unacked_checks += 1
        return max(sub_limit, 0), max(consumer_limit, 0)

    async def _after(self, result: DispatchResult) -> None:
        reason = result.reason
        if reason is DispatchReason.MORE:
            await asyncio.sleep(0)
        elif reason in (DispatchReason.MSG_BUDGET, DispatchReason.BYTE_BUDGET):
            await self._wait_for_quota(result)
        else:
            # Consumers that join or leave send a wake-up that reads them again.
            self.settled = result.next_due_ms < 0 and not self.refresh_needed
            await self._park(result.next_due_ms)

    async def _wait_for_quota(self, result: DispatchResult) -> None:
        """Count the throttling and sleep until every exhausted limiter has quota again."""
        for bit, dimension, kind in EXHAUSTED_BITS:
            if result.exhausted & bit:
                self._count(dimension, kind)
        wait = result.wait_ms / 1000
        broker = self.shared.broker_limiter
        now = time.monotonic()
        if broker.enabled and broker.available(now).exhausted:
            self._count_broker(now)
            if broker.has_reservations and not result.exhausted:
                # Another dispatcher holds a reservation; it may hand part of it back.
                await broker.wait_changed(max(broker.next_refill() - now, 0.0))
                return
            wait = max(wait, broker.next_refill() - now)
        window = self._renewal_window(result.exhausted)
        clock = self.shared.renewals if window > 1 and self.renews_alone() else None
        self.waiting_for_quota = True
        try:
            await self._sleep(wait, window, clock)
        finally:
            self.waiting_for_quota = False

    def _renewal_window(self, exhausted: int) -> int:
        """How late (ms) this dispatcher may wake for its SUBSCRIPTION quota's renewal: when
        that quota alone holds it back and one call takes all of it, the renewal may be
        served up to a fortieth of the period (at most ``RENEWAL_WINDOW_MS``) late: half of
        what keeps the period on its grid (``dispatch.lua``; the other half for the event
        loop's own delays), so nothing of its quota is lost; the
        dispatchers of a partition that renew in the same window then wake in the same turn
        and share one script call.  Else 1 (wake on the millisecond)."""
        sub = self._sub_args
        if exhausted != 4 or sub.relative or not 0 < sub.msg <= self.shared.settings.max_entries:
            return 1
        return max(1, min(RENEWAL_WINDOW_MS, sub.period * 1000 // 40))

    def renewal_window(self, result: DispatchResult) -> int:
        """``_renewal_window`` of a call that ended for want of quota; 1 for any other."""
        if result.reason not in BUDGET_REASONS:
            return 1
        return self._renewal_window(result.exhausted)

    def renews_alone(self) -> bool:
        """Whether the renewal clock may make this dispatcher's calls while it sleeps for its
        SUBSCRIPTION quota: only where a call needs nothing from the worker but its
        arguments (no BROKER limiter, no resource group, no tracing, packed calls of one
        partition merged on one server) and nothing is to be read again first."""
        shared = self.shared
        return not (
            shared.broker_limiter.enabled
            or self.group is not None
            or shared.tracer is not None
            or shared.script.cluster
            or not shared.script.multi_sha
            or self.refresh_needed
            or self._stopped
        )

    def renewal_call(self) -> tuple[Packed, int, bytes]:
        """The next call as the renewal clock makes it (``PackedScript.call_many``)."""
        self.settled = False
        return self._packed_keys, ARGC, self._packed_call_args((None, None))

    def count_renewal_wait(self) -> None:
        """A call the renewal clock made left the SUBSCRIPTION quota spent."""
        self._count("msg", Limiter.SUBSCRIPTION)

    async def _wait_for_broker(self) -> None:
        """The BROKER limiter is exhausted before the call: wait for its next period."""
        broker = self.shared.broker_limiter
        now = time.monotonic()
        self._count_broker(now)
        deadline = broker.next_refill()
        if broker.has_reservations:
            await broker.wait_changed(max(deadline - now, 0.0))
            return
        await self._sleep(deadline - now)

    def _count_broker(self, now: float) -> None:
        budget = self.shared.broker_limiter.available(now)
        if budget.messages is not None and budget.messages <= 0:
            self._count("msg", Limiter.BROKER)
        if budget.bytes is not None and budget.bytes <= 0:
            self._count("byte", Limiter.BROKER)

    def _count(self, dimension: str, kind: Limiter | str) -> None:
        key = (dimension, kind if isinstance(kind, str) else kind.value)
        self.throttled[key] = self.throttled.get(key, 0) + 1

    async def _park(self, next_due_ms: int) -> None:
        """Wait for a wake-up (data, permits, consumers) or the next scheduled redelivery."""
        timeout = PARK_FALLBACK_SECONDS
        if next_due_ms >= 0:
            timeout = min(timeout, max((next_due_ms - time.time() * 1000) / 1000, 0.0))
        if await self._sleep(timeout):
            self.refresh_needed = True

    async def _sleep(
        self, timeout: float, window_ms: int = 1, clock: AlarmClock | None = None
    ) -> bool:
        """Sleep up to ``timeout`` s (rounded up to the end of its window of ``window_ms``)
        or until woken (a wake-up, a changed limit); True when the time ran out.  The
        worker's alarm clock rings the end: thousands of dispatchers sleep this way at every
        period boundary (or ``clock``: the renewal clock, which may make calls for it)."""
        if timeout <= 0 or self.wake.is_set():
            self.wake.clear()
            await asyncio.sleep(0)
            return False
        self.alarm += 1
        clock = clock or self.shared.alarms
        clock.ring_at(asyncio.get_running_loop().time() + timeout, self, window_ms)
        try:
            await self.wake.wait()
        finally:
            self.wake.clear()
            self.alarm += 1  # the alarm of this sleep, if still to come, wakes nothing
        return self.rang == self.alarm - 1


def _smaller(reserved: int | None, granted: int) -> int | None:
    """The tighter of a BROKER reservation (None = no limit) and a group grant (-1 = none)."""
    if granted < 0:
        return reserved
    return granted if reserved is None else min(reserved, granted)
