"""Publishing committed change events to the workers' Redis stream.

Events are rows written in the same transaction as the change they describe, so a rolled-back
write never produces one and a committed write always does.  Right after its commit a request
publishes its own events (``publish``: one pipelined XADD) and the rows are marked published
in the background, in batches at most every ``mark_seconds``; the sweep (``run``) publishes
whatever a request could not (Redis down, process gone) once it is older than
``grace_seconds``, or at once when a request reports a failure.  Publishing is
at-least-once: a row published by its request and swept again before it was marked goes out
twice, which is harmless, because workers treat an event as "re-read this entity" and do not
depend on the order of events.  Sweeps of several admin
replicas are serialised by a database lock.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from datetime import timedelta
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from sqlalchemy import select, text, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from models.base import utcnow
from models.journal import WrittenEvent
from models.orm import OutboxEvent
from sluice.protocol.connection import REDIS_FAULTS
from sluice.waits import wait_event

log = logging.getLogger(__name__)

BATCH = 500
# Key of the PostgreSQL advisory lock that serialises sweeps across admin replicas.
RELAY_LOCK_KEY = 0x5E1C_E0B0


def event_fields(event: OutboxEvent | WrittenEvent) -> dict[str, Any]:
    """The fields of the stream entry for one outbox row."""
    return {
        "id": str(event.id),
        "kind": event.kind,
        "entity": event.entity,
        "at": event.created_at.isoformat(),
        "payload": orjson.dumps(event.payload),
    }


@dataclass(eq=False)
class OutboxRelay:
    """Publishes a request's events at once and sweeps up the rest; run ``run()`` and
    ``mark()`` as background tasks."""

    sessions: async_sessionmaker[AsyncSession]
    redis: Redis
    stream: str
    _: KW_ONLY
    maxlen: int = 100_000
    sweep_seconds: float = 1.0
    grace_seconds: float = 5.0
    mark_seconds: float = 0.25
    published: int = field(default=0, init=False)
    _wake: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)
    _urgent: bool = field(default=False, init=False, repr=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)
    _to_mark: set[int] = field(default_factory=set, init=False, repr=False)
    _mark_wake: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)

    def notify(self) -> None:
        """A request could not publish its events: sweep now, without the grace period."""
        self._urgent = True
        self._wake.set()

    async def publish(
        self, events: list[WrittenEvent], then: Callable[[Pipeline], Any] | None = None
    ) -> tuple[str, list[Any]]:
        """Publish committed events now; return the stream id of the last one, and the
        replies of what ``then(pipe)`` queued after them in the same round trip (errors
        included as replies)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for event in events:
                pipe.xadd(self.stream, event_fields(event), maxlen=self.maxlen, approximate=True)
            if then is not None:
                queued = then(pipe)
                if inspect.isawaitable(queued) and queued is not pipe:
                    await queued  # a script call on an asyncio cluster pipeline
            replies = await pipe.execute(raise_on_error=False)
        ids = replies[: len(events)]
        for reply in ids:
            if isinstance(reply, Exception):
                raise reply
        self._to_mark.update(event.id for event in events)
        self._mark_wake.set()
        self.published += len(events)
        last = ids[-1]
        return (last.decode() if isinstance(last, bytes) else last), replies[len(events) :]

    async def mark(self) -> None:
        """Mark published rows in batches, until cancelled."""
        while True:
            await self._mark_wake.wait()
            await asyncio.sleep(self.mark_seconds)  # one UPDATE for a burst of writes
            self._mark_wake.clear()
            ids, self._to_mark = self._to_mark, set()
            if not ids:
                continue
            try:
                async with self.sessions() as session, session.begin():
                    await _no_sync_commit(session)
                    await session.execute(
                        update(OutboxEvent)
                        .where(OutboxEvent.id.in_(ids))
                        .values(published_at=utcnow())
                    )
            except Exception as exc:  # the sweep publishes them again: harmless
                log.warning("outbox: could not mark %d published event(s): %s", len(ids), exc)

    async def run(self) -> None:
        """Sweep on every failure report, and every ``sweep_seconds`` while sweeps find
        events or fail; sweeps that find nothing space out, doubling up to the grace period
        (an idle admin service reads the outbox once per grace period, not every second),
        until cancelled.  An event left by a replica that died before publishing it is so
        published 5 to 10 s (grace, then at most one more) after it was written."""
        wait = self.sweep_seconds
        while True:
            await wait_event(self._wake, wait)
            self._wake.clear()
            urgent, self._urgent = self._urgent, False
            previous, wait = wait, self.sweep_seconds
            try:
                if not await self.publish_pending(grace=0.0 if urgent else self.grace_seconds):
                    wait = min(previous * 2, max(self.sweep_seconds, self.grace_seconds))
            except REDIS_FAULTS as exc:
                self._urgent = urgent
                log.warning("outbox relay: Redis unavailable, will retry: %s", exc)
            except Exception:
                self._urgent = urgent
                log.exception("outbox relay: publish pass failed, will retry")

    async def publish_pending(self, grace: float = 0.0) -> int:
        """Publish every unpublished event older than ``grace`` seconds, oldest first;
        return how many went out."""
        total = 0
        async with self._lock:
            while True:
                count = await self._publish_batch(grace)
                total += count
                if count < BATCH:
                    break
        self.published += total
        return total

    async def _publish_batch(self, grace: float) -> int:
        async with self.sessions() as session, session.begin():
            if session.bind.dialect.name == "postgresql":
                await _no_sync_commit(session)
                await session.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": RELAY_LOCK_KEY}
                )
            query = select(OutboxEvent).where(OutboxEvent.published_at.is_(None))
            if grace > 0:
                query = query.where(OutboxEvent.created_at < utcnow() - timedelta(seconds=grace))
            rows = (await session.execute(query.order_by(OutboxEvent.id).limit(BATCH))).scalars()
            rows = rows.all()
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


async def _no_sync_commit(session: AsyncSession) -> None:
    """Marking rows published need not wait for the disk: rows whose mark is lost in a crash
    are published again, and events are idempotent."""
    if session.bind.dialect.name == "postgresql":
        await session.execute(text("SET LOCAL synchronous_commit = off"))
