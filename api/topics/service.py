"""Topic rules: partitioned and non-partitioned topics, partition growth, subscriptions."""

from __future__ import annotations

import contextlib
from typing import Any, cast

from sqlalchemy import Table, bindparam, insert, select

from api.dataplane import aggregate, lookup, registry_topics
from api.permissions.service import note_roles_granted
from api.topic_rows import get_topic, get_topic_row
from api.topics.limits import (
    check_subscriptions,
    check_topics,
    subscriptions_limit,
    topics_limit,
)
from api.unit_of_work import UnitOfWork
from dataplane.catalog import subscription_names
from models.abuse import MAX_SUBSCRIPTIONS_PER_TOPIC, MAX_TOPICS_PER_NAMESPACE
from models.base import utcnow
from models.broker_config import BrokerConfig
from models.errors import (
    Conflict,
    NotAcceptable,
    NotFound,
    PreconditionFailed,
    Unavailable,
    partitioned_topic_not_found,
    subscription_not_found,
    topic_not_found,
)
from models.flow import value_from_json
from models.orm import FlowPolicy, Subscription, Topic
from models.repository import (
    find_topic,
    find_topic_rows,
    get_namespace,
    insert_new,
    insert_new_statement,
    load_broker_config,
    load_limits,
)
from sluice.protocol import keys
from sluice.protocol.connection import REDIS_FAULTS
from sluice.protocol.names import (
    PARTITION_SUFFIX,
    PERSISTENT,
    TopicName,
    check_namespace,
    check_subscription,
)


def expand(topic: TopicName, partitions: int) -> list[str]:
    """Full names of the real topics: the partitions, or the topic itself."""
    if partitions > 0:
        return [topic.partition(i).full for i in range(partitions)]
    return [topic.full]


async def _known_topics(uow: UnitOfWork, tenant: str, namespace: str) -> dict[str, int]:
    """Base topic name -> partitions, sorted by name: the database's, plus any clients just
    auto-created (in the registry only)."""
    check_namespace(tenant, namespace)
    row = await get_namespace(uow.session, tenant, namespace)
    return dict(sorted((await _topics_of(uow, row.id, f"{tenant}/{namespace}")).items()))


async def _topics_of(uow: UnitOfWork, namespace_id: int, namespace: str) -> dict[str, int]:
    """Full topic name -> partitions of the namespace ``namespace_id`` (``tenant/namespace``):
    the database's, plus any clients just auto-created (in the registry only).  Names are
    built as strings: a namespace may hold tens of thousands of topics."""
    prefix = f"{PERSISTENT}://{namespace}/"
    query = select(Topic.name, Topic.partitions).where(Topic.namespace_id == namespace_id)
    rows = (await (await uow.session.connection()).execute(query)).all()  # plain rows, no ORM
    known = {prefix + name: partitions for name, partitions in rows}
    if uow.data_plane is not None:
        with contextlib.suppress(*REDIS_FAULTS):
            known.update(await registry_topics(uow.data_plane.redis, namespace, known.keys()))
    return known


async def _stored_subscriptions(uow: UnitOfWork, topic_id: int) -> set[str]:
    """Names of the subscriptions the database holds for a topic."""
    query = select(Subscription.name).where(Subscription.topic_id == topic_id)
    return set((await uow.session.scalars(query)).all())


async def _limits(
    uow: UnitOfWork, namespace_id: int | None, topic_id: int | None, kind: str
) -> tuple[BrokerConfig, dict[str, Any], dict[str, Any]]:
    """The broker configuration, and the values of ``kind`` stored at the namespace (when
    ``namespace_id`` is known) and at the topic (with ``topic_id``), as ``FlowInputs`` takes
    them: one query."""
    scopes: dict[str, bool] = {}
    if namespace_id is not None:
        scopes[FlowPolicy.key(namespace_id, None, kind)] = False
        if topic_id is not None:
            scopes[FlowPolicy.key(namespace_id, topic_id, kind)] = True
    broker, rows = await load_limits(uow.session, list(scopes))
    namespace: dict[str, Any] = {}
    topic: dict[str, Any] = {}
    for scope_key, (stored_kind, value) in rows.items():
        (topic if scopes[scope_key] else namespace)[stored_kind] = value_from_json(
            stored_kind, value
        )
    return broker, namespace, topic


async def _check_topics_limit(
    uow: UnitOfWork,
    namespace_id: int,
    topic: TopicName,
    partitions: int,
    broker: BrokerConfig,
    own: dict[str, Any],
) -> None:
    """412 when ``topic`` would take the namespace over its ``maxTopicsPerNamespace``
    (``own``: the values the namespace stores, as ``_limits`` reads them)."""
    limit = topics_limit(broker, own)
    if limit > 0:
        known = await _topics_of(uow, namespace_id, topic.namespace_name)
        check_topics(limit, known, topic, partitions)


