"""Routes of Pulsar's permissions: produce and consume grants on namespaces and topics.

Paths, bodies and status codes are Pulsar's: ``GET .../permissions`` answers role -> actions
(on a topic, merged with the namespace's grants), ``POST .../permissions/{role}`` with a JSON
list of actions replaces that role's grant there (204), ``DELETE .../permissions/{role}``
revokes it (204; on a topic, 412 when the role has no topic-level grant).  A partition's
grants are its partitioned topic's.  As for every policy write, ``dryRun=true`` answers 200
with the permissions the write would leave and changes nothing.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query
from starlette.responses import Response

from api.deps import UowDep
from api.permissions import service
from api.permissions.schemas import Permissions, PermissionsDryRun
from api.policy_store.target import PolicyTarget, namespace_target, topic_target
from api.responses import JsonResponse, no_content
from api.routing import SluiceRoute
from api.unit_of_work import UnitOfWork
from models.permissions import Action, check_role, parse_actions
from sluice.protocol.names import TopicName

router = APIRouter(tags=["permissions"], route_class=SluiceRoute)

NS = "/admin/v2/namespaces/{tenant}/{namespace}/permissions"
TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}/permissions"
DRY_RUN = Query(False, alias="dryRun", description="validate and report, change nothing")
DRY_RUN_ANSWER: dict[int | str, dict] = {
    200: {
        "model": PermissionsDryRun,
        "description": "dryRun=true: the permissions the write would leave",
    }
}
# The body is read raw, so that each wrong action is refused with a reason naming it.
ACTIONS_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "array",
                    "items": {"type": "string", "enum": [a.value for a in Action]},
                    "description": 'the actions granted to the role, e.g. ["produce", "consume"]',
                }
            }
        },
    }
}
RAW_BODY = Body(None)


async def namespace_dep(tenant: str, namespace: str, uow: UowDep) -> PolicyTarget:
    return await namespace_target(uow, tenant, namespace)


async def topic_dep(tenant: str, namespace: str, topic: str, uow: UowDep) -> PolicyTarget:
    return await topic_target(uow, TopicName.parse(tenant, namespace, topic))


NamespaceDep = Annotated[PolicyTarget, Depends(namespace_dep)]
TopicDep = Annotated[PolicyTarget, Depends(topic_dep)]


async def _write_answer(uow: UnitOfWork, target: PolicyTarget) -> Response:
    """204, or for a dry run 200 with the permissions the write leaves at the target."""
    if not uow.dry_run:
        return no_content()
    await uow.session.flush()
    permissions = await service.read_permissions(uow.session, target)
    return JsonResponse({"dryRun": True, "changed": target.entity, "permissions": permissions})


async def _grant(uow: UnitOfWork, target: PolicyTarget, role: str, body: Any) -> Response:
    actions = parse_actions(body)
    await service.grant(uow, target, check_role(role), actions)
    return await _write_answer(uow, target)


async def _revoke(uow: UnitOfWork, target: PolicyTarget, role: str) -> Response:
    await service.revoke(uow, target, check_role(role))
    return await _write_answer(uow, target)


@router.get(NS, summary="Get the permissions on a namespace", response_model=Permissions)
async def get_namespace_permissions(target: NamespaceDep, uow: UowDep) -> dict:
    """Every role granted on the namespace and its actions."""
    return await service.read_permissions(uow.session, target)


@router.post(
    NS + "/{role}",
    status_code=204,
    summary="Grant permissions to a role on a namespace",
    responses=DRY_RUN_ANSWER,
    openapi_extra=ACTIONS_BODY,
)
async def grant_namespace_permissions(
    target: NamespaceDep, role: str, uow: UowDep, body: Any = RAW_BODY, dry_run: bool = DRY_RUN
) -> Response:
    """Set the role's actions on the namespace (replacing those it had)."""
    return await _grant(uow, target, role, body)


@router.delete(
    NS + "/{role}",
    status_code=204,
    summary="Revoke a role's permissions on a namespace",
    responses=DRY_RUN_ANSWER,
)
async def revoke_namespace_permissions(
    target: NamespaceDep, role: str, uow: UowDep, dry_run: bool = DRY_RUN
) -> Response:
    """Remove the role's namespace grant (nothing to remove is not an error)."""
    return await _revoke(uow, target, role)


@router.get(TOPIC, summary="Get the permissions on a topic", response_model=Permissions)
async def get_topic_permissions(target: TopicDep, uow: UowDep) -> dict:
    """Every role granted on the topic or its namespace, with the union of its actions."""
    return await service.read_permissions(uow.session, target)


@router.post(
    TOPIC + "/{role}",
    status_code=204,
    summary="Grant permissions to a role on a topic",
    responses=DRY_RUN_ANSWER,
    openapi_extra=ACTIONS_BODY,
)
async def grant_topic_permissions(
    target: TopicDep, role: str, uow: UowDep, body: Any = RAW_BODY, dry_run: bool = DRY_RUN
) -> Response:
    """Set the role's actions on the topic and all its partitions (replacing those it had)."""
    return await _grant(uow, target, role, body)


@router.delete(
    TOPIC + "/{role}",
    status_code=204,
    summary="Revoke a role's permissions on a topic",
    responses=DRY_RUN_ANSWER,
)
async def revoke_topic_permissions(
    target: TopicDep, role: str, uow: UowDep, dry_run: bool = DRY_RUN
) -> Response:
    """Remove the role's topic grant; 412 when it has none at the topic level."""
    return await _revoke(uow, target, role)
