"""Grants of roles on namespaces and topics: read, grant (replace), revoke.

A grant is one ``PermissionGrant`` row per (target, role); writes go through the shared
policy path (``api.policy_store``), so the grant, its audit entry and its ``permissions``
change event commit together.  Every write notes its role on the unit of work, whose request
dependency refreshes the data plane's credentials of that role once the change is durable
(``api.deps.refresh_dataplane_acl``).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from api.policy_store.store import Slot, find, remove, store
from api.policy_store.target import PolicyTarget
from api.unit_of_work import UnitOfWork
from models.errors import PreconditionFailed
from models.orm import Namespace, PermissionGrant, Topic
from sluice.protocol.names import TopicName

PERMISSIONS = "permissions"  # the change events' kind and the audit entity type's suffix


def grant_slot(target: PolicyTarget, role: str) -> Slot:
    """Where ``role``'s grant on ``target`` is stored, and how its changes are recorded."""
    return Slot(
        PermissionGrant,
        {"scope_key": PermissionGrant.key(target.namespace.id, target.topic_id, role)},
        change=PERMISSIONS,
        entity_type=f"{target.level}.{PERMISSIONS}",
        entity=target.entity,
        columns={
            "namespace_id": target.namespace.id,
            "topic_id": target.topic_id,
            "role": role,
        },
        payload={**target.event_payload(PERMISSIONS), "grantee": role},
    )


async def read_permissions(session: AsyncSession, target: PolicyTarget) -> dict[str, list[str]]:
    """Role -> sorted actions at the target; for a topic, the union of the namespace's grant
    and the topic's, per role (Pulsar's answer)."""
    query = select(PermissionGrant.role, PermissionGrant.actions).where(
        PermissionGrant.namespace_id == target.namespace.id
    )
    if target.topic_id is None:
        query = query.where(PermissionGrant.topic_id.is_(None))
    else:
        query = query.where(
            PermissionGrant.topic_id.is_(None) | (PermissionGrant.topic_id == target.topic_id)
        )
    merged: dict[str, set[str]] = {}
    for role, actions in await session.execute(query):
        merged.setdefault(role, set()).update(actions)
    return {role: sorted(merged[role]) for role in sorted(merged)}


async def grant(uow: UnitOfWork, target: PolicyTarget, role: str, actions: list[str]) -> None:
    """Give ``role`` exactly ``actions`` at the target (replacing what it had there)."""
    await store(uow, grant_slot(target, role), actions)
    uow.permissions_changed(role)


async def revoke(uow: UnitOfWork, target: PolicyTarget, role: str) -> None:
    """Remove ``role``'s grant at the target.

    On a namespace, revoking a role without a grant changes nothing (204, as in Pulsar); on a
    topic it is refused with 412, also when the role's grant is on the namespace.
    """
    slot = grant_slot(target, role)
    if target.topic is not None and await find(uow.session, slot, lock=True) is None:
        raise PreconditionFailed("Permissions are not set at the topic level")
    recorded = uow.emitted
    await remove(uow, slot)
    if uow.emitted > recorded:  # a grant was there
        uow.permissions_changed(role)


async def note_roles_granted(
    uow: UnitOfWork,
    *,
    tenant_id: int | None = None,
    namespace_id: int | None = None,
    topic_id: int | None = None,
) -> None:
    """Before a tenant, namespace or topic is deleted (its grants go with it, by cascade):
    note the roles granted there, so their data-plane credentials are refreshed too."""
    query = select(PermissionGrant.role).distinct()
    if tenant_id is not None:
        query = query.join(Namespace, PermissionGrant.namespace_id == Namespace.id).where(
            Namespace.tenant_id == tenant_id
        )
    if namespace_id is not None:
        query = query.where(PermissionGrant.namespace_id == namespace_id)
    if topic_id is not None:
        query = query.where(PermissionGrant.topic_id == topic_id)
    uow.permissions_changed(*(await uow.session.scalars(query)))


async def namespace_auth(
    uow: UnitOfWork, tenant: str, namespace: str, namespace_id: int
) -> dict[str, dict]:
    """The grants of Pulsar's namespace ``Policies.auth_policies``: ``namespace_auth`` (role ->
    actions) and ``destination_auth`` (full topic name -> role -> actions)."""
    rows = await uow.session.execute(
        select(PermissionGrant.role, PermissionGrant.actions, Topic.name)
        .outerjoin(Topic, PermissionGrant.topic_id == Topic.id)
        .where(PermissionGrant.namespace_id == namespace_id)
        .order_by(Topic.name.nulls_first(), PermissionGrant.role)
    )
    on_namespace: dict[str, list[str]] = {}
    on_topics: dict[str, dict[str, list[str]]] = {}
    for role, actions, topic in rows:
        if topic is None:
            on_namespace[role] = list(actions)
        else:
            full = TopicName(tenant, namespace, topic).full
            on_topics.setdefault(full, {})[role] = list(actions)
    return {"namespace_auth": on_namespace, "destination_auth": on_topics}
