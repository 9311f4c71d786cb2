"""Flow-control policies (backlog quota, max unacked, message TTL) at namespace and topic level.

Every write stores the value, an audit entry and a ``policy`` change event in one transaction,
so the workers re-resolve exactly as they do for dispatch rates.  ``applied`` reads and dry
runs go through ``models.flow_resolution``, the functions the workers use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from api.unit_of_work import UnitOfWork
from models.flow import BACKLOG_QUOTA_PREFIX, QuotaType, quota_kind, value_to_json
from models.flow_resolution import FlowLimits, resolve_flow
from models.names import TopicName, check_namespace
from models.orm import FlowPolicy, Namespace, Tenant, Topic
from models.repository import get_namespace, get_topic, insert_or_lock, load_snapshot


@dataclass(frozen=True, slots=True)
class FlowTarget:
    """Where a flow policy lives: a namespace or a (base) topic."""

    namespace: Namespace
    namespace_name: str
    topic: Topic | None = None
    topic_name: TopicName | None = None

    @property
    def level(self) -> str:
        """namespace or topic."""
        return "topic" if self.topic is not None else "namespace"

    @property
    def entity(self) -> str:
        """Name of the target in the audit log and events."""
        return self.topic_name.full if self.topic_name else self.namespace_name

    def scope_key(self, kind: str) -> str:
        """Unique key of the stored row of ``kind``."""
        return FlowPolicy.key(self.namespace.id, self.topic.id if self.topic else None, kind)


async def namespace_target(uow: UnitOfWork, tenant: str, namespace: str) -> FlowTarget:
    """Target a namespace; 412 on a bad name, 404 when it does not exist."""
    check_namespace(tenant, namespace)
    row = await get_namespace(uow.session, tenant, namespace)
    return FlowTarget(row, f"{tenant}/{namespace}")


async def topic_target(uow: UnitOfWork, topic: TopicName) -> FlowTarget:
    """Target a topic; policies of a partition are stored under the base topic."""
    namespace, row = await get_topic(uow.session, topic)
    base = TopicName(topic.tenant, topic.namespace, row.name)
    return FlowTarget(namespace, base.namespace_name, row, base)


async def _stored(session: AsyncSession, target: FlowTarget, kind: str, lock: bool = False):
    query = select(FlowPolicy).where(FlowPolicy.scope_key == target.scope_key(kind))
    if lock:
        query = query.with_for_update()
    return await session.scalar(query)


async def read_value(uow: UnitOfWork, target: FlowTarget, kind: str) -> Any:
    """The JSON value stored at exactly this target, or None."""
    row = await _stored(uow.session, target, kind)
    return row.value if row else None


async def read_quota_map(uow: UnitOfWork, target: FlowTarget) -> dict[str, Any]:
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


async def set_value(uow: UnitOfWork, target: FlowTarget, kind: str, value: Any) -> None:
    """Store ``value`` (a BacklogQuota or an int) at the target, with audit entry and event."""
    stored = value_to_json(value)
    row, created = await insert_or_lock(
        uow.session,
        FlowPolicy,
        {
            "scope_key": target.scope_key(kind),
            "namespace_id": target.namespace.id,
            "topic_id": target.topic.id if target.topic else None,
            "kind": kind,
            "value": stored,
        },
        {"scope_key": target.scope_key(kind)},
    )
    before = None if created else row.value
    row.value = stored
    await uow.session.flush()
    _record(uow, target, kind, before, stored)


async def remove_value(uow: UnitOfWork, target: FlowTarget, kind: str) -> None:
    """Remove the value stored at the target; removing nothing is not an error."""
    row = await _stored(uow.session, target, kind, lock=True)
    if row is None:
        return
    before = row.value
    await uow.session.delete(row)
    await uow.session.flush()
    _record(uow, target, kind, before, None)


def _record(uow: UnitOfWork, target: FlowTarget, kind: str, before, after) -> None:
    policy, _, quota_type = kind.partition(".")
    extra = {"backlogQuotaType": quota_type} if quota_type else {}
    uow.record(
        "policy",
        f"{target.level}.{policy}",
        target.entity,
        before,
        after,
        level=target.level,
        policy=policy,
        namespace=target.namespace_name,
        topic=target.topic_name.full if target.topic_name else None,
        **extra,
    )


async def applied_limits(uow: UnitOfWork, target: FlowTarget) -> FlowLimits:
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

    return {
        "backlogQuota": {t.value: one(limits.quotas[t]) for t in QuotaType},
        "maxUnackedMessagesPerSubscription": one(limits.max_unacked_per_subscription),
        "maxUnackedMessagesPerConsumer": one(limits.max_unacked_per_consumer),
        "messageTTL": one(limits.message_ttl),
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
    "FlowTarget",
    "applied_limits",
    "flow_provenance_for",
    "limits_json",
    "namespace_target",
    "quota_kind",
    "read_quota_map",
    "read_value",
    "remove_value",
    "set_value",
    "topic_target",
]
