"""``PartitionRunner.resolve``: the limits in force, resolved once per subscription for the
same limits and publish rate, and again as soon as either changes (the rate only when a
limit follows it)."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from models.dispatch_rate import DispatchRate
from models.flow_resolution import FlowInputs, resolve_flow
from models.resolution import PolicyInputs
from sluice.protocol.names import TopicName
from tests.workers.parts import make_context, make_shared
from workers.partition import PartitionRunner
from workers.policy import PartitionLimits

FLOW = resolve_flow(FlowInputs())


def limits(sub_msg: int, relative: bool = False) -> PartitionLimits:
    inputs = PolicyInputs(
        topic_subscription_dispatch_rate=DispatchRate(msg=sub_msg, relative=relative),
        subscription_dispatch_rates={"own": DispatchRate(msg=99)},
    )
    return PartitionLimits(inputs, FLOW)


def test_resolutions_follow_the_limits_and_the_publish_rate(settings, redis_server):
    async def scenario():
        client = Redis.from_url(redis_server.url)
        context = make_context(settings, client)
        shared = make_shared(context)
        runner = PartitionRunner(context, shared, TopicName("t", "ns", "resolve"), limits(5))
        try:
            first = runner.resolve("s")
            assert first.msg_per_second == 5
            assert runner.resolve("s") is first  # resolved once
            assert runner.resolve("own").msg_per_second == 99
            runner.apply_limits(limits(7))  # a policy change
            assert runner.resolve("s").msg_per_second == 7
            kept = runner.resolve("s")
            runner.publish.add(0.0, 0, 0)
            runner.publish.add(1.0, 100, 1000)  # another publish rate: no limit follows it
            assert runner.resolve("s") is kept
            assert runner.resolve("s") == runner.limits.resolve("s", runner.publish.rate())
            runner.apply_limits(limits(7, relative=True))
            kept = runner.resolve("s")
            assert kept.msg_per_second == 7 + 100
            runner.publish.add(2.0, 300, 3000)  # another publish rate: resolved again
            assert runner.resolve("s") is not kept
            assert runner.resolve("s") == runner.limits.resolve("s", runner.publish.rate())
        finally:
            await shared.script.close()
            await client.aclose()

    asyncio.run(scenario())


def test_the_same_limits_again_change_no_dispatcher(settings, redis_server):
    """Limits handed down again unchanged (a resync) name no dispatcher to wake and leave
    each one's limits the same objects; a change names the dispatchers it changes."""

    async def scenario():
        client = Redis.from_url(redis_server.url)
        context = make_context(settings, client)
        shared = make_shared(context)
        runner = PartitionRunner(context, shared, TopicName("t", "ns", "again"), limits(5))
        try:
            s, own = runner._add("s"), runner._add("own")
            rate, flow = s.rate, s.flow
            assert runner.apply_limits(limits(5)) == []  # equal limits, new objects
            assert s.rate is rate and s.flow is flow
            assert runner.apply_limits(limits(7)) == [s]  # "own" keeps its 99
            assert s.rate is not None and s.rate.permits_msg == 7
            assert own.rate is not None and own.rate.permits_msg == 99
        finally:
            await shared.script.close()
            await client.aclose()

    asyncio.run(scenario())
