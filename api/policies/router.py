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
from api.policies.service import DISPATCH_RATE, SUBSCRIPTION_DISPATCH_RATE, Target
from api.responses import JsonResponse, no_content
from api.unit_of_work import UnitOfWork
from models.dispatch_rate import DispatchRate
from models.names import TopicName

router = APIRouter(tags=["dispatch rate policies"])

NS = "/admin/v2/namespaces/{tenant}/{namespace}"
TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"
DRY_RUN = Query(False, alias="dryRun", description="validate and report, change nothing")
APPLIED = Query(False, description="resolve through namespace and broker levels")


async def _write_answer(uow: UnitOfWork, target: Target) -> Response:
    """204, or for a dry run 200 with the would-be limits of every affected topic."""
    if not uow.dry_run:
        return no_content()
    await uow.session.flush()
    if target.topic is not None:
        topics = await provenance_for(
            uow.session, namespace_id=target.namespace.id, topic_id=target.topic.id
        )
    else:
        topics = await provenance_for(uow.session, namespace_id=target.namespace.id)
    return JsonResponse({"dryRun": True, "changed": target.entity, "topics": topics})


def _rate_or_null(rate: DispatchRate | None) -> Response:
    return JsonResponse(rate.to_json() if rate is not None else None)


# Each route family gets a dependency that resolves its Target (404/412 before any work).


def _namespace_target(kind: str):
    async def target(tenant: str, namespace: str, uow: UowDep) -> Target:
        return await service.namespace_target(uow, tenant, namespace, kind)

    return target


def _topic_target(kind: str):
    async def target(tenant: str, namespace: str, topic: str, uow: UowDep) -> Target:
        name = TopicName.parse(tenant, namespace, topic)
        return await service.topic_target(uow, name, kind)

    return target


def _subscription_target():
    async def target(tenant: str, namespace: str, topic: str, subName: str, uow: UowDep) -> Target:
        name = TopicName.parse(tenant, namespace, topic)
        return await service.topic_target(uow, name, DISPATCH_RATE, subName)

    return target


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
    TargetDep = Annotated[Target, Depends(resolve_target)]

    async def set_rate(
        target: TargetDep, uow: UowDep, rate: DispatchRate = Body(...), dry_run: bool = DRY_RUN
    ) -> Response:
        await service.set_rate(uow, target, rate)
        return await _write_answer(uow, target)

    async def remove_rate(target: TargetDep, uow: UowDep, dry_run: bool = DRY_RUN) -> Response:
        await service.remove_rate(uow, target)
        return await _write_answer(uow, target)

    name = f"{level}_{kind}"
    router.add_api_route(
        path, get_rate, methods=["GET"], name=f"get_{name}", summary=f"Get the {level} {kind}"
    )
    router.add_api_route(
        path,
        set_rate,
        methods=["POST"],
        name=f"set_{name}",
        status_code=204,
        summary=f"Set the {level} {kind}",
    )
    router.add_api_route(
        path,
        remove_rate,
        methods=["DELETE"],
        name=f"remove_{name}",
        status_code=204,
        summary=f"Remove the {level} {kind}",
    )


for _kind in (DISPATCH_RATE, SUBSCRIPTION_DISPATCH_RATE):
    _add_routes(
        f"{NS}/{_kind}", "namespace", _kind, _namespace_target(_kind), _namespace_reader(_kind)
    )
    _add_routes(f"{TOPIC}/{_kind}", "topic", _kind, _topic_target(_kind), _topic_reader(_kind))
_add_routes(
    f"{TOPIC}/{{subName}}/dispatchRate",
    "subscription",
    DISPATCH_RATE,
    _subscription_target(),
    _subscription_reader(),
)


@router.get(f"{TOPIC}/effectiveDispatchRates")
async def effective_dispatch_rates(tenant: str, namespace: str, topic: str, uow: UowDep) -> dict:
    """Every limiter of the topic and its subscriptions: value, source level, combined limit."""
    name = TopicName.parse(tenant, namespace, topic)
    target = await service.topic_target(uow, name, DISPATCH_RATE)
    assert target.topic is not None
    [document] = await provenance_for(
        uow.session, namespace_id=target.namespace.id, topic_id=target.topic.id
    )
    return document
