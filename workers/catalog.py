"""The catalog: keeps the database and Redis in agreement about topics and subscriptions.

Database -> Redis: topics created over the admin API appear in the topic registry
(``sl:{meta}:topics``), their subscriptions get consumer groups, the namespace set and the
settings clients read (auto-creation, consumer timeout) are published.  Redis -> database:
topics clients auto-created and subscriptions consumers created are recorded (with an audit
entry by the worker's role; not those the admin API deleted in the last minute, whose groups
a read may see between the delete's commit and their drop), and subscriptions consumers
deleted are removed.  Deleted topics
lose their Redis data.  Runs fully at start and periodically; change events apply it piecewise.

Redis is written through ``dataplane.catalog.CatalogProjection``, the same code the admin
service projects its writes with.  The catalog needs the worker's context and a session
factory; when the set of topics changed it calls ``on_changed`` (the worker then claims and
runs the partitions that are now its own).  ``version`` goes up whenever the set of
partitions changes, so partition ownership recomputes its assignment only then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import orjson
from sqlalchemy import delete, insert, select, tuple_
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from dataplane.catalog import (
    CatalogProjection,
    Recorded,
    drop_mark,
    forget_old_drop_marks,
    marked_dropped,
    subscriptions_by_topic,
)
from dataplane.events import ChangeEvent
from models.base import epoch_ms, utcnow
from models.journal import AuditEntry, OutboxEvent, change_rows, record_change
from models.orm import Namespace, Subscription, Tenant, Topic
from models.repository import find_namespace, find_topic
from sluice.protocol import keys
from sluice.protocol.frames import partitions_of
from sluice.protocol.names import TopicName
from workers.context import WorkerContext

log = logging.getLogger(__name__)

WORKER_ROLE = "sluice-worker"
RECORD_BATCH = 500  # client-created subscriptions recorded per transaction
# Partitions whose subscription sets one full pass reads, besides those a deletion mark names.
SCAN_PARTITIONS_PER_PASS = 5_000
# Broker settings clients (and topic_create.lua: the broker's maxTopicsPerNamespace) read.
CLIENT_SETTINGS = (
    "allowAutoTopicCreation",
    "allowAutoTopicCreationType",
    "defaultNumPartitions",
    "maxTopicsPerNamespace",
    "maxMessageSize",
)


class Catalog:
    """Topic registry mirror and the two-way sync."""

    def __init__(
        self,
        context: WorkerContext,
        sessions: async_sessionmaker[AsyncSession],
        on_changed: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.context = context
        self.sessions = sessions
        self.plane = CatalogProjection(context.redis, context.scripts, context.consumer_timeout_ms)
        self.on_changed = on_changed
        self._topics: dict[str, int] = {}
        self.version = 0  # bumped whenever the set of partitions changes
        self._partitions: tuple[int, list[TopicName]] | None = None  # (version, partitions)
        self.recorded: set[tuple[str, str]] = set()  # (base topic, subscription) in the database
        self._to_record: set[tuple[str, str]] = set()
        self._scan_from = 0  # where the next pass's slice of topics starts (name order)
        self._recorder: asyncio.Task | None = None
        self._lock = asyncio.Lock()
        self._topic_limits: dict[str, int] | None = None  # as last published
        self._topic_limits_lock = asyncio.Lock()

    @property
    def topics(self) -> dict[str, int]:
        """Known base topic -> its partitions (0: not partitioned).  Read it only: changes go
        through the setter, ``_set_topic`` and ``_forget_topic``, which keep ``version``."""
        return self._topics

    @topics.setter
    def topics(self, topics: dict[str, int]) -> None:
        if topics != self._topics:
            self.version += 1
        self._topics = topics

    def _set_topic(self, name: str, partitions: int) -> None:
        if self._topics.get(name) != partitions:
            self._topics[name] = partitions
            self.version += 1

    def _forget_topic(self, name: str) -> int:
        """Forget a topic; its partitions as known until now (0 when it was not known)."""
        if name not in self._topics:
            return 0
        self.version += 1
        return self._topics.pop(name)

    def partitions(self) -> list[TopicName]:
        """Every partition of every known topic: the same list until ``version`` changes (do
        not modify it)."""
        if self._partitions is None or self._partitions[0] != self.version:
            listed = [
                p
                for name, count in self._topics.items()
                for p in partitions_of(TopicName.from_full(name), count)
            ]
            self._partitions = (self.version, listed)
        return self._partitions[1]

    async def load_registry(self) -> dict[str, dict]:
        """Read the topic registry from Redis."""
        raw = await self.context.redis.hgetall(keys.TOPICS)
        records = {k.decode(): orjson.loads(v) for k, v in raw.items()}
        self.topics = {name: int(r["partitions"]) for name, r in records.items()}
        return records

    # --- full sync ------------------------------------------------------------------------

    async def sync(self) -> None:
        """Reconcile everything, both ways (one pass at a time; a pass that loses a race
        with another worker's insert is simply run again)."""
        async with self._lock:
            try:
                await self._sync()
            except IntegrityError:
                await self._sync()

    async def _sync(self) -> None:
        records = await self.load_registry()
        async with self.sessions() as session, session.begin():
            rows = (
                await session.execute(
                    select(Topic, Namespace, Tenant.name)
                    .join(Namespace, Topic.namespace_id == Namespace.id)
                    .join(Tenant, Namespace.tenant_id == Tenant.id)
                )
            ).all()
            db_topics = {TopicName(t, ns.name, topic.name).full: topic for topic, ns, t in rows}
            namespaces = {
                f"{t}/{ns}": ns_id
                for ns_id, ns, t in (
                    await session.execute(
                        select(Namespace.id, Namespace.name, Tenant.name).join(Tenant)
                    )
                ).all()
            }
            for name, record in records.items():
                if name in db_topics:
                    continue
                topic = TopicName.from_full(name)
                if record.get("autoCreated") and topic.namespace_name in namespaces:
                    row = Topic(
                        namespace_id=namespaces[topic.namespace_name],
                        name=topic.local,
                        partitions=int(record["partitions"]),
                        properties={},
                    )
                    session.add(row)
                    await session.flush()
                    db_topics[name] = row
                    self._record_created(session, name, row)
                elif not record.get("autoCreated"):
                    await self.drop_topic_data(topic, int(record["partitions"]))
            await self._sync_subscriptions(session, db_topics)
        # Only the registry entries that differ are written (an auto-created topic's loses its
        # mark once recorded): a pass over a settled catalog of 50,000 topics writes none.
        await self.plane.replace_catalog(
            {
                name: row.partitions
                for name, row in db_topics.items()
                if records.get(name) != {"partitions": row.partitions}
            },
            namespaces,
        )
        await self.publish_client_config()
        await self.publish_topic_limits(force=True)
        await self.load_registry()

    async def adopt(self, names: set[str]) -> None:
        """Topics that appeared in the registry (clients create them on first use): record
        the new ones in the database and run their partitions.  Only these topics are read,
        however large the catalog."""
        redis = self.context.redis
        async with self._lock:
            wanted = sorted(name for name in names if name not in self.topics)
            if not wanted:
                return
            records = {
                name: orjson.loads(raw)
                for name, raw in zip(wanted, await redis.hmget(keys.TOPICS, wanted), strict=True)
                if raw is not None
            }
            # Another worker may record one first: the periodic full pass settles it.
            with contextlib.suppress(IntegrityError):
                await self._record_auto_created(records)
            for name, record in records.items():
                self._set_topic(name, int(record["partitions"]))
        await self._changed()

    async def _changed(self) -> None:
        if self.on_changed is not None:
            await self.on_changed()

    async def _record_auto_created(self, records: dict[str, dict]) -> None:
        auto = {name: r for name, r in records.items() if r.get("autoCreated")}
        if not auto:
            return
        async with self.sessions() as session, session.begin():
            for name, record in auto.items():
                topic = TopicName.from_full(name)
                namespace = await find_namespace(session, topic.tenant, topic.namespace)
                if namespace is None or await find_topic(session, namespace.id, topic.local):
                    continue
                row = Topic(
                    namespace_id=namespace.id,
                    name=topic.local,
                    partitions=int(record["partitions"]),
                    properties={},
                )
                session.add(row)
                await session.flush()
                self._record_created(session, name, row)
        await self.plane.register_topics({n: int(r["partitions"]) for n, r in auto.items()})

    async def publish_client_config(self) -> None:
        """The broker settings clients read (auto-creation, limits, consumer timeout)."""
        broker = self.context.policy.broker
        runtime = broker.runtime()
        config = {k: runtime[k] for k in CLIENT_SETTINGS}
        # An auto-created topic obeys the same bound as one created over REST.
        config["defaultNumPartitions"] = str(
            min(
                broker.get("defaultNumPartitions"),
                broker.get("maxNumPartitionsPerPartitionedTopic"),
            )
        )
        config["consumerTimeoutMs"] = str(self.context.consumer_timeout_ms)
        await self.context.redis.hset(keys.CLIENT_CONFIG, mapping=config)

    async def publish_topic_limits(self, force: bool = False) -> None:
        """Each namespace's own ``maxTopicsPerNamespace`` for ``topic_create.lua`` (the
        broker's goes with the client settings); written when it changed, read from the
        policies in force at the time of writing, one write at a time."""
        async with self._topic_limits_lock:
            limits = self.context.policy.namespace_topic_limits()
            if limits == self._topic_limits and not force:
                return
            pipe = self.context.redis.pipeline(transaction=True)
            pipe.delete(keys.TOPIC_LIMITS)
            if limits:
                pipe.hset(keys.TOPIC_LIMITS, mapping=limits)
            await pipe.execute()
            self._topic_limits = limits

    async def _sync_subscriptions(self, session, db_topics: dict[str, Topic]) -> None:
        """Subscriptions deleted by their consumers leave the database; those created by
        consumers are recorded (in small batches, off this pass); those created over the
        admin API get their consumer groups."""
        redis = self.context.redis
        tombstones = {k.decode() for k in await redis.hkeys(keys.TOMBSTONES)}
        rows = (
            await session.execute(select(Subscription.id, Subscription.topic_id, Subscription.name))
        ).all()
        by_topic: dict[int, dict[str, int]] = {}
        for sub_id, topic_id, sub_name in rows:
            by_topic.setdefault(topic_id, {})[sub_name] = sub_id
        gone: list[int] = []
        missing: dict[int, tuple[TopicName, int, str]] = {}  # recorded, not in Redis: by id
        self.recorded = {
            (name, sub) for name, topic in db_topics.items() for sub in by_topic.get(topic.id, {})
        }
        scanned, self._scan_from = scan_slice(
            {name: topic.partitions for name, topic in db_topics.items()},
            {t.rpartition("#")[0] for t in tombstones},
            self._scan_from,
        )
        present = await subscriptions_by_topic(
            redis, {TopicName.from_full(name): db_topics[name].partitions for name in scanned}
        )
        for name in scanned:
            topic = db_topics[name]
            known = by_topic.get(topic.id, {})
            base = TopicName.from_full(name)
            in_redis = present[name]
            for sub_name, sub_id in known.items():
                # A mark is believed only while Redis agrees: any client that may consume
                # somewhere may write marks, but cannot delete another's consumer groups.
                if f"{name}#{sub_name}" in tombstones and sub_name not in in_redis:
                    gone.append(sub_id)
                    self.recorded.discard((name, sub_name))
                    self._record(
                        session,
                        "subscription",
                        "subscription",
                        f"{name}#{sub_name}",
                        {"name": sub_name},
                        None,
                        topic=name,
                        subscription=sub_name,
                    )
                    continue
                if sub_name not in in_redis:
                    missing[sub_id] = (base, topic.partitions, sub_name)
            for sub_name in in_redis - set(known):
                self.note_subscription(name, sub_name)
        await self._ensure_still_recorded(missing)
        await forget_old_drop_marks(redis)
        if gone:
            await session.execute(delete(Subscription).where(Subscription.id.in_(gone)))
        if tombstones:
            await redis.hdel(keys.TOMBSTONES, *tombstones)

    async def _ensure_still_recorded(self, missing: dict[int, tuple[TopicName, int, str]]) -> None:
        """Make the consumer groups of recorded subscriptions that Redis lacks, but only of
        those the database still holds now, read after Redis was: a subscription deleted over
        the admin API between this pass's two reads (its row goes first, then its groups) is
        not made again.  Read in a session of its own: the pass's transaction may see the
        database as it was when the pass began.  That read also gives when each row was made,
        which tells a delete mark of an earlier subscription of the same name from its own."""
        if not missing:
            return
        async with self.sessions() as session:
            still = (
                await session.execute(
                    select(Subscription.id, Subscription.created_at).where(
                        Subscription.id.in_(list(missing))
                    )
                )
            ).all()
        await self.plane.ensure_recorded_subscriptions(
            [Recorded(*missing[sub_id], epoch_ms(created)) for sub_id, created in still]
        )

    @property
    def recorder(self) -> asyncio.Task | None:
        """The task recording client-created subscriptions, if one was started."""
        return self._recorder

    def note_subscription(self, topic: str, subscription: str) -> None:
        """A subscription a consumer created (``topic`` is the base topic's full name): record
        it in the database soon, if it is not there yet."""
        item = (topic, subscription)
        if item in self.recorded or item in self._to_record:
            return
        self._to_record.add(item)
        if self._recorder is None or self._recorder.done():
            self._recorder = asyncio.create_task(self._record_subscriptions())

    async def _record_subscriptions(self) -> None:
        while self._to_record:
            batch = sorted(self._to_record)[:RECORD_BATCH]
            try:
                await self._record_batch(batch)
            except Exception as exc:  # the next full pass records what is left
                log.warning("recording %d subscription(s) failed: %s", len(batch), exc)
                self._to_record.clear()
                return
            self._to_record.difference_update(batch)
            self.recorded.update(batch)
            await asyncio.sleep(0)

    async def _record_batch(self, batch: list[tuple[str, str]]) -> None:
        """Record a batch of client-created subscriptions, with their audit entries and
        change events, in a few bulk statements."""
        names = {TopicName.from_full(topic) for topic, _sub in batch}
        async with self.sessions() as session, session.begin():
            rows = (
                await session.execute(
                    select(Tenant.name, Namespace.name, Topic.name, Topic.id)
                    .join(Namespace, Topic.namespace_id == Namespace.id)
                    .join(Tenant, Namespace.tenant_id == Tenant.id)
                    .where(Topic.name.in_({n.local for n in names}))
                )
            ).all()
            ids = {TopicName(t, ns, topic).full: tid for t, ns, topic, tid in rows}
            names_of = {tid: name for name, tid in ids.items()}
            values = [
                {"topic_id": ids[topic], "name": sub, "created_at": utcnow()}
                for topic, sub in batch
                if topic in ids
            ]
            if not values:
                return
            dialect = session.bind.dialect.name
            insert_ = postgresql_insert if dialect == "postgresql" else sqlite_insert
            inserted = (
                await session.execute(
                    insert_(Subscription)
                    .values(values)
                    .on_conflict_do_nothing(index_elements=["topic_id", "name"])
                    .returning(Subscription.topic_id, Subscription.name)
                )
            ).all()
            if inserted:
                # Read after the insert: the admin API marks a subscription it deletes before
                # the row goes, so a row made again from groups seen before their drop is
                # taken back here, in the same transaction.
                dropped = await marked_dropped(
                    self.context.redis, [drop_mark(names_of[tid], sub) for tid, sub in inserted]
                )
                undone = [(t, sub) for t, sub in inserted if drop_mark(names_of[t], sub) in dropped]
                if undone:
                    await session.execute(
                        delete(Subscription).where(
                            tuple_(Subscription.topic_id, Subscription.name).in_(undone)
                        )
                    )
                    inserted = [(t, sub) for t, sub in inserted if (t, sub) not in undone]
            if not inserted:
                return
            audit, events = change_rows(
                role=WORKER_ROLE,
                request_id=f"worker:{self.context.worker_id}",
                kind="subscription",
                changes=[
                    (
                        "subscription",
                        f"{names_of[tid]}#{sub}",
                        None,
                        {"name": sub},
                        {"topic": names_of[tid], "subscription": sub},
                    )
                    for tid, sub in inserted
                ],
            )
            await session.execute(insert(AuditEntry), audit)
            await session.execute(insert(OutboxEvent), events)

    def _record_created(self, session, name: str, row: Topic) -> None:
        """Audit and emit a topic the worker recorded (a client created it)."""
        partitions = row.partitions
        self._record(
            session, "topic", "topic", name, None, {"partitions": partitions}, partitions=partitions
        )

    def _record(self, session, kind, entity_type, entity, before, after, **payload) -> None:
        record_change(
            session,
            role=WORKER_ROLE,
            request_id=f"worker:{self.context.worker_id}",
            kind=kind,
            entity_type=entity_type,
            entity=entity,
            before=before,
            after=after,
            **payload,
        )

    # --- pieces ---------------------------------------------------------------------------

    async def drop_topic_data(self, topic: TopicName, partitions: int) -> None:
        """Delete every Redis key of a deleted topic and forget it."""
        await self.plane.drop_topic_data(topic, partitions)
        self._forget_topic(topic.full)

    async def apply_events(self, events: list[ChangeEvent]) -> None:
        """Apply catalog events from the admin service, then rebalance partitions.

        An event only names what changed: the database says what is true now, so events
        that arrive twice or out of order (a create after its delete) change nothing wrong."""
        named: dict[str, int] = {}  # topic -> partitions its events mention
        gone: dict[str, int] = {}  # deleted topic -> partitions whose data to drop
        subscriptions: set[tuple[str, str]] = set()
        deleted_namespaces = False
        for event in events:
            kind, entity, payload = event.kind, event.entity, event.payload
            if kind == "topic":
                named[entity] = max(named.get(entity, 0), int(payload.get("partitions", 0)))
            elif kind == "subscription":
                subscriptions.add((payload["topic"], payload["subscription"]))
            elif kind in ("namespace", "tenant") and payload.get("action") == "delete":
                deleted_namespaces = True
                for name in payload.get("topics", []):
                    named.setdefault(name, 0)
        current, existing = await self._read_current(
            set(named) | {t for t, _ in subscriptions}, subscriptions
        )
        for name, mentioned in named.items():
            if name in current:
                count = current[name]
                await self.plane.register_topic(TopicName.from_full(name), count)
                self._set_topic(name, count)
            else:
                gone[name] = max(self._forget_topic(name), mentioned)
        ensured: list[Recorded] = []
        dropped: list[tuple[TopicName, str]] = []
        for topic_name, sub in subscriptions:
            if topic_name not in current:
                continue  # the topic went, and its subscriptions with it
            topic = TopicName.from_full(topic_name)
            if (topic_name, sub) in existing:
                created_ms = existing[topic_name, sub]
                ensured.append(Recorded(topic, current[topic_name], sub, created_ms))
                self.recorded.add((topic_name, sub))
            else:
                dropped += [(p, sub) for p in partitions_of(topic, current[topic_name])]
                self.recorded.discard((topic_name, sub))
        # All of the batch's subscriptions at once (pipelined), not one round trip each.
        await self.plane.ensure_recorded_subscriptions(ensured)
        if dropped:
            await self.plane.drop_subscriptions(dropped)
        if deleted_namespaces:
            await self.sync()
        await self._changed()
        # Only now that this worker's dispatchers of deleted topics have stopped (none can
        # write a key of theirs again), their data goes.
        for name, partitions in gone.items():
            await self.plane.drop_topic_data(TopicName.from_full(name), partitions)

    async def _read_current(
        self, topics: set[str], subscriptions: set[tuple[str, str]]
    ) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
        """The named topics that exist (with their partitions) and the named subscriptions
        that exist (with when their rows were made, ms), as the database has them now."""
        if not topics:
            return {}, {}
        names = [TopicName.from_full(t) for t in topics]
        async with self.sessions() as session:
            rows = (
                await session.execute(
                    select(Tenant.name, Namespace.name, Topic.name, Topic.partitions, Topic.id)
                    .join(Namespace, Topic.namespace_id == Namespace.id)
                    .join(Tenant, Namespace.tenant_id == Tenant.id)
                    .where(Topic.name.in_({n.local for n in names}))
                )
            ).all()
            found = {TopicName(t, ns, name).full: (count, tid) for t, ns, name, count, tid in rows}
            current = {name: found[name][0] for name in topics if name in found}
            existing: dict[tuple[str, str], int] = {}
            wanted = [(t, s) for t, s in subscriptions if t in current]
            if wanted:
                ids = {found[t][1]: t for t, _ in wanted}
                sub_rows = (
                    await session.execute(
                        select(
                            Subscription.topic_id, Subscription.name, Subscription.created_at
                        ).where(
                            Subscription.topic_id.in_(ids),
                            Subscription.name.in_({s for _, s in wanted}),
                        )
                    )
                ).all()
                existing = {(ids[tid], name): epoch_ms(at) for tid, name, at in sub_rows}
        return current, existing


def scan_slice(
    topics: dict[str, int], marked: set[str], start: int, budget: int = SCAN_PARTITIONS_PER_PASS
) -> tuple[list[str], int]:
    """The topics (name -> partitions) whose subscription sets a full pass reads, and where
    the next pass starts: those ``marked`` (a consumer's deletion mark names them), and the
    next slice of the others in name order from ``start``, of about ``budget`` partitions.
    So a pass costs the same however many partitions there are, and every topic is read
    again within (partitions / budget) passes."""
    names = sorted(topics)
    scan = [name for name in names if name in marked]
    if not names:
        return scan, 0
    start %= len(names)
    taken = 0
    for name in names[start:] + names[:start]:
        if budget <= 0:
            break
        taken += 1
        budget -= max(1, topics[name])
        if name not in marked:
            scan.append(name)
    return scan, start + taken
