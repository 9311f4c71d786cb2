"""Background jobs that outlive their failures.

A worker's loops (the tick, the resync, the lease heartbeat and reconciliation) must keep
running when one turn fails: Redis may be away for a while, a database read may time out.
``guarded`` runs one turn and logs its failure (a warning when Redis is unavailable, the
traceback otherwise); ``every`` runs a job at a fixed interval, guarded; ``bounded`` runs
one job per item, a few at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sluice.protocol.connection import REDIS_FAULTS

log = logging.getLogger(__name__)

Job = Callable[[], Awaitable[object]]
T = TypeVar("T")


async def guarded(job: Job, label: str = "") -> None:
    """Run one turn of ``job``; a failure is logged, and the next turn runs as planned."""
    name = f"{label}{getattr(job, '__name__', 'job')}"
    try:
        await job()
    except asyncio.CancelledError:
        raise
    except REDIS_FAULTS as exc:
        log.warning("%s: Redis unavailable (%s)", name, exc)
    except Exception:
        log.exception("%s failed; will run again", name)
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        # Cancelled while the job ran, and the job swallowed it (redis-py's pipelines can, now
        # and then, when the cancellation meets the end of a round trip): honoured here, or
        # the loop that runs this job would outlive whoever stopped it, who waits for ever
        # (seen: LeaseOwnership.stop() waiting on its heartbeat loop, 2 runs in 16).
        raise asyncio.CancelledError


async def every(seconds: float, job: Job, label: str = "") -> None:
    """Run ``job`` every ``seconds`` (after each sleep), guarded, until cancelled."""
    while True:
        await asyncio.sleep(seconds)
        await guarded(job, label)


async def bounded(
    items: list[T], job: Callable[[T], Awaitable[object]], concurrency: int = 32
) -> None:
    """Run ``job`` on every item, at most ``concurrency`` at a time (a tick over many
    partitions waits for Redis round trips side by side, not one after another); the first
    error is raised once every job has ended."""
    if not items:
        return
    position = iter(items)
    errors: list[BaseException] = []

    async def lane() -> None:
        for item in position:
            try:
                await job(item)
            except Exception as exc:
                errors.append(exc)

    await asyncio.gather(*(lane() for _ in range(min(concurrency, len(items)))))
    if errors:
        raise errors[0]
