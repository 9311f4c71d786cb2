"""The ``whoami`` answer."""

from __future__ import annotations

from api.schemas import Document


class Identity(Document):
    """Who the caller is and what it may administer."""

    role: str | None
    superUser: bool
    authenticationEnabled: bool
    authorizationEnabled: bool
    tenants: list[str]
