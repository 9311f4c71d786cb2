"""The renewal clock (``workers.renewal``): the SUBSCRIPTION-quota renewals of sleeping
dispatchers made in their stead, a partition's in one script call, on a real Redis."""

from __future__ import annotations

import asyncio
import time

import redis
from redis.asyncio import Redis

from sluice.protocol import keys
from tests.workers.parts import make_context, make_shared
from tests.workers.test_dispatch_script import Partition
from tests.workers.test_dispatcher_part import FLOW, delivered, limits, wait_for
from workers.dispatcher import Dispatcher


class Steps:
    """Counts the steps each dispatcher's own task takes."""

    def __init__(self, monkeypatch) -> None:
        self.count: dict[str, int] = {}
        step = Dispatcher.step

        async def counted(dispatcher: Dispatcher) -> None:
            name = dispatcher.subscription
            self.count[name] = self.count.get(name, 0) + 1
            await step(dispatcher)

        monkeypatch.setattr(Dispatcher, "step", counted)


async def started(settings, url: str, partition: Partition, names: list[str], sub_msg: int = 1):
    """Dispatchers of ``names`` limited to ``sub_msg`` a second, each past its first call."""
    client = Redis.from_url(url)
    context = make_context(settings, client)
    shared = make_shared(context)
    subscription, topic = limits(sub_msg=sub_msg)
    dispatchers = [Dispatcher(context, shared, partition.name, n) for n in names]
    for dispatcher in dispatchers:
        dispatcher.apply(subscription, topic, FLOW)
        dispatcher.start()
        await wait_for(lambda d=dispatcher: d.waiting_for_quota)
    return client, shared, dispatchers


async def stopped(client, shared, dispatchers) -> None:
    await asyncio.gather(*(d.stop() for d in dispatchers))
    await shared.script.close()
    await client.aclose()


def test_renewals_are_made_without_waking_the_dispatchers(settings, redis_server, monkeypatch):
    """Subscriptions at one message a second with backlog: after their first call their
    dispatchers' tasks take no step; the clock renews each period, a partition's
    renewals in one multi call, within the limit."""
    steps = Steps(monkeypatch)
    sync = redis.Redis.from_url(redis_server.url)
    partition = Partition(sync)
    partition.produce(200)
    names = [f"s{i}" for i in range(6)]
    for name in names:
        partition.subscribe(name)

    async def scenario():
        client, shared, dispatchers = await started(settings, redis_server.url, partition, names)
        try:
            first = dict(steps.count)
            calls = sum(d.dispatch_calls for d in dispatchers)
            multi = shared.script.multi_calls
            await asyncio.sleep(2.6)  # two renewals each
            assert sum(d.dispatch_calls for d in dispatchers) - calls >= 2 * len(names)
            assert steps.count == first  # nobody woke
            assert shared.script.multi_calls > multi
            for dispatcher in dispatchers:
                assert dispatcher.waiting_for_quota and not dispatcher.in_call
                assert dispatcher.throttled[("msg", "subscription")] >= 3
                # One a period at most: the first, and one per whole second since.
                assert 3 <= delivered(sync, partition, dispatcher.subscription) <= 4
            assert not shared.gate.busy_before(shared.gate.generation + 1)
        finally:
            await stopped(client, shared, dispatchers)

    asyncio.run(scenario())
    sync.close()


def test_a_limit_handed_down_binds_the_next_renewal(settings, redis_server):
    """The clock calls with the limits in force when it calls: a higher limit handed down
    (without a wake-up) is what the next renewal hands out."""
    sync = redis.Redis.from_url(redis_server.url)
    partition = Partition(sync)
    partition.produce(200)
    partition.subscribe("s")

    async def scenario():
        client, shared, dispatchers = await started(settings, redis_server.url, partition, ["s"])
        (dispatcher,) = dispatchers
        try:
            subscription, topic = limits(sub_msg=5)
            dispatcher.apply(subscription, topic, FLOW)
            await wait_for(lambda: delivered(sync, partition, "s") >= 6, timeout=3)
            await asyncio.sleep(0.2)
            # 1 in the first period; the renewal, with the new limit, 5 in the next.
            assert delivered(sync, partition, "s") == 6
        finally:
            await stopped(client, shared, dispatchers)

    asyncio.run(scenario())
    sync.close()


