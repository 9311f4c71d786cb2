"""Two processes writing one SQLite file, as ``sluice standalone``'s admin service and its
worker child do: a writer waits for the other's transaction (WAL and the busy timeout of
``models.db``) instead of failing with "database is locked".

Each process runs transactions shaped like the worker's recording of client-created
subscriptions (``workers.catalog``): a read, then bulk inserts of audit entries and change
events, in one transaction, on an engine from ``models.db.make_async_engine``.  One of them
also holds the write lock for ``HOLD_SECONDS`` (under the 5 s busy timeout) in the middle of
the other's run.  Every transaction must commit and every row must be there.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time
from pathlib import Path

from sqlalchemy import func, insert, select

from migrations import upgrade
from models.db import make_async_engine, make_session_factory, make_sync_engine
from models.journal import AuditEntry, OutboxEvent, change_rows

TRANSACTIONS = 150  # per process
ROWS = 5  # audit entries (and as many change events) per transaction
HOLD_SECONDS = 1.5  # one transaction keeps the write lock this long


async def _write(url: str, name: str, hold: bool, go: float) -> list[str]:
    engine = make_async_engine(url)
    sessions = make_session_factory(engine)
    errors: list[str] = []
    await asyncio.sleep(max(0.0, go - time.time()))
    for i in range(TRANSACTIONS):
        try:
            async with sessions() as session, session.begin():
                await session.execute(select(func.count()).select_from(AuditEntry))
                audit, events = change_rows(
                    role=name,
                    request_id=f"{name}:{i}",
                    kind="subscription",
                    changes=[
                        ("subscription", f"t#{name}-{i}-{n}", None, {"n": n}, {"n": n})
                        for n in range(ROWS)
                    ],
                )
                await session.execute(insert(AuditEntry), audit)
                await session.execute(insert(OutboxEvent), events)
                if hold and i == TRANSACTIONS // 3:
                    await asyncio.sleep(HOLD_SECONDS)  # the write lock is held meanwhile
        except Exception as exc:
            errors.append(f"{name} transaction {i}: {type(exc).__name__}: {exc}")
    await engine.dispose()
    return errors


def writer(url: str, name: str, hold: bool, go: float, results) -> None:
    """One process: its transactions, then its errors on ``results``."""
    results.put((name, asyncio.run(_write(url, name, hold, go))))


def test_two_processes_write_one_sqlite_file_without_locking_errors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sluice.db'}"
    upgrade(url)
    context = mp.get_context("spawn")
    results = context.Queue()
    go = time.time() + 3.0  # both start together, after their imports
    processes = [
        context.Process(target=writer, args=(url, name, hold, go, results))
        for name, hold in (("admin", True), ("worker", False))
    ]
    for process in processes:
        process.start()
    errors = dict(results.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(30)
        assert process.exitcode == 0
    assert errors == {"admin": [], "worker": []}
    engine = make_sync_engine(url)
    with engine.connect() as connection:
        for table in (AuditEntry, OutboxEvent):
            count = connection.execute(select(func.count()).select_from(table)).scalar()
            assert count == 2 * TRANSACTIONS * ROWS
        journal_mode = connection.exec_driver_sql("PRAGMA journal_mode").scalar()
    engine.dispose()
    assert journal_mode == "wal"
