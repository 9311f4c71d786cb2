"""``read_backlogs`` when Redis cannot tell a group's lag: counted exactly, in bounded calls.

A group moved to an explicit id has an unknown entries-read counter, so ``XINFO GROUPS``
answers its lag as nil.  The count then goes ``COUNT_BATCH`` entries per call (here a handful,
so a small stream takes many calls), is stored as the group's counter, and is exact though
entries are produced and read by the group between the calls.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from dataplane import backlog as backlog_module
from dataplane.backlog import read_backlogs
from dataplane.scripts import register_scripts
from sluice.protocol import keys
from sluice.protocol.names import TopicName

_names = itertools.count()


@pytest.fixture
async def redis(redis_server) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_server.url)
    yield client
    await client.aclose()


def partition() -> TopicName:
    return TopicName.from_full(f"persistent://count/ns/deep{next(_names)}")


async def fill(redis: Redis, stream: str, entries: int) -> list[str]:
    pipe = redis.pipeline(transaction=False)
    for i in range(entries):
        pipe.xadd(stream, {"d": str(i)})
    return [i.decode() for i in await pipe.execute()]


async def unknown_lag(redis: Redis, stream: str, group: str, at: str) -> None:
    """Move ``group`` to ``at`` without an entries-read counter (Redis forgets its lag)."""
    await redis.execute_command("XGROUP", "SETID", stream, group, at)
    (info,) = [g for g in await redis.xinfo_groups(stream) if g["name"].decode() == group]
    assert info["lag"] is None


async def deep_group(
    redis: Redis, monkeypatch, batch: int, entries: int, at: int
) -> tuple[TopicName, str, list[str]]:
    """A partition of ``entries`` whose group ``g`` stands at the ``at``-th one with its lag
    unknown, counted ``batch`` entries per call: the partition, its stream, the entry ids."""
    monkeypatch.setattr(backlog_module, "COUNT_BATCH", batch)
    name = partition()
    stream = keys.log(name)
    ids = await fill(redis, stream, entries)
    await redis.xgroup_create(stream, "g", id="0")
    await unknown_lag(redis, stream, "g", ids[at])
    return name, stream, ids


async def group_backlog(redis: Redis, name: TopicName):
    """The backlog ``read_backlogs`` finds for group ``g`` of partition ``name``."""
    return (await read_backlogs(redis, register_scripts(redis), [name]))[name.full]["g"]


async def test_counted_in_bounded_calls_and_stored(redis, monkeypatch):
    monkeypatch.setattr(backlog_module, "COUNT_BATCH", 7)
    name = partition()
    stream = keys.log(name)
    ids = await fill(redis, stream, 100)
    await redis.xgroup_create(stream, "g", id="0")
    await redis.xreadgroup("g", "c1", {stream: ">"}, count=5)  # 5 pending
    await unknown_lag(redis, stream, "g", ids[9])  # 90 undelivered
    await redis.config_resetstat()
    scripts = register_scripts(redis)
    got = (await read_backlogs(redis, scripts, [name]))[name.full]["g"]
    assert (got.entries, got.pending) == (95, 5)
    # 90 entries at most 7 per call: 13 counting calls, none over the bound.
    stats = await redis.info("commandstats")
    assert stats["cmdstat_evalsha"]["calls"] >= 13
    # Stored: Redis answers the lag itself now.
    (info,) = await redis.xinfo_groups(stream)
    assert info["lag"] == 90


async def test_exact_though_the_group_moves_and_the_stream_grows(redis, monkeypatch):
    """Between the counting calls a dispatcher reads 23 entries and producers add 40: the
    backlog is what it is at the end, not what it was at the start."""
    name, stream, _ = await deep_group(redis, monkeypatch, 4, 60, 1)  # 58 undelivered
    script = backlog_module._count
    calls = 0

    async def count_meanwhile(redis_, scripts_, walks):
        nonlocal calls
        calls += 1
        await fill(redis, stream, 40)
        await redis.xreadgroup("g", "c1", {stream: ">"}, count=23)  # the group moves on
        await script(redis_, scripts_, walks)

    monkeypatch.setattr(backlog_module, "_count", count_meanwhile)
    got = await group_backlog(redis, name)
    assert calls == 1
    assert (got.entries, got.pending) == (58 + 40, 23)
    (info,) = await redis.xinfo_groups(stream)
    assert info["lag"] == 58 + 40 - 23
    assert info["pending"] == 23


async def test_a_group_moved_back_meanwhile_is_counted_again(redis, monkeypatch):
    name, stream, ids = await deep_group(redis, monkeypatch, 5, 30, 19)  # 10 undelivered
    script = backlog_module._count
    moved = False

    async def move_back(redis_, scripts_, walks):
        nonlocal moved
        if not moved:
            moved = True
            await unknown_lag(redis, stream, "g", ids[4])  # 25 undelivered
        await script(redis_, scripts_, walks)

    monkeypatch.setattr(backlog_module, "_count", move_back)
    got = await group_backlog(redis, name)
    assert (got.entries, got.pending) == (25, 0)


async def test_entries_trimmed_during_the_count_make_it_start_over(redis, monkeypatch):
    """The group moves on and its entries are acknowledged and trimmed after they were
    counted: what was counted no longer shows where the group is now, so the count starts
    over rather than store a counter 13 entries short."""
    name, stream, ids = await deep_group(redis, monkeypatch, 4, 60, 1)  # 58 undelivered
    store = backlog_module._store
    trimmed = False

    async def trim_meanwhile(redis_, scripts_, walks, result):
        nonlocal trimmed
        if not trimmed:
            trimmed = True
            read = await redis.xreadgroup("g", "c1", {stream: ">"}, count=20)
            await redis.xack(stream, "g", *[entry for entry, _ in read[0][1]])
            await redis.xtrim(stream, minid=ids[15], approximate=False)  # entries 0..14 go
        return await store(redis_, scripts_, walks, result)

    monkeypatch.setattr(backlog_module, "_store", trim_meanwhile)
    got = await group_backlog(redis, name)
    assert trimmed
    assert (got.entries, got.pending) == (60 - 22, 0)
    (info,) = await redis.xinfo_groups(stream)
    assert info["lag"] == 38
