"""``dispatch_many.lua``: several subscriptions of one partition dispatched in one script run,
on a real Redis, against the same calls of ``dispatch.lua`` one by one on a twin partition."""

from __future__ import annotations

import redis
from redis.exceptions import ResponseError

from sluice.protocol import keys
from sluice.protocol.frames import DispatchArgs, DispatchReason, DispatchResult, LimitArgs
from sluice.protocol.scripts import DISPATCH, DISPATCH_MANY, SCRIPTS
from tests.workers.test_dispatch_script import NOW_MS, Partition

SUBS = ("a", "b", "c")


def args(part: Partition, subscription: str, at: float, **kwargs) -> DispatchArgs:
    return DispatchArgs(
        subscription=subscription,
        queue_prefix=keys.sub_prefix(part.name, subscription) + "q:",
        now_ms=NOW_MS,
        clock_ms=NOW_MS + at * 1000,
        **kwargs,
    )


def made(client: redis.Redis, permits: dict[str, int]) -> Partition:
    """A partition with 50 entries and the subscriptions of ``permits`` (their consumer's
    permits)."""
    part = Partition(client)
    part.produce(50)
    for subscription, count in permits.items():
        part.subscribe(subscription, permits=count)
    return part


def state(client: redis.Redis, part: Partition, subscription: str) -> tuple:
    """What a dispatch leaves behind for a subscription: its limiter, counters, permits,
    receiver queue and pending entries (ids made relative to the partition's)."""
    sub = keys.sub_key
    limiter = client.hgetall(sub(part.name, subscription, "lim"))
    stats = client.hgetall(sub(part.name, subscription, "stats"))
    permits = client.hgetall(sub(part.name, subscription, "permits"))
    queue = client.lrange(keys.queue(part.name, subscription, "c1"), 0, -1)
    pending = client.xpending(DISPATCH.keys(part.name)[0], subscription)
    return limiter, stats, permits, len(queue), pending["pending"]


def many(client: redis.Redis, part: Partition, calls: list[DispatchArgs]) -> list:
    script = client.register_script(DISPATCH_MANY.source)
    return script(*DISPATCH_MANY.call(part.name, calls))


def test_one_run_does_what_the_calls_one_by_one_do(redis_server):
    client = redis.Redis.from_url(redis_server.url)
    permits = {"a": 100, "b": 3, "c": 0}
    alone, together = made(client, permits), made(client, permits)
    sub_limit = LimitArgs(5, 0, 1, False)
    topic_limit = LimitArgs(7, 0, 1, False)
    for at in (0.0, 0.5, 1.0, 2.2):
        one_by_one = [
            alone.dispatch(s, at, sub=sub_limit, topic=topic_limit, max_entries=4) for s in SUBS
        ]
        replies = many(
            client,
            together,
            [args(together, s, at, sub=sub_limit, topic=topic_limit, max_entries=4) for s in SUBS],
        )
        assert [DispatchResult.from_reply(r) for r in replies] == one_by_one
        for s in SUBS:
            assert state(client, together, s) == state(client, alone, s), (at, s)
    # The TOPIC quota (7 a period) is shared: over four periods a, b and c got 4 x 7 at most.
    out = sum(
        int(client.hget(keys.sub_key(together.name, s, "stats"), "msg_out") or 0) for s in SUBS
    )
    assert 0 < out <= 4 * 7
    reasons = {DispatchResult.from_reply(r).reason for r in replies}
    assert DispatchReason.NO_PERMITS in reasons  # c has none
    client.close()


def test_a_fenced_call_fails_alone(redis_server):
    client = redis.Redis.from_url(redis_server.url)
    part = made(client, {"a": 10, "b": 10})
    client.set(keys.lease(part.name), "w1:1:1")
    replies = many(
        client,
        part,
        [
            args(part, "a", 0.0, fencing_token="w1:1:1"),
            args(part, "b", 0.0, fencing_token="w0:1:1"),
        ],
    )
    assert DispatchResult.from_reply(replies[0]).entries == 10
    assert isinstance(replies[1], ResponseError) and str(replies[1]).startswith("FENCED")
    assert client.hget(keys.sub_key(part.name, "b", "stats"), "msg_out") is None
    client.close()


def test_a_failing_call_fails_alone(redis_server):
    """A call whose command fails (its cursor key holds the wrong type) answers with the
    error; the calls before and after it go on."""
    client = redis.Redis.from_url(redis_server.url)
    part = made(client, {"a": 10, "b": 10, "c": 10})
    client.delete(keys.sub_key(part.name, "b", "redeliver"))
    client.set(keys.sub_key(part.name, "b", "redeliver"), "not a zset")
    replies = many(client, part, [args(part, s, 0.0) for s in SUBS])
    assert DispatchResult.from_reply(replies[0]).entries == 10
    assert isinstance(replies[1], ResponseError)
    assert DispatchResult.from_reply(replies[2]).entries == 10
    assert "dispatch_many" in SCRIPTS
    client.close()
