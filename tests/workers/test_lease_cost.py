"""Owning partitions costs a bounded number of Redis commands a second, whatever their number.

A fleet member (``LeaseOwnership`` over a real ``Catalog`` whose topic registry holds one
topic of N partitions, hooks instead of a worker) runs alone on a private ``redis-server``,
so every command that server counts is the member's.  Once it holds all N leases, the
commands of ``WINDOW`` seconds without traffic are taken from ``INFO commandstats`` deltas,
for N = 200 and N = 2,000.  With 1.5 s leases a cycle runs every 0.5 s and costs a heartbeat:
one pipeline of 7 commands (the ``SCRIPT EXISTS`` redis-py sends with a pipelined script
included), 12 with the 5 that ``worker_heartbeat.lua`` runs, which Redis counts too: about 24
commands a second.  Bound: under ``PER_SECOND_BOUND`` for both N, and N = 2,000 within
``TOLERANCE`` commands a second of N = 200 (a cycle more or less in the window: 12 commands in
5 s).  Renewing every lease every cycle, as leases once did, would cost N / 0.5 s more: 400
and 4,000 a second.  The assignment is not computed again during the window either.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
from redis.asyncio import Redis

from server.embedded_redis import EmbeddedRedis
from sluice.protocol.names import TopicName
from tests.workers.conftest import wait_until
from tests.workers.parts import make_context
from workers import leases
from workers.catalog import Catalog
from workers.context import OwnershipHooks
from workers.leases import LeaseOwnership

LEASE_TTL = 1.5
WINDOW = 5.0
PER_SECOND_BOUND = 40.0  # commands a second, those scripts run included
TOLERANCE = 3.0  # commands a second


@pytest.fixture(scope="module")
def private_redis(tmp_path_factory):
    server = EmbeddedRedis(tmp_path_factory.mktemp("lease-cost-redis"))
    server.start()
    yield server
    server.stop()


def commandstats(sync: redis.Redis) -> dict[str, int]:
    """Calls by command, but INFO's own."""
    stats = sync.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): int(value["calls"])
        for name, value in stats.items()
        if name != "cmdstat_info"
    }


def idle_commands(settings, url: str, partitions: int, monkeypatch) -> tuple[float, dict, int]:
    """Commands a second of a member holding ``partitions`` leases, by command, and how often
    the assignment was computed meanwhile."""
    sync = redis.Redis.from_url(url)
    sync.flushall()
    computed = []
    assigned = leases.assigned

    def counting(*args):
        computed.append(time.monotonic())
        return assigned(*args)

    monkeypatch.setattr(leases, "assigned", counting)

    async def scenario() -> tuple[float, dict, int]:
        client = Redis.from_url(url)
        context = make_context(settings, client, "cost")
        catalog = Catalog(context, sessions=None)
        topic = TopicName("acme", "cost", f"wide{partitions}")
        await catalog.plane.register_topics({topic.full: partitions})
        await catalog.load_registry()
        ownership = LeaseOwnership(LEASE_TTL)

        async def rebalance():
            pass

        async def recover():
            return True

        hooks = OwnershipHooks(catalog.partitions, rebalance, recover, lambda: catalog.version)
        try:
            await ownership.join(context, hooks)
            await ownership.start()
            await asyncio.to_thread(
                wait_until, lambda: len(ownership.tokens) == partitions, timeout=30
            )
            await asyncio.sleep(1.0)
            before, at = commandstats(sync), time.monotonic()
            computed.clear()
            await asyncio.sleep(WINDOW)
            after, seconds = commandstats(sync), time.monotonic() - at
            assert len(ownership.tokens) == partitions
        finally:
            await ownership.stop()
            await client.aclose()
        delta = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
        return sum(delta.values()) / seconds, delta, len(computed)

    try:
        return asyncio.run(scenario())
    finally:
        sync.close()


def test_idle_ownership_costs_the_same_commands_for_200_and_2000_partitions(
    settings, private_redis, monkeypatch
):
    small, small_by_command, small_assignments = idle_commands(
        settings, private_redis.url, 200, monkeypatch
    )
    large, large_by_command, large_assignments = idle_commands(
        settings, private_redis.url, 2000, monkeypatch
    )
    report = (
        f"N=200: {small:.1f}/s {small_by_command}; N=2000: {large:.1f}/s {large_by_command}; "
        f"assignments computed in the window: {small_assignments}, {large_assignments}"
    )
    assert small < PER_SECOND_BOUND and large < PER_SECOND_BOUND, report
    assert large <= small + TOLERANCE, report
    assert small_assignments == large_assignments == 0, report
    print(report)
