"""Dispatch-rate policies at namespace, topic and subscription level: read, write, remove.

A rate is one ``DispatchRatePolicy`` row per (target, kind); writes go through the shared
policy path (``api.policy_store``), so the value, its audit entry and its ``policy`` change
event commit together.  ``applied`` reads go through the shared resolution function, so what
the API reports is what the workers enforce.
"""

from __future__ import annotations

from api.policy_store.store import Slot, find, remove, store
from api.policy_store.target import PolicyTarget
from api.unit_of_work import UnitOfWork
from models.dispatch_rate import DispatchRate
from models.orm import DISPATCH_RATE, SUBSCRIPTION_DISPATCH_RATE, DispatchRatePolicy
from models.repository import load_snapshot
from models.resolution import resolve_limits


def rate_slot(target: PolicyTarget, kind: str) -> Slot:
    """Where the rate of ``kind`` at ``target`` is stored, and how its changes are recorded.

    A subscription's own rate (PIP-152) is always of kind ``dispatchRate``.
    """
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


async def read_rate(uow: UnitOfWork, target: PolicyTarget, kind: str) -> DispatchRate | None:
    """The rate stored at exactly this target, or None."""
    row = await find(uow.session, rate_slot(target, kind))
    return row.to_rate() if row else None


async def set_rate(uow: UnitOfWork, target: PolicyTarget, kind: str, rate: DispatchRate) -> None:
    """Store ``rate`` at the target (insert or replace), with audit entry and event."""
    await store(uow, rate_slot(target, kind), rate)


async def remove_rate(uow: UnitOfWork, target: PolicyTarget, kind: str) -> None:
    """Remove the rate stored at the target; removing nothing is not an error (as in Pulsar)."""
    await remove(uow, rate_slot(target, kind))


async def applied_rate(uow: UnitOfWork, target: PolicyTarget, kind: str) -> DispatchRate:
    """The value the matching limiter gets after resolution (``applied=true``)."""
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


__all__ = [
    "DISPATCH_RATE",
    "SUBSCRIPTION_DISPATCH_RATE",
    "applied_rate",
    "rate_slot",
    "read_rate",
    "remove_rate",
    "set_rate",
]
