"""Route of ``/admin/v2/audit``: read the change log with filters."""

from datetime import datetime

from fastapi import Query

from api.audit import service
from api.audit.schemas import AuditEntryDocument
from api.audit.service import AuditFilter
from api.deps import UowDep
from api.routing import SluiceRoute, SluiceRouter

router = SluiceRouter(prefix="/admin/v2/audit", tags=["audit"], route_class=SluiceRoute)


@router.get("", response_model=list[AuditEntryDocument])
async def list_audit(
    uow: UowDep,
    entity: str | None = Query(None, description="exact entity name"),
    entityPrefix: str | None = Query(None, description="entity name prefix"),
    entityType: str | None = Query(None, description="e.g. topic.dispatchRate"),
    role: str | None = None,
    since: datetime | None = Query(None, description="ISO-8601, inclusive"),
    until: datetime | None = Query(None, description="ISO-8601, exclusive"),
    limit: int = Query(100, ge=1, le=1000),
) -> list[dict]:
    """Changes, newest first."""
    where = AuditFilter(entity, entityPrefix, entityType, role, since, until, limit)
    return await service.list_entries(uow.session, where)
