"""``LeaseOwnership`` on its own: two fleet members on one Redis, hooks instead of workers."""

from __future__ import annotations

import asyncio

import pytest
import redis
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from sluice.protocol import keys
from sluice.protocol.names import TopicName
from tests.workers.parts import make_context
from workers.context import OwnershipHooks
from workers.leases import LeaseOwnership, rendezvous_owner

PARTITIONS = [TopicName("acme", "leases", "t").partition(i) for i in range(6)]


class Member:
    """One fleet member: an ownership with hooks that count what it asked for."""

    def __init__(self, settings, client: Redis, worker_id: str) -> None:
        self.context = make_context(settings, client, worker_id)
        self.ownership = LeaseOwnership(1.0)
        self.rebalances = 0
        self.recoveries = 0

    def hooks(self) -> OwnershipHooks:
        async def rebalance():
            self.rebalances += 1

        async def recover():
            self.recoveries += 1
            return True

        return OwnershipHooks(lambda: PARTITIONS, rebalance, recover)

    async def join(self) -> None:
        await self.ownership.join(self.context, self.hooks())


def test_two_members_share_the_partitions_by_rendezvous_and_take_over(settings, redis_server):
    sync = redis.Redis.from_url(redis_server.url)
    sync.delete(keys.WORKERS, *(keys.lease(p) for p in PARTITIONS))

    async def scenario():
        client = Redis.from_url(redis_server.url)
        a, b = Member(settings, client, "a"), Member(settings, client, "b")
        try:
            await a.join()
            await b.join()
            await a.ownership.cycle()
            await b.ownership.cycle()
            await a.ownership.cycle()  # a learns of b: it lets go of b's share
            for partition in PARTITIONS:
                owner = rendezvous_owner(["a", "b"], partition.full)
                member = a if owner == "a" else b
                other = b if member is a else a
                assert member.ownership.owns(partition) and not other.ownership.owns(partition)
                token = member.ownership.token(partition)
                assert token.startswith(f"{owner}:")
                assert sync.get(keys.lease(partition)).decode() == token
            assert a.rebalances >= 1
            # a leaves: b takes everything on its next cycle.
            await a.ownership.stop()
            assert sync.zscore(keys.WORKERS, "a") is None
            await b.ownership.cycle()
            assert all(b.ownership.owns(p) for p in PARTITIONS)
            # The admin service fences b off: b gives everything up and recovers.
            sync.hset(keys.worker_info("b"), "fenced", "5-0")
            await b.ownership.cycle()
            assert b.recoveries == 1
            assert sync.hget(keys.worker_info("b"), "fenced") is None
        finally:
            await b.ownership.stop()
            await client.aclose()

    asyncio.run(scenario())
    sync.close()


def test_leases_taken_in_a_cycle_that_then_fails_are_rebalanced_by_the_next(settings, redis_server):
    sync = redis.Redis.from_url(redis_server.url)
    sync.delete(keys.WORKERS, *(keys.lease(p) for p in PARTITIONS))

    async def scenario():
        client = Redis.from_url(redis_server.url)
        a = Member(settings, client, "a")
        try:
            await a.join()

            async def connection_lost(*_args):
                raise RedisConnectionError("Connection closed by server.")

            # The leases are taken, then Redis drops the connection before the cycle asks
            # the worker to run them.
            client.sadd = connection_lost  # type: ignore[method-assign]
            with pytest.raises(RedisConnectionError):
                await a.ownership.cycle()
            assert all(a.ownership.owns(p) for p in PARTITIONS)
            assert a.rebalances == 0
            del client.sadd
            await a.ownership.cycle()
            assert a.rebalances == 1
            await a.ownership.cycle()  # nothing changed since
            assert a.rebalances == 1
        finally:
            await a.ownership.stop()
            await client.aclose()

    asyncio.run(scenario())
    sync.close()
