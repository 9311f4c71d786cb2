"""Tenant rules: names, allowed clusters, and what a delete may take with it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, select

from api.permissions.service import note_roles_granted
from api.schemas import TenantInfo
from api.unit_of_work import UnitOfWork
from models.errors import Conflict, PreconditionFailed
from models.orm import Cluster, Namespace, Tenant
from models.repository import CascadingDeletion, find_tenant, get_tenant
from sluice.protocol.names import check_tenant


def tenant_json(tenant: Tenant) -> dict:
    """Pulsar's ``TenantInfo`` shape."""
    return {
        "adminRoles": list(tenant.admin_roles),
        "allowedClusters": list(tenant.allowed_clusters),
    }


async def list_tenants(uow: UnitOfWork) -> list[str]:
    """Every tenant name, sorted."""
    return list((await uow.session.scalars(select(Tenant.name).order_by(Tenant.name))).all())


async def read_tenant(uow: UnitOfWork, name: str) -> dict:
    """One tenant's info, or 404."""
    return tenant_json(await get_tenant(uow.session, name))


async def _checked_clusters(uow: UnitOfWork, info: TenantInfo, local: str) -> list[str]:
    clusters = info.allowedClusters if info.allowedClusters is not None else [local]
    clusters = list(dict.fromkeys(c.strip() for c in clusters))
    if not clusters or any(not c for c in clusters):
        raise PreconditionFailed("Clusters can not be empty")
    known = set((await uow.session.scalars(select(Cluster.name))).all()) | {"global"}
    if any(c not in known for c in clusters):
        raise PreconditionFailed("Clusters do not exist")
    return clusters


async def create_tenant(uow: UnitOfWork, name: str, info: TenantInfo, local: str) -> None:
    """Create a tenant; 412 on a bad name or clusters, 409 when it exists."""
    check_tenant(name)
    clusters = await _checked_clusters(uow, info, local)
    if await find_tenant(uow.session, name) is not None:
        raise Conflict("Tenant already exists")
    tenant = Tenant(name=name, admin_roles=list(info.adminRoles), allowed_clusters=clusters)
    uow.session.add(tenant)
    await uow.session.flush()
    uow.record("tenant", "tenant", name, None, tenant_json(tenant))


async def update_tenant(uow: UnitOfWork, name: str, info: TenantInfo, local: str) -> None:
    """Replace a tenant's admin roles and clusters; 404 when it does not exist."""
    tenant = await get_tenant(uow.session, name, f"Tenant {name} not found")
    clusters = await _checked_clusters(uow, info, local)
    before = tenant_json(tenant)
    tenant.admin_roles = list(info.adminRoles)
    tenant.allowed_clusters = clusters
    uow.record("tenant", "tenant", name, before, tenant_json(tenant))


TAKES_NAMESPACES = CascadingDeletion(
    "forceDeleteTenantAllowed", "tenants", "The tenant still has active namespaces"
)


async def delete_owner(
    uow: UnitOfWork,
    row: Tenant | Namespace,
    deletion: CascadingDeletion,
    owned: Select[Any],
    force: bool,
    **owner_id: int,
) -> list[str]:
    """Delete ``row`` (a tenant or namespace) and, if ``deletion`` allows, the rows it owns
    (``owned`` selects their names); those names.  The roles granted under it are noted
    first (their sessions lose the grants: ``note_roles_granted`` with ``owner_id``)."""
    names = await deletion.names(uow.session, owned, force)
    await note_roles_granted(uow, **owner_id)
    await uow.session.delete(row)
    return names


async def delete_tenant(uow: UnitOfWork, name: str, force: bool) -> None:
    """Delete a tenant; 409 while it has namespaces unless ``force`` (which takes them too)."""
    tenant = await get_tenant(uow.session, name, "Tenant doesn't exist")
    before = tenant_json(tenant)
    owned = select(Namespace.name).where(Namespace.tenant_id == tenant.id)
    namespaces = await delete_owner(
        uow, tenant, TAKES_NAMESPACES, owned, force, tenant_id=tenant.id
    )
    uow.record("tenant", "tenant", name, before, None, namespaces=sorted(namespaces))
    gone = [f"{name}/{ns}" for ns in namespaces]
    uow.project(lambda dp: dp.unregister_namespaces(gone))
