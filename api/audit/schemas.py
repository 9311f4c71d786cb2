"""Response documents of the audit route."""

from __future__ import annotations

from typing import Any

from api.schemas import Document


class AuditEntryDocument(Document):
    """One change: who made it, when, to what, and the value before and after."""

    id: int
    at: str
    role: str
    requestId: str
    action: str
    entityType: str
    entity: str
    before: Any
    after: Any
