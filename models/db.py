"""Engines and sessions: URL normalisation for PostgreSQL (psycopg 3) and SQLite.

Callers build engines at start-up (app factory, worker main, task) and pass them down; nothing
here is created at import time.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)


def normalize_url(url: str, *, asynchronous: bool) -> str:
    """Pick the driver: psycopg for PostgreSQL (both modes), aiosqlite or pysqlite for SQLite."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    elif backend == "sqlite":
        parsed = parsed.set(drivername="sqlite+aiosqlite" if asynchronous else "sqlite")
    return parsed.render_as_string(hide_password=False)


def is_sqlite(url: str) -> bool:
    """True for a SQLite URL."""
    return make_url(url).get_backend_name() == "sqlite"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


def make_async_engine(
    url: str, *, pool_size: int = 10, ping_after_idle: float | None = None
) -> AsyncEngine:
    """An async engine; SQLite gets foreign keys, WAL and a busy timeout.

    A pooled PostgreSQL connection is checked (a round trip) before each use, so that one
    broken by a database restart is replaced instead of failing a request.  With
    ``ping_after_idle`` it is checked only when it has been idle that many seconds: a
    connection in steady use skips the round trip, and after a restart at most the requests
    already on their way fail (the first broken connection makes the pool drop them all).
    """
    if is_sqlite(url):
        engine = create_async_engine(normalize_url(url, asynchronous=True))
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    engine = create_async_engine(
        normalize_url(url, asynchronous=True),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=ping_after_idle is None,
    )
    event.listen(engine.sync_engine, "connect", _durable_commits)
    if ping_after_idle is not None:
        _ping_after_idle(engine.sync_engine, ping_after_idle)
    return engine


# One round trip per new connection: ``synchronous_commit`` back on where the server (or the
# database, or the role) turned it off; any other setting (``local``, ``remote_apply``...)
# already waits for the local disk, and stays.
DURABLE_COMMITS = (
    "SELECT set_config('synchronous_commit', 'on', false) "
    "WHERE current_setting('synchronous_commit') = 'off'"
)


def _durable_commits(dbapi_connection: Any, _record: Any) -> None:
    """A COMMIT answers only once it is in the write-ahead log on disk.

    With ``synchronous_commit = off`` PostgreSQL answers a COMMIT before its log record is
    written, and a crash (``pg_ctl restart -m immediate``, the out-of-memory killer, a power
    cut) loses the last fraction of a second of commits: the admin service would have
    answered 2xx for writes that are gone.  Statements that may be lost say so themselves
    (``SET LOCAL synchronous_commit = off``, the outbox's marks).
    """
    cursor = dbapi_connection.cursor()
    cursor.execute(DURABLE_COMMITS)
    cursor.close()
    # A session setting made in a transaction that rolls back is undone: keep it.
    dbapi_connection.commit()


def _ping_after_idle(engine: Engine, seconds: float) -> None:
    """Check a pooled connection on checkout only after ``seconds`` of idleness."""

    def used(_dbapi_connection: Any, record: Any, *_args: Any) -> None:
        record.info["sluice_used_at"] = time.monotonic()

    def checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if time.monotonic() - record.info.get("sluice_used_at", 0.0) < seconds:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:
            # The pool replaces the connection and checks out again.
            raise DisconnectionError(f"stale pooled connection: {exc}") from exc
        record.info["sluice_used_at"] = time.monotonic()

    event.listen(engine, "connect", used)
    event.listen(engine, "checkin", used)
    event.listen(engine, "checkout", checkout)


def make_sync_engine(url: str) -> Engine:
    """A synchronous engine (migrations, Celery tasks, tests)."""
    engine = create_engine(normalize_url(url, asynchronous=False), pool_pre_ping=True)
    if is_sqlite(url):
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


async def without_transaction(session: AsyncSession) -> None:
    """Let the session's reads run outside a transaction on PostgreSQL: under READ
    COMMITTED (the default, which Sluice keeps) each statement sees its own snapshot inside
    a transaction too, so a BEGIN and a ROLLBACK around a batch of reads are two round trips
    for nothing.  For sessions that only read; call before the session's first statement."""
    bind = session.bind
    if bind is not None and bind.dialect.name == "postgresql":
        await session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})


def make_session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that keep loaded objects usable after commit."""
    return async_sessionmaker(engine, expire_on_commit=False)


def create_scratch_database(server_url: str, prefix: str) -> str:
    """Create an empty PostgreSQL database named ``{prefix}_{random}``; return its URL.

    For tests and benchmarks, which each want a database of their own on a shared server.
    """
    import uuid

    from sqlalchemy import text

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = create_engine(
        normalize_url(server_url, asynchronous=False), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


def drop_database(server_url: str, url: str) -> None:
    """Drop a database made by ``create_scratch_database`` (closing its connections)."""
    from sqlalchemy import text

    name = make_url(url).database
    admin = create_engine(
        normalize_url(server_url, asynchronous=False), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()
