"""Data written under the cluster-wide keys' old names keeps working on a single server."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import redis
from redis.asyncio import Redis

from dataplane.legacy_keys import migrate_legacy_keys, migrate_partition_keys
from sluice.protocol import keys
from sluice.protocol.connection import connect_async
from sluice.protocol.names import TopicName


def run_twice(url: str, migration: Callable[[Redis], Awaitable[Any]]) -> tuple[Any, Any]:
    """What ``migration`` answers run once, then again, on a client of ``url``."""

    async def both():
        client = connect_async(url)
        try:
            return await migration(client), await migration(client)
        finally:
            await client.aclose()

    return asyncio.run(both())


def test_old_names_are_renamed_once_and_new_data_wins(redis_server):
    plain = redis.Redis.from_url(redis_server.url)
    plain.flushall()
    plain.hset("sl:meta:topics", "persistent://a/b/t", b'{"partitions": 3}')
    plain.sadd("sl:meta:namespaces", "a/b")
    plain.zadd("sl:workers", {"w1": 1})
    plain.hset("sl:meta:config", "maxTopicsPerNamespace", "7")
    plain.hset(keys.CLIENT_CONFIG, "maxTopicsPerNamespace", "9")  # already written anew

    first, second = run_twice(redis_server.url, migrate_legacy_keys)
    assert sorted(first) == ["sl:meta:namespaces", "sl:meta:topics", "sl:workers"]
    assert second == []
    assert plain.hget(keys.TOPICS, "persistent://a/b/t") == b'{"partitions": 3}'
    assert plain.smembers(keys.NAMESPACES) == {b"a/b"}
    assert plain.zscore(keys.WORKERS, "w1") == 1
    assert plain.hget(keys.CLIENT_CONFIG, "maxTopicsPerNamespace") == b"9"
    assert not plain.exists("sl:meta:topics", "sl:meta:namespaces", "sl:workers")
    plain.flushall()
    plain.close()


def test_partition_keys_move_to_their_spread_tags_once(redis_server):
    plain = redis.Redis.from_url(redis_server.url)
    plain.flushall()
    partition = TopicName.from_full("persistent://a/b/t").partition(3)
    old = "sl:{a/b/t-partition-3}"
    plain.xadd(f"{old}:log", {"d": "x"})
    plain.sadd(f"{old}:subs", "audit")
    plain.set("sl:{a/b/plain}:lease", "w1:1")  # a non-partitioned topic keeps its tag

    assert run_twice(redis_server.url, migrate_partition_keys) == (2, 0)
    assert keys.tag(partition) != "{a/b/t-partition-3}"
    assert plain.xlen(keys.log(partition)) == 1
    assert plain.smembers(keys.subs(partition)) == {b"audit"}
    assert not plain.exists(f"{old}:log", f"{old}:subs")
    assert plain.get("sl:{a/b/plain}:lease") == b"w1:1"
    plain.flushall()
    plain.close()