async def _check_subscriptions_limit(
    uow: UnitOfWork, topic: Any, base: TopicName, name: str
) -> set[str]:
    """412 when subscription ``name`` would take ``topic`` over its
    ``maxSubscriptionsPerTopic``, counting those the database holds and those consumers
    created that the workers have not recorded yet.

    Returns the names of the subscriptions the database holds when it had to count them
    (a limit is set), else an empty set; when ``name`` is among them, nothing is refused
    (creating it again is a conflict, which the caller reports)."""
    broker, namespace, own = await _limits(
        uow, topic.namespace_id, topic.id, MAX_SUBSCRIPTIONS_PER_TOPIC
    )
    limit = subscriptions_limit(broker, namespace, own)
    if limit <= 0:
        return set()
    stored = await _stored_subscriptions(uow, topic.id)
    if name in stored:
        return stored
    names = set(stored)
    if uow.data_plane is not None:
        with contextlib.suppress(*REDIS_FAULTS):
            names |= await subscription_names(uow.data_plane.redis, base, topic.partitions)
    check_subscriptions(limit, names, base)
    return stored


async def list_topics(uow: UnitOfWork, tenant: str, namespace: str) -> list[str]:
    """Every persistent topic of a namespace, partitions listed one by one."""
    names: list[str] = []
    for full, partitions in (await _known_topics(uow, tenant, namespace)).items():
        if partitions > 0:
            names.extend([f"{full}{PARTITION_SUFFIX}{i}" for i in range(partitions)])
        else:
            names.append(full)
    return names


async def list_partitioned(uow: UnitOfWork, tenant: str, namespace: str) -> list[str]:
    """Base names of the partitioned topics of a namespace."""
    known = await _known_topics(uow, tenant, namespace)
    return [full for full, partitions in known.items() if partitions > 0]


def _check_partition_count(broker: BrokerConfig, partitions: int) -> None:
    """406 unless ``partitions`` is within the broker's bound."""
    limit = broker.get("maxNumPartitionsPerPartitionedTopic")
    if not 0 < partitions <= limit:
        raise NotAcceptable(
            "Number of partitions should be more than 0 and less than or equal to "
            f"maxNumPartitionsPerPartitionedTopic ({limit})"
        )


def _topic_json(topic: Topic) -> dict:
    return {"partitions": topic.partitions, "properties": dict(topic.properties or {})}


async def create_partitioned_topic(uow: UnitOfWork, topic: TopicName, partitions: int) -> None:
    """Create a partitioned topic; 406 on a bad count, 404 without the namespace, 409 if the
    name is taken (in this order)."""
    if PARTITION_SUFFIX in topic.local:
        raise PreconditionFailed(f"Partitioned Topic Name should not contain '{PARTITION_SUFFIX}'")
    await uow.writes_in_one_statement()
    try:
        found: tuple[int, dict[str, Any]] | None = await find_topic_rows(uow.session, topic)
    except NotFound:  # reported after the count is checked
        found = None
    namespace_id = found[0] if found is not None else None
    broker, own, _ = await _limits(uow, namespace_id, None, MAX_TOPICS_PER_NAMESPACE)
    _check_partition_count(broker, partitions)
    if found is None:
        raise NotFound("Namespace does not exist")
    await _create_topic(uow, topic, partitions, {}, found, (broker, own))


async def create_non_partitioned_topic(
    uow: UnitOfWork, topic: TopicName, properties: dict[str, str]
) -> None:
    """Create a non-partitioned topic; 409 if the name is taken."""
    found = await find_topic_rows(uow.session, topic)
    broker, own, _ = await _limits(uow, found[0], None, MAX_TOPICS_PER_NAMESPACE)
    await _create_topic(uow, topic, 0, properties, found, (broker, own))


# Built once: the insert of a new topic, written with its audit entry and change event
# (``UnitOfWork.write_later``): nothing in the request reads the row back.
_TOPICS = cast(Table, Topic.__table__)
_INSERT_TOPIC = insert(_TOPICS).values(
    {
        name: bindparam(f"topic_{name}", type_=_TOPICS.c[name].type)
        for name in ("namespace_id", "name", "partitions", "properties", "created_at")
    }
)


