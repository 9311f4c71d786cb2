"""The outbox relay: publishes committed change events to the workers' Redis stream.

Events are rows written in the same transaction as the change they describe, so a rolled-back
write never produces one and a committed write always does.  After each commit the request
wakes the relay; a periodic sweep retries whatever could not be published (Redis down), so
events go out once Redis is back.  A request that needs its events out before it answers
(read-your-writes, ``api.enforcement``) calls ``publish_now``.  Publishing is at-least-once
and in id order: a relay holds a database lock while it publishes, so two admin replicas never
interleave.  Workers treat events as "re-read this entity", so a duplicate is harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError
from sqlalchemy import select, text, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from models.base import utcnow
from models.orm import OutboxEvent

log = logging.getLogger(__name__)

BATCH = 500
# Key of the PostgreSQL advisory lock that serialises relays across admin replicas.
RELAY_LOCK_KEY = 0x5E1C_E0B0


def event_fields(event: OutboxEvent) -> dict[str, Any]:
    """The fields of the stream entry for one outbox row."""
    return {
        "id": str(event.id),
        "kind": event.kind,
        "entity": event.entity,
        "at": event.created_at.isoformat(),
        "payload": orjson.dumps(event.payload),
    }


class OutboxRelay:
    """Moves unpublished outbox rows to ``stream``; run ``run()`` as a background task."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        redis: Redis,
        stream: str,
        *,
        maxlen: int = 100_000,
        sweep_seconds: float = 1.0,
    ) -> None:
        self.sessions = sessions
        self.redis = redis
        self.stream = stream
        self.maxlen = maxlen
        self.sweep_seconds = sweep_seconds
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self.published = 0

    def notify(self) -> None:
        """Ask for a publish pass now (called after a commit that wrote events)."""
        self._wake.set()

    async def run(self) -> None:
        """Publish on every wake-up and at least every ``sweep_seconds``, until cancelled."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.sweep_seconds)
            self._wake.clear()
            try:
                await self.publish_pending()
            except RedisError as exc:
                log.warning("outbox relay: Redis unavailable, will retry: %s", exc)
            except Exception:
                log.exception("outbox relay: publish pass failed, will retry")

    async def publish_pending(self) -> int:
        """Publish every unpublished event, oldest first; return how many went out."""
        total = 0
        async with self._lock:
            while True:
                count = await self._publish_batch()
                total += count
                if count < BATCH:
                    break
        self.published += total
        return total

    async def publish_now(self) -> str:
        """Publish what is pending (this request's events included); return the stream's
        newest entry id, which is at or past every event committed before the call."""
        await self.publish_pending()
        newest = await self.redis.xrevrange(self.stream, count=1)
        return newest[0][0].decode() if newest else "0-0"

    async def _publish_batch(self) -> int:
        async with self.sessions() as session, session.begin():
            if session.bind.dialect.name == "postgresql":
                await session.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": RELAY_LOCK_KEY}
                )
            rows = (
                (
                    await session.execute(
                        select(OutboxEvent)
                        .where(OutboxEvent.published_at.is_(None))
                        .order_by(OutboxEvent.id)
                        .limit(BATCH)
                    )
                )
                .scalars()
                .all()
            )
            if not rows:
                return 0
            pipe = self.redis.pipeline(transaction=False)
            for event in rows:
                pipe.xadd(self.stream, event_fields(event), maxlen=self.maxlen, approximate=True)
            await pipe.execute()
            await session.execute(
                update(OutboxEvent)
                .where(OutboxEvent.id.in_([e.id for e in rows]))
                .values(published_at=utcnow())
            )
            return len(rows)
