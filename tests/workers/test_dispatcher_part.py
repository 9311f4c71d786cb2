"""A ``Dispatcher`` on its own: a context, the shared dispatch state, limits handed down.

No worker runs: the partition's backlog and consumer are made through the scripts clients
use (``tests.workers.test_dispatch_script.Partition``), and the dispatcher is driven against
a real Redis.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from dataclasses import replace

import redis
from redis.asyncio import Redis

from models.dispatch_rate import DispatchRate
from models.flow_resolution import FlowInputs, resolve_flow
from models.resolution import PolicyInputs, resolve_limits
from sluice.protocol import keys
from tests.workers.parts import make_context, make_shared
from tests.workers.test_dispatch_script import Partition
from workers.dispatcher import Dispatcher, limit_args
from workers.scriptcall import pack_args

FLOW = resolve_flow(FlowInputs())


def delivered(client: redis.Redis, partition: Partition, subscription: str) -> int:
    return int(client.hget(keys.sub_key(partition.name, subscription, "stats"), "msg_out") or 0)


def limits(topic_msg: int = -1, sub_msg: int = -1):
    """The TOPIC args and SUBSCRIPTION limit a runner would hand down."""
    inputs = PolicyInputs(
        topic_dispatch_rate=DispatchRate(msg=topic_msg),
        topic_subscription_dispatch_rate=DispatchRate(msg=sub_msg),
    )
    resolved = resolve_limits(inputs, "s")
    assert resolved.subscription is not None
    return resolved.subscription, limit_args(resolved.topic)


async def wait_for(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met"
        await asyncio.sleep(0.02)


@asynccontextmanager
async def running(settings, url: str, partition: Partition, *args, **kwargs):
    """A dispatcher of subscription ``s`` of ``partition`` (``args``: the rest of
    ``Dispatcher``'s), with a context and shared state of its own on a client of its own,
    and that shared state; stopped and closed afterwards."""
    client = Redis.from_url(url)
    context = make_context(settings, client)
    shared = make_shared(context)
    dispatcher = Dispatcher(context, shared, partition.name, "s", *args, **kwargs)
    try:
        yield dispatcher, shared
    finally:
        await dispatcher.stop()
        await shared.script.close()
        await client.aclose()


def test_a_dispatcher_hands_out_what_its_limits_allow_and_takes_new_ones(settings, redis_server):
    sync = redis.Redis.from_url(redis_server.url)
    partition = Partition(sync)
    partition.produce(40)
    partition.subscribe("s")

    async def scenario():
        async with running(settings, redis_server.url, partition) as (dispatcher, shared):
            subscription, topic = limits(topic_msg=10)
            dispatcher.apply(subscription, topic, FLOW)
            dispatcher.start()
            await wait_for(lambda: delivered(sync, partition, "s") >= 10)
            await asyncio.sleep(0.3)  # the rest of the period: nothing more
            assert delivered(sync, partition, "s") == 10
            assert dispatcher.waiting_for_quota
            assert dispatcher.throttled[("msg", "topic")] >= 1
            assert not shared.gate.busy_before(shared.gate.generation + 1)
            # A lower SUBSCRIPTION limit handed down binds from the next period on.
            subscription, topic = limits(topic_msg=10, sub_msg=3)
            dispatcher.apply(subscription, topic, FLOW)
            # The changed limit taken; the TOPIC limit, equal, kept as it was.
            assert dispatcher.rate is subscription and dispatcher.topic_args == topic
            dispatcher.wake.set()
            await wait_for(lambda: delivered(sync, partition, "s") >= 13, timeout=3)
            await asyncio.sleep(0.3)
            assert delivered(sync, partition, "s") == 13

    asyncio.run(scenario())
    sync.close()


def test_a_fenced_dispatcher_reports_it_and_stops(settings, redis_server):
    sync = redis.Redis.from_url(redis_server.url)
    partition = Partition(sync)
    partition.produce(5)
    partition.subscribe("s")
    sync.set(keys.lease(partition.name), "another-worker:7")

    async def scenario():
        lost = asyncio.Event()
        fenced = running(settings, redis_server.url, partition, "unit:1", on_fenced=lost.set)
        async with fenced as (dispatcher, _shared):
            subscription, topic = limits()
            dispatcher.apply(subscription, topic, FLOW)
            dispatcher.start()
            await asyncio.wait_for(lost.wait(), 5)
            await asyncio.wait_for(asyncio.shield(dispatcher._task), 5)
            assert delivered(sync, partition, "s") == 0

    asyncio.run(scenario())
    sync.close()


def test_a_consumer_joining_during_a_refresh_is_not_missed(settings, redis_server):
    """A wake-up that asks for a refresh while one is reading the consumers must survive it:
    otherwise a consumer that subscribes just after another left (an Exclusive subscription
    handed over) waits for the park fallback before anything is dispatched to it."""
    sync = redis.Redis.from_url(redis_server.url)
    partition = Partition(sync)
    partition.subscribe("s")

    async def scenario():
        client = Redis.from_url(redis_server.url)
        context = make_context(settings, client)
        shared = make_shared(context)
        dispatcher = Dispatcher(context, shared, partition.name, "s")
        try:
            refresh = asyncio.create_task(dispatcher.refresh_consumers())
            await asyncio.sleep(0)  # the read is on its way
            assert not refresh.done()
            dispatcher.refresh_needed = True  # what a consumer's wake-up does meanwhile
            await refresh
            assert dispatcher.refresh_needed
        finally:
            await shared.script.close()
            await client.aclose()

    asyncio.run(scenario())
    sync.close()


def test_packed_arguments_are_the_call_arguments_packed(settings, redis_server, monkeypatch):
    """The arguments a dispatcher keeps packed between calls follow every change of what
    they come from: they are always ``DispatchArgs.argv()`` packed."""
    sync = redis.Redis.from_url(redis_server.url)
    partition = Partition(sync)
    monkeypatch.setattr(time, "time", lambda: 1_764_000_000.123)  # one clock for both forms

    def same(dispatcher, reserved, grant=None) -> bytes:
        packed = dispatcher._packed_call_args(reserved, grant)
        assert packed == pack_args(dispatcher._call_args(reserved, grant).argv())
        return packed

    async def scenario():
        async with running(settings, redis_server.url, partition, "token-1") as (dispatcher, _):
            subscription, topic = limits(topic_msg=10)
            dispatcher.apply(subscription, topic, FLOW)
            first = same(dispatcher, (None, None))
            assert same(dispatcher, (None, None)) == first
            assert dispatcher._packed is not None
            kept = dispatcher._packed[1]
            same(dispatcher, (7, 1024))
            assert dispatcher._packed[1] is kept  # budgets change, the rest stays packed
            dispatcher.rr_offset = 12
            same(dispatcher, (3, None))
            # The same limits resolved again (equal objects): still packed, and the dispatcher
            # keeps the objects it had, which later calls find without comparing them field
            # by field.
            again, topic_again = limits(topic_msg=10)
            flow_again = resolve_flow(FlowInputs())
            assert (again, topic_again, flow_again) == (subscription, topic, FLOW)
            dispatcher.apply(again, topic_again, flow_again)
            same(dispatcher, (3, None))
            assert dispatcher._packed[1] is kept
            assert dispatcher.flow is FLOW and dispatcher.rate is subscription
            assert any(part is FLOW for part in dispatcher._packed[0])
            subscription, topic = limits(topic_msg=10, sub_msg=3)
            dispatcher.apply(subscription, topic, FLOW)
            changed = same(dispatcher, (None, None))
            assert changed != first and dispatcher._packed[1] is not kept
            dispatcher.take_consumers(b"Failover", [b"c2", b"c1"])
            assert b"c1" in same(dispatcher, (None, None))
            dispatcher.take_consumers(b"Key_Shared", [b"c1"])
            same(dispatcher, (None, None))
            dispatcher.unacked_bound = 5
            unacked = replace(FLOW.max_unacked_per_subscription, value=6)
            flow = replace(FLOW, max_unacked_per_subscription=unacked)
            dispatcher.apply(subscription, topic, flow)
            assert b"$1\r\n6\r\n" in same(dispatcher, (None, None))
            dispatcher.fencing_token = "token-2"
            assert b"token-2" in same(dispatcher, (None, None))

    asyncio.run(scenario())
    sync.close()


def test_renewals_of_a_partition_in_one_window_share_a_script_call(settings, redis_server):
    """Subscriptions of one partition limited to one message a period, whose periods began a
    few milliseconds apart, wake for their renewals in the same window and renew in one
    ``dispatch_many.lua`` call, none handing out more than its limit, and, unless the machine
    delays the wake-ups beyond what the limiter tolerates, their periods back to back on their
    grid."""
    sync = redis.Redis.from_url(redis_server.url)
    partition = Partition(sync)
    partition.produce(200)
    names = [f"s{i}" for i in range(8)]
    for name in names:
        partition.subscribe(name)

    def period_start(name: str) -> float:
        return float(sync.hget(keys.sub_key(partition.name, name, "lim"), "mws") or 0)

    async def scenario():
        client = Redis.from_url(redis_server.url)
        context = make_context(settings, client)
        shared = make_shared(context)
        subscription, topic = limits(sub_msg=1)
        dispatchers = [Dispatcher(context, shared, partition.name, n) for n in names]
        try:
            for dispatcher in dispatchers:  # first periods one after another: calls of their own
                dispatcher.apply(subscription, topic, FLOW)
                dispatcher.start()
                while not dispatcher.waiting_for_quota:
                    await asyncio.sleep(0.001)
            assert all(delivered(sync, partition, n) == 1 for n in names)
            starts = {n: period_start(n) for n in names}
            calls = sum(d.dispatch_calls for d in dispatchers)
            merged = shared.script.merged_calls
            await asyncio.sleep(2.5)  # two renewals each
            renewed = sum(d.dispatch_calls for d in dispatchers) - calls
            merged = shared.script.merged_calls - merged
            assert renewed >= len(names)
            # Most renewals ran merged (a window's boundary may split the eight).
            assert merged >= renewed * 0.7, (merged, renewed)
            on_grid = 0
            for name in names:
                # Every renewal came a whole period or more after the one before: the limit
                # of one a period holds, however late the machine woke the dispatchers.
                count, began = delivered(sync, partition, name), period_start(name)
                assert 2 <= count <= 1 + (began - starts[name]) / 1000, (name, count)
                on_grid += began in (starts[name] + 2000, starts[name] + 3000)
            assert on_grid >= 1
        finally:
            await asyncio.gather(*(d.stop() for d in dispatchers))
            await shared.script.close()
            await client.aclose()

    asyncio.run(scenario())
    sync.close()


def test_only_a_small_subscription_quota_renews_in_a_window(settings, redis_server):
    """A quota one call takes whole may be renewed up to a fortieth of its period late; a
    larger one, a TOPIC quota or a relative limit renews on the millisecond."""
    sync = redis.Redis.from_url(redis_server.url)
    partition = Partition(sync)

    async def scenario():
        async with running(settings, redis_server.url, partition) as (dispatcher, shared):
            max_entries = shared.settings.max_entries
            subscription, topic = limits(sub_msg=max_entries)
            dispatcher.apply(subscription, topic, FLOW)
            assert dispatcher._renewal_window(4) == 25
            assert dispatcher._renewal_window(1) == 1  # the TOPIC quota
            assert dispatcher._renewal_window(5) == 1
            subscription, topic = limits(sub_msg=max_entries + 1)
            dispatcher.apply(subscription, topic, FLOW)
            assert dispatcher._renewal_window(4) == 1

    asyncio.run(scenario())
    sync.close()


def test_a_renewal_the_worker_serves_late_keeps_its_period_on_the_grid(settings, redis_server):
    """A subscription waiting for its quota's renewal, served 400 ms late because the
    worker's event loop stalled (a collection, a burst of work), keeps its period on the
    grid: its previous call told the next one that the quota was spent, so the lateness is
    not taken for a quiet spell, and the subscription loses none of its limit."""
    sync = redis.Redis.from_url(redis_server.url)
    # Redis knows when it started to the second: a quota spent in its first second counts as
    # spent before a restart (whose periods start again).
    while sync.info("server")["uptime_in_seconds"] < 2:
        time.sleep(0.1)
    partition = Partition(sync)
    partition.produce(20)
    partition.subscribe("s")

    def period_start() -> float:
        return float(sync.hget(keys.sub_key(partition.name, "s", "lim"), "mws") or 0)

    async def scenario():
        async with running(settings, redis_server.url, partition) as (dispatcher, _shared):
            rate = DispatchRate(msg=1, period=2)
            resolved = resolve_limits(PolicyInputs(topic_subscription_dispatch_rate=rate), "s")
            assert resolved.subscription is not None
            dispatcher.apply(resolved.subscription, limit_args(resolved.topic), FLOW)
            dispatcher.start()
            await wait_for(lambda: dispatcher.waiting_for_quota)
            assert delivered(sync, partition, "s") == 1
            start = period_start()
            # Until just before the renewal (Redis's clock is this machine's), then a stall.
            await asyncio.sleep(max(0.0, (start + 2000) / 1000 - time.time() - 0.05))
            time.sleep(0.45)
            await wait_for(lambda: delivered(sync, partition, "s") == 2)
            assert period_start() == start + 2000  # on the grid, 400 ms late
            assert delivered(sync, partition, "s") == 2

    asyncio.run(scenario())
    sync.close()
