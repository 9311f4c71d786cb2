"""Routes of Pulsar's resource groups, and of attaching tenants, namespaces and topics to them.

``/admin/v2/resourcegroups[/{rg}]`` (list, get, PUT create-or-update of the fields sent,
DELETE) need a super-user (no entry in ``api.auth.POLICY``); attaching follows the target's
policy permissions (a namespace's or topic's tenant admins; a tenant's: super-users, as every
``/admin/v2/tenants`` route).  The weight of a member in the group's fair split is the
``weight`` query parameter of an attach (a Sluice extension, default 1).  Every write takes
``dryRun=true``: 200 with what the write would leave, nothing changed.
"""

from typing import Annotated, Any

from fastapi import Body, Depends, Query
from starlette.responses import Response

from api.deps import UowDep
from api.resource_groups import service
from api.resource_groups.schemas import MemberDocument, ResourceGroupDocument
from api.resource_groups.service import Member
from api.responses import JsonResponse, no_content
from api.routing import SluiceRoute, SluiceRouter, named
from api.unit_of_work import UnitOfWork
from models.errors import InvalidInput, NotFound
from sluice.protocol.names import TopicName, is_valid_name

router = SluiceRouter(tags=["resource groups"], route_class=SluiceRoute)

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


async def namespace_dep(tenant: str, namespace: str, uow: UowDep) -> Member:
    return await service.namespace_member(uow, tenant, namespace)


async def topic_dep(tenant: str, namespace: str, topic: str, uow: UowDep) -> Member:
    return await service.topic_member(uow, TopicName.parse(tenant, namespace, topic))


async def tenant_dep(tenant: str, uow: UowDep) -> Member:
    return await service.tenant_member(uow, tenant)


def group_dep(resourcegroup: str) -> str:
    """The group a path names (a dependency, so that it follows the member's parameters)."""
    return resourcegroup


NamespaceMember = Annotated[Member, Depends(namespace_dep)]
TopicMember = Annotated[Member, Depends(topic_dep)]
TenantMember = Annotated[Member, Depends(tenant_dep)]
GroupName = Annotated[str, Depends(group_dep)]


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


async def get_topic_resource_group(
    member: TopicMember,
    uow: UowDep,
    applied: bool = Query(False, description="the group in force: topic, namespace or tenant"),
) -> str | None:
    """The topic's group, or null; ``applied=true``: the one in force (topic > namespace >
    tenant)."""
    if not applied:
        return await _group_of(uow, member)
    namespace_name = member.name.removeprefix("persistent://").rsplit("/", 1)[0]
    members = [
        member,
        Member("namespace", namespace_name, member.tenant_id, member.namespace_id),
        Member("tenant", namespace_name.split("/", 1)[0], member.tenant_id),
    ]
    return await service.applied_group(uow.session, members)


async def set_topic_resource_group(
    member: TopicMember,
    uow: UowDep,
    body: Any = RAW_BODY,
    weight: Weight = None,
    dry_run: bool = DRY_RUN,
) -> Response:
    """The body is the group's name as a JSON string; null or "" removes the topic's group.
    404 "ResourceGroup does not exist" for an unknown group (Pulsar's answer)."""
    if body is None or body == "":
        await service.detach(uow, member)
    elif not isinstance(body, str) or not is_valid_name(body):
        raise InvalidInput("The body must be a resource group's name as a JSON string")
    else:
        await service.attach(uow, member, body, weight, NotFound)
    return await _answer(uow, member)


def _add_routes(path: str, member_dep: Any, level: str, docs: dict[str, str]) -> None:
    """GET, POST and DELETE of one level's group (``namespace``, ``topic`` or ``tenant``):
    ``docs`` names each route's endpoint (its operation id) and gives its description.  A
    topic's GET and POST are its own (above): they read ``applied`` and a body."""

    async def read(member: member_dep, uow: UowDep) -> str | None:
        return await _group_of(uow, member)

    async def attach(
        member: member_dep,
        resourcegroup: GroupName,
        uow: UowDep,
        weight: Weight = None,
        dry_run: bool = DRY_RUN,
    ) -> Response:
        await service.attach(uow, member, resourcegroup, weight)
        return await _answer(uow, member)

    async def detach(member: member_dep, uow: UowDep, dry_run: bool = DRY_RUN) -> Response:
        await service.detach(uow, member)
        return await _answer(uow, member)

    topic = level == "topic"
    if topic:
        read, attach = get_topic_resource_group, set_topic_resource_group
    for endpoint, (name, doc) in zip((read, attach, detach), docs.items(), strict=True):
        named(endpoint, name, doc)
    router.get(path, summary=f"Get a {level}'s resource group")(read)
    router.post(
        path if topic else path + "/{resourcegroup}",
        status_code=204,
        summary=f"Attach a {level} to a resource group" + (" (null removes it)" if topic else ""),
        responses=DRY_RUN_ANSWER,
        openapi_extra=NAME_BODY if topic else None,
    )(attach)
    router.delete(
        path,
        status_code=204,
        summary=f"Detach a {level} from its resource group",
        responses=DRY_RUN_ANSWER,
    )(detach)


_add_routes(
    NAMESPACE,
    NamespaceMember,
    "namespace",
    {
        "get_namespace_resource_group": "The group's name, or null.",
        "set_namespace_resource_group": (
            '412 "ResourceGroup does not exist" for an unknown group (Pulsar\'s answer).'
        ),
        "remove_namespace_resource_group": (
            "The namespace has no group afterwards (204 also when it had none)."
        ),
    },
)
_add_routes(
    TOPIC,
    TopicMember,
    "topic",
    {
        "get_topic_resource_group": get_topic_resource_group.__doc__ or "",
        "set_topic_resource_group": set_topic_resource_group.__doc__ or "",
        "remove_topic_resource_group": (
            "The namespace's (or tenant's) group applies to the topic afterwards."
        ),
    },
)
_add_routes(
    TENANT,
    TenantMember,
    "tenant",
    {
        "get_tenant_resource_group": (
            "The group's name, or null (Sluice: Pulsar planned tenant groups, never shipped them)."
        ),
        "set_tenant_resource_group": (
            "A tenant-wide group: its namespaces and topics without their own group use it.  412\n"
            "    for an unknown group, as for a namespace."
        ),
        "remove_tenant_resource_group": "The tenant has no group afterwards.",
    },
)
