"""The admin and worker scripts on a partition with level streams (docs/priority.md: entries of
priority L other than 4 in ``sl:{P}:log:L``), called directly on a real Redis: backlog,
counts, stats, internal stats, trim, peek and skip each treat the partition's streams as one,
and each test compares the answer with the one the test knows from what it sent.

The partition holds 40 entries, four of each priority 0..9 (so ten streams, the log holding
priority 4's), all sent in one call; subscription ``s`` has had the first five in dispatch
order (priority 9's four, then priority 8's first) handed to consumer ``c1``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from sluice.protocol import keys
from sluice.protocol.frames import LimitArgs
from sluice.protocol.scripts import (
    ACK,
    BACKLOG,
    BACKLOG_SET,
    COUNT_ENTRIES,
    INTERNAL_READ,
    PEEK,
    PRODUCE_SCRIPT,
    SKIP,
    STATS_LIVE,
    STATS_READ,
    SUBSCRIBE,
    TRIM,
    ScriptSpec,
)
from tests.workers.test_dispatch_script import NOW_MS, Partition

HANDED_OUT = 5  # entries dispatched to c1 before each test


def text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def id_key(entry_id: str) -> tuple[int, int]:
    ms, seq = entry_id.split("-")
    return int(ms), int(seq)


class LevelPartition(Partition):
    """A partition that uses level streams, with subscription ``s`` (consumer ``c1``)."""

    def __init__(self, client: redis.Redis) -> None:
        super().__init__(client)
        self.sent: list[tuple[int, str]] = []  # (priority, id), in send order

    def send(self, levels: list[int]) -> list[str]:
        entries = [
            ["d", f"m{len(self.sent) + i}".encode(), *(["u", str(lv)] if lv != 4 else [])]
            for i, lv in enumerate(levels)
        ]
        script_keys, args = PRODUCE_SCRIPT.call(self.name, entries)
        ids = [text(i) for i in self.scripts["produce"](keys=script_keys[:3], args=args)]
        self.sent += list(zip(levels, ids, strict=True))
        return ids

    def run(self, spec: ScriptSpec, *args: Any) -> Any:
        script_keys, argv = spec.call(self.name, *args)
        return self.scripts[spec.name](keys=script_keys, args=argv)

    def dispatch_order(self) -> list[str]:
        """Every id sent, highest priority first, in send (stream) order within one."""
        return [i for _, i in sorted(self.sent, key=lambda sent: (-sent[0], id_key(sent[1])))]

    def by_id(self) -> list[str]:
        return sorted((i for _, i in self.sent), key=id_key)

    def group(self, level: int) -> dict[str, Any]:
        (found,) = self.client.xinfo_groups(keys.level_log(self.name, level))
        return found


@pytest.fixture
def lv(redis_server) -> Iterator[LevelPartition]:
    client = redis.Redis.from_url(redis_server.url)
    part = LevelPartition(client)
    part.subscribe("s")
    part.send([(i * 7) % 10 for i in range(40)])
    assert client.hlen(keys.levels(part.name)) == 9  # every level but 4 has its stream
    handed = part.dispatch("s", 0.0, topic=LimitArgs(HANDED_OUT, -1, 1, False))
    assert handed.entries == HANDED_OUT
    yield part
    client.close()


def handed_out(lv: LevelPartition) -> list[str]:
    """What c1 got (pending), by id."""
    return sorted(lv.dispatch_order()[:HANDED_OUT], key=id_key)


# --- backlog.lua, count_entries.lua, backlog_set.lua ----------------------------------------


def counted_backlog(lv: LevelPartition, subscription: str, batch: int) -> int:
    """The backlog as a caller counts it from backlog.lua's answer, ``batch`` entries a call:
    what Redis knows, plus each stream it does not know counted (count_entries.lua) and
    stored (backlog_set.lua) on that stream."""
    reply = [text(x) for x in lv.run(BACKLOG, subscription)]
    if reply[0] == 0:
        return reply[1] + reply[2]
    assert reply[0] == 1
    total = reply[6] + reply[7]
    walks = [reply[1:6]] + [reply[k : k + 5] for k in range(8, len(reply), 5)]
    for ref, added, end, deleted, level in walks:
        counted, anchor = 0, ref
        while anchor != end:
            n, last = lv.run(COUNT_ENTRIES, anchor, batch, end, level)
            counted += n
            if n < batch:
                break
            anchor = text(last)
        position, read = ref, added - counted
        while True:
            reply = lv.run(BACKLOG_SET, subscription, position, read, batch, deleted, level)
            done = [text(x) for x in reply]
            if done[0] != 1:
                break
            position, read = done[1], done[2]
        assert done[0] == 0
        total += done[1] + done[2]
    return total


def test_the_backlog_is_pending_and_lag_over_every_stream(lv):
    assert lv.run(BACKLOG, "s") == [0, 40 - HANDED_OUT, HANDED_OUT]


def test_a_backlog_redis_cannot_tell_is_counted_stream_by_stream(lv):
    # Groups moved to an explicit id (no entries-read): the lag of log:1 and of the log is
    # unknown.  Each is moved past its first two entries, which leaves the backlog.
    firsts = {}
    for level in (1, 4):
        ids = [i for lv_, i in lv.sent if lv_ == level]
        stream = keys.level_log(lv.name, level)
        lv.client.execute_command("XGROUP", "SETID", stream, "s", ids[1])
        assert lv.group(level)["lag"] is None
        firsts[level] = ids[1]
    reply = [text(x) for x in lv.run(BACKLOG, "s")]
    # Highest level first: log (4) then log:1; lag and pending of the eight others.
    assert reply[:2] == [1, firsts[4]] and reply[5] == 4
    assert reply[8] == firsts[1] and reply[12] == 1 and len(reply) == 13
    assert (reply[6], reply[7]) == (40 - 8 - HANDED_OUT, HANDED_OUT)
    expected = 40 - 4  # four entries passed
    assert counted_backlog(lv, "s", batch=1) == expected
    # Stored: Redis knows each lag now.
    assert lv.run(BACKLOG, "s") == [0, expected - HANDED_OUT, HANDED_OUT]
    assert lv.group(1)["lag"] == 2 and lv.group(4)["lag"] == 2


def test_entries_are_counted_over_every_stream_in_id_order(lv):
    every = lv.by_id()
    counted, anchor, lasts = 0, "0-0", []
    while True:
        n, last = lv.run(COUNT_ENTRIES, anchor, 3)
        counted += n
        if n:
            lasts.append(text(last))
            anchor = text(last)
        if n < 3:
            break
    assert counted == 40
    assert lasts == [*every[2::3], every[-1]]
    # A range by ids: the same ids in each stream.
    assert lv.run(COUNT_ENTRIES, every[9], 100, every[29]) == [20, every[29].encode()]
    # One level's stream alone.
    sevens = [i for level, i in lv.sent if level == 7]
    assert lv.run(COUNT_ENTRIES, "0-0", 100, None, 7) == [4, sevens[-1].encode()]
    fours = [i for level, i in lv.sent if level == 4]
    assert lv.run(COUNT_ENTRIES, "0-0", 100, None, 4) == [4, fours[-1].encode()]


def test_streams_that_interleave_are_walked_in_id_order(redis_server):
    """Sends in several milliseconds interleave the streams' ids: counts in short calls and
    examine (either way) still go in id order, reading each stream in runs."""
    client = redis.Redis.from_url(redis_server.url)
    part = LevelPartition(client)
    rng = random.Random(7)
    for _ in range(8):
        part.send([rng.choice((0, 4, 4, 7, 9)) for _ in range(rng.randint(1, 6))])
        time.sleep(0.002)
    every = part.by_id()
    assert len({id_key(i)[0] for i in every}) > 1
    for most in (1, 2, 3, 5):
        lasts, anchor = [], "0-0"
        while (found := part.run(COUNT_ENTRIES, anchor, most))[0]:
            lasts.append(anchor := text(found[1]))
        assert lasts == [*every[most - 1 :: most], every[-1]][: len(lasts)]
        assert lasts[-1] == every[-1]
    first = [text((part.run(PEEK, "earliest", n) or [None])[0]) for n in range(1, len(every) + 2)]
    last = [text((part.run(PEEK, "latest", n) or [None])[0]) for n in range(1, len(every) + 2)]
    assert first == [*every, None]
    assert last == [*every[::-1], None]
    client.close()


# --- stats_live.lua, stats_read.lua, internal_read.lua --------------------------------------


def group_of(flat: list[Any]) -> dict[str, Any]:
    return {text(k): text(v) for k, v in zip(flat[0::2], flat[1::2], strict=True)}


def test_live_stats_sum_each_group_over_every_stream(lv):
    _, groups, _ = lv.run(STATS_LIVE, ["s"])
    (group,) = [group_of(g) for g in groups]
    assert (group["name"], group["pending"], group["lag"]) == ("s", HANDED_OUT, 40 - HANDED_OUT)


def test_the_stats_tick_reads_every_stream_and_each_level_from_its_own(lv):
    _, groups, (_, pending, _, _, waiting) = lv.run(STATS_READ, ["s"])
    (group,) = [group_of(g) for g in groups]
    assert (group["pending"], group["lag"]) == (HANDED_OUT, 40 - HANDED_OUT)
    mine = handed_out(lv)
    assert [pending[0], text(pending[1]), text(pending[2])] == [HANDED_OUT, mine[0], mine[-1]]
    assert [[text(c), int(n)] for c, n in pending[3]] == [["c1", HANDED_OUT]]
    # Each priority's backlog (0..9) from its own stream: four each, pending or not.
    assert waiting == [4] * 10
    # Two of priority 9 acknowledged, one undelivered entry of 8 passed (its group moved on,
    # so Redis no longer knows that lag: counted): those levels' figures only.
    nines = [i for level, i in lv.sent if level == 9]
    assert lv.run(ACK, "s", nines[:2]) == 2
    eights = [i for level, i in lv.sent if level == 8]
    lv.client.execute_command("XGROUP", "SETID", keys.level_log(lv.name, 8), "s", eights[1])
    assert lv.group(8)["lag"] is None
    *_, (*_, waiting) = lv.run(STATS_READ, ["s"])
    assert waiting == [4, 4, 4, 4, 4, 4, 4, 4, 3, 2]


def test_internal_stats_read_the_streams_as_one(lv):
    stream_flat, _token, *groups = lv.run(INTERNAL_READ)
    stream = {text(k): v for k, v in zip(stream_flat[0::2], stream_flat[1::2], strict=True)}
    every = lv.by_id()
    assert (stream["length"], stream["entries-added"]) == (40, 40)
    assert text(stream["first-entry"][0]) == every[0]
    assert text(stream["last-entry"][0]) == every[-1]
    assert text(stream["last-generated-id"]) == every[-1]
    ((group_flat, pending, consumers, scheduled),) = groups
    group = group_of(group_flat)
    assert (group["pending"], group["lag"]) == (HANDED_OUT, 40 - HANDED_OUT)
    assert pending[0] == HANDED_OUT and text(pending[1]) == handed_out(lv)[0]
    assert [(group_of(c)["name"], group_of(c)["pending"]) for c in consumers] == [("c1", 5)]
    assert scheduled == 0


# --- peek.lua -------------------------------------------------------------------------------


def test_peek_walks_pending_entries_then_the_rest_in_dispatch_order(lv):
    expected = handed_out(lv) + lv.dispatch_order()[HANDED_OUT:]
    got = [text((lv.run(PEEK, "backlog", n, "s") or [None])[0]) for n in range(1, 42)]
    assert got == [*expected, None]
    # Its fields come from its own stream.
    _, fields = lv.run(PEEK, "backlog", HANDED_OUT + 1, "s")
    assert fields[fields.index(b"u") + 1] == b"8"


def test_examine_walks_every_stream_in_id_order(lv):
    every = lv.by_id()
    first = [text((lv.run(PEEK, "earliest", n) or [None])[0]) for n in range(1, 42)]
    last = [text((lv.run(PEEK, "latest", n) or [None])[0]) for n in range(1, 42)]
    assert first == [*every, None]
    assert last == [*every[::-1], None]


# --- skip.lua -------------------------------------------------------------------------------


def skip(lv: LevelPartition, budget: int, pending: bool = True, cutoff: str = "+") -> list[int]:
    return lv.run(SKIP, "s", cutoff, budget, pending, "skipped")


def test_skip_takes_pending_entries_then_the_next_in_dispatch_order(lv):
    peeked = [text(lv.run(PEEK, "backlog", n, "s")[0]) for n in range(1, 41)]
    # The five pending, priority 8's other three, 7's four and 6's first.
    assert skip(lv, 13) == [13, 13]
    # What remains is what peek showed after the thirteenth, exactly.
    assert text(lv.run(PEEK, "backlog", 1, "s")[0]) == peeked[13]
    assert lv.run(BACKLOG, "s") == [0, 27, 0]
    # Each stream's lag stays known and exact.
    assert [lv.group(level)["lag"] for level in range(9, -1, -1)] == [0, 0, 0, 3, 4, 4, 4, 4, 4, 4]
    assert skip(lv, 1000) == [27, 27]
    assert lv.run(BACKLOG, "s") == [0, 0, 0]
    assert skip(lv, 1000) == [0, 0]
    assert int(lv.client.hget(keys.sub_key(lv.name, "s", "stats"), "skipped")) == 40


def test_expiry_passes_undelivered_entries_below_the_cutoff_in_every_stream(lv):
    every = lv.by_id()
    cutoff = every[20]
    mine = set(handed_out(lv))
    below = [i for i in every[:20] if i not in mine]
    assert skip(lv, 1000, pending=False, cutoff=cutoff) == [len(below), len(below)]
    left = [i for i in lv.dispatch_order() if i not in mine and i not in below]
    expected = handed_out(lv) + left
    got = [text((lv.run(PEEK, "backlog", n, "s") or [None])[0]) for n in range(1, 42)]
    assert got[: len(expected) + 1] == [*expected, None]
    # (The log's group started without entries-read, so Redis may not know its lag now.)
    assert counted_backlog(lv, "s", batch=3) == len(left) + HANDED_OUT


def test_eviction_skips_the_oldest_of_every_level(lv):
    """Backlog eviction and expiry (``oldest_first``) drop the oldest undelivered messages in
    arrival order over every stream, not the next ones in dispatch order (the highest
    levels'), which an admin's skip takes."""
    mine = set(handed_out(lv))
    waiting = [i for i in lv.by_id() if i not in mine]
    call = SKIP.call(lv.name, "s", "+", 7, False, "evicted", oldest_first=True)
    assert lv.scripts["skip"](keys=call[0], args=call[1]) == [7, 7]
    left = [i for i in lv.dispatch_order() if i not in mine and i not in waiting[:7]]
    got = [text((lv.run(PEEK, "backlog", n, "s") or [None])[0]) for n in range(1, 42)]
    expected = handed_out(lv) + left
    assert got[: len(expected) + 1] == [*expected, None]


def test_a_key_shared_subscription_peeks_and_skips_in_arrival_order(lv):
    """Key_Shared reads the streams merged in arrival order (dispatch.lua): so do peek and
    skip for it."""
    call = SUBSCRIBE.call(lv.name, "k", "", "Key_Shared", "earliest", NOW_MS, "{}", 60_000)
    lv.scripts["subscribe"](keys=call[0], args=call[1])
    every = lv.by_id()
    got = [text((lv.run(PEEK, "backlog", n, "k") or [None])[0]) for n in range(1, 42)]
    assert got == [*every, None]
    assert lv.run(SKIP, "k", "+", 7, True, "skipped") == [7, 7]
    assert text(lv.run(PEEK, "backlog", 1, "k")[0]) == every[7]
    # (The log's group started without entries-read: its lag is counted, then stored.)
    assert counted_backlog(lv, "k", batch=3) == 33
    # What each stream's group passed: its entries among the seven oldest.
    for level in range(10):
        (group,) = [
            g for g in lv.client.xinfo_groups(keys.level_log(lv.name, level)) if g["name"] == b"k"
        ]
        mine = [i for lv_, i in lv.sent if lv_ == level]
        assert group["lag"] == len([i for i in mine if i not in every[:7]]), level


# --- trim.lua -------------------------------------------------------------------------------


@pytest.fixture
def single_entry_nodes(redis_server) -> Iterator[None]:
    """Stream nodes of one entry, so the approximate trim (whole nodes) is exact here."""
    connection = redis.Redis.from_url(redis_server.url)
    before = connection.config_get("stream-node-max-entries")["stream-node-max-entries"]
    connection.config_set("stream-node-max-entries", 1)
    yield
    connection.config_set("stream-node-max-entries", before)
    connection.close()


def test_trim_applies_the_rule_to_every_stream(single_entry_nodes, redis_server):
    client = redis.Redis.from_url(redis_server.url)
    part = LevelPartition(client)
    part.subscribe("s")
    old = part.send([(i * 7) % 10 for i in range(20)])  # two of each priority
    time.sleep(0.005)
    part.send(list(range(10)))  # one of each, a later millisecond
    assert part.dispatch("s", 0.0).entries == 30
    queue = keys.sub_prefix(part.name, "s") + "q:c1"
    assert client.llen(queue) > 0
    nines = [i for level, i in part.sent[:20] if level == 9]
    # Everything acknowledged but one old entry of priority 9: log:9 keeps its millisecond.
    part.run(ACK, "s", [i for _, i in part.sent if i != nines[0]])
    deleted = part.run(TRIM, int(time.time() * 1000) + 60_000, "")
    assert deleted == 20 - 2
    for level in range(10):
        stream = keys.level_log(part.name, level)
        kept = [text(i) for i, _ in client.xrange(stream)]
        expected = [i for lv_, i in part.sent if lv_ == level and (level == 9 or i not in old)]
        assert kept == expected, level
    client.close()


# --- produce.lua ----------------------------------------------------------------------------


def test_a_priority_field_that_is_no_level_stays_in_the_partitions_stream(redis_server):
    """A raw producer (the produce script takes any fields) marking entries "12", "7.5", "-1",
    "x" or "4" writes them to the partition's own stream, as the default priority dispatch
    reads them as, and neither makes a level stream nor turns the priority index on."""
    client = redis.Redis.from_url(redis_server.url)
    part = LevelPartition(client)
    part.subscribe("s")
    entries = [["d", b"p", "u", mark] for mark in ("12", "7.5", "-1", "x", "4")]
    script_keys, args = PRODUCE_SCRIPT.call(part.name, [*entries, ["d", b"q", "u", "7"]])
    ids = [text(i) for i in part.scripts["produce"](keys=script_keys[:3], args=args)]
    assert [keys.level_of(i) for i in ids] == [None] * 5 + [7]
    assert client.xlen(keys.log(part.name)) == 5
    assert client.hkeys(keys.levels(part.name)) == [b"7"]
    assert client.hget(keys.partition_stats(part.name), "priority_entries") is None
    client.close()
