"""Abuse limits on the admin path: a topic that would exceed ``maxTopicsPerNamespace``, or a
subscription that would exceed ``maxSubscriptionsPerTopic``, is refused (412).

Counted as Pulsar counts: each partition of a partitioned topic and each non-partitioned
topic, those the database holds and those clients auto-created that the workers have not
recorded yet (the topic registry).  Resolution is ``models.flow_resolution.resolve_abuse``:
the namespace's own value, else the broker's.  Clients that create topics on first use are
checked by ``topic_create.lua`` against the same limit.
"""

from __future__ import annotations

import contextlib
from typing import Any

from redis.exceptions import RedisError
from sqlalchemy import select

from api.dataplane import registry_topics
from api.unit_of_work import UnitOfWork
from dataplane.catalog import subscription_names
from models.abuse import MAX_SUBSCRIPTIONS_PER_TOPIC, MAX_TOPICS_PER_NAMESPACE, TOPICS_EXCEEDED
from models.broker_config import BrokerConfig
from models.errors import PreconditionFailed
from models.flow import value_from_json
from models.flow_resolution import FlowInputs, resolve_abuse
from models.orm import FlowPolicy, Namespace, Subscription, Topic
from models.repository import load_broker_config
from sluice.protocol.names import PERSISTENT, TopicName


async def _stored_limits(
    uow: UnitOfWork, namespace_id: int, topic_id: int | None, kind: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The values of ``kind`` stored at the namespace and (with ``topic_id``) at the topic,
    as ``FlowInputs`` takes them, in one query on the unique scope keys."""
    scopes = {FlowPolicy.key(namespace_id, None, kind): False}
    if topic_id is not None:
        scopes[FlowPolicy.key(namespace_id, topic_id, kind)] = True
    rows = await uow.session.execute(
        select(FlowPolicy.scope_key, FlowPolicy.kind, FlowPolicy.value).where(
            FlowPolicy.scope_key.in_(list(scopes))
        )
    )
    namespace: dict[str, Any] = {}
    topic: dict[str, Any] = {}
    for scope_key, stored_kind, value in rows:
        (topic if scopes[scope_key] else namespace)[stored_kind] = value_from_json(
            stored_kind, value
        )
    return namespace, topic


async def topics_limit(
    uow: UnitOfWork, namespace: Namespace, broker: BrokerConfig | None = None
) -> int:
    """The namespace's ``maxTopicsPerNamespace`` in force (0 = no limit); ``broker``: the
    broker configuration when the caller read it already."""
    own, _ = await _stored_limits(uow, namespace.id, None, MAX_TOPICS_PER_NAMESPACE)
    if broker is None:
        broker = await load_broker_config(uow.session)
    return int(
        resolve_abuse(FlowInputs(broker=broker, namespace=own)).max_topics_per_namespace.value
    )


async def check_topics_limit(
    uow: UnitOfWork,
    namespace: Namespace,
    topic: TopicName,
    partitions: int,
    broker: BrokerConfig | None = None,
) -> None:
    """412 when ``topic`` with ``partitions`` (0: non-partitioned) would take the namespace
    over its ``maxTopicsPerNamespace``."""
    limit = await topics_limit(uow, namespace, broker)
    if limit <= 0:
        return
    known: dict[str, int] = {}
    if uow.data_plane is not None:
        with contextlib.suppress(RedisError):
            known = await registry_topics(uow.data_plane.redis, topic.namespace_name)
    rows = await uow.session.execute(
        select(Topic.name, Topic.partitions).where(Topic.namespace_id == namespace.id)
    )
    prefix = f"{PERSISTENT}://{topic.namespace_name}/"
    for name, count in rows:
        known[prefix + name] = count
    known.pop(topic.full, None)
    existing = sum(max(count, 1) for count in known.values())
    if existing + max(partitions, 1) > limit:
        raise PreconditionFailed(TOPICS_EXCEEDED)


async def check_subscriptions_limit(
    uow: UnitOfWork, topic: Topic, base: TopicName, name: str
) -> set[str]:
    """412 when subscription ``name`` would take ``topic`` over its
    ``maxSubscriptionsPerTopic`` (topic > namespace > broker), counting those the database
    holds and those consumers created that the workers have not recorded yet.

    Returns the names of the subscriptions the database holds when it had to count them
    (a limit is set), else an empty set; when ``name`` is among them, nothing is refused
    (creating it again is a conflict, which the caller reports)."""
    namespace, own = await _stored_limits(
        uow, topic.namespace_id, topic.id, MAX_SUBSCRIPTIONS_PER_TOPIC
    )
    inputs = FlowInputs(
        broker=await load_broker_config(uow.session), namespace=namespace, topic=own
    )
    limit = int(resolve_abuse(inputs).max_subscriptions_per_topic.value)
    if limit <= 0:
        return set()
    query = select(Subscription.name).where(Subscription.topic_id == topic.id)
    stored = set((await uow.session.scalars(query)).all())
    if name in stored:
        return stored
    names = set(stored)
    if uow.data_plane is not None:
        with contextlib.suppress(RedisError):
            names |= await subscription_names(uow.data_plane.redis, base, topic.partitions)
    if len(names) >= limit:
        raise PreconditionFailed(
            f"Exceed the maximum number of subscriptions of the topic: {base.full}"
        )
    return stored
