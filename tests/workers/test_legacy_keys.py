"""Data written under the cluster-wide keys' old names keeps working on a single server."""

from __future__ import annotations

import asyncio

import redis

from dataplane.legacy_keys import migrate_legacy_keys
from sluice.protocol import keys
from sluice.protocol.connection import connect_async


def test_old_names_are_renamed_once_and_new_data_wins(redis_server):
    plain = redis.Redis.from_url(redis_server.url)
    plain.flushall()
    plain.hset("sl:meta:topics", "persistent://a/b/t", b'{"partitions": 3}')
    plain.sadd("sl:meta:namespaces", "a/b")
    plain.zadd("sl:workers", {"w1": 1})
    plain.hset("sl:meta:config", "maxTopicsPerNamespace", "7")
    plain.hset(keys.CLIENT_CONFIG, "maxTopicsPerNamespace", "9")  # already written anew

    async def migrate():
        client = connect_async(redis_server.url)
        try:
            return await migrate_legacy_keys(client), await migrate_legacy_keys(client)
        finally:
            await client.aclose()

    first, second = asyncio.run(migrate())
    assert sorted(first) == ["sl:meta:namespaces", "sl:meta:topics", "sl:workers"]
    assert second == []
    assert plain.hget(keys.TOPICS, "persistent://a/b/t") == b'{"partitions": 3}'
    assert plain.smembers(keys.NAMESPACES) == {b"a/b"}
    assert plain.zscore(keys.WORKERS, "w1") == 1
    assert plain.hget(keys.CLIENT_CONFIG, "maxTopicsPerNamespace") == b"9"
    assert not plain.exists("sl:meta:topics", "sl:meta:namespaces", "sl:workers")
    plain.flushall()
    plain.close()
