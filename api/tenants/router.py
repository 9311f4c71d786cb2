"""Routes of ``/admin/v2/tenants``."""

from __future__ import annotations

from fastapi import Body
from starlette.responses import Response

from api.deps import StateDep, UowDep
from api.responses import no_content
from api.routing import SluiceRoute, SluiceRouter
from api.schemas import TenantDocument, TenantInfo
from api.tenants import service

router = SluiceRouter(prefix="/admin/v2/tenants", tags=["tenants"], route_class=SluiceRoute)


@router.get("")
async def list_tenants(uow: UowDep) -> list[str]:
    """All tenant names."""
    return await service.list_tenants(uow)


@router.get("/{tenant}", response_model=TenantDocument)
async def get_tenant(tenant: str, uow: UowDep) -> dict:
    """A tenant's admin roles and allowed clusters."""
    return await service.read_tenant(uow, tenant)


@router.put("/{tenant}", status_code=204)
async def create_tenant(
    tenant: str, uow: UowDep, state: StateDep, info: TenantInfo | None = Body(None)
) -> Response:
    """Create a tenant."""
    await service.create_tenant(uow, tenant, info or TenantInfo(), state.cluster)
    return no_content()


@router.post("/{tenant}", status_code=204)
async def update_tenant(
    tenant: str, uow: UowDep, state: StateDep, info: TenantInfo | None = Body(None)
) -> Response:
    """Replace a tenant's admin roles and allowed clusters."""
    await service.update_tenant(uow, tenant, info or TenantInfo(), state.cluster)
    return no_content()


@router.delete("/{tenant}", status_code=204)
async def delete_tenant(tenant: str, uow: UowDep, force: bool = False) -> Response:
    """Delete a tenant (``force=true`` also deletes its namespaces)."""
    await service.delete_tenant(uow, tenant, force)
    return no_content()
