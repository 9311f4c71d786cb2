"""An in-memory view of policies and topics for the hot read paths of the admin service.

``GET .../dispatchRate`` (with or without ``applied``) is what dashboards and scripts poll;
serving it from memory keeps it fast.  The cache is correct or unused: it answers only while
it is *fresh*, i.e. no write committed by this process since its last reload began and no
change event pending.  Otherwise callers read the database.  It reloads in the background
after every local commit and every change event from other replicas, and at least every
``max_age`` seconds.  Reloads are coalesced and at least ``min_interval`` seconds apart: under
a storm of writes the reads go to the database for a moment instead of the writes paying for
a full reload each.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from redis.asyncio import Redis
from redis.exceptions import RedisError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from dataplane.events import ChangeEvent, ChangeFollower
from models.dispatch_rate import DispatchRate
from models.orm import DISPATCH_RATE, Namespace, Tenant, Topic
from models.repository import load_snapshot
from models.resolution import resolve_limits
from models.snapshot import PolicySnapshot
from sluice.protocol.names import TopicName

log = logging.getLogger(__name__)


class PolicyCache:
    """Policies, topics and namespaces as of the last reload."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        redis: Redis,
        stream: str,
        *,
        max_age: float = 30.0,
        min_interval: float = 0.1,
    ) -> None:
        self.sessions = sessions
        self.redis = redis
        self.stream = stream
        self.max_age = max_age
        self.min_interval = min_interval
        self.snapshot = PolicySnapshot()
        self.topics: dict[str, int] = {}
        self.namespaces: set[str] = set()
        self.generation = 0  # local commits so far
        self._loaded_generation = -1
        self._pending_events = False
        self._wake = asyncio.Event()
        self.reloads = 0
        self.hits = 0  # reads answered from memory
        self.misses = 0  # reads that went to the database because the cache was stale

    @property
    def fresh(self) -> bool:
        """True when the cache reflects every write this process committed."""
        return self._loaded_generation == self.generation and not self._pending_events

    def local_write(self) -> None:
        """A commit that changed policies or topics happened here: stale until reloaded."""
        self.generation += 1
        self._wake.set()

    async def reload(self) -> None:
        """Read policies, topics and namespaces again."""
        started_at = self.generation
        self._pending_events = False
        async with self.sessions() as session:
            snapshot = await load_snapshot(session)
            rows = (
                await session.execute(
                    select(Tenant.name, Namespace.name, Topic.name, Topic.partitions)
                    .select_from(Namespace)
                    .join(Tenant, Namespace.tenant_id == Tenant.id)
                    .outerjoin(Topic, Topic.namespace_id == Namespace.id)
                )
            ).all()
        self.snapshot = snapshot
        self.namespaces = {f"{t}/{n}" for t, n, _topic, _p in rows}
        self.topics = {
            TopicName(t, n, topic).full: partitions
            for t, n, topic, partitions in rows
            if topic is not None
        }
        self._loaded_generation = started_at
        self.reloads += 1

    async def run(self) -> None:
        """Reload when woken (local commit or change event) or every ``max_age`` seconds."""
        follower = asyncio.create_task(self._follow_events())
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.max_age)
                self._wake.clear()
                started = time.monotonic()
                try:
                    await self.reload()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("policy cache reload failed (reads use the database): %s", exc)
                    await asyncio.sleep(0.5)
                    continue
                # Let the writes of a burst pile up behind one reload.
                await asyncio.sleep(max(0.0, started + self.min_interval - time.monotonic()))
        finally:
            follower.cancel()

    async def _follow_events(self) -> None:
        follower = ChangeFollower(self.redis, self.stream, count=1000, retry_seconds=1.0)
        await follower.follow(self._on_events, self._on_stream_lost)

    async def _on_events(self, _events: list[ChangeEvent]) -> bool:
        self._pending_events = True
        self._wake.set()
        return True

    def _on_stream_lost(self, _exc: RedisError) -> None:
        # Without events we cannot know what other replicas changed: stale until the stream
        # is back, then reload.
        self._pending_events = True
        self._wake.set()

    # --- reads ----------------------------------------------------------------------------

    def topic_partitions(self, topic: TopicName) -> int | None:
        """Partitions of the topic a name refers to, or None when it is unknown."""
        count = self.topics.get(topic.full)
        if count is not None:
            return count
        if topic.partition_index >= 0:
            base = self.topics.get(topic.base.full)
            if base is not None and topic.partition_index < base:
                return base
        return None

    def rate(self, topic: TopicName, kind: str, subscription: str | None) -> DispatchRate | None:
        """The rate stored at exactly this topic-level target."""
        stored = self.snapshot.topics.get(topic.base.full)
        if stored is None:
            return None
        if subscription is not None:
            return stored.subscriptions.get(subscription)
        if kind == DISPATCH_RATE:
            return stored.dispatch_rate
        return stored.subscription_dispatch_rate

    def applied(self, topic: TopicName, kind: str, subscription: str | None) -> DispatchRate:
        """The resolved value, exactly as ``applied=true`` computes it from the database."""
        inputs = self.snapshot.inputs_for(topic)
        if kind == DISPATCH_RATE and subscription is None:
            return resolve_limits(inputs).topic.rate
        limits = resolve_limits(inputs, subscription=subscription or "")
        assert limits.subscription is not None
        return limits.subscription.rate
