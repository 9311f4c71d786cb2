"""Routes of Pulsar's resource groups, and of attaching tenants, namespaces and topics to them.

``/admin/v2/resourcegroups[/{rg}]`` (list, get, PUT create-or-update of the fields sent,
DELETE) need a super-user (no entry in ``api.auth.POLICY``); attaching follows the target's
policy permissions (a namespace's or topic's tenant admins; a tenant's: super-users, as every
``/admin/v2/tenants`` route).  The weight of a member in the group's fair split is the
``weight`` query parameter of an attach (a Sluice extension, default 1).  Every write takes
``dryRun=true``: 200 with what the write would leave, nothing changed.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from starlette.responses import Response

from api.deps import UowDep
from api.resource_groups import service
from api.resource_groups.schemas import MemberDocument, ResourceGroupDocument
from api.resource_groups.service import Member
from api.responses import JsonResponse, no_content
from api.routing import SluiceRoute
from api.unit_of_work import UnitOfWork
from models.errors import InvalidInput, NotFound
from sluice.protocol.names import TopicName, is_valid_name

router = APIRouter(tags=["resource groups"], route_class=SluiceRoute)

GROUPS = "/admin/v2/resourcegroups"
NAMESPACE = "/admin/v2/namespaces/{tenant}/{namespace}/resourcegroup"
TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}/resourceGroup"
TENANT = "/admin/v2/tenants/{tenant}/resourcegroup"
DRY_RUN = Query(False, alias="dryRun", description="validate and report, change nothing")
WEIGHT = Query(
    description="the member's weight in the group's fair split (1..1000, default 1; Sluice)",
)
Weight = Annotated[int | None, WEIGHT]
DRY_RUN_ANSWER: dict[int | str, dict] = {200: {"description": "dryRun=true: what it would leave"}}
GROUP_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "description": "Pulsar's ResourceGroup: only the fields sent change",
                    "properties": {
                        name: {"type": "integer", "format": "int64"}
                        for name in (
                            "publishRateInMsgs",
                            "publishRateInBytes",
                            "dispatchRateInMsgs",
                            "dispatchRateInBytes",
                            "replicationDispatchRateInMsgs",
                            "replicationDispatchRateInBytes",
                        )
                    },
                }
            }
        },
    }
}
NAME_BODY = {
    "requestBody": {
        "required": False,
        "content": {
            "application/json": {
                "schema": {"type": "string", "description": "the group's name; null removes"}
            }
        },
    }
}
RAW_BODY = Body(None)


# --- groups ---------------------------------------------------------------------------------


@router.get(GROUPS, summary="List the resource groups")
async def get_resource_groups(uow: UowDep) -> list[str]:
    """Every resource group's name."""
    return await service.list_groups(uow.session)


@router.get(
    GROUPS + "/{resourcegroup}",
    summary="Get a resource group",
    response_model=ResourceGroupDocument,
)
async def get_resource_group(resourcegroup: str, uow: UowDep) -> dict:
    """The group's rates (-1 = unlimited); 404 "ResourceGroup does not exist"."""
    return await service.read_group(uow.session, resourcegroup)


@router.put(
    GROUPS + "/{resourcegroup}",
    status_code=204,
    summary="Create a resource group, or update the fields sent",
    responses=DRY_RUN_ANSWER,
    openapi_extra=GROUP_BODY,
)
async def create_or_update_resource_group(
    resourcegroup: str, uow: UowDep, body: Any = RAW_BODY, dry_run: bool = DRY_RUN
) -> Response:
    """Create (fields not sent are -1, unlimited) or update only the fields sent."""
    after = await service.put_group(uow, resourcegroup, body)
    if uow.dry_run:
        return JsonResponse({"dryRun": True, "changed": resourcegroup, "resourceGroup": after})
    return no_content()


@router.delete(
    GROUPS + "/{resourcegroup}",
    status_code=204,
    summary="Delete a resource group",
    responses=DRY_RUN_ANSWER,
)
async def delete_resource_group(
    resourcegroup: str, uow: UowDep, dry_run: bool = DRY_RUN
) -> Response:
    """404 when missing; 409 while a tenant, namespace or topic uses it (named in the reason)."""
    await service.delete_group(uow, resourcegroup)
    if uow.dry_run:
        return JsonResponse({"dryRun": True, "changed": resourcegroup, "resourceGroup": None})
    return no_content()


@router.get(
    GROUPS + "/{resourcegroup}/attachments",
    summary="List a group's members",
    response_model=list[MemberDocument],
)
async def get_resource_group_attachments(resourcegroup: str, uow: UowDep) -> list[dict]:
    """The tenants, namespaces and topics attached, with their weights (Sluice)."""
    return await service.attachments(uow.session, resourcegroup)


# --- attachments ----------------------------------------------------------------------------


async def _group_of(uow: UnitOfWork, member: Member) -> str | None:
    """The name of the group ``member`` is attached to, or None."""
    attached = await service.read_attachment(uow.session, member)
    return str(attached["resourceGroup"]) if attached else None


async def _answer(uow: UnitOfWork, member: Member) -> Response:
    if not uow.dry_run:
        return no_content()
    attached = await service.read_attachment(uow.session, member)
    return JsonResponse(
        {
            "dryRun": True,
            "changed": member.name,
            "resourceGroup": attached["resourceGroup"] if attached else None,
            "weight": attached["weight"] if attached else None,
        }
    )


