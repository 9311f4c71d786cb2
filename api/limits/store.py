"""Where a policy kind's values are stored, and the one write path every kind takes.

Dispatch rates are ``DispatchRatePolicy`` rows (typed columns, read by the policy cache); every
other kind is a ``FlowPolicy`` row holding its JSON.  A write goes through the shared policy
path (``api.policy_store``): the value, its audit entry and its ``policy`` change event commit
together, and the answer waits until the workers enforce it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from api.policy_store.store import Slot, find
from api.policy_store.target import PolicyTarget
from api.unit_of_work import UnitOfWork
from models.dispatch_rate import DispatchRate
from models.flow import BACKLOG_QUOTA_PREFIX
from models.orm import DISPATCH_RATE, DispatchRatePolicy, FlowPolicy
from models.repository import load_snapshot
from models.resolution import resolve_limits


def rate_slot(target: PolicyTarget, kind: str) -> Slot:
    """Where the dispatch rate of ``kind`` at ``target`` is stored, and how its changes are
    recorded.  A subscription's own rate (PIP-152) is always of kind ``dispatchRate``."""
    return Slot(
        DispatchRatePolicy,
        {
            "scope_key": DispatchRatePolicy.key(
                target.namespace.id, target.topic_id, target.subscription, kind
            )
        },
        change="policy",
        entity_type=f"{target.level}.{kind}",
        entity=target.entity,
        columns={
            "namespace_id": target.namespace.id,
            "topic_id": target.topic_id,
            "subscription": target.subscription,
            "kind": kind,
        },
        payload={**target.event_payload(kind), "subscription": target.subscription},
    )


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


async def read_rate(uow: UnitOfWork, target: PolicyTarget, kind: str) -> DispatchRate | None:
    """The dispatch rate stored at exactly this target, or None."""
    row = await find(uow.session, rate_slot(target, kind))
    return row.to_rate() if row else None


async def applied_rate(uow: UnitOfWork, target: PolicyTarget, kind: str) -> DispatchRate:
    """The value the matching dispatch limiter gets after resolution (``applied=true``)."""
    assert target.topic_name is not None
    snapshot = await load_snapshot(
        uow.session, namespace_id=target.namespace.id, topic_id=target.topic_id
    )
    inputs = snapshot.inputs_for(target.topic_name)
    if kind == DISPATCH_RATE and target.subscription is None:
        return resolve_limits(inputs).topic.rate
    # "" asks for the chain a subscription without its own rate gets.
    limits = resolve_limits(inputs, subscription=target.subscription or "")
    assert limits.subscription is not None
    return limits.subscription.rate


async def read_value(uow: UnitOfWork, target: PolicyTarget, kind: str) -> Any:
    """The JSON value of a flow policy stored at exactly this target, or None."""
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
