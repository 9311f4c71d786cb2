"""Routes of ``/admin/v2/clusters``: the one local cluster."""

from api.clusters import service
from api.deps import UowDep
from api.routing import SluiceRoute, SluiceRouter
from api.schemas import ClusterDocument

router = SluiceRouter(prefix="/admin/v2/clusters", tags=["clusters"], route_class=SluiceRoute)


@router.get("")
async def list_clusters(uow: UowDep) -> list[str]:
    """Names of the known clusters."""
    return await service.list_clusters(uow.session)


@router.get("/{cluster}", response_model=ClusterDocument)
async def get_cluster(cluster: str, uow: UowDep) -> dict:
    """Pulsar's ``ClusterData`` for one cluster."""
    return await service.read_cluster(uow.session, cluster)
