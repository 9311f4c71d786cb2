"""Reads of the change log: filtered, newest first."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from models.orm import AuditEntry


@dataclass(frozen=True, slots=True)
class AuditFilter:
    """Which entries to read; every field left None matches everything."""

    entity: str | None = None
    entity_prefix: str | None = None
    entity_type: str | None = None
    role: str | None = None
    since: datetime | None = None  # inclusive
    until: datetime | None = None  # exclusive
    limit: int = 100


def entry_json(entry: AuditEntry) -> dict[str, Any]:
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


async def list_entries(session: AsyncSession, where: AuditFilter) -> list[dict[str, Any]]:
    """The matching entries, newest first, at most ``where.limit``."""
    query = select(AuditEntry).order_by(AuditEntry.id.desc()).limit(where.limit)
    if where.entity is not None:
        query = query.where(AuditEntry.entity == where.entity)
    if where.entity_prefix is not None:
        query = query.where(AuditEntry.entity.startswith(where.entity_prefix, autoescape=True))
    if where.entity_type is not None:
        query = query.where(AuditEntry.entity_type == where.entity_type)
    if where.role is not None:
        query = query.where(AuditEntry.role == where.role)
    if where.since is not None:
        query = query.where(AuditEntry.at >= where.since)
    if where.until is not None:
        query = query.where(AuditEntry.at < where.until)
    return [entry_json(e) for e in (await session.scalars(query)).all()]