@router.get(NAMESPACE, summary="Get a namespace's resource group")
async def get_namespace_resource_group(tenant: str, namespace: str, uow: UowDep) -> str | None:
    """The group's name, or null."""
    member = await service.namespace_member(uow, tenant, namespace)
    return await _group_of(uow, member)


@router.post(
    NAMESPACE + "/{resourcegroup}",
    status_code=204,
    summary="Attach a namespace to a resource group",
    responses=DRY_RUN_ANSWER,
)
async def set_namespace_resource_group(
    tenant: str,
    namespace: str,
    resourcegroup: str,
    uow: UowDep,
    weight: Weight = None,
    dry_run: bool = DRY_RUN,
) -> Response:
    """412 "ResourceGroup does not exist" for an unknown group (Pulsar's answer)."""
    member = await service.namespace_member(uow, tenant, namespace)
    await service.attach(uow, member, resourcegroup, weight)
    return await _answer(uow, member)


@router.delete(
    NAMESPACE,
    status_code=204,
    summary="Detach a namespace from its resource group",
    responses=DRY_RUN_ANSWER,
)
async def remove_namespace_resource_group(
    tenant: str, namespace: str, uow: UowDep, dry_run: bool = DRY_RUN
) -> Response:
    """The namespace has no group afterwards (204 also when it had none)."""
    member = await service.namespace_member(uow, tenant, namespace)
    await service.detach(uow, member)
    return await _answer(uow, member)


@router.get(TOPIC, summary="Get a topic's resource group")
async def get_topic_resource_group(
    tenant: str,
    namespace: str,
    topic: str,
    uow: UowDep,
    applied: bool = Query(False, description="the group in force: topic, namespace or tenant"),
) -> str | None:
    """The topic's group, or null; ``applied=true``: the one in force (topic > namespace >
    tenant)."""
    member = await service.topic_member(uow, TopicName.parse(tenant, namespace, topic))
    if not applied:
        return await _group_of(uow, member)
    namespace_name = member.name.removeprefix("persistent://").rsplit("/", 1)[0]
    members = [
        member,
        Member("namespace", namespace_name, member.tenant_id, member.namespace_id),
        Member("tenant", tenant, member.tenant_id),
    ]
    return await service.applied_group(uow.session, members)


@router.post(
    TOPIC,
    status_code=204,
    summary="Attach a topic to a resource group (null removes it)",
    responses=DRY_RUN_ANSWER,
    openapi_extra=NAME_BODY,
)
async def set_topic_resource_group(
    tenant: str,
    namespace: str,
    topic: str,
    uow: UowDep,
    body: Any = RAW_BODY,
    weight: Weight = None,
    dry_run: bool = DRY_RUN,
) -> Response:
    """The body is the group's name as a JSON string; null or "" removes the topic's group.
    404 "ResourceGroup does not exist" for an unknown group (Pulsar's answer)."""
    member = await service.topic_member(uow, TopicName.parse(tenant, namespace, topic))
    if body is None or body == "":
        await service.detach(uow, member)
    elif not isinstance(body, str) or not is_valid_name(body):
        raise InvalidInput("The body must be a resource group's name as a JSON string")
    else:
        await service.attach(uow, member, body, weight, NotFound)
    return await _answer(uow, member)


@router.delete(
    TOPIC,
    status_code=204,
    summary="Detach a topic from its resource group",
    responses=DRY_RUN_ANSWER,
)
async def remove_topic_resource_group(
    tenant: str, namespace: str, topic: str, uow: UowDep, dry_run: bool = DRY_RUN
) -> Response:
    """The namespace's (or tenant's) group applies to the topic afterwards."""
    member = await service.topic_member(uow, TopicName.parse(tenant, namespace, topic))
    await service.detach(uow, member)
    return await _answer(uow, member)


@router.get(TENANT, summary="Get a tenant's resource group")
async def get_tenant_resource_group(tenant: str, uow: UowDep) -> str | None:
    """The group's name, or null (Sluice: Pulsar planned tenant groups, never shipped them)."""
    member = await service.tenant_member(uow, tenant)
    return await _group_of(uow, member)


@router.post(
    TENANT + "/{resourcegroup}",
    status_code=204,
    summary="Attach a tenant to a resource group",
    responses=DRY_RUN_ANSWER,
)
async def set_tenant_resource_group(
    tenant: str, resourcegroup: str, uow: UowDep, weight: Weight = None, dry_run: bool = DRY_RUN
) -> Response:
    """A tenant-wide group: its namespaces and topics without their own group use it.  412
    for an unknown group, as for a namespace."""
    member = await service.tenant_member(uow, tenant)
    await service.attach(uow, member, resourcegroup, weight)
    return await _answer(uow, member)


@router.delete(
    TENANT,
    status_code=204,
    summary="Detach a tenant from its resource group",
    responses=DRY_RUN_ANSWER,
)
async def remove_tenant_resource_group(
    tenant: str, uow: UowDep, dry_run: bool = DRY_RUN
) -> Response:
    """The tenant has no group afterwards."""
    member = await service.tenant_member(uow, tenant)
    await service.detach(uow, member)
    return await _answer(uow, member)
