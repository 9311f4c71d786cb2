"""Routes of Pulsar's permissions: produce and consume grants on namespaces and topics.

Paths, bodies and status codes are Pulsar's: ``GET .../permissions`` answers role -> actions
(on a topic, merged with the namespace's grants), ``POST .../permissions/{role}`` with a JSON
list of actions replaces that role's grant there (204), ``DELETE .../permissions/{role}``
revokes it (204; on a topic, 412 when the role has no topic-level grant).  A partition's
grants are its partitioned topic's.  As for every policy write, ``dryRun=true`` answers 200
with the permissions the write would leave and changes nothing.

Subscription permissions (``api.permissions.subscriptions``): ``POST
.../permissions/subscription/{subscription}`` with a JSON list of roles sets the roles that
may use that subscription name in the namespace (204), ``DELETE
.../permissions/{subscription}/{role}`` takes one role out (204; 404 when the subscription has
no list), ``GET .../permissions/subscription`` answers subscription -> roles.
"""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Body, Depends, Query
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.responses import Response

from api.deps import UowDep
from api.permissions import service, subscriptions
from api.permissions.schemas import Permissions, PermissionsDryRun, SubscriptionPermissions
from api.policy_store.target import PolicyTarget, namespace_target, topic_target
from api.responses import JsonResponse, no_content
from api.routing import SluiceRoute, SluiceRouter, named
from api.unit_of_work import UnitOfWork
from models.permissions import Action, check_role, parse_actions, parse_roles
from sluice.protocol.names import TopicName, check_subscription

router = SluiceRouter(tags=["permissions"], route_class=SluiceRoute)

NS = "/admin/v2/namespaces/{tenant}/{namespace}/permissions"
TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}/permissions"
DRY_RUN = Query(False, alias="dryRun", description="validate and report, change nothing")
DRY_RUN_ANSWER: dict[int | str, dict] = {
    200: {
        "model": PermissionsDryRun,
        "description": "dryRun=true: the permissions the write would leave",
    }
}


def array_body(items: dict, description: str) -> dict:
    """The OpenAPI request body of a route that reads a JSON array raw (so that each wrong
    element is refused with a reason naming it)."""
    schema = {"type": "array", "items": items, "description": description}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


ACTIONS_BODY = array_body(
    {"type": "string", "enum": [a.value for a in Action]},
    'the actions granted to the role, e.g. ["produce", "consume"]',
)
RAW_BODY = Body(None)


async def namespace_dep(tenant: str, namespace: str, uow: UowDep) -> PolicyTarget:
    return await namespace_target(uow, tenant, namespace)


async def topic_dep(tenant: str, namespace: str, topic: str, uow: UowDep) -> PolicyTarget:
    return await topic_target(uow, TopicName.parse(tenant, namespace, topic))


NamespaceDep = Annotated[PolicyTarget, Depends(namespace_dep)]
TopicDep = Annotated[PolicyTarget, Depends(topic_dep)]


Reader = Callable[[AsyncSession, PolicyTarget], Awaitable[dict[str, list[str]]]]


async def _write_answer(
    uow: UnitOfWork, target: PolicyTarget, read: Reader = service.read_permissions
) -> Response:
    """204, or for a dry run 200 with the permissions the write leaves at the target (the
    role grants, or with ``read=_subscription_permissions`` the subscriptions' roles)."""
    if not uow.dry_run:
        return no_content()
    await uow.session.flush()
    permissions = await read(uow.session, target)
    return JsonResponse({"dryRun": True, "changed": target.entity, "permissions": permissions})


async def _grant(uow: UnitOfWork, target: PolicyTarget, role: str, body: Any) -> Response:
    actions = parse_actions(body)
    await service.grant(uow, target, check_role(role), actions)
    return await _write_answer(uow, target)


async def _revoke(uow: UnitOfWork, target: PolicyTarget, role: str) -> Response:
    await service.revoke(uow, target, check_role(role))
    return await _write_answer(uow, target)


