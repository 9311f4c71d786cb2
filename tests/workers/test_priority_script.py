"""``dispatch.lua``'s priority index (``priorityIndexOnly``: the layout a partition keeps when
level streams are off), called directly on a real Redis: entries go out highest
priority first and in stream order within a priority, small and large alike, over several
calls under a message limit (read ahead once, then handed out from the index); an entry
deleted while it waits in the index is dropped, uncharged."""

from __future__ import annotations

import msgpack
import pytest
import redis

from sluice.protocol import keys
from sluice.protocol.frames import DispatchArgs, DispatchResult, LimitArgs
from sluice.protocol.scripts import DISPATCH, PRODUCE_SCRIPT
from tests.workers.test_dispatch_script import NOW_MS, Partition

LARGE = 3000  # payload bytes of a large entry


class PriorityPartition(Partition):
    """A partition whose entries carry priorities, one Shared subscription ``s``."""

    def __init__(self, client: redis.Redis) -> None:
        super().__init__(client)
        # The priority index (level streams are the default: docs/priority.md).
        client.hset(keys.limits(self.name), "priorityIndexOnly", 1)
        self.sent: list[tuple[int, str, list[bytes]]] = []  # (priority, id, fields)

    def produce_levels(self, sent: list[tuple[int, bytes]]) -> None:
        entries = [["d", payload, "u", str(level)] for level, payload in sent]
        script_keys, args = PRODUCE_SCRIPT.call(self.name, entries)
        self.scripts["produce"](keys=script_keys[:3], args=args)
        rows = self.client.xrange(keys.log(self.name))[-len(sent) :]
        for (level, _), (entry_id, fields) in zip(sent, rows, strict=True):
            flat = [item for pair in fields.items() for item in pair]
            self.sent.append((level, entry_id.decode(), flat))

    def hand_out(self, at: float, messages: int = -1) -> DispatchResult:
        args = DispatchArgs(
            subscription="s",
            queue_prefix=keys.sub_prefix(self.name, "s") + "q:",
            now_ms=NOW_MS,
            clock_ms=NOW_MS + at * 1000,
            max_entries=100,
            reads=4,
            topic=LimitArgs(messages, -1, 1, False),
        )
        return DispatchResult.from_reply(self.scripts["dispatch"](*DISPATCH.call(self.name, args)))

    def received(self) -> list[list]:
        """[id, fields, delivery count] of every entry in c1's receiver queue, in order (bytes;
        an [id, fields] row of a packet of new entries is a first delivery, count 1)."""
        queue = keys.sub_prefix(self.name, "s") + "q:c1"
        packets = self.client.lrange(queue, 0, -1)
        rows = [entry for raw in packets for entry in msgpack.unpackb(raw, raw=True)]
        return [row if len(row) == 3 else [*row, 1] for row in rows]


@pytest.fixture
def prio(redis_server) -> PriorityPartition:
    client = redis.Redis.from_url(redis_server.url)
    yield PriorityPartition(client)
    client.close()


def mixed_sizes(count: int) -> list[tuple[int, bytes]]:
    """(priority, payload) over levels 0..9 in a scattered order, every third one large."""
    return [
        ((i * 7) % 10, (b"L" * LARGE if i % 3 == 0 else b"s") + f"{i:03d}".encode())
        for i in range(count)
    ]


def test_order_holds_across_levels_and_within_one_whatever_the_size(prio):
    prio.subscribe("s")
    prio.produce_levels(mixed_sizes(50))
    # Ten messages a second: the backlog leaves over five periods, read ahead once.
    for second in range(5):
        assert prio.hand_out(float(second), messages=10).entries == 10
    assert prio.hand_out(5.0, messages=10).entries == 0
    expected = sorted(prio.sent, key=lambda row: -row[0])  # stable: stream order in a level
    assert prio.received() == [[entry_id.encode(), fields, 1] for _, entry_id, fields in expected]


def test_an_entry_deleted_while_indexed_is_dropped_uncharged(prio):
    prio.subscribe("s")
    prio.produce_levels([(9, b"first"), (5, b"gone"), (5, b"L" * LARGE), (1, b"last")])
    assert prio.hand_out(0.0, messages=1).entries == 1
    prio.client.xdel(keys.log(prio.name), prio.sent[1][1])
    after = prio.hand_out(1.0)
    assert (after.entries, after.messages) == (2, 2)
    assert [entry[0].decode() for entry in prio.received()] == [prio.sent[k][1] for k in (0, 2, 3)]


def test_what_went_out_is_pending_for_its_consumer_and_what_waits_for_the_holder(prio):
    """Entries read ahead and handed out in the same call, round robin over two consumers,
    are pending for the consumer that got them (a first delivery); the rest for the holder,
    however the call read them."""
    prio.subscribe("s", "c1")
    prio.subscribe("s", "c2")
    prio.produce_levels([((i * 3) % 10, f"m{i}".encode()) for i in range(40)])
    args = DispatchArgs(
        subscription="s",
        queue_prefix=keys.sub_prefix(prio.name, "s") + "q:",
        now_ms=NOW_MS,
        clock_ms=NOW_MS,
        rr_chunk=3,
        topic=LimitArgs(10, -1, 1, False),
    )
    result = DispatchResult.from_reply(prio.scripts["dispatch"](*DISPATCH.call(prio.name, args)))
    assert result.entries == 10
    log = keys.log(prio.name)
    handed: list[str] = []
    for consumer in ("c1", "c2"):
        queue = keys.sub_prefix(prio.name, "s") + f"q:{consumer}"
        got = [e for raw in prio.client.lrange(queue, 0, -1) for e in msgpack.unpackb(raw)]
        pending = prio.client.xpending_range(log, "s", "-", "+", 100, consumername=consumer)
        assert sorted(e[0] for e in got) == sorted(p["message_id"].decode() for p in pending)
        assert {p["times_delivered"] for p in pending} == {1}
        handed += [e[0] for e in got]
    expected = sorted(prio.sent, key=lambda row: -row[0])
    assert sorted(handed) == sorted(entry_id for _, entry_id, _ in expected[:10])
    held = prio.client.xpending_range(log, "s", "-", "+", 100, consumername="~held")
    assert len(held) == 30


def test_the_index_hands_entries_out_as_rows_of_new_entries(prio):
    """What the index hands out goes in a packet of new entries: each row the [id, fields]
    pair the call read or claimed, as the fast path's packets (first deliveries), not a row
    built per entry with a delivery count."""
    prio.subscribe("s")
    prio.produce_levels([(level, f"m{level}".encode()) for level in (1, 9, 5, 9, 0)])
    assert prio.hand_out(0.0, messages=2).entries == 2  # read ahead, the two 9s go at once
    assert prio.hand_out(1.0).entries == 3  # the rest from the index
    queue = keys.sub_prefix(prio.name, "s") + "q:c1"
    rows = [row for raw in prio.client.lrange(queue, 0, -1) for row in msgpack.unpackb(raw)]
    assert [len(row) for row in rows] == [2] * 5
    levels = [dict(zip(row[1][::2], row[1][1::2], strict=True)).get("u", "4") for row in rows]
    assert levels == ["9", "9", "5", "1", "0"]
