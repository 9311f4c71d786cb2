"""Route of ``/admin/v2/audit``: read the change log with filters."""

from datetime import datetime

from fastapi import APIRouter, Query
from sqlalchemy import select

from api.deps import UowDep
from models.orm import AuditEntry

router = APIRouter(prefix="/admin/v2/audit", tags=["audit"])


def entry_json(entry: AuditEntry) -> dict:
    """One audit entry as JSON."""
    return {
        "id": entry.id,
        "at": entry.at.isoformat(),
        "role": entry.role,
        "requestId": entry.request_id,
        "action": entry.action,
        "entityType": entry.entity_type,
        "entity": entry.entity,
        "before": entry.before,
        "after": entry.after,
    }


@router.get("")
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
    query = select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit)
    if entity is not None:
        query = query.where(AuditEntry.entity == entity)
    if entityPrefix is not None:
        query = query.where(AuditEntry.entity.startswith(entityPrefix, autoescape=True))
    if entityType is not None:
        query = query.where(AuditEntry.entity_type == entityType)
    if role is not None:
        query = query.where(AuditEntry.role == role)
    if since is not None:
        query = query.where(AuditEntry.at >= since)
    if until is not None:
        query = query.where(AuditEntry.at < until)
    return [entry_json(e) for e in (await uow.session.scalars(query)).all()]
