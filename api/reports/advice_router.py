"""Routes of the limit advisor: ``GET /admin/v2/reports/advice/{tenant}/{namespace}`` and
per topic."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import UowDep
from api.reports import advice_service
from api.reports.advice_schemas import AdviceDocument
from api.routing import SluiceRoute
from sluice.protocol.names import TopicName, check_namespace

router = APIRouter(prefix="/admin/v2/reports", tags=["reports"], route_class=SluiceRoute)


@router.get("/advice/{tenant}/{namespace}", response_model=AdviceDocument)
async def namespace_advice(tenant: str, namespace: str, uow: UowDep) -> dict:
    """Recommended dispatch limits of a namespace's subscriptions, with the arithmetic and
    findings, from the latest ``advice`` run."""
    check_namespace(tenant, namespace)
    return await advice_service.advice(uow, tenant, namespace)


@router.get("/advice/{tenant}/{namespace}/{topic}", response_model=AdviceDocument)
async def topic_advice(tenant: str, namespace: str, topic: str, uow: UowDep) -> dict:
    """The advice for one topic's subscriptions."""
    name = TopicName.parse(tenant, namespace, topic)
    return await advice_service.advice(uow, tenant, namespace, name.full)
