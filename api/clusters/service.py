"""The cluster rows: the local one made at start-up, listed and read by name."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from models.errors import NotFound
from models.orm import Cluster
from sluice.protocol.names import check_cluster


async def ensure_local_cluster(
    sessions: async_sessionmaker[AsyncSession], name: str, url: str
) -> None:
    """Insert the local cluster row on first start (its own transaction)."""
    async with sessions() as session, session.begin():
        if await session.scalar(select(Cluster).where(Cluster.name == name)) is None:
            session.add(Cluster(name=name, service_url=url))


async def list_clusters(session: AsyncSession) -> list[str]:
    """Names of the known clusters, sorted."""
    return list((await session.scalars(select(Cluster.name).order_by(Cluster.name))).all())


async def read_cluster(session: AsyncSession, name: str) -> dict[str, Any]:
    """Pulsar's ``ClusterData`` of one cluster; 412 on a bad name, 404 when unknown."""
    check_cluster(name)
    row = await session.scalar(select(Cluster).where(Cluster.name == name))
    if row is None:
        raise NotFound("Cluster does not exist")
    return {"serviceUrl": row.service_url, "brokerServiceUrl": row.broker_service_url}
