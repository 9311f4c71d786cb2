"""The wait for enforcement (``api.enforcement``) against a real Redis: a write's answer goes
out as soon as every worker of the fleet read with its events has confirmed them, without
reading the fleet again, and still waits for a worker that has not."""

from __future__ import annotations

import asyncio
import time

from redis.asyncio import Redis

from api.enforcement import Enforcement
from server.embedded_redis import EmbeddedRedis
from sluice.protocol import keys


def evalsha_calls(info: dict) -> int:
    """Script calls Redis counted since its statistics were reset."""
    return sum(info.get(name, {}).get("calls", 0) for name in ("cmdstat_evalsha", "cmdstat_eval"))


async def confirmed_wait(url: str, confirm_after: float) -> tuple[float, int, list[str]]:
    """Wait for position 5-0 with a fleet of one worker (as read with the events) that
    confirms it after ``confirm_after`` seconds: (seconds waited, script calls, fenced)."""
    redis = Redis.from_url(url)
    enforcement = Enforcement(redis, timeout=5.0)
    follower = asyncio.create_task(enforcement.run())
    # A live worker in the fleet registry: a re-read of the fleet still finds it.
    expiry_ms = int(time.time() * 1000) + 60_000
    await redis.zadd(keys.WORKERS, {"w1": expiry_ms})
    try:
        await asyncio.sleep(0.2)  # subscribed to the confirmations
        await redis.config_resetstat()

        async def confirm() -> None:
            await asyncio.sleep(confirm_after)
            await redis.publish(keys.APPLIED_CHANNEL, "w1\t5-0")

        confirming = asyncio.create_task(confirm())
        started = time.monotonic()
        outcome = await enforcement.wait("5-0", fleet=[b"w1", b"4-0"])
        waited = time.monotonic() - started
        await confirming
        calls = evalsha_calls(await redis.info("commandstats"))
        return waited, calls, outcome.fenced
    finally:
        await redis.zrem(keys.WORKERS, "w1")
        await redis.hdel(keys.APPLIED, "w1")
        follower.cancel()
        await asyncio.gather(follower, return_exceptions=True)
        await redis.aclose()


def test_answered_once_the_fleet_confirms_without_reading_it_again(
    redis_server: EmbeddedRedis,
) -> None:
    waited, calls, fenced = asyncio.run(confirmed_wait(redis_server.url, 0.05))
    assert fenced == []
    assert 0.05 <= waited < 0.2
    # The fleet was read once, in the round trip that published the events.
    assert calls == 0


def test_still_waits_for_a_worker_that_has_not_confirmed(redis_server: EmbeddedRedis) -> None:
    # Confirmed after a re-read of the fleet (every 0.25 s) that still finds the worker
    # live and behind: the wait goes on until the confirmation comes.
    waited, _calls, fenced = asyncio.run(confirmed_wait(redis_server.url, 0.4))
    assert fenced == []
    assert waited >= 0.4
