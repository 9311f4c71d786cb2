"""``EventFollower`` on its own: it applies batches, drains the gate, then confirms.

Events are added to a real Redis stream the way the admin service's relay adds them.
"""

from __future__ import annotations

import asyncio
import uuid

import orjson
from redis.asyncio import Redis

from dataplane.events import ChangeEvent, latest_position
from sluice.protocol import keys
from workers.events import EventFollower, split_events
from workers.gate import DispatchGate


async def publish(client: Redis, stream: str, kind: str, **payload) -> str:
    entry = await client.xadd(
        stream, {"kind": kind, "entity": "e", "payload": orjson.dumps(payload)}
    )
    return entry.decode()


def test_events_are_confirmed_only_after_the_gate_drains_and_a_failure_is_read_again(
    redis_server,
):
    stream = f"test-events-{uuid.uuid4().hex[:8]}"
    me = f"unit-{uuid.uuid4().hex[:8]}"

    async def scenario():
        client = Redis.from_url(redis_server.url)
        gate = DispatchGate()
        applied: list[list[ChangeEvent]] = []
        fail_next = [False]
        resyncs = []

        async def apply(events):
            applied.append(events)
            if fail_next[0]:
                fail_next[0] = False
                raise RuntimeError("database away")
            gate.advance()  # as the worker does when limits change

        async def resync():
            resyncs.append(True)

        await publish(client, stream, "topic", partitions=1)  # before the start: not read
        start = await latest_position(client, stream)
        follower = EventFollower(client, stream, me, gate, start, apply, resync)
        task = asyncio.create_task(follower.run())
        try:
            # A dispatch call issued under the old limits is still running.
            generation = gate.enter()
            first = await publish(client, stream, "policy", namespace="acme/orders")
            assert not await follower.caught_up(first, timeout=0.5)
            assert [e.kind for e in applied[0]] == ["policy"]
            assert await client.hget(keys.APPLIED, me) is None
            gate.leave(generation)
            assert await follower.caught_up(first, timeout=5)
            assert (await client.hget(keys.APPLIED, me)).decode() == first

            # Applying fails once: resync, the same batch again, then confirmed.
            fail_next[0] = True
            second = await publish(client, stream, "subscription", topic="t", subscription="s")
            assert await follower.caught_up(second, timeout=5)
            assert resyncs == [True]
            assert [b[0].id for b in applied[1:]] == [second, second]
            assert applied[1][0].payload == {"topic": "t", "subscription": "s"}
        finally:
            task.cancel()
            await asyncio.wait([task], timeout=5)
            await client.delete(stream)
            await client.hdel(keys.APPLIED, me)
            await client.aclose()

    asyncio.run(scenario())


def test_a_batch_splits_into_policy_reloads_and_catalog_events():
    events = [
        ChangeEvent("1-0", "policy", "x", {"namespace": "acme/orders"}),
        ChangeEvent("1-1", "broker.config", "x", {}),
        ChangeEvent("1-2", "topic", "t", {"partitions": 2}),
    ]
    namespaces, broker, catalog = split_events(events)
    assert namespaces == {"acme/orders"} and broker and [e.id for e in catalog] == ["1-2"]
    assert split_events([ChangeEvent("2-0", "policy", "x", {})])[0] == {None}
