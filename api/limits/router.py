"""The routes of every policy kind, generated from the table in ``api.limits.kinds``.

Paths, bodies and status codes are Pulsar's: for each level a kind exists at, GET answers the
stored value (``null`` when none; on a topic ``applied=true`` resolves it through the levels),
POST stores it and DELETE removes it (removing nothing is not an error).  Beyond Pulsar:
``dryRun=true`` on a write answers 200 with the limits every affected topic would get and
changes nothing; ``effectiveDispatchRates`` and ``effectiveFlowControls`` show each resolved
limit and the level it came from.
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends
from starlette.responses import Response

from api.deps import CallerDep, StateDep, UowDep
from api.limits.kinds import (
    BACKLOG_QUOTA,
    CLIENT_RATE_KINDS,
    DELAYED_DELIVERY,
    DISPATCH_KINDS,
    DISPATCH_TAG,
    DURABLE_ACKS,
    FLOW_TAG,
    INT_KINDS,
    RATES_TAG,
    PolicyKind,
    flow_controls_json,
)
from api.limits.levels import (
    LEVELS,
    TOPIC_PATH,
    Address,
    TopicDep,
    applied_query,
    dry_run_query,
    stored_only,
)
from api.limits.provenance import applied_limits, provenance_for
from api.limits.schemas import EffectiveFlowControls, TopicProvenance
from api.limits.service import remove_policy, set_policy
from api.limits.values import Posted, Where
from api.policy_store.target import PolicyTarget
from api.responses import JsonResponse
from api.routing import SluiceRoute, SluiceRouter

# One router per OpenAPI tag: each is included in the app on its own.
ROUTERS = {
    tag: SluiceRouter(tags=[tag], route_class=SluiceRoute)
    for tag in (DISPATCH_TAG, FLOW_TAG, RATES_TAG)
}
DRY_RUN = Depends(dry_run_query)


def _handlers(kind: PolicyKind, level: str, segment: str) -> dict[str, Any]:
    """The GET, POST and DELETE handlers of one kind at one level."""
    address = Depends(LEVELS[level].address)
    target_param = Depends(LEVELS[level].target)
    applied_param = Depends(applied_query if level in kind.applied_levels else stored_only)
    body_param = Depends(kind.body_at(level))
    removal_param = Depends(kind.remove_query)
    where = Where(kind.name, level, segment)

    async def get_value(
        state: StateDep, caller: CallerDep, at: Address = address, applied: bool = applied_param
    ) -> Response:
        return JsonResponse(await kind.family.read(state, caller, at, kind, applied))

    def writer(posted_param, write) -> Any:
        async def write_value(
            uow: UowDep,
            target: PolicyTarget = target_param,
            posted: Posted = posted_param,
            dry_run: bool = DRY_RUN,
        ) -> Response:
            return await write(uow, target, posted)

        return write_value

    set_value = writer(
        body_param, lambda uow, target, posted: set_policy(uow, kind, target, posted, where)
    )
    remove_value = writer(
        removal_param, lambda uow, target, posted: remove_policy(uow, kind, target, posted)
    )

    return {"get": get_value, "set": set_value, "remove": remove_value}


METHODS = {"get": "GET", "set": "POST", "remove": "DELETE"}


def _routes(kind: PolicyKind, level: str) -> list[tuple[str, dict[str, Any]]]:
    """(verb, route arguments) of one kind's GET, POST and DELETE at one level."""
    segment = kind.segments[level]
    path = f"{LEVELS[level].prefix}/{segment}"
    dry_run_answer: dict[int | str, dict] = {
        200: {
            "model": kind.family.dry_run_model,
            "description": "dryRun=true: the limits the write would produce",
        }
    }
    handlers = _handlers(kind, level, segment)
    routes = []
    for verb, method in METHODS.items():
        name, summary, description = kind.naming(verb, level, segment, kind.name)
        route: dict[str, Any] = {
            "path": path + kind.read_suffix if verb == "get" else path,
            "endpoint": handlers[verb],
            "methods": [method],
            "name": name,
            "summary": summary,
        }
        if description is not None:
            route["description"] = description
        if verb == "get":
            route["response_model"] = kind.response_model
        else:
            route.update(status_code=204, responses=dry_run_answer)
        if verb == "set" and kind.request_body is not None:
            route["openapi_extra"] = kind.request_body
        routes.append((verb, route))
    return routes


def add_kinds(kinds: tuple[PolicyKind, ...], *, level_by_level: bool = False) -> None:
    """Add the routes of ``kinds``: kind by kind (each level in turn), or level by level."""
    if level_by_level:
        levels = dict.fromkeys(level for kind in kinds for level in kind.segments)
        pairs = [(kind, level) for level in levels for kind in kinds if level in kind.segments]
    else:
        pairs = [(kind, level) for kind in kinds for level in kind.segments]
    routes = [(kind, verb, route) for kind, level in pairs for verb, route in _routes(kind, level)]
    # A kind whose reads have a path of their own (backlogQuotaMap) lists them first.
    routes.sort(key=lambda entry: entry[0].reads_first and entry[1] != "get")
    for kind, _verb, route in routes:
        ROUTERS[kind.tag].add_api_route(**route)


# The published routes, in their order: dispatch rates, their provenance, flow controls,
# their provenance, publish and subscribe rates, durable acknowledgements, delayed delivery.
add_kinds(DISPATCH_KINDS)


@ROUTERS[DISPATCH_TAG].get(f"{TOPIC_PATH}/effectiveDispatchRates", response_model=TopicProvenance)
async def effective_dispatch_rates(target: TopicDep, uow: UowDep) -> dict:
    """Every limiter of the topic and its subscriptions: value, source level, combined limit."""
    [document] = await provenance_for(
        uow.session, namespace_id=target.namespace.id, topic_id=target.topic_id
    )
    return document


add_kinds((BACKLOG_QUOTA,))
add_kinds(INT_KINDS, level_by_level=True)


@ROUTERS[FLOW_TAG].get(
    f"{TOPIC_PATH}/effectiveFlowControls",
    summary="Resolved flow limits and their sources",
    response_model=EffectiveFlowControls,
)
async def effective_flow_controls(target: TopicDep, uow: UowDep) -> dict:
    """Every flow-control limit of the topic, with the level (topic, namespace, broker) it
    came from."""
    return {
        "topic": target.entity,
        "appliesPer": "partition",
        "flowControl": flow_controls_json(await applied_limits(uow, target)),
    }


add_kinds(CLIENT_RATE_KINDS)
add_kinds((DURABLE_ACKS,))
add_kinds((DELAYED_DELIVERY,))
