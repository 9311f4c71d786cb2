"""``GET /admin/v2/whoami`` (a Sluice extension): any authenticated caller may ask who it is
and which tenants it may administer, so that a tenant admin's tools can offer its tenants
instead of asking for their names (``GET /admin/v2/tenants`` stays super-user only, as in
Pulsar)."""

from __future__ import annotations

from api.deps import StateDep, UowDep
from api.identity import service
from api.identity.schemas import Identity
from api.routing import SluiceRoute, SluiceRouter

router = SluiceRouter(tags=["identity"], route_class=SluiceRoute)


@router.get("/admin/v2/whoami", response_model=Identity)
async def whoami(uow: UowDep, state: StateDep) -> dict:
    """The caller's role (null when authentication is off), whether it is a super-user, and
    the tenants it may administer."""
    return await service.whoami(uow, state.access_control)
