"""The admin service's policy cache recovers by itself from reloads that failed.

A reload that fails (the database restarting) leaves the cache stale, so reads go to the
database; the cache tries again on its own, without waiting for the next change or for its
periodic reload, and is fresh again once the database answers.
"""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from api.policy_cache import PolicyCache
from models.db import make_async_engine, make_session_factory


class FailingSessions:
    """A session factory whose first ``failures`` sessions fail, as a restarting database's."""

    def __init__(self, sessions, failures: int) -> None:
        self.sessions = sessions
        self.failures = failures

    def __call__(self):
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionRefusedError("the database system is starting up")
        return self.sessions()


def test_a_failed_reload_is_retried_without_a_new_change(database_url, redis_server):
    async def main() -> tuple[bool, bool, int]:
        engine = make_async_engine(database_url, pool_size=1)
        redis = Redis.from_url(redis_server.url)
        sessions = FailingSessions(make_session_factory(engine), failures=2)
        cache = PolicyCache(sessions, redis, "sluice:events", max_age=60.0)
        task = asyncio.create_task(cache.run())
        try:
            cache.local_write()  # one change, then none: only retries can make it fresh
            await asyncio.sleep(0.2)
            stale_meanwhile = not cache.fresh
            for _ in range(100):
                if cache.fresh:
                    break
                await asyncio.sleep(0.05)
            return stale_meanwhile, cache.fresh, sessions.failures
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await redis.aclose()
            await engine.dispose()

    assert asyncio.run(main()) == (True, True, 0)
