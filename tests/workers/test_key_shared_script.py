"""``dispatch.lua`` on a Key_Shared subscription, called directly on a real Redis: one consumer
that owns every slot takes the backlog as Shared would (in stream order, nothing held), and
a second consumer sends the subscription back to routing by key."""

from __future__ import annotations

import pytest
import redis

from sluice.protocol import keys
from sluice.protocol.frames import (
    DispatchArgs,
    DispatchResult,
    parse_position,
    range_notice,
    unpack_packets,
)
from sluice.protocol.scripts import DISPATCH, FLOW, PRODUCE_SCRIPT, SUBSCRIBE
from tests.workers.test_dispatch_script import NOW_MS, Partition


class KeyedPartition(Partition):
    """A partition with keyed entries and one Key_Shared subscription ``s``."""

    def __init__(self, client: redis.Redis) -> None:
        super().__init__(client)
        self.ids: list[str] = []

    def produce(self, count: int, keys_used: int = 7) -> None:  # type: ignore[override]
        before = len(self.ids)
        entries = [["d", b"x" * 10, "k", f"key-{(before + i) % keys_used}"] for i in range(count)]
        script_keys, args = PRODUCE_SCRIPT.call(self.name, entries)
        self.scripts["produce"](keys=script_keys[:3], args=args)
        rows = self.client.xrange(keys.log(self.name))
        self.ids = [entry_id.decode() for entry_id, _ in rows]

    def join(self, consumer: str, permits: int) -> None:
        call = SUBSCRIBE.call(
            self.name, "s", consumer, "Key_Shared", "earliest", NOW_MS, "{}", 60_000
        )
        self.scripts["subscribe"](keys=call[0], args=call[1])
        self.scripts["flow"](*FLOW.call(self.name, "s", consumer, permits, NOW_MS))

    def dispatch(self) -> DispatchResult:  # type: ignore[override]
        args = DispatchArgs(
            subscription="s",
            queue_prefix=keys.sub_prefix(self.name, "s") + "q:",
            now_ms=NOW_MS,
            clock_ms=NOW_MS,
            max_entries=100,
            reads=4,
            key_shared=True,
        )
        return DispatchResult.from_reply(self.scripts["dispatch"](*DISPATCH.call(self.name, args)))

    def received(self, consumer: str) -> list[str]:
        """The ids the consumer's receiver queue names, in order (range notices read back,
        packets of new entries unpacked)."""
        queue = keys.sub_prefix(self.name, "s") + "q:" + consumer
        ids = []
        for raw in self.client.lrange(queue, 0, -1):
            notice = range_notice(raw)
            if notice is None:
                rows = unpack_packets(raw)
            else:
                rows = self.client.xrange(keys.log(self.name), *notice)
            ids += [row[0].decode() for row in rows]
        return ids

    def held(self) -> int:
        return self.client.zcard(keys.sub_prefix(self.name, "s") + "redeliver")


@pytest.fixture
def part(redis_server) -> KeyedPartition:
    client = redis.Redis.from_url(redis_server.url)
    yield KeyedPartition(client)
    client.close()


def test_one_consumer_takes_keyed_entries_in_stream_order_up_to_its_permits(part):
    part.produce(30)
    part.join("c1", permits=10)
    first = part.dispatch()
    assert first.entries == 10
    assert part.received("c1") == part.ids[:10]
    # What it could not take stays in the stream: nothing is held for its key.
    assert part.held() == 0
    part.scripts["flow"](*FLOW.call(part.name, "s", "c1", 100, NOW_MS))
    second = part.dispatch()
    assert second.entries == 20
    assert part.received("c1") == part.ids


def test_a_second_consumer_routes_by_key_again(part):
    part.produce(40)
    part.join("c1", permits=1000)
    part.join("c2", permits=1000)
    result = part.dispatch()
    assert result.entries == 40
    one, two = part.received("c1"), part.received("c2")
    assert one and two, "both consumers own part of the ring"
    assert sorted(one + two, key=parse_position) == part.ids
    assert one == sorted(one, key=parse_position) and two == sorted(two, key=parse_position)
    # Each key went to one consumer only.
    key_of = {
        entry_id.decode(): fields[b"k"]
        for entry_id, fields in part.client.xrange(keys.log(part.name))
    }
    assert not {key_of[i] for i in one} & {key_of[i] for i in two}


def test_the_ring_of_one_owner_is_kept_with_the_consumers_it_was_built_for(part):
    state = keys.sub_prefix(part.name, "s") + "ks"
    part.produce(20)
    part.join("c1", permits=10)
    part.dispatch()
    ring = part.client.hget(state, "r")
    # One owner for the whole ring (consumer 1): later calls take it from here, unparsed.
    assert part.client.hget(state, "u") == f"1 {len(ring)} c1".encode()
    # A second consumer: the ring is rebuilt, the kept owner (for c1 alone) no longer counts.
    part.join("c2", permits=1000)
    part.dispatch()
    ring = part.client.hget(state, "r")
    assert part.client.hget(state, "u") == f"0 {len(ring)} c1 c2".encode()


def test_a_kept_owner_for_another_ring_is_not_used(part):
    state = keys.sub_prefix(part.name, "s") + "ks"
    part.produce(40)
    part.join("c1", permits=1000)
    part.join("c2", permits=1000)
    part.dispatch()
    # A kept owner that does not match the ring (written for a ring of another length) is
    # worked out again from the ring: both consumers keep their keys.
    ring = part.client.hget(state, "r")
    part.client.hset(state, "u", f"1 {len(ring) + 1} c1 c2")
    part.produce(40)
    part.dispatch()
    assert part.received("c1") and part.received("c2")
    assert part.client.hget(state, "u") == f"0 {len(ring)} c1 c2".encode()
