"""``PartitionRunner.housekeeping``: a subscription's consumers' heartbeats are read only once
the oldest of them may have expired, and a consumer that stopped is released then."""

from __future__ import annotations

import asyncio
import time

import redis
from redis.asyncio import Redis

from models.flow_resolution import FlowInputs, resolve_flow
from models.resolution import PolicyInputs
from sluice.protocol import keys
from tests.workers.parts import make_context, make_shared
from tests.workers.test_dispatch_script import Partition
from workers.partition import PartitionRunner
from workers.policy import PartitionLimits


def heartbeat_reads(client: redis.Redis) -> int:
    """ZRANGEBYSCORE commands the server has run so far."""
    stats = client.info("commandstats").get("cmdstat_zrangebyscore")
    return int(stats["calls"]) if stats else 0


def test_heartbeats_are_read_when_the_oldest_may_have_expired(settings, redis_server):
    sync = redis.Redis.from_url(redis_server.url)
    partition = Partition(sync)
    partition.subscribe("s")
    alive = keys.sub_key(partition.name, "s", "alive")

    async def scenario():
        client = Redis.from_url(redis_server.url)
        context = make_context(settings, client)
        shared = make_shared(context)
        limits = PartitionLimits(PolicyInputs(), resolve_flow(FlowInputs()))
        runner = PartitionRunner(context, shared, partition.name, limits)
        runner._add("s")  # its dispatcher, not started
        runner._last_trim = time.monotonic() + 60  # no trim in this test

        async def housekeeping() -> None:
            runner._consumers_checked = 0.0  # the check is due on the partition
            await runner.housekeeping()

        try:
            timeout_ms = context.consumer_timeout_ms
            # c1's last heartbeat expires in 0.4 s.
            sync.zadd(alive, {"c1": int(time.time() * 1000) - timeout_ms + 400})
            await housekeeping()
            assert sync.zscore(alive, "c1") is not None
            reads = heartbeat_reads(sync)
            await housekeeping()  # nothing can have expired yet: nothing read
            assert heartbeat_reads(sync) == reads
            await asyncio.sleep(0.5)
            await housekeeping()
            assert heartbeat_reads(sync) > reads
            assert sync.zscore(alive, "c1") is None  # released
        finally:
            await shared.script.close()
            await client.aclose()

    asyncio.run(scenario())
    sync.close()
