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

from redis.exceptions import RedisError
from sqlalchemy import select

from api.dataplane import registry_topics
from api.unit_of_work import UnitOfWork
from dataplane.catalog import subscription_names
from models.abuse import MAX_TOPICS_PER_NAMESPACE, TOPICS_EXCEEDED
from models.errors import PreconditionFailed
from models.flow import value_from_json
from models.flow_resolution import FlowInputs, resolve_abuse, resolve_flow
from models.orm import FlowPolicy, Namespace, Subscription, Topic
from models.repository import load_broker_config, load_snapshot
from sluice.protocol.names import TopicName


async def topics_limit(uow: UnitOfWork, namespace: Namespace) -> int:
    """The namespace's ``maxTopicsPerNamespace`` in force (0 = no limit)."""
    stored = await uow.session.scalar(
        select(FlowPolicy).where(
            FlowPolicy.scope_key == FlowPolicy.key(namespace.id, None, MAX_TOPICS_PER_NAMESPACE)
        )
    )
    own = {MAX_TOPICS_PER_NAMESPACE: value_from_json(stored.kind, stored.value)} if stored else {}
    inputs = FlowInputs(broker=await load_broker_config(uow.session), namespace=own)
    return int(resolve_abuse(inputs).max_topics_per_namespace.value)


async def check_topics_limit(
    uow: UnitOfWork, namespace: Namespace, topic: TopicName, partitions: int
) -> None:
    """412 when ``topic`` with ``partitions`` (0: non-partitioned) would take the namespace
    over its ``maxTopicsPerNamespace``."""
    limit = await topics_limit(uow, namespace)
    if limit <= 0:
        return
    known: dict[str, int] = {}
    if uow.data_plane is not None:
        with contextlib.suppress(RedisError):
            known = await registry_topics(uow.data_plane.redis, topic.namespace_name)
    rows = await uow.session.execute(
        select(Topic.name, Topic.partitions).where(Topic.namespace_id == namespace.id)
    )
    for name, count in rows:
        known[TopicName(topic.tenant, topic.namespace, name).full] = count
    known.pop(topic.full, None)
    existing = sum(max(count, 1) for count in known.values())
    if existing + max(partitions, 1) > limit:
        raise PreconditionFailed(TOPICS_EXCEEDED)


async def check_subscriptions_limit(uow: UnitOfWork, topic: Topic, base: TopicName) -> None:
    """412 when one more subscription would take ``topic`` over its
    ``maxSubscriptionsPerTopic`` (topic > namespace > broker), counting those the database
    holds and those consumers created that the workers have not recorded yet."""
    snapshot = await load_snapshot(uow.session, namespace_id=topic.namespace_id, topic_id=topic.id)
    limit = int(
        resolve_flow(snapshot.flow_inputs_for(base)).abuse.max_subscriptions_per_topic.value
    )
    if limit <= 0:
        return
    query = select(Subscription.name).where(Subscription.topic_id == topic.id)
    names = set((await uow.session.scalars(query)).all())
    if uow.data_plane is not None:
        with contextlib.suppress(RedisError):
            names |= await subscription_names(uow.data_plane.redis, base, topic.partitions)
    if len(names) >= limit:
        raise PreconditionFailed(
            f"Exceed the maximum number of subscriptions of the topic: {base.full}"
        )
