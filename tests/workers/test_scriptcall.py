"""``PackedScript``: the dispatch hot path's EVALSHA, against a real Redis."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from workers.scriptcall import PackedScript

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