async def _create_topic(
    uow: UnitOfWork,
    topic: TopicName,
    partitions: int,
    properties: dict[str, str],
    found: tuple[int, dict[str, Any]],
    limits: tuple[BrokerConfig, dict[str, Any]],
) -> None:
    """Create ``topic`` in the namespace and among the rows ``find_topic_rows`` ``found``,
    under the broker configuration and the namespace's stored values (``limits``)."""
    namespace_id, rows = found  # the base's row too
    existing = rows.get(topic.local)
    if existing is not None:
        if partitions > 0 and existing.partitions > 0:
            raise Conflict("Partitioned topic already exists")
        raise Conflict("This topic already exists")
    if topic.partition_index >= 0:
        base = rows.get(topic.base.local)
        if base is not None and base.partitions > 0:
            raise Conflict("This topic already exists")
    await _check_topics_limit(uow, namespace_id, topic, partitions, *limits)
    # A concurrent creation of the same name fails the write on the unique key: 409.
    values = {
        "namespace_id": namespace_id,
        "name": topic.local,
        "partitions": partitions,
        "properties": properties,
        "created_at": utcnow(),
    }
    uow.write_later(_INSERT_TOPIC, {f"topic_{k}": v for k, v in values.items()})
    created = {"partitions": partitions, "properties": dict(properties)}
    uow.record("topic", "topic", topic.full, None, created, partitions=partitions)
    uow.project(lambda dp: dp.register_topic(topic, partitions))


async def update_partitions(uow: UnitOfWork, topic: TopicName, partitions: int) -> None:
    """Grow a partitioned topic; shrinking or touching a non-partitioned topic is 409."""
    namespace = await get_namespace(uow.session, topic.tenant, topic.namespace)
    row = await find_topic(uow.session, namespace.id, topic.local)
    if row is None or row.partitions == 0:
        raise NotFound("Partitioned topic does not exist")
    _check_partition_count(await load_broker_config(uow.session), partitions)
    if partitions <= row.partitions:
        raise Conflict("Number of partitions must be more than existing number of partitions")
    before = _topic_json(row)
    row.partitions = partitions
    uow.record("topic", "topic", topic.full, before, _topic_json(row), partitions=partitions)
    uow.project(lambda dp: dp.register_topic(topic, partitions))


async def partition_count(uow: UnitOfWork, topic: TopicName) -> int:
    """Partitions of a topic: N for a partitioned topic, 0 otherwise (also when unknown)."""
    namespace = await get_namespace(uow.session, topic.tenant, topic.namespace)
    row = await find_topic(uow.session, namespace.id, topic.local)
    return row.partitions if row is not None else 0


async def delete_topic(
    uow: UnitOfWork, topic: TopicName, *, partitioned: bool, force: bool = False
) -> None:
    """Delete a topic, its partitions, subscriptions and topic policies.

    Refused (412) while consumers are connected, unless ``force``.
    """
    namespace = await get_namespace(uow.session, topic.tenant, topic.namespace)
    row = await find_topic(uow.session, namespace.id, topic.local)
    if partitioned and (row is None or row.partitions == 0):
        raise NotFound("Partitioned topic does not exist")
    if not partitioned and (row is None or row.partitions > 0):
        raise topic_not_found(topic)
    if not force and uow.data_plane is not None:
        redis = uow.data_plane.redis
        for name in await subscription_names(redis, topic, row.partitions):
            try:
                await uow.data_plane.require_no_consumers(topic, row.partitions, name)
            except PreconditionFailed:
                raise PreconditionFailed("Topic has active consumers") from None
    assert row is not None  # both kinds were checked above
    before = _topic_json(row)
    await note_roles_granted(uow, topic_id=row.id)
    await uow.session.delete(row)
    uow.record("topic", "topic", topic.full, before, None, partitions=row.partitions)
    uow.project(lambda dp: dp.unregister_topic(topic))


async def list_subscriptions(uow: UnitOfWork, topic: TopicName) -> list[str]:
    """Subscription names of a topic (or of the topic a partition belongs to), including
    those consumers created that the workers have not recorded yet."""
    _, row = await get_topic(uow, topic)
    names = await _stored_subscriptions(uow, row.id)
    if uow.data_plane is not None:
        base = TopicName(topic.tenant, topic.namespace, row.name)
        scope = topic if topic.partition_index >= 0 else base
        with contextlib.suppress(*REDIS_FAULTS):
            redis = uow.data_plane.redis
            names |= await subscription_names(redis, scope, 0 if scope is topic else row.partitions)
            # Deleted by their consumers; the workers remove them from the database soon.
            ordered = sorted(names)
            gone = await redis.hmget(keys.TOMBSTONES, [f"{base.full}#{n}" for n in ordered])
            names -= {n for n, mark in zip(ordered, gone, strict=True) if mark}
    return sorted(names)


