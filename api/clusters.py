"""Routes of ``/admin/v2/clusters``: the one local cluster."""

from fastapi import APIRouter
from sqlalchemy import select

from api.deps import UowDep
from models.errors import NotFound
from models.orm import Cluster

router = APIRouter(prefix="/admin/v2/clusters", tags=["clusters"])


@router.get("")
async def list_clusters(uow: UowDep) -> list[str]:
    """Names of the known clusters."""
    return list((await uow.session.scalars(select(Cluster.name).order_by(Cluster.name))).all())


@router.get("/{cluster}")
async def get_cluster(cluster: str, uow: UowDep) -> dict:
    """Pulsar's ``ClusterData`` for one cluster."""
    row = await uow.session.scalar(select(Cluster).where(Cluster.name == cluster))
    if row is None:
        raise NotFound("Cluster does not exist")
    return {"serviceUrl": row.service_url, "brokerServiceUrl": row.broker_service_url}
