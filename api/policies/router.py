"""Routes of the dispatch-rate policies at namespace, topic and subscription level.

Paths, bodies and status codes are Pulsar's.  Beyond Pulsar: ``dryRun=true`` on every write
answers 200 with the limits the write would produce and changes nothing, and
``effectiveDispatchRates`` shows where every limiter's value comes from.
"""

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query
from starlette.responses import Response

from api.deps import CallerDep, StateDep, UowDep
from api.policies import service
from api.policies.provenance import provenance_for
from api.policies.reads import read_namespace_rate, read_topic_rate
from api.policies.schemas import RateDryRun, TopicProvenance
from api.policies.service import DISPATCH_RATE, SUBSCRIPTION_DISPATCH_RATE
from api.policy_store.dry_run import write_answer
from api.policy_store.target import PolicyTarget, namespace_target, topic_target
from api.responses import JsonResponse
from api.routing import SluiceRoute
from api.schemas import DispatchRateDocument
from api.unit_of_work import UnitOfWork
from models.dispatch_rate import DispatchRate, DispatchRateBody
from sluice.protocol.names import TopicName

router = APIRouter(tags=["dispatch rate policies"], route_class=SluiceRoute)

NS = "/admin/v2/namespaces/{tenant}/{namespace}"
TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"
DRY_RUN = Query(False, alias="dryRun", description="validate and report, change nothing")
APPLIED = Query(False, description="resolve through namespace and broker levels")
DRY_RUN_ANSWER: dict[int | str, dict] = {
    200: {"model": RateDryRun, "description": "dryRun=true: the limits the write would produce"}
}


async def _write_answer(uow: UnitOfWork, target: PolicyTarget) -> Response:
    """204, or for a dry run 200 with the would-be limits of every affected topic."""

    async def topics() -> list[dict]:
        return await provenance_for(
            uow.session, namespace_id=target.namespace.id, topic_id=target.topic_id
        )

    return await write_answer(uow, topics, changed=target.entity)


def _rate_or_null(rate: DispatchRate | None) -> Response:
    return JsonResponse(rate.to_json() if rate is not None else None)


# Each route family gets a dependency that resolves its Target (404/412 before any work).


async def _namespace_target(tenant: str, namespace: str, uow: UowDep) -> PolicyTarget:
    return await namespace_target(uow, tenant, namespace)


async def _topic_target(tenant: str, namespace: str, topic: str, uow: UowDep) -> PolicyTarget:
    return await topic_target(uow, TopicName.parse(tenant, namespace, topic))


async def _subscription_target(
    tenant: str, namespace: str, topic: str, subName: str, uow: UowDep
) -> PolicyTarget:
    return await topic_target(uow, TopicName.parse(tenant, namespace, topic), subName)


def _namespace_reader(kind: str):
    async def get_rate(tenant: str, namespace: str, state: StateDep, caller: CallerDep) -> Response:
        return _rate_or_null(await read_namespace_rate(state, caller, tenant, namespace, kind))

    return get_rate


def _topic_reader(kind: str):
    async def get_rate(
        tenant: str,
        namespace: str,
        topic: str,
        state: StateDep,
        caller: CallerDep,
        applied: bool = APPLIED,
    ) -> Response:
        name = TopicName.parse(tenant, namespace, topic)
        return _rate_or_null(await read_topic_rate(state, caller, name, kind, None, applied))

    return get_rate


def _subscription_reader():
    async def get_rate(
        tenant: str,
        namespace: str,
        topic: str,
        subName: str,
        state: StateDep,
        caller: CallerDep,
        applied: bool = APPLIED,
    ) -> Response:
        name = TopicName.parse(tenant, namespace, topic)
        rate = await read_topic_rate(state, caller, name, DISPATCH_RATE, subName, applied)
        return _rate_or_null(rate)

    return get_rate


def _add_routes(path: str, level: str, kind: str, resolve_target, get_rate) -> None:
    TargetDep = Annotated[PolicyTarget, Depends(resolve_target)]

    async def set_rate(
        target: TargetDep, uow: UowDep, rate: DispatchRateBody = Body(...), dry_run: bool = DRY_RUN
    ) -> Response:
        await service.set_rate(uow, target, kind, rate.value())
        return await _write_answer(uow, target)

    async def remove_rate(target: TargetDep, uow: UowDep, dry_run: bool = DRY_RUN) -> Response:
        await service.remove_rate(uow, target, kind)
        return await _write_answer(uow, target)

    name = f"{level}_{kind}"
    router.add_api_route(
        path,
        get_rate,
        methods=["GET"],
        name=f"get_{name}",
        summary=f"Get the {level} {kind}",
        response_model=DispatchRateDocument | None,
    )
    router.add_api_route(
        path,
        set_rate,
        methods=["POST"],
        name=f"set_{name}",
        status_code=204,
        summary=f"Set the {level} {kind}",
        responses=DRY_RUN_ANSWER,
    )
    router.add_api_route(
        path,
        remove_rate,
        methods=["DELETE"],
        name=f"remove_{name}",
        status_code=204,
        summary=f"Remove the {level} {kind}",
        responses=DRY_RUN_ANSWER,
    )


for _kind in (DISPATCH_RATE, SUBSCRIPTION_DISPATCH_RATE):
    _add_routes(f"{NS}/{_kind}", "namespace", _kind, _namespace_target, _namespace_reader(_kind))
    _add_routes(f"{TOPIC}/{_kind}", "topic", _kind, _topic_target, _topic_reader(_kind))
_add_routes(
    f"{TOPIC}/{{subName}}/dispatchRate",
    "subscription",
    DISPATCH_RATE,
    _subscription_target,
    _subscription_reader(),
)


@router.get(f"{TOPIC}/effectiveDispatchRates", response_model=TopicProvenance)
async def effective_dispatch_rates(tenant: str, namespace: str, topic: str, uow: UowDep) -> dict:
    """Every limiter of the topic and its subscriptions: value, source level, combined limit."""
    target = await topic_target(uow, TopicName.parse(tenant, namespace, topic))
    [document] = await provenance_for(
        uow.session, namespace_id=target.namespace.id, topic_id=target.topic_id
    )
    return document
