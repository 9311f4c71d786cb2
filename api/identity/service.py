"""Who the caller is, as the access rules of ``api.auth`` see it.

A super-user (or any caller while authorization is off) administers every tenant; any other
role the tenants whose ``adminRoles`` name it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from api.auth import AccessControl
from api.unit_of_work import ANONYMOUS, UnitOfWork
from models.orm import Tenant


async def whoami(uow: UnitOfWork, access: AccessControl) -> dict[str, Any]:
    """The caller's role, whether it is a super-user, and the tenants it administers."""
    role = uow.caller.role
    authenticated = access.authentication and role != ANONYMOUS
    every = not access.authorization or role in access.super_users
    rows = (await uow.session.execute(select(Tenant.name, Tenant.admin_roles))).all()
    tenants = sorted(name for name, admins in rows if every or role in (admins or []))
    return {
        "role": role if authenticated else None,
        "superUser": every,
        "authenticationEnabled": access.authentication,
        "authorizationEnabled": access.authorization,
        "tenants": tenants,
    }
