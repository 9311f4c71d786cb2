"""Dispatch-rate policies at namespace, topic and subscription level: read, write, remove.

Every write stores the value, an audit entry and a ``policy`` change event in one transaction.
``applied`` reads go through the shared resolution function, so what the API reports is what
the workers enforce.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from api.unit_of_work import UnitOfWork
from models.dispatch_rate import DispatchRate
from models.names import TopicName, check_namespace, check_subscription
from models.orm import (
    DISPATCH_RATE,
    SUBSCRIPTION_DISPATCH_RATE,
    DispatchRatePolicy,
    Namespace,
    Topic,
)
from models.repository import get_namespace, get_topic, insert_or_lock, load_snapshot
from models.resolution import resolve_limits


@dataclass(frozen=True, slots=True)
class Target:
    """Where a policy lives: a namespace, a topic, or one subscription of a topic."""

    namespace: Namespace
    namespace_name: str
    kind: str
    topic: Topic | None = None
    topic_name: TopicName | None = None
    subscription: str | None = None

    @property
    def level(self) -> str:
        """namespace, topic or subscription."""
        if self.subscription is not None:
            return "subscription"
        return "topic" if self.topic is not None else "namespace"

    @property
    def scope_key(self) -> str:
        """Unique key of the stored row."""
        return DispatchRatePolicy.key(
            self.namespace.id, self.topic.id if self.topic else None, self.subscription, self.kind
        )

    @property
    def entity(self) -> str:
        """Name of the target in the audit log and events."""
        if self.topic_name is None:
            return self.namespace_name
        if self.subscription is not None:
            return f"{self.topic_name.full}#{self.subscription}"
        return self.topic_name.full


async def namespace_target(uow: UnitOfWork, tenant: str, namespace: str, kind: str) -> Target:
    """Target a namespace policy; 412 on a bad name, 404 when the namespace does not exist."""
    check_namespace(tenant, namespace)
    row = await get_namespace(uow.session, tenant, namespace)
    return Target(row, f"{tenant}/{namespace}", kind)


async def topic_target(
    uow: UnitOfWork, topic: TopicName, kind: str, subscription: str | None = None
) -> Target:
    """Target a topic (or subscription) policy, stored under the base topic name."""
    namespace, row = await get_topic(uow.session, topic)
    if subscription is not None:
        check_subscription(subscription)
    base = TopicName(topic.tenant, topic.namespace, row.name)
    return Target(namespace, base.namespace_name, kind, row, base, subscription)


async def _stored(session: AsyncSession, target: Target, lock: bool = False):
    query = select(DispatchRatePolicy).where(DispatchRatePolicy.scope_key == target.scope_key)
    if lock:
        query = query.with_for_update()
    return await session.scalar(query)


async def read_rate(uow: UnitOfWork, target: Target) -> DispatchRate | None:
    """The rate stored at exactly this target, or None."""
    row = await _stored(uow.session, target)
    return row.to_rate() if row else None


async def set_rate(uow: UnitOfWork, target: Target, rate: DispatchRate) -> None:
    """Store ``rate`` at the target (insert or replace), with audit entry and event."""
    values = {"msg": rate.msg, "byte": rate.byte, "relative": rate.relative, "period": rate.period}
    row, created = await insert_or_lock(
        uow.session,
        DispatchRatePolicy,
        {
            "scope_key": target.scope_key,
            "namespace_id": target.namespace.id,
            "topic_id": target.topic.id if target.topic else None,
            "subscription": target.subscription,
            "kind": target.kind,
            **values,
        },
        {"scope_key": target.scope_key},
    )
    before = None if created else row.to_rate().to_json()
    row.assign(rate)  # written at the commit, with the audit entry and the event
    _record(uow, target, before, rate.to_json())


async def remove_rate(uow: UnitOfWork, target: Target) -> None:
    """Remove the rate stored at the target; removing nothing is not an error (as in Pulsar)."""
    row = await _stored(uow.session, target, lock=True)
    if row is None:
        return
    before = row.to_rate().to_json()
    await uow.session.delete(row)
    await uow.session.flush()
    _record(uow, target, before, None)


def _record(uow: UnitOfWork, target: Target, before, after) -> None:
    uow.record(
        "policy",
        f"{target.level}.{target.kind}",
        target.entity,
        before,
        after,
        level=target.level,
        policy=target.kind,
        namespace=target.namespace_name,
        topic=target.topic_name.full if target.topic_name else None,
        subscription=target.subscription,
    )


async def applied_rate(uow: UnitOfWork, target: Target) -> DispatchRate:
    """The value the matching limiter gets after resolution (``applied=true``)."""
    assert target.topic_name is not None
    snapshot = await load_snapshot(
        uow.session, namespace_id=target.namespace.id, topic_id=target.topic.id
    )
    inputs = snapshot.inputs_for(target.topic_name)
    if target.kind == DISPATCH_RATE and target.subscription is None:
        return resolve_limits(inputs).topic.rate
    # "" asks for the chain a subscription without its own rate gets.
    limits = resolve_limits(inputs, subscription=target.subscription or "")
    assert limits.subscription is not None
    return limits.subscription.rate


__all__ = [
    "DISPATCH_RATE",
    "SUBSCRIPTION_DISPATCH_RATE",
    "Target",
    "applied_rate",
    "namespace_target",
    "read_rate",
    "remove_rate",
    "set_rate",
    "topic_target",
]
