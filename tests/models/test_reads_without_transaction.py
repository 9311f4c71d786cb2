"""The policy reloads of the worker (on every batch of change events) and of the admin
service's policy cache read outside a transaction on PostgreSQL: no BEGIN and ROLLBACK round
trips around their statements (under READ COMMITTED each statement has its own snapshot
either way)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from psycopg.pq import TransactionStatus
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from api.policy_cache import PolicyCache
from models.db import make_async_engine, make_session_factory
from workers.policy import PolicyState


def statuses(
    url: str, reload: Callable[[async_sessionmaker[AsyncSession]], Awaitable[None]]
) -> list[TransactionStatus]:
    """The connection's transaction status after each statement ``reload`` runs."""
    seen: list[TransactionStatus] = []

    async def main() -> None:
        engine = make_async_engine(url)

        def after(conn, *_args) -> None:
            seen.append(conn.connection.dbapi_connection.driver_connection.info.transaction_status)

        event.listen(engine.sync_engine, "after_cursor_execute", after)
        try:
            await reload(make_session_factory(engine))
        finally:
            await engine.dispose()

    asyncio.run(main())
    return seen


def test_worker_reload_reads_outside_a_transaction(database_url: str) -> None:
    async def reload(sessions: async_sessionmaker[AsyncSession]) -> None:
        state = PolicyState(sessions)
        await state.reload_parts({"t/ns"}, broker=True)
        await state.reload()

    seen = statuses(database_url, reload)
    assert seen and set(seen) == {TransactionStatus.IDLE}


def test_policy_cache_reload_reads_outside_a_transaction(database_url: str) -> None:
    async def reload(sessions: async_sessionmaker[AsyncSession]) -> None:
        cache = PolicyCache(sessions, None, "events")  # type: ignore[arg-type]  # no Redis
        await cache.reload(full=True)

    seen = statuses(database_url, reload)
    assert seen and set(seen) == {TransactionStatus.IDLE}