def test_another_outcome_wakes_the_dispatcher_with_it(settings, redis_server, monkeypatch):
    """A renewal that finds the backlog gone wakes the dispatcher, which parks on that
    outcome without another call; new entries and a wake-up start it again."""
    steps = Steps(monkeypatch)
    sync = redis.Redis.from_url(redis_server.url)
    partition = Partition(sync)
    partition.produce(2)
    partition.subscribe("s")

    async def scenario():
        client, shared, dispatchers = await started(settings, redis_server.url, partition, ["s"])
        (dispatcher,) = dispatchers
        try:
            await wait_for(lambda: dispatcher.settled, timeout=4)
            assert delivered(sync, partition, "s") == 2
            # The first call, the renewal that handed out the second entry in the clock, the
            # one that found nothing: the dispatcher took its outcome in one step, no call.
            assert dispatcher.dispatch_calls == 3
            assert steps.count["s"] == 2
            partition.produce(1)
            dispatcher.wake.set()
            await wait_for(lambda: delivered(sync, partition, "s") == 3, timeout=3)
        finally:
            await stopped(client, shared, dispatchers)

    asyncio.run(scenario())
    sync.close()


def test_a_renewal_refused_for_the_lease_fences_the_dispatcher(settings, redis_server):
    sync = redis.Redis.from_url(redis_server.url)
    partition = Partition(sync)
    partition.produce(20)
    partition.subscribe("s")
    sync.set(keys.lease(partition.name), "unit:1")

    async def scenario():
        client = Redis.from_url(redis_server.url)
        context = make_context(settings, client)
        shared = make_shared(context)
        lost = asyncio.Event()
        dispatcher = Dispatcher(context, shared, partition.name, "s", "unit:1", lost.set)
        subscription, topic = limits(sub_msg=1)
        dispatcher.apply(subscription, topic, FLOW)
        dispatcher.start()
        try:
            await wait_for(lambda: dispatcher.waiting_for_quota)
            sync.set(keys.lease(partition.name), "another-worker:2")
            await asyncio.wait_for(lost.wait(), 3)
            assert delivered(sync, partition, "s") == 1
            assert dispatcher.renewed is None and dispatcher.renewing is None
        finally:
            await stopped(client, shared, [dispatcher])

    asyncio.run(scenario())
    sync.close()


def test_renewals_of_several_partitions_in_one_window_share_a_script_run(settings, redis_server):
    """One subscription on each of six partitions, started together: the clock renews those
    that fall in one window together, whatever their partition, in one ``dispatch_many.lua``
    run, each within its limit."""
    sync = redis.Redis.from_url(redis_server.url)
    partitions = [Partition(sync) for _ in range(6)]
    for partition in partitions:
        partition.produce(200)
        partition.subscribe("s")

    async def scenario():
        client = Redis.from_url(redis_server.url)
        context = make_context(settings, client)
        shared = make_shared(context)
        subscription, topic = limits(sub_msg=1)
        dispatchers = [Dispatcher(context, shared, p.name, "s") for p in partitions]
        try:
            for dispatcher in dispatchers:
                dispatcher.apply(subscription, topic, FLOW)
                dispatcher.start()
            await wait_for(lambda: all(d.waiting_for_quota for d in dispatchers))
            began = time.monotonic()
            calls = sum(d.dispatch_calls for d in dispatchers)
            multi = shared.script.multi_calls
            await asyncio.sleep(2.5)  # two renewals each
            renewed = sum(d.dispatch_calls for d in dispatchers) - calls
            runs = shared.script.multi_calls - multi
            assert renewed >= len(dispatchers)
            # Runs of several partitions' renewals (a window's boundary may split the six).
            assert runs <= renewed / 2, (runs, renewed)
            periods = 1 + (time.monotonic() - began)
            for partition in partitions:
                assert delivered(sync, partition, "s") <= periods
        finally:
            await stopped(client, shared, dispatchers)

    asyncio.run(scenario())
    sync.close()
