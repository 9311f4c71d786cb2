"""Authentication and authorization of admin calls, as Pulsar's token provider does them.

Authentication (``SLUICE_AUTHENTICATION_ENABLED``): every call except the open ones carries
``Authorization: Bearer <JWT>``; the token's ``sub`` claim is the caller's role.  A missing,
malformed, expired or badly signed token is refused with 401.

Authorization (``SLUICE_AUTHORIZATION_ENABLED``): ``POLICY`` below says, for every resource,
who may call it.  Super-users (``SLUICE_SUPER_USER_ROLES``) may call everything; a role in a
tenant's ``adminRoles`` may manage that tenant's namespaces, topics, subscriptions, policies,
stats and reports; anyone else gets 403.  With authentication on and authorization off, any
authenticated role may call anything (as in Pulsar).

``AuthenticationMiddleware`` checks the token before the app reads anything of the request,
so an anonymous caller learns nothing about its body (a malformed one gets 401, not 400);
``authorize`` is one dependency installed on the whole app that applies ``POLICY`` to the
authenticated role, so a new router is covered the moment it is included: a route that
matches no entry needs super-user access.

WebSocket connections (``api.websocket``, Pulsar's ``/ws/v2/...``) take the same token, in
the ``Authorization`` header or, as Pulsar's proxy allows, the ``token`` query parameter (a
browser cannot set headers on a WebSocket); the middleware refuses the handshake with 401,
and ``authorize_websocket`` applies ``POLICY`` (403), before anything is created.  Producing,
consuming and reading a tenant's topics needs what managing them needs (a super-user or an
admin role of the tenant), or a produce or consume grant on the topic
(``models.permissions``), which the WebSocket handlers check themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from urllib.parse import parse_qs

from fastapi import Depends, Request, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import select
from starlette.exceptions import HTTPException
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Receive, Scope, Send

from api.console.router import CONSOLE_PATHS
from api.docs import ASSET_PATHS
from api.errors import reason_response
from models.errors import Forbidden, SluiceError
from models.orm import Tenant
from models.settings import Settings
from models.tokens import TokenVerifier, read_key
from sluice.protocol.names import is_valid_name


class Access(StrEnum):
    """Who may call a resource."""

    OPEN = "open"  # anyone, no credentials (health, readiness)
    AUTHENTICATED = "authenticated"  # any valid token (the handler decides what it may see)
    TENANT_ADMIN = "tenant-admin"  # a super-user or an admin role of the path's tenant
    SUPER_USER = "super-user"  # a super-user only


# The policy table: route path prefix -> access needed.  The longest matching prefix wins;
# a route that matches none needs super-user access.  Tenants, clusters, broker configuration
# and the audit log (which spans all tenants) are super-user only, as in Pulsar.
POLICY: dict[str, Access] = {
    "/docs": Access.OPEN,
    "/docs/oauth2-redirect": Access.OPEN,
    "/redoc": Access.OPEN,
    **dict.fromkeys(ASSET_PATHS, Access.OPEN),
    "/openapi.json": Access.OPEN,
    # The console's page and assets hold no data: it reads everything through the REST API
    # with the signed-in user's token, so what it shows is what that role may read.
    **dict.fromkeys(CONSOLE_PATHS, Access.OPEN),
    "/admin/v2/brokers/health": Access.OPEN,
    # Prometheus scrapes without a token, as from a Pulsar broker by default (api.metrics).
    "/metrics": Access.OPEN,
    "/admin/v2/brokers/ready": Access.OPEN,
    "/admin/v2/brokers": Access.SUPER_USER,
    "/admin/v2/clusters": Access.SUPER_USER,
    "/admin/v2/tenants": Access.SUPER_USER,
    "/admin/v2/audit": Access.SUPER_USER,
    # Who the caller is and which tenants it may administer (api.identity).
    "/admin/v2/whoami": Access.AUTHENTICATED,
    # A client's data-plane session and topic lookups: any role; what the session may do on
    # Redis, and which topics it may look up, follow the role's grants (api.sessions).
    "/admin/v2/dataplane": Access.AUTHENTICATED,
    "/admin/v2/namespaces/{tenant}": Access.TENANT_ADMIN,
    "/admin/v2/persistent/{tenant}": Access.TENANT_ADMIN,
    "/lookup/v2/topic/persistent/{tenant}": Access.TENANT_ADMIN,
    # Reports of one namespace belong to its tenant; the run history spans every tenant.
    "/admin/v2/reports/rates/{tenant}": Access.TENANT_ADMIN,
    "/admin/v2/reports/backlog/{tenant}": Access.TENANT_ADMIN,
    "/admin/v2/reports/charts/{tenant}": Access.TENANT_ADMIN,
    "/admin/v2/reports/advice/{tenant}": Access.TENANT_ADMIN,
    # The simulator names its namespace in the body: the handler asks for an admin of its
    # tenant (``require_tenant_admin``).
    "/admin/v2/reports/simulate": Access.AUTHENTICATED,
    "/admin/v2/reports/runs": Access.SUPER_USER,
    # Pulsar's WebSocket API: produce, consume and read a tenant's topics.
    "/ws/v2/producer/persistent/{tenant}": Access.TENANT_ADMIN,
    "/ws/v2/consumer/persistent/{tenant}": Access.TENANT_ADMIN,
    "/ws/v2/reader/persistent/{tenant}": Access.TENANT_ADMIN,
}


# The open resources have no path parameters: requests for them are recognised by their path.
OPEN_PATHS = frozenset(prefix for prefix, level in POLICY.items() if level is Access.OPEN)


def required_access(path_template: str) -> Access:
    """The access a route (by its path template, e.g. ``/admin/v2/tenants/{tenant}``) needs."""
    best, access = -1, Access.SUPER_USER
    for prefix, level in POLICY.items():
        if (path_template == prefix or path_template.startswith(prefix + "/")) and len(
            prefix
        ) > best:
            best, access = len(prefix), level
    return access


def _configured_key(settings: Settings) -> tuple[str, bytes] | None:
    """("secret" | "public", key bytes) from the settings, or None when none is set."""
    sources = [
        ("secret", settings.token_secret_key_file, True),
        ("secret", settings.token_secret_key, False),
        ("public", settings.token_public_key_file, True),
        ("public", settings.token_public_key, False),
    ]
    given = [(kind, value, is_file) for kind, value, is_file in sources if value]
    if not given:
        return None
    if len(given) > 1:
        raise ValueError("Set only one of SLUICE_TOKEN_SECRET_KEY[_FILE] / PUBLIC_KEY[_FILE]")
    kind, value, is_file = given[0]
    try:
        return kind, Path(value).read_bytes() if is_file else read_key(value)
    except OSError as exc:
        raise ValueError(f"Cannot read token key file {value}: {exc.strerror}") from None
    except SluiceError as exc:
        raise ValueError(exc.reason) from None


@dataclass(frozen=True)
class AccessControl:
    """The security settings of one admin service, checked once at start-up."""

    authentication: bool = False
    authorization: bool = False
    super_users: frozenset[str] = frozenset()
    verifier: TokenVerifier | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> AccessControl:
        """Build from settings; ``ValueError`` on a configuration that cannot work."""
        if settings.authorization_enabled and not settings.authentication_enabled:
            raise ValueError("SLUICE_AUTHORIZATION_ENABLED needs SLUICE_AUTHENTICATION_ENABLED")
        super_users = frozenset(
            r.strip() for r in settings.super_user_roles.split(",") if r.strip()
        )
        if not settings.authentication_enabled:
            return cls(super_users=super_users)
        key = _configured_key(settings)
        if key is None:
            raise ValueError(
                "Authentication is enabled but no token key is configured: set "
                "SLUICE_TOKEN_SECRET_KEY_FILE or SLUICE_TOKEN_PUBLIC_KEY_FILE"
            )
        kind, data = key
        try:
            verifier = TokenVerifier.from_keys(
                secret_key=data if kind == "secret" else None,
                public_key=data if kind == "public" else None,
                role_claim=settings.token_auth_claim,
            )
        except SluiceError as exc:
            raise ValueError(exc.reason) from None
        return cls(True, settings.authorization_enabled, super_users, verifier)

    def authenticate(self, authorization_header: str | None) -> str:
        """The role of a request's bearer token; 401 when there is no valid one."""
        return self.authenticate_token(authorization_header)[0]

    def authenticate_token(self, authorization_header: str | None) -> tuple[str, float | None]:
        """The role of a request's bearer token and the token's expiry (None: never); 401
        when there is no valid one."""
        assert self.verifier is not None
        scheme, _, token = (authorization_header or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise _unauthorized("Authentication required: send Authorization: Bearer <token>")
        try:
            return self.verifier.verify(token.strip())
        except SluiceError as exc:
            raise _unauthorized(exc.reason) from None


UNAUTHORIZED_CHALLENGE = "Bearer"


def _unauthorized(reason: str) -> HTTPException:
    return HTTPException(401, reason, headers={"WWW-Authenticate": UNAUTHORIZED_CHALLENGE})


class AuthenticationMiddleware:
    """Authenticates every HTTP request that is not open before the app sees it.

    The role goes into the request scope (``scope["state"]["role"]``), where ``authorize``
    and the audit log find it; a request without a valid token is answered 401 here.
    """

    def __init__(self, app: ASGIApp, control: AccessControl) -> None:
        self.app = app
        self.control = control

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket") or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        header = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                header = value.decode("latin-1")
                break
        if header is None and kind == "websocket":
            token = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
            if token:
                header = f"Bearer {token[-1]}"
        try:
            role, expires = self.control.authenticate_token(header)
        except HTTPException as exc:
            response = reason_response(401, exc.detail)
            response.headers["WWW-Authenticate"] = UNAUTHORIZED_CHALLENGE
            if kind == "websocket":
                await refuse_websocket(scope, receive, send, response)
            else:
                await response(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        state["role"], state["token_expires"] = role, expires
        await self.app(scope, receive, send)


async def refuse_websocket(scope: Scope, receive: Receive, send: Send, response: Response) -> None:
    """Refuse a WebSocket handshake with an HTTP answer (a close when the server cannot)."""
    if "websocket.http.response" in scope.get("extensions", {}):
        await response(scope, receive, send)  # Starlette answers a handshake as HTTP
    else:
        await send({"type": "websocket.close", "code": 1008, "reason": ""})


async def _is_tenant_admin(request: HTTPConnection, tenant: str, role: str) -> bool:
    if not is_valid_name(tenant):
        return False
    sessions = request.app.state.sluice.sessions
    async with sessions() as session:
        roles = await session.scalar(select(Tenant.admin_roles).where(Tenant.name == tenant))
    return roles is not None and role in roles


# Declares the Bearer scheme in the OpenAPI document (the "Authorize" button of /docs);
# the header itself is parsed by ``AccessControl.authenticate``.
BEARER = HTTPBearer(auto_error=False, description="A token made by `sluice tokens create`")


async def authorize(
    request: Request, _scheme: HTTPAuthorizationCredentials | None = Depends(BEARER)
) -> None:
    """The app-wide dependency: authenticate the caller, then apply ``POLICY``.

    The role is left in the request scope, where ``api.deps.get_caller`` (and so the audit
    log) finds it.
    """
    await _apply_policy(request)


async def authorize_websocket(websocket: HTTPConnection) -> None:
    """``POLICY`` for a WebSocket handshake (its routes are outside the app's dependencies:
    the handler calls this first); ``Forbidden`` when the role may not."""
    await _apply_policy(websocket)


async def _apply_policy(request: HTTPConnection) -> None:
    route = request.scope.get("route")
    access = required_access(getattr(route, "path_format", None) or request.url.path)
    control: AccessControl = request.app.state.sluice.access_control
    if access is Access.OPEN or not control.authentication:
        return
    role = request.scope["state"]["role"]  # set by AuthenticationMiddleware
    if not control.authorization or role in control.super_users or access is Access.AUTHENTICATED:
        return
    if access is Access.TENANT_ADMIN:
        await _check_tenant_admin(request, role, request.path_params.get("tenant", ""))
        return
    raise Forbidden(f"Role {role} is not a super-user: this operation needs super-user access")


async def require_tenant_admin(request: HTTPConnection, tenant: str) -> None:
    """``TENANT_ADMIN`` for a tenant a request names in its body, not its path (a route of
    ``Access.AUTHENTICATED`` calls this first); ``Forbidden`` when the role may not."""
    control: AccessControl = request.app.state.sluice.access_control
    if not control.authentication or not control.authorization:
        return
    role = request.scope["state"]["role"]
    if role not in control.super_users:
        await _check_tenant_admin(request, role, tenant)


async def _check_tenant_admin(request: HTTPConnection, role: str, tenant: str) -> None:
    if not (tenant and await _is_tenant_admin(request, tenant, role)):
        raise Forbidden(f"Role {role} is not an admin of tenant {tenant}")
