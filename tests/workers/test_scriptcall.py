"""``PackedScript``: the dispatch hot path's EVALSHA, against a real Redis."""

from __future__ import annotations

import asyncio

import pytest
import redis
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from sluice.protocol import keys
from sluice.protocol.frames import DispatchArgs, DispatchResult, LimitArgs
from sluice.protocol.scripts import DISPATCH, DISPATCH_MANY
from tests.workers.test_dispatch_script import NOW_MS, Partition
from workers.scriptcall import PackedScript, pack_args

SOURCE = """
if ARGV[1] == 'fail' then return redis.error_reply('FENCED partition lease lost') end
redis.call('SET', KEYS[1], ARGV[1])
return {#KEYS, #ARGV, tonumber(ARGV[2])}
"""


def test_packed_calls_run_reload_a_flushed_script_and_pass_error_replies(redis_server):
    async def scenario():
        redis = Redis.from_url(redis_server.url)
        script = PackedScript(redis, SOURCE)
        keys = script.prefix(["k:{a}:1", "k:{a}:2"])
        try:
            assert await script(keys, ["v", 7, b"bytes"]) == [2, 3, 7]
            assert await redis.get("k:{a}:1") == b"v"
            await redis.script_flush()  # as after a restart: the call loads it again
            assert await script(keys, ["w", -1]) == [2, 2, -1]
            with pytest.raises(ResponseError, match="FENCED"):
                await script(keys, ["fail", 0])
            # The connection that carried the error reply is fine for the next call.
            assert await script(keys, ["x", 1]) == [2, 2, 1]
        finally:
            await redis.aclose()

    asyncio.run(scenario())


def test_calls_of_one_turn_go_out_together_and_each_gets_its_own_reply(redis_server):
    async def scenario():
        redis = Redis.from_url(redis_server.url)
        script = PackedScript(redis, SOURCE)
        keys = [script.prefix([f"k:{{b}}:{i}", "k:{b}:x"]) for i in range(300)]
        try:
            calls = [script.call(keys[i], ["fail" if i % 7 == 0 else "v", i]) for i in range(300)]
            replies = await asyncio.gather(*calls, return_exceptions=True)
            for i, reply in enumerate(replies):
                if i % 7 == 0:
                    assert isinstance(reply, ResponseError)
                else:
                    assert reply == [2, 2, i]
        finally:
            await redis.aclose()

    asyncio.run(scenario())


def test_calls_of_one_partition_run_in_one_multi_call(redis_server):
    """Dispatch calls of one partition queued in one turn run in one ``dispatch_many.lua``
    call (loaded again after a flush), each answered as the call alone would be: the same
    replies and the same state as the same calls one by one on a twin partition; a call
    of another partition, or the only one of its partition, goes on its own."""
    sync = redis.Redis.from_url(redis_server.url)
    permits = {"a": 100, "b": 2, "c": 0}
    alone, together, other = Partition(sync), Partition(sync), Partition(sync)
    for part in (alone, together, other):
        part.produce(30)
        for subscription, count in permits.items():
            part.subscribe(subscription, permits=count)
    sub_limit = LimitArgs(4, 0, 1, False)

    def args(part: Partition, subscription: str) -> DispatchArgs:
        return DispatchArgs(
            subscription=subscription,
            queue_prefix=keys.sub_prefix(part.name, subscription) + "q:",
            now_ms=NOW_MS,
            clock_ms=NOW_MS,
            sub=sub_limit,
        )

    expected = [alone.dispatch(s, 0.0, sub=sub_limit) for s in permits]

    async def scenario():
        client = Redis.from_url(redis_server.url)
        script = PackedScript(client, DISPATCH.source, DISPATCH_MANY.source)
        try:
            await client.script_flush()
            calls = []
            for part, subscriptions in ((together, permits), (other, ["a"])):
                for s in subscriptions:
                    prefix = script.prefix(DISPATCH.keys(part.name, s))
                    argv = args(part, s).argv()
                    calls.append(
                        script.call_packed(prefix, len(argv), pack_args(argv), None, part.name.full)
                    )
            replies = await asyncio.gather(*calls)
            assert (script.multi_calls, script.merged_calls) == (1, 3)
            return replies
        finally:
            await script.close()
            await client.aclose()

    replies = asyncio.run(scenario())
    assert [DispatchResult.from_reply(r) for r in replies[:3]] == expected
    assert DispatchResult.from_reply(replies[3]) == expected[0]
    for s in permits:
        for role in ("lim", "stats", "permits"):
            assert sync.hgetall(keys.sub_key(together.name, s, role)) == sync.hgetall(
                keys.sub_key(alone.name, s, role)
            ), (s, role)
    sync.close()
