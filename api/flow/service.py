"""Flow-control policies (backlog quota, max unacked, message TTL) and abuse limits at namespace
and topic level.

A value is one ``FlowPolicy`` row per (target, kind); writes go through the shared policy path
(``api.policy_store``), so the value, its audit entry and its ``policy`` change event commit
together and the workers re-resolve exactly as they do for dispatch rates.  ``applied`` reads
and dry runs go through ``models.flow_resolution``, the functions the workers use.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from api.policy_store.store import Slot, find, remove, store
from api.policy_store.target import PolicyTarget
from api.unit_of_work import UnitOfWork
from models.flow import BACKLOG_QUOTA_PREFIX, QuotaType, quota_kind, value_to_json
from models.flow_resolution import FlowLimits, resolve_flow
from models.orm import FlowPolicy, Namespace, Tenant, Topic
from models.repository import load_broker_config, load_snapshot
from sluice.protocol.names import TopicName


def flow_slot(target: PolicyTarget, kind: str) -> Slot:
    """Where the flow policy of ``kind`` at ``target`` is stored, and how changes are recorded.

    ``kind`` is ``backlogQuota.<type>`` for a quota: the event names the policy
    ``backlogQuota`` and adds the ``backlogQuotaType``.
    """
    policy, _, quota_type = kind.partition(".")
    extra = {"backlogQuotaType": quota_type} if quota_type else {}
    return Slot(
        FlowPolicy,
        {"scope_key": FlowPolicy.key(target.namespace.id, target.topic_id, kind)},
        change="policy",
        entity_type=f"{target.level}.{policy}",
        entity=target.entity,
        columns={"namespace_id": target.namespace.id, "topic_id": target.topic_id, "kind": kind},
        payload={**target.event_payload(policy), **extra},
    )


async def read_value(uow: UnitOfWork, target: PolicyTarget, kind: str) -> Any:
    """The JSON value stored at exactly this target, or None."""
    row = await find(uow.session, flow_slot(target, kind))
    return row.stored_json() if row else None


async def read_quota_map(uow: UnitOfWork, target: PolicyTarget) -> dict[str, Any]:
    """Every backlog quota stored at the target, keyed by quota type."""
    rows = await uow.session.scalars(
        select(FlowPolicy).where(
            FlowPolicy.namespace_id == target.namespace.id,
            FlowPolicy.topic_id.is_(None)
            if target.topic is None
            else FlowPolicy.topic_id == target.topic.id,
            FlowPolicy.kind.startswith(BACKLOG_QUOTA_PREFIX),
        )
    )
    return {row.kind.removeprefix(BACKLOG_QUOTA_PREFIX): row.value for row in rows}


async def set_value(uow: UnitOfWork, target: PolicyTarget, kind: str, value: Any) -> None:
    """Store ``value`` (a BacklogQuota or an int) at the target, with audit entry and event."""
    await store(uow, flow_slot(target, kind), value_to_json(value))


async def remove_value(uow: UnitOfWork, target: PolicyTarget, kind: str) -> None:
    """Remove the value stored at the target; removing nothing is not an error."""
    await remove(uow, flow_slot(target, kind))


async def broker_setting(uow: UnitOfWork, name: str) -> Any:
    """A broker setting in force (``maxMessageSize`` bounds the topic value)."""
    return (await load_broker_config(uow.session)).get(name)


async def applied_limits(uow: UnitOfWork, target: PolicyTarget) -> FlowLimits:
    """Every flow limit the topic's partitions enforce (topic > namespace > broker)."""
    assert target.topic_name is not None and target.topic is not None
    snapshot = await load_snapshot(
        uow.session, namespace_id=target.namespace.id, topic_id=target.topic.id
    )
    return resolve_flow(snapshot.flow_inputs_for(target.topic_name))


def limits_json(limits: FlowLimits) -> dict[str, Any]:
    """Every resolved flow limit with the level it came from."""

    def one(resolved) -> dict[str, Any]:
        return {"value": value_to_json(resolved.value), "source": resolved.source.value}

    abuse = limits.abuse
    return {
        "backlogQuota": {t.value: one(limits.quotas[t]) for t in QuotaType},
        "maxUnackedMessagesPerSubscription": one(limits.max_unacked_per_subscription),
        "maxUnackedMessagesPerConsumer": one(limits.max_unacked_per_consumer),
        "messageTTL": one(limits.message_ttl),
        "maxTopicsPerNamespace": one(abuse.max_topics_per_namespace),
        "maxSubscriptionsPerTopic": one(abuse.max_subscriptions_per_topic),
        "maxProducersPerTopic": one(abuse.max_producers_per_topic),
        "maxConsumersPerTopic": one(abuse.max_consumers_per_topic),
        "maxConsumersPerSubscription": one(abuse.max_consumers_per_subscription),
        "maxMessageSize": one(abuse.max_message_size),
        "publishRate": one(limits.rates.publish_rate),
        "subscribeRate": one(limits.rates.subscribe_rate),
    }


async def flow_provenance_for(
    session: AsyncSession, *, namespace_id: int, topic_id: int | None = None
) -> list[dict[str, Any]]:
    """The resolved flow limits of every topic in scope (one topic or one namespace)."""
    snapshot = await load_snapshot(session, namespace_id=namespace_id, topic_id=topic_id)
    query = (
        select(Topic.name, Namespace.name, Tenant.name)
        .join(Namespace, Topic.namespace_id == Namespace.id)
        .join(Tenant, Namespace.tenant_id == Tenant.id)
        .where(Topic.namespace_id == namespace_id)
        .order_by(Topic.name)
    )
    if topic_id is not None:
        query = query.where(Topic.id == topic_id)
    documents = []
    for topic, namespace, tenant in await session.execute(query):
        name = TopicName(tenant, namespace, topic)
        limits = resolve_flow(snapshot.flow_inputs_for(name))
        documents.append({"topic": name.full, "flowControl": limits_json(limits)})
    return documents


__all__ = [
    "applied_limits",
    "broker_setting",
    "flow_provenance_for",
    "flow_slot",
    "limits_json",
    "quota_kind",
    "read_quota_map",
    "read_value",
    "remove_value",
    "set_value",
]
