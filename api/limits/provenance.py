"""Provenance of effective limits: every limiter, the value each level offers, who won; and
every resolved flow limit with the level it came from.

Only formatting: the precedence and the candidates come from ``models.resolution`` and
``models.flow_resolution``, the functions the workers use.

Used by ``GET .../effectiveDispatchRates`` and ``.../effectiveFlowControls``, and by every
``dryRun=true`` write, which reports the would-be limits of each affected topic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from api.policy_store.target import PolicyTarget
from api.unit_of_work import UnitOfWork
from models.flow_resolution import FlowLimits, resolve_flow
from models.orm import Namespace, Subscription, Tenant, Topic
from models.repository import load_snapshot
from models.resolution import Candidate, EffectiveLimits, ResolvedRate, resolve_limits
from models.resource_groups import GroupBinding, GroupSnapshot, load_group_snapshot, with_group
from models.snapshot import PolicySnapshot
from sluice.protocol.names import TopicName


def candidate_json(candidate: Candidate) -> dict:
    """One level's offer to a limiter, and whether it is set (else it falls through)."""
    rate = candidate.rate
    return {
        "level": candidate.level.value,
        "value": rate.to_json() if rate is not None else None,
        "set": candidate.set,
    }


def limiter_json(resolved: ResolvedRate) -> dict:
    """One limiter: the value it got, where from, its permits, and every level's offer."""
    return {
        "source": resolved.source.value,
        "value": resolved.rate.to_json(),
        "enabled": resolved.enabled,
        "permitsPerPeriodInMsg": resolved.permits_msg,
        "permitsPerPeriodInByte": resolved.permits_byte,
        "levels": [candidate_json(c) for c in resolved.candidates],
    }


def effective_json(limits: EffectiveLimits, group: GroupBinding | None = None) -> dict:
    """The combined limit: the smallest rate per dimension and the limiter that sets it (the
    resource group's, ``resourceGroup``, when it is the lowest)."""
    msg, msg_limiter = (
        limits.msg_per_second,
        limits.msg_limiter.value if limits.msg_limiter else None,
    )
    byte = limits.byte_per_second
    byte_limiter = limits.byte_limiter.value if limits.byte_limiter else None
    if group is not None:
        msg, msg_limiter = with_group(msg, msg_limiter, group.rates.dispatch_msgs)
        byte, byte_limiter = with_group(byte, byte_limiter, group.rates.dispatch_bytes)
    return {
        "msgPerSecond": msg,
        "bytePerSecond": byte,
        "msgLimiter": msg_limiter,
        "byteLimiter": byte_limiter,
    }


def group_json(group: GroupBinding | None) -> dict | None:
    """The resource group that applies: which, attached where, its dispatch rates."""
    if group is None:
        return None
    return {
        "name": group.group,
        "level": group.level,
        "member": group.member,
        "weight": group.weight,
        "dispatchRateInMsgs": group.rates.dispatch_msgs,
        "dispatchRateInBytes": group.rates.dispatch_bytes,
        "appliesPer": "group",
    }


def topic_provenance(
    snapshot: PolicySnapshot,
    topic: TopicName,
    partitions: int,
    subscriptions: list[str],
    groups: GroupSnapshot | None = None,
) -> dict[str, Any]:
    """The full provenance document of one topic and its subscriptions."""
    group = groups.binding_for(topic) if groups is not None else None
    inputs = snapshot.inputs_for(topic)
    limits = resolve_limits(inputs)
    names = sorted(set(subscriptions) | set(inputs.subscription_dispatch_rates))
    subs = {}
    for name in names:
        sub_limits = resolve_limits(inputs, subscription=name)
        assert sub_limits.subscription is not None
        subs[name] = {
            "subscription": limiter_json(sub_limits.subscription),
            "effective": effective_json(sub_limits, group),
        }
    default = resolve_limits(inputs, subscription="")
    assert default.subscription is not None
    return {
        "topic": topic.full,
        "partitions": partitions,
        "appliesPer": "partition",
        "limiters": {
            "broker": limiter_json(limits.broker),
            "topic": limiter_json(limits.topic),
            "subscriptionDefault": limiter_json(default.subscription),
        },
        "effective": effective_json(limits, group),
        "subscriptions": subs,
        "resourceGroup": group_json(group),
    }


async def _topics_in_scope(
    session: AsyncSession, namespace_id: int | None, topic_id: int | None
) -> list[Any]:
    """(topic row, namespace name, tenant name) of every topic in scope, in name order."""
    query = (
        select(Topic, Namespace.name, Tenant.name)
        .join(Namespace, Topic.namespace_id == Namespace.id)
        .join(Tenant, Namespace.tenant_id == Tenant.id)
        .order_by(Tenant.name, Namespace.name, Topic.name)
    )
    if namespace_id is not None:
        query = query.where(Topic.namespace_id == namespace_id)
    if topic_id is not None:
        query = query.where(Topic.id == topic_id)
    return list((await session.execute(query)).all())


async def provenance_for(
    session: AsyncSession,
    *,
    namespace_id: int | None = None,
    topic_id: int | None = None,
) -> list[dict[str, Any]]:
    """Provenance of every topic in scope: one topic, one namespace, or everything."""
    snapshot = await load_snapshot(session, namespace_id=namespace_id, topic_id=topic_id)
    groups = await load_group_snapshot(session)
    topics = await _topics_in_scope(session, namespace_id, topic_id)
    subs_query = select(Subscription.topic_id, Subscription.name)
    if topic_id is not None:
        subs_query = subs_query.where(Subscription.topic_id == topic_id)
    elif namespace_id is not None:
        subs_query = subs_query.join(Topic).where(Topic.namespace_id == namespace_id)
    subs: dict[int, list[str]] = {}
    for tid, name in await session.execute(subs_query):
        subs.setdefault(tid, []).append(name)
    return [
        topic_provenance(
            snapshot, TopicName(tenant, ns, row.name), row.partitions, subs.get(row.id, []), groups
        )
        for row, ns, tenant in topics
    ]


async def applied_limits(uow: UnitOfWork, target: PolicyTarget) -> FlowLimits:
    """Every flow limit the topic's partitions enforce (topic > namespace > broker)."""
    assert target.topic_name is not None and target.topic is not None
    snapshot = await load_snapshot(
        uow.session, namespace_id=target.namespace.id, topic_id=target.topic.id
    )
    return resolve_flow(snapshot.flow_inputs_for(target.topic_name))


async def flow_provenance_for(
    session: AsyncSession,
    describe: Callable[[FlowLimits], dict[str, Any]],
    *,
    namespace_id: int,
    topic_id: int | None = None,
) -> list[dict[str, Any]]:
    """The resolved flow limits of every topic in scope (one topic or one namespace), each
    as ``describe`` shows them."""
    snapshot = await load_snapshot(session, namespace_id=namespace_id, topic_id=topic_id)
    documents = []
    for row, namespace, tenant in await _topics_in_scope(session, namespace_id, topic_id):
        name = TopicName(tenant, namespace, row.name)
        limits = resolve_flow(snapshot.flow_inputs_for(name))
        documents.append({"topic": name.full, "flowControl": describe(limits)})
    return documents
