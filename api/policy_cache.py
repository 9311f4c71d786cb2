"""An in-memory view of policies and topics for the hot read paths of the admin service.

``GET .../dispatchRate`` (with or without ``applied``) is what dashboards and scripts poll;
serving it from memory keeps it fast.  The cache is correct or unused: it answers only while
it is *fresh*, i.e. no write committed by this process since its last reload began and no
change event pending.  Otherwise callers read the database.  It reloads in the background
after every local commit and every change event from other replicas, and at least every
``max_age`` seconds.  Reloads are coalesced and at least ``min_interval`` seconds apart: under
a storm of writes the reads go to the database for a moment instead of the writes paying for
a full reload each.

A reload reads only what the changes since the last one may have touched: the policies
after a policy or broker-configuration change (or a topic deletion, whose policies go with
it); just the named topics after a topic is created, resized or deleted; nothing more for a
subscription, an operation or a permission.  Only a change of namespaces or tenants, a lost
event stream and the periodic reload read everything, so a write does not cost a scan of a
namespace of 50,000 topics.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Protocol

from redis.asyncio import Redis
from redis.exceptions import RedisError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from api.permissions.service import PERMISSIONS
from api.resource_groups.service import RESOURCE_GROUP
from dataplane.events import ChangeEvent, ChangeFollower
from models.db import without_transaction
from models.dispatch_rate import DispatchRate
from models.orm import DISPATCH_RATE, Namespace, Tenant, Topic
from models.repository import load_snapshot
from models.resolution import resolve_limits
from models.snapshot import PolicySnapshot
from sluice.protocol.errors import PreconditionFailed
from sluice.protocol.names import PERSISTENT, TopicName
from sluice.waits import wait_event

log = logging.getLogger(__name__)

# Seconds before a failed reload is tried again: the first wait, and the longest.
RETRY_FIRST_SECONDS = 0.5
RETRY_MAX_SECONDS = 5.0
# Kinds of change that touch neither the policies nor the topics and namespaces.
NEUTRAL = frozenset({"subscription", "operation", PERMISSIONS, RESOURCE_GROUP})
# Kinds of change that touch the policies only.
POLICIES = frozenset({"policy", "broker.config"})


class Change(Protocol):
    """What the cache reads of a change event (an outbox row or a stream entry)."""

    @property
    def kind(self) -> str: ...

    @property
    def entity(self) -> str: ...

    @property
    def payload(self) -> dict[str, Any]: ...


@dataclass(eq=False)
class PolicyCache:
    """Policies, topics and namespaces as of the last reload."""

    sessions: async_sessionmaker[AsyncSession]
    redis: Redis
    stream: str
    _: KW_ONLY
    max_age: float = 30.0
    min_interval: float = 0.1
    snapshot: PolicySnapshot = field(default_factory=PolicySnapshot, init=False)
    topics: dict[str, int] = field(default_factory=dict, init=False)
    namespaces: set[str] = field(default_factory=set, init=False)
    generation: int = field(default=0, init=False)  # local commits so far
    _loaded_generation: int = field(default=-1, init=False, repr=False)
    _pending_events: bool = field(default=False, init=False, repr=False)
    # The next reload reads everything / the policies / these topics (full names) again.
    _full_pending: bool = field(default=True, init=False, repr=False)
    _policies_pending: bool = field(default=False, init=False, repr=False)
    _topics_pending: set[str] = field(default_factory=set, init=False, repr=False)
    _wake: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)
    reloads: int = field(default=0, init=False)
    full_reloads: int = field(default=0, init=False)
    hits: int = field(default=0, init=False)  # reads answered from memory
    # Reads that went to the database because the cache was stale.
    misses: int = field(default=0, init=False)
    # Called (in a task of their own) when a change event says grants changed, whichever
    # replica made the change (the WebSocket connections' recheck, api.websocket.grants).
    on_permissions: list[Callable[[], Awaitable[Any]]] = field(default_factory=list, init=False)
    _listener_tasks: set[asyncio.Task] = field(default_factory=set, init=False, repr=False)

    @property
    def fresh(self) -> bool:
        """True when the cache reflects every write this process committed."""
        return self._loaded_generation == self.generation and not self._pending_events

    def local_write(self, changes: Iterable[Change] | None = None) -> None:
        """A commit that changed policies or topics happened here: stale until reloaded.

        ``changes``: the change events it wrote (None: anything may have changed)."""
        self.generation += 1
        self._note(changes)
        self._wake.set()

    def _note(self, changes: Iterable[Change] | None) -> None:
        """Remember what the next reload must read."""
        if changes is None:
            self._full_pending = True
            return
        for change in changes:
            if change.kind == "topic":
                self._topics_pending.add(change.entity)
                if change.payload.get("action") == "delete":
                    self._policies_pending = True  # the topic's policies went with it
            elif change.kind in POLICIES:
                self._policies_pending = True
            elif change.kind not in NEUTRAL:
                self._full_pending = True

    async def reload(self, full: bool = False) -> None:
        """Read again what changed: the policies, the named topics, or everything (when
        ``full``, or when a change may have touched anything)."""
        started_at = self.generation
        self._pending_events = False
        full = full or self._full_pending
        policies = full or self._policies_pending
        names, self._topics_pending = self._topics_pending, set()
        self._full_pending = self._policies_pending = False
        snapshot = self.snapshot
        try:
            async with self.sessions() as session:
                await without_transaction(session)
                if policies:
                    snapshot = await load_snapshot(session)
                if full:
                    namespaces, topics = await _catalog(session)
                elif names:
                    found = await _topics_named(session, names)
        except BaseException:
            # Still to do: a failed reload leaves the cache stale, never wrongly fresh.
            self._pending_events = True
            self._full_pending = self._full_pending or full
            self._policies_pending = self._policies_pending or policies
            self._topics_pending |= names
            raise
        self.snapshot = snapshot
        if full:
            self.namespaces, self.topics = namespaces, topics
            self.full_reloads += 1
        else:
            for name in names:
                if name in found:
                    self.topics[name] = found[name]
                else:
                    self.topics.pop(name, None)
        self._loaded_generation = started_at
        self.reloads += 1

    async def run(self) -> None:
        """Reload when woken (local commit or change event) or every ``max_age`` seconds.

        A reload that fails (the database restarting) is tried again by itself, 0.5 s later,
        then waiting twice as long each time up to ``RETRY_MAX_SECONDS``: the reads go to the
        database meanwhile, and come back to memory without waiting for the next change."""
        follower = asyncio.create_task(self._follow_events())
        retry = RETRY_FIRST_SECONDS
        try:
            while True:
                woken = await wait_event(self._wake, self.max_age)
                self._wake.clear()
                started = time.monotonic()
                try:
                    await self.reload(full=not woken)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning(
                        "policy cache reload failed (reads use the database; retry in %.1f s): %s",
                        retry,
                        exc,
                    )
                    await asyncio.sleep(retry)
                    retry = min(2 * retry, RETRY_MAX_SECONDS)
                    self._wake.set()
                    continue
                retry = RETRY_FIRST_SECONDS
                # Let the writes of a burst pile up behind one reload.
                await asyncio.sleep(max(0.0, started + self.min_interval - time.monotonic()))
        finally:
            follower.cancel()

    async def _follow_events(self) -> None:
        follower = ChangeFollower(self.redis, self.stream, count=1000, retry_seconds=1.0)
        await follower.follow(self._on_events, self._on_stream_lost)

    async def _on_events(self, events: list[ChangeEvent]) -> bool:
        self._pending_events = True
        self._note(events)
        self._wake.set()
        if any(event.kind == PERMISSIONS for event in events):
            for listener in self.on_permissions:
                task = asyncio.create_task(listener())
                self._listener_tasks.add(task)
                task.add_done_callback(self._listener_tasks.discard)
        return True

    def _on_stream_lost(self, _exc: RedisError) -> None:
        # Without events we cannot know what other replicas changed: stale until the stream
        # is back, then reload everything.
        self._pending_events = True
        self._full_pending = True
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


async def _catalog(session: AsyncSession) -> tuple[set[str], dict[str, int]]:
    """Every namespace (``tenant/ns``) and every topic (full name -> partitions)."""
    rows = await session.execute(
        select(Tenant.name, Namespace.name, Topic.name, Topic.partitions)
        .select_from(Namespace)
        .join(Tenant, Namespace.tenant_id == Tenant.id)
        .outerjoin(Topic, Topic.namespace_id == Namespace.id)
    )
    namespaces: set[str] = set()
    topics: dict[str, int] = {}
    for tenant, namespace, topic, partitions in rows:
        namespaces.add(f"{tenant}/{namespace}")
        if topic is not None:
            topics[f"{PERSISTENT}://{tenant}/{namespace}/{topic}"] = partitions
    return namespaces, topics


async def _topics_named(session: AsyncSession, names: set[str]) -> dict[str, int]:
    """Those of ``names`` (full names) that exist, with their partitions, in one query."""
    wanted: dict[tuple[str, str, str], str] = {}
    for name in names:
        topic = _parsed(name)
        if topic is not None:
            wanted[(topic.tenant, topic.namespace, topic.local)] = name
    if not wanted:
        return {}
    rows = await session.execute(
        select(Tenant.name, Namespace.name, Topic.name, Topic.partitions)
        .join(Namespace, Topic.namespace_id == Namespace.id)
        .join(Tenant, Namespace.tenant_id == Tenant.id)
        .where(Topic.name.in_({local for _t, _n, local in wanted}))
    )
    return {
        wanted[(tenant, namespace, topic)]: partitions
        for tenant, namespace, topic, partitions in rows
        if (tenant, namespace, topic) in wanted
    }


def _parsed(name: str) -> TopicName | None:
    try:
        return TopicName.from_full(name)
    except PreconditionFailed:
        return None