def _add_routes(path: str, target_dep: Any, level: str, docs: dict[str, str]) -> None:
    """GET, POST and DELETE of the permissions at one level (``namespace`` or ``topic``):
    ``docs`` names each route's endpoint (its operation id) and gives its description."""

    async def read(target: target_dep, uow: UowDep) -> dict:
        return await service.read_permissions(uow.session, target)

    async def grant(
        target: target_dep, role: str, uow: UowDep, body: Any = RAW_BODY, dry_run: bool = DRY_RUN
    ) -> Response:
        return await _grant(uow, target, role, body)

    async def revoke(
        target: target_dep, role: str, uow: UowDep, dry_run: bool = DRY_RUN
    ) -> Response:
        return await _revoke(uow, target, role)

    for endpoint, (name, doc) in zip((read, grant, revoke), docs.items(), strict=True):
        named(endpoint, name, doc)
    router.get(path, summary=f"Get the permissions on a {level}", response_model=Permissions)(read)
    router.post(
        path + "/{role}",
        status_code=204,
        summary=f"Grant permissions to a role on a {level}",
        responses=DRY_RUN_ANSWER,
        openapi_extra=ACTIONS_BODY,
    )(grant)
    router.delete(
        path + "/{role}",
        status_code=204,
        summary=f"Revoke a role's permissions on a {level}",
        responses=DRY_RUN_ANSWER,
    )(revoke)


_add_routes(
    NS,
    NamespaceDep,
    "namespace",
    {
        "get_namespace_permissions": "Every role granted on the namespace and its actions.",
        "grant_namespace_permissions": (
            "Set the role's actions on the namespace (replacing those it had)."
        ),
        "revoke_namespace_permissions": (
            "Remove the role's namespace grant (nothing to remove is not an error)."
        ),
    },
)
_add_routes(
    TOPIC,
    TopicDep,
    "topic",
    {
        "get_topic_permissions": (
            "Every role granted on the topic or its namespace, with the union of its actions."
        ),
        "grant_topic_permissions": (
            "Set the role's actions on the topic and all its partitions (replacing those it had)."
        ),
        "revoke_topic_permissions": (
            "Remove the role's topic grant; 412 when it has none at the topic level."
        ),
    },
)


ROLES_BODY = array_body(
    {"type": "string"}, 'the roles that may use the subscription, e.g. ["billing"]'
)


async def _subscription_permissions(
    session: AsyncSession, target: PolicyTarget
) -> dict[str, list[str]]:
    """The namespace's subscriptions with a role list, and their roles."""
    return await subscriptions.read_subscription_permissions(session, target.namespace.id)


@router.get(
    NS + "/subscription",
    summary="Get the subscription permissions of a namespace",
    response_model=SubscriptionPermissions,
)
async def get_subscription_permissions(target: NamespaceDep, uow: UowDep) -> dict:
    """Every subscription of the namespace with a role list, and its roles."""
    return await _subscription_permissions(uow.session, target)


@router.post(
    NS + "/subscription/{subscription}",
    status_code=204,
    summary="Set the roles that may use a subscription",
    responses=DRY_RUN_ANSWER,
    openapi_extra=ROLES_BODY,
)
async def grant_subscription_permission(
    target: NamespaceDep,
    subscription: str,
    uow: UowDep,
    body: Any = RAW_BODY,
    dry_run: bool = DRY_RUN,
) -> Response:
    """Only these roles (besides super-users and the tenant's admins) may subscribe with
    this subscription name in the namespace; replaces the list it had."""
    roles = parse_roles(body)
    await subscriptions.grant(uow, target, check_subscription(subscription), roles)
    return await _write_answer(uow, target, _subscription_permissions)


@router.delete(
    NS + "/{subscription}/{role}",
    status_code=204,
    summary="Revoke a role's access to a subscription",
    responses=DRY_RUN_ANSWER,
)
async def revoke_subscription_permission(
    target: NamespaceDep, subscription: str, role: str, uow: UowDep, dry_run: bool = DRY_RUN
) -> Response:
    """Take the role out of the subscription's role list (404 when it has none)."""
    await subscriptions.revoke(uow, target, check_subscription(subscription), check_role(role))
    return await _write_answer(uow, target, _subscription_permissions)