async def create_subscription(uow: UnitOfWork, topic: TopicName, name: str) -> None:
    """Create a subscription on every partition; 409 when it exists."""
    check_subscription(name)
    await uow.writes_in_one_statement()
    _, row = await get_topic_row(uow, topic)
    base = TopicName(topic.tenant, topic.namespace, row.name)
    stored = await _check_subscriptions_limit(uow, row, base, name)
    exists = Conflict("Subscription already exists for topic")
    if name in stored:
        raise exists
    # The insert itself tells whether the subscription exists (no query before it): it is
    # written with its audit entry and change event, and refused when it inserted nothing
    # (a dry run writes neither: its insert runs now).
    values = {"topic_id": row.id, "name": name, "created_at": utcnow()}
    if uow.dry_run:
        if not await insert_new(uow.session, Subscription, values):
            raise exists
    else:
        statement, params = insert_new_statement(uow.session, Subscription, values)
        uow.write_later(statement, params, refusal=exists)
    _record_subscription(uow, base, name, None, {"name": name})
    uow.project(lambda dp: dp.ensure_subscription(base, row.partitions, name))


async def delete_subscription(
    uow: UnitOfWork, topic: TopicName, name: str, force: bool = False
) -> None:
    """Delete a subscription from every partition; 404 when it does not exist, 412 while
    consumers are connected (unless ``force``)."""
    _, row = await get_topic(uow, topic)
    base = TopicName(topic.tenant, topic.namespace, row.name)
    existing = await uow.session.scalar(
        select(Subscription).where(Subscription.topic_id == row.id, Subscription.name == name)
    )
    in_redis = False
    if uow.data_plane is not None:
        in_redis = name in await subscription_names(uow.data_plane.redis, base, row.partitions)
        if not force:
            await uow.data_plane.require_no_consumers(base, row.partitions, name)
    if existing is None and not in_redis:
        raise subscription_not_found(name, topic)
    if uow.data_plane is not None and not uow.dry_run:
        # Before the row goes: a worker that reads the database after the commit and Redis
        # before the groups are dropped must not record them as a client's subscription.
        await uow.data_plane.mark_dropped(base, name)
    if existing is not None:
        await uow.session.delete(existing)
    _record_subscription(uow, base, name, {"name": name}, None)
    uow.project(lambda dp: dp.drop_subscription(base, row.partitions, name))


def _record_subscription(uow: UnitOfWork, base: TopicName, name: str, before, after) -> None:
    uow.record(
        "subscription",
        "subscription",
        f"{base.full}#{name}",
        before,
        after,
        topic=base.full,
        subscription=name,
    )


async def topic_stats(uow: UnitOfWork, topic: TopicName) -> dict:
    """Pulsar's ``TopicStats`` of a partition or non-partitioned topic; for a partitioned
    topic, the totals over its partitions (as Pulsar answers)."""
    _, row = await get_topic(uow, topic)
    if topic.partition_index < 0 and row.partitions > 0:
        return await partitioned_stats(uow, topic, per_partition=False)
    return await _data_plane(uow).partition_stats(topic)


async def partitioned_stats(uow: UnitOfWork, topic: TopicName, per_partition: bool) -> dict:
    """Pulsar's ``PartitionedTopicStats``: totals over partitions, and each if asked."""
    _, row = await get_topic(uow, topic)
    if row.partitions == 0:
        raise partitioned_topic_not_found(topic)
    partitions = [topic.partition(i) for i in range(row.partitions)]
    return aggregate(await _data_plane(uow).partitions_stats(partitions), per_partition)


async def lookup_topic(uow: UnitOfWork, topic: TopicName) -> dict:
    """Which worker owns a topic: one answer for a partition or non-partitioned topic, a map
    partition -> answer for a partitioned topic (like ``pulsar-admin topics partitioned-lookup``).
    """
    _, row = await get_topic(uow, topic)
    _data_plane(uow)
    redis = uow.data_plane.redis
    if topic.partition_index < 0 and row.partitions > 0:
        names = [TopicName.from_full(p) for p in expand(topic, row.partitions)]
        return await lookup(redis, names)
    answer = (await lookup(redis, [topic]))[topic.full]
    if answer["owner"] is None:
        raise Unavailable(f"No live worker owns {topic.full} yet: no worker holds its lease")
    return answer


def _data_plane(uow: UnitOfWork):
    if uow.data_plane is None:
        raise Unavailable("Redis is not configured")
    return uow.data_plane
