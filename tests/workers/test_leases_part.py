"""``LeaseOwnership`` on its own: two fleet members on one Redis, hooks instead of workers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from dataplane.cursors import Cursors
from dataplane.scripts import register_scripts
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import LEASE_ACQUIRE, LEASE_RELEASE
from tests.workers.parts import make_context
from workers import leases
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
        self.rebalance_seconds = 0.0  # how long a rebalance takes (starting runners)

    def hooks(self) -> OwnershipHooks:
        async def rebalance():
            self.rebalances += 1
            await asyncio.sleep(self.rebalance_seconds)

        async def recover():
            self.recoveries += 1
            return True

        return OwnershipHooks(lambda: PARTITIONS, rebalance, recover)

    async def join(self) -> None:
        await self.ownership.join(self.context, self.hooks())


def test_two_members_share_the_partitions_by_rendezvous_and_take_over(settings, redis_server, sync):

    async def scenario(client: Redis):
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

    with_client(redis_server.url, scenario)


def test_leases_taken_in_a_cycle_that_then_fails_are_rebalanced_by_the_next(
    settings, redis_server, sync, monkeypatch
):
    monkeypatch.setattr(leases, "BATCH", 3)  # two batches of acquisitions

    async def scenario(client: Redis):
        a = Member(settings, client, "a")
        try:
            await a.join()
            sadd = client.sadd
            calls = []

            async def connection_lost_at_second_batch(*args):
                calls.append(args)
                if len(calls) == 2:
                    raise RedisConnectionError("Connection closed by server.")
                return await sadd(*args)

            # The first batch of leases is taken, then Redis drops the connection before
            # the cycle asks the worker to run them.
            client.sadd = connection_lost_at_second_batch  # type: ignore[method-assign]
            with pytest.raises(RedisConnectionError):
                await a.ownership.cycle()
            assert sum(a.ownership.owns(p) for p in PARTITIONS) == 3
            assert a.rebalances == 0
            del client.sadd
            await a.ownership.cycle()
            assert all(a.ownership.owns(p) for p in PARTITIONS)
            assert a.rebalances == 1
            await a.ownership.cycle()  # nothing changed since
            assert a.rebalances == 1
        finally:
            await a.ownership.stop()

    with_client(redis_server.url, scenario)


def crash(ownership: LeaseOwnership) -> None:
    """The process dies: its loops stop, nothing is released."""
    for task in ownership._tasks:
        task.cancel()


def with_client(url: str, scenario):
    """Run ``scenario(client)`` with an asyncio client of its own, closed afterwards; what
    it returns."""

    async def main():
        client = Redis.from_url(url)
        try:
            return await scenario(client)
        finally:
            await client.aclose()

    return asyncio.run(main())


@pytest.fixture
def sync(redis_server) -> Iterator[redis.Redis]:
    """A plain client on the test Redis, no fleet member or lease of these tests left in it."""
    client = redis.Redis.from_url(redis_server.url)
    _clean(client)
    yield client
    client.close()


def _clean(sync: redis.Redis) -> None:
    sync.delete(keys.WORKERS, *(keys.lease(p) for p in PARTITIONS))
    for member in ("a", "b"):
        sync.delete(
            keys.worker_info(member), keys.worker_leases(member), keys.worker_unloaded(member)
        )


def _holders(sync: redis.Redis) -> dict[str, str | None]:
    tokens = {p.full: sync.get(keys.lease(p)) for p in PARTITIONS}
    return {name: t.decode().rpartition(":")[0] if t else None for name, t in tokens.items()}


def _epoch(token: str) -> int:
    return int(token.rpartition(":")[2])


def test_acquire_takes_a_free_lease_its_own_and_a_dead_holders_never_a_live_ones(
    settings, redis_server
):
    sync = redis.Redis.from_url(redis_server.url)
    partition = TopicName("acme", "leases", "script")
    lease, counter = keys.lease(partition), keys.lease_epoch(partition)
    other = TopicName("acme", "leases", "script2")
    sync.delete(lease, counter, keys.lease(other), keys.lease_epoch(other))
    acquire = sync.register_script(LEASE_ACQUIRE.source)

    def take(me: str, *live: str) -> str | None:
        [token] = acquire(keys=[lease, counter], args=[me, *live])
        return token.decode() if token else None

    try:
        assert take("a", "a", "b") == "a:1"  # free
        assert sync.ttl(lease) == -1  # no TTL: it stands while its holder is live
        assert take("b", "a", "b") is None  # a is live
        assert sync.get(lease) == b"a:1"
        assert take("b", "b") == "b:2"  # a is not among the live workers
        assert take("b", "b") == "b:3"  # its own (a restarted process): a new epoch
        assert take("a:x", "a:x", "b") is None  # holder is what precedes the last ':'
        # Several partitions a call (a single server): each as if alone.
        sync.set(keys.lease(other), "c:9")
        both = acquire(
            keys=[lease, counter, keys.lease(other), keys.lease_epoch(other)], args=["b", "b"]
        )
        assert both == [b"b:4", b"b:1"]
        release = sync.register_script(LEASE_RELEASE.source)
        assert release(keys=[lease, keys.lease(other)], args=["b:4", "b:0"]) == 1
        assert sync.get(lease) is None and sync.get(keys.lease(other)) == b"b:1"
    finally:
        sync.delete(lease, counter, keys.lease(other), keys.lease_epoch(other))
        sync.close()


def test_a_member_whose_heartbeat_lapsed_drops_the_tokens_taken_and_takes_its_share_again(
    settings, redis_server, sync
):

    async def scenario(client: Redis):
        a, b = Member(settings, client, "a"), Member(settings, client, "b")
        try:
            await a.join()
            await b.join()
            for member in (a, b, a, b):
                await member.ownership.cycle()
            before = {p.full: a.ownership.token(p) for p in PARTITIONS if a.ownership.owns(p)}
            assert before and len(before) < len(PARTITIONS)
            # a is paused past its heartbeat while b carries on: b takes everything over.
            for _ in range(5):
                await asyncio.sleep(0.3)
                await b.ownership.cycle()
            assert "a" not in b.ownership.live
            assert set(_holders(sync).values()) == {"b"}
            assert all(a.ownership.owns(p) for p in PARTITIONS if p.full in before)
            # Resumed, a's heartbeat finds its entry gone: it drops the tokens of every lease
            # b took (all of them) and stops their runners.
            rebalances = a.rebalances
            await a.ownership.cycle()
            assert a.rebalances > rebalances
            assert not any(a.ownership.owns(p) for p in PARTITIONS)  # b still holds them
            await b.ownership.cycle()  # b sees a again and lets a's share go
            await a.ownership.cycle()
            after = {p.full: a.ownership.token(p) for p in PARTITIONS if a.ownership.owns(p)}
            assert set(after) == set(before)
            assert all(_epoch(after[name]) > _epoch(before[name]) for name in before)
            owners = _holders(sync)
            assert owners == {p.full: rendezvous_owner(["a", "b"], p.full) for p in PARTITIONS}
        finally:
            await a.ownership.stop()
            await b.ownership.stop()

    with_client(redis_server.url, scenario)


def test_a_lapsed_member_keeps_the_leases_nobody_took(settings, redis_server, sync):
    """Paused past its heartbeat with no one to take over (or only slow): its leases still
    hold its tokens, so it keeps them, and its runners, instead of starting them all again."""

    async def scenario(client: Redis):
        a = Member(settings, client, "a")
        try:
            await a.join()
            await a.ownership.cycle()
            before = dict(a.ownership.tokens)
            assert len(before) == len(PARTITIONS)
            await asyncio.sleep(1.2)  # past the 1 s TTL: the entry lapses
            rebalances = a.rebalances
            await a.ownership.cycle()
            assert a.ownership.tokens == before
            assert a.rebalances == rebalances  # no runner stopped or started
            # One lease another worker took meanwhile: only that token is dropped.
            sync.set(keys.lease(PARTITIONS[0]), "z:99")
            await asyncio.sleep(1.2)
            await a.ownership.beat()
            assert not a.ownership.owns(PARTITIONS[0])
            assert all(a.ownership.token(p) == before[p.full] for p in PARTITIONS[1:])
        finally:
            await a.ownership.stop()

    with_client(redis_server.url, scenario)


@pytest.mark.parametrize("on_thread", [True, False], ids=["thread", "loop"])
def test_a_busy_event_loop_lapses_the_heartbeat_only_when_it_beats_on_the_loop(
    settings, redis_server, sync, on_thread
):
    """The event loop blocked for three lease TTLs: a heartbeat on its own thread keeps the
    registration live throughout; one beaten on the loop lapses (the control case)."""

    async def scenario(client: Redis):
        a = Member(settings, client, "a")
        a.ownership = LeaseOwnership(1.0, redis_server.url if on_thread else None)
        try:
            await a.join()
            await a.ownership.start()
            before = dict(a.ownership.tokens)
            assert len(before) == len(PARTITIONS)
            time.sleep(3.0)  # the loop does nothing else meanwhile
            seconds, micros = sync.time()
            now_ms = seconds * 1000 + micros // 1000
            expiry = sync.zscore(keys.WORKERS, "a")
            live = expiry is not None and expiry > now_ms
            await asyncio.sleep(1.0)  # the beats that arrived are taken
            return live, before, dict(a.ownership.tokens)
        finally:
            await a.ownership.stop()

    live, before, after = with_client(redis_server.url, scenario)
    assert live is on_thread
    assert after == before  # either way nobody took a lease: every token is kept


def test_a_member_restarted_with_the_same_id_takes_its_partitions_again_at_once(
    settings, redis_server, sync
):

    async def scenario(client: Redis):
        a = Member(settings, client, "a")
        restarted = Member(settings, client, "a")
        try:
            await a.join()
            await a.ownership.start()
            before = {p.full: a.ownership.token(p) for p in PARTITIONS}
            assert all(before.values())
            crash(a.ownership)  # the process dies: nothing is released
            # The same worker id starts again at once, its registry entry still live.
            await restarted.join()
            await restarted.ownership.start()
            after = {p.full: restarted.ownership.token(p) for p in PARTITIONS}
            assert all(_epoch(after[n]) > _epoch(before[n]) for n in before)
            assert {sync.get(keys.lease(p)).decode() for p in PARTITIONS} == set(after.values())
        finally:
            await restarted.ownership.stop()

    with_client(redis_server.url, scenario)


def test_a_restarted_member_lets_go_of_what_is_no_longer_its_own(settings, redis_server, sync):
    """A worker restarted with the same id while another joined: the leases its previous
    process held that are now the other's are released, not kept by a live worker that
    does not know it holds them."""

    async def scenario(client: Redis):
        a, b = Member(settings, client, "a"), Member(settings, client, "b")
        restarted = Member(settings, client, "a")
        try:
            await a.join()
            await a.ownership.start()
            crash(a.ownership)  # dies holding everything
            await b.join()
            await b.ownership.cycle()  # a is live: b cannot take its share yet
            assert set(_holders(sync).values()) == {"a"}
            await restarted.join()
            await restarted.ownership.start()
            await b.ownership.cycle()
            expected = {p.full: rendezvous_owner(["a", "b"], p.full) for p in PARTITIONS}
            assert "b" in expected.values()
            assert _holders(sync) == expected
        finally:
            await restarted.ownership.stop()
            await b.ownership.stop()

    with_client(redis_server.url, scenario)


def test_an_unloaded_partition_is_taken_again_at_the_next_heartbeat(settings, redis_server, sync):

    async def scenario(client: Redis):
        a = Member(settings, client, "a")
        try:
            await a.join()
            await a.ownership.cycle()
            partition = PARTITIONS[0]
            token = a.ownership.token(partition)
            cursors = Cursors(client, register_scripts(client))
            assert await cursors.unload([partition]) == ["a"]
            assert sync.get(keys.lease(partition)) is None
            rebalances = a.rebalances
            await a.ownership.cycle()
            again = a.ownership.token(partition)
            assert again and _epoch(again) > _epoch(token)
            assert sync.get(keys.lease(partition)).decode() == again
            assert a.rebalances >= rebalances + 1  # its runner stopped, then started again
            assert not sync.exists(keys.worker_unloaded("a"))
        finally:
            await a.ownership.stop()

    with_client(redis_server.url, scenario)


def test_a_slow_rebalance_delays_neither_the_heartbeat_nor_a_takeover(settings, redis_server, sync):
    """A worker starting the runners of many partitions stays live, and takes a dead
    worker's partitions over within the TTL and a third meanwhile."""

    async def scenario(client: Redis):
        a, b = Member(settings, client, "a"), Member(settings, client, "b")
        b.rebalance_seconds = 4.0
        try:
            await a.join()
            await a.ownership.start()
            await b.join()
            await b.ownership.start()
            share = sum(rendezvous_owner(["a", "b"], p.full) == "b" for p in PARTITIONS)
            deadline = time.monotonic() + 10
            while len(b.ownership.tokens) < share and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert len(b.ownership.tokens) == share
            assert b.ownership._rebalancing is not None and not b.ownership._rebalancing.done()
            crash(a.ownership)  # while b starts the runners of its share
            crashed = time.monotonic()
            lapsed = []
            while len(b.ownership.tokens) < len(PARTITIONS) and time.monotonic() < crashed + 10:
                seconds, micros = sync.time()
                score = sync.zscore(keys.WORKERS, "b")
                lapsed += [] if score and score > seconds * 1000 + micros // 1000 else [score]
                await asyncio.sleep(0.05)
            took = time.monotonic() - crashed
            ttl = a.ownership.ttl_ms / 1000
            assert took < ttl + ttl / 3 + 0.5, took
            assert not b.ownership._rebalancing.done()  # still busy with the first one
            assert lapsed == []
            assert set(_holders(sync).values()) == {"b"}
        finally:
            b.rebalance_seconds = 0.0
            await b.ownership.stop()

    with_client(redis_server.url, scenario)
