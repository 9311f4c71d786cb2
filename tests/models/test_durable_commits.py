"""The service's connections wait for the write-ahead log at COMMIT, whatever the server says.

The test server runs with ``synchronous_commit = off`` (for speed, as a server tuned for
throughput might): connections from ``make_async_engine`` turn it back on for themselves, and a
transaction that opts out (``SET LOCAL``) still can.
"""

from __future__ import annotations

import asyncio

from sqlalchemy import text

from models.db import make_async_engine


def test_async_engine_turns_synchronous_commit_on(database_url, db):
    with db.connect() as connection:
        assert connection.execute(text("SHOW synchronous_commit")).scalar() == "off"

    async def main() -> tuple[str, str, str]:
        engine = make_async_engine(database_url, pool_size=1)
        try:
            async with engine.connect() as connection:
                session_value = (await connection.execute(text("SHOW synchronous_commit"))).scalar()
                await connection.rollback()
            async with engine.begin() as connection:
                await connection.execute(text("SET LOCAL synchronous_commit = off"))
                local = (await connection.execute(text("SHOW synchronous_commit"))).scalar()
            async with engine.connect() as connection:  # the same pooled connection
                after = (await connection.execute(text("SHOW synchronous_commit"))).scalar()
            return session_value, local, after
        finally:
            await engine.dispose()

    assert asyncio.run(main()) == ("on", "off", "on")
