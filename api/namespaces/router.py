"""Routes of ``/admin/v2/namespaces`` (the dispatch-rate policies live in ``api.policies``)."""

from fastapi import Body
from starlette.responses import Response

from api.deps import StateDep, UowDep
from api.namespaces import service
from api.responses import JsonResponse, no_content
from api.routing import SluiceRoute, SluiceRouter
from api.schemas import NamespacePolicies, PoliciesDocument
from api.topics.service import list_topics

router = SluiceRouter(prefix="/admin/v2/namespaces", tags=["namespaces"], route_class=SluiceRoute)


@router.get("/{tenant}")
async def list_namespaces(tenant: str, uow: UowDep) -> list[str]:
    """``tenant/namespace`` names of the tenant."""
    return await service.list_namespaces(uow, tenant)


@router.put("/{tenant}/{namespace}", status_code=204)
async def create_namespace(
    tenant: str,
    namespace: str,
    uow: UowDep,
    state: StateDep,
    policies: NamespacePolicies | None = Body(None),
) -> Response:
    """Create a namespace; the optional body is a partial ``Policies`` document."""
    await service.create_namespace(
        uow, tenant, namespace, policies or NamespacePolicies(), state.cluster
    )
    return no_content()


@router.get("/{tenant}/{namespace}", response_model=PoliciesDocument)
async def get_policies(tenant: str, namespace: str, uow: UowDep, state: StateDep) -> dict:
    """The namespace's ``Policies`` document."""
    return await service.read_policies(uow, tenant, namespace, state.cluster)


@router.delete("/{tenant}/{namespace}", status_code=204)
async def delete_namespace(
    tenant: str, namespace: str, uow: UowDep, force: bool = False
) -> Response:
    """Delete a namespace (``force=true`` also deletes its topics)."""
    await service.delete_namespace(uow, tenant, namespace, force)
    return no_content()


@router.get("/{tenant}/{namespace}/topics", response_model=list[str])
async def get_topics(tenant: str, namespace: str, uow: UowDep) -> Response:
    """Every persistent topic of the namespace (rendered at once: it may be a long list)."""
    return JsonResponse(await list_topics(uow, tenant, namespace))
