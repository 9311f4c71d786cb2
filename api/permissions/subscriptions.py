"""Subscription permissions of a namespace: which roles may use a subscription name.

One ``SubscriptionPermission`` row per (namespace, subscription) holds its role list; writes
go through the shared policy path (``api.policy_store``), so the list, its audit entry and a
``permissions`` change event commit together (the event makes every admin replica re-check
the WebSocket consumers it admitted by a grant, ``api.websocket.grants``).  As in Pulsar, a
grant replaces the list, a revoke takes one role out of it (the list may become empty, which
restricts nothing again) and revoking on a subscription without a list is refused.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from api.permissions.service import PERMISSIONS
from api.policy_store.store import Slot, find, store
from api.policy_store.target import PolicyTarget
from api.unit_of_work import UnitOfWork
from models.errors import NotFound
from models.orm import SubscriptionPermission


def subscription_slot(target: PolicyTarget, subscription: str) -> Slot:
    """Where the role list of ``subscription`` in the target namespace is stored."""
    return Slot(
        SubscriptionPermission,
        {"scope_key": SubscriptionPermission.key(target.namespace.id, subscription)},
        change=PERMISSIONS,
        entity_type="namespace.subscriptionPermissions",
        entity=f"{target.entity}#{subscription}",
        columns={"namespace_id": target.namespace.id, "subscription": subscription},
        payload={**target.event_payload(PERMISSIONS), "subscription": subscription},
    )


async def read_subscription_permissions(
    session: AsyncSession, namespace_id: int
) -> dict[str, list[str]]:
    """Subscription -> sorted roles, every subscription of the namespace with a list (Pulsar's
    ``auth_policies.subscription_auth_roles``)."""
    rows = await session.execute(
        select(SubscriptionPermission.subscription, SubscriptionPermission.roles)
        .where(SubscriptionPermission.namespace_id == namespace_id)
        .order_by(SubscriptionPermission.subscription)
    )
    return {subscription: list(roles) for subscription, roles in rows}


async def grant(uow: UnitOfWork, target: PolicyTarget, subscription: str, roles: list[str]) -> None:
    """Make ``roles`` the list of roles that may use ``subscription`` (replacing it)."""
    await store(uow, subscription_slot(target, subscription), roles)


async def revoke(uow: UnitOfWork, target: PolicyTarget, subscription: str, role: str) -> None:
    """Take ``role`` out of the list of ``subscription``; 404 when it has no list."""
    slot = subscription_slot(target, subscription)
    row = await find(uow.session, slot, lock=True)
    if row is None:
        raise NotFound(f"Subscription {subscription} has no permissions set")
    if role in row.roles:
        await store(uow, slot, [r for r in row.roles if r != role])
