"""Routes of the limit advisor (``GET /admin/v2/reports/advice/{tenant}/{namespace}`` and per
topic) and of the limit simulator (``POST /admin/v2/reports/simulate``)."""

from __future__ import annotations

from fastapi import Request

from api.auth import require_tenant_admin
from api.deps import StateDep, UowDep
from api.reports import advice_service, simulate_service
from api.reports.advice_schemas import AdviceDocument, SimulateRequest, SimulationDocument
from api.routing import SluiceRoute, SluiceRouter
from sluice.protocol.names import TopicName, check_namespace

router = SluiceRouter(prefix="/admin/v2/reports", tags=["reports"], route_class=SluiceRoute)


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


@router.post("/simulate", response_model=SimulationDocument)
async def simulate(body: SimulateRequest, request: Request, uow: UowDep, state: StateDep) -> dict:
    """Replay a past window's recorded traffic under a proposed dispatch limit: what the
    backlog, the delivered rate and the throttled time would have been.  For super-users and
    the admins of the body's tenant."""
    await require_tenant_admin(request, body.tenant)
    check_namespace(body.tenant, body.namespace)
    lake = state.settings.effective_lake_path
    return await simulate_service.simulation(uow, state.redis, lake, body)
