"""Routes of the flow-control policies: backlog quota, max unacked messages, message TTL, and
the abuse limits (``maxTopicsPerNamespace``, ``maxSubscriptionsPerTopic``, ``maxProducers``,
``maxConsumers``, ``maxConsumersPerSubscription``, ``maxMessageSize``).

Paths, bodies and status codes are Pulsar's: quotas take a ``BacklogQuota`` object and a
``backlogQuotaType`` query parameter; the other policies take a bare integer (the topic TTL
also as ``?messageTTL=N``, as ``pulsar-admin`` sends it).  As for dispatch
rates, ``dryRun=true`` on a write answers 200 with the limits every affected topic would get,
and ``effectiveFlowControls`` shows each resolved limit and the level it came from.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query
from starlette.responses import Response

from api.deps import UowDep
from api.flow import service
from api.flow.schemas import EffectiveFlowControls, FlowDryRun
from api.policy_store.dry_run import write_answer
from api.policy_store.target import PolicyTarget, namespace_target, topic_target
from api.responses import JsonResponse
from api.routing import SluiceRoute
from api.schemas import BacklogQuotaDocument
from api.unit_of_work import UnitOfWork
from models.abuse import (
    COUNT_KINDS,
    MAX_CONSUMERS_PER_SUBSCRIPTION,
    MAX_CONSUMERS_PER_TOPIC,
    MAX_MESSAGE_SIZE,
    MAX_PRODUCERS_PER_TOPIC,
    MAX_SUBSCRIPTIONS_PER_TOPIC,
    MAX_TOPICS_PER_NAMESPACE,
    check_count,
    check_message_size,
)
from models.errors import InvalidInput
from models.flow import (
    MAX_UNACKED_PER_CONSUMER,
    MAX_UNACKED_PER_SUBSCRIPTION,
    MESSAGE_TTL,
    BacklogQuotaBody,
    QuotaType,
    check_max_unacked,
    check_ttl,
    parse_quota_type,
    quota_kind,
)
from models.flow_resolution import FlowLimits
from sluice.protocol.names import TopicName

router = APIRouter(tags=["flow control policies"], route_class=SluiceRoute)

NS = "/admin/v2/namespaces/{tenant}/{namespace}"
TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"
DRY_RUN = Query(False, alias="dryRun", description="validate and report, change nothing")
APPLIED = Query(False, description="resolve through namespace and broker levels")
QUOTA_TYPE = Query(None, alias="backlogQuotaType", description="destination_storage (default)")
RAW_BODY = Body(None)
DRY_RUN_ANSWER: dict[int | str, dict] = {
    200: {"model": FlowDryRun, "description": "dryRun=true: the limits the write would produce"}
}
QuotaMap = dict[str, BacklogQuotaDocument]
# The integer policies read their body raw (a non-integer is 400, a negative one 412, as in
# Pulsar); the schema says what they take.
INT_BODY = {
    "requestBody": {"content": {"application/json": {"schema": {"type": "integer", "minimum": 0}}}}
}


async def namespace_dep(tenant: str, namespace: str, uow: UowDep) -> PolicyTarget:
    return await namespace_target(uow, tenant, namespace)


async def topic_dep(tenant: str, namespace: str, topic: str, uow: UowDep) -> PolicyTarget:
    return await topic_target(uow, TopicName.parse(tenant, namespace, topic))


NamespaceDep = Annotated[PolicyTarget, Depends(namespace_dep)]
TopicDep = Annotated[PolicyTarget, Depends(topic_dep)]


async def write_flow_answer(uow: UnitOfWork, target: PolicyTarget) -> Response:
    """204, or for a dry run 200 with the would-be flow limits of every affected topic."""

    async def topics() -> list[dict]:
        return await service.flow_provenance_for(
            uow.session, namespace_id=target.namespace.id, topic_id=target.topic_id
        )

    return await write_answer(uow, topics, changed=target.entity)


def _required(body: Any) -> Any:
    if body is None:
        raise InvalidInput("Request body is required")
    return body


# --- backlog quota ------------------------------------------------------------------------


@router.get(
    f"{NS}/backlogQuotaMap", summary="Get the namespace backlog quotas", response_model=QuotaMap
)
async def get_namespace_quotas(target: NamespaceDep, uow: UowDep) -> dict:
    """Stored quotas by type (``{}`` when none)."""
    return await service.read_quota_map(uow, target)


@router.get(
    f"{TOPIC}/backlogQuotaMap", summary="Get the topic backlog quotas", response_model=QuotaMap
)
async def get_topic_quotas(target: TopicDep, uow: UowDep, applied: bool = APPLIED) -> dict:
    """Stored quotas by type; with ``applied`` every type resolved through the levels."""
    if not applied:
        return await service.read_quota_map(uow, target)
    limits = await service.applied_limits(uow, target)
    return {t.value: limits.quotas[t].value.to_json() for t in QuotaType}


async def _set_quota(
    uow: UnitOfWork, target: PolicyTarget, quota: BacklogQuotaBody, quota_type: str | None
):
    kind = quota_kind(parse_quota_type(quota_type))
    await service.set_value(uow, target, kind, quota.value())
    return await write_flow_answer(uow, target)


async def _remove_quota(uow: UnitOfWork, target: PolicyTarget, quota_type: str | None):
    await service.remove_value(uow, target, quota_kind(parse_quota_type(quota_type)))
    return await write_flow_answer(uow, target)


@router.post(
    f"{NS}/backlogQuota",
    status_code=204,
    summary="Set a namespace backlog quota",
    responses=DRY_RUN_ANSWER,
)
async def set_namespace_quota(
    target: NamespaceDep,
    uow: UowDep,
    quota: BacklogQuotaBody = Body(...),
    quota_type: str | None = QUOTA_TYPE,
    dry_run: bool = DRY_RUN,
) -> Response:
    return await _set_quota(uow, target, quota, quota_type)


@router.delete(
    f"{NS}/backlogQuota",
    status_code=204,
    summary="Remove a namespace backlog quota",
    responses=DRY_RUN_ANSWER,
)
async def remove_namespace_quota(
    target: NamespaceDep, uow: UowDep, quota_type: str | None = QUOTA_TYPE, dry_run: bool = DRY_RUN
) -> Response:
    return await _remove_quota(uow, target, quota_type)


@router.post(
    f"{TOPIC}/backlogQuota",
    status_code=204,
    summary="Set a topic backlog quota",
    responses=DRY_RUN_ANSWER,
)
async def set_topic_quota(
    target: TopicDep,
    uow: UowDep,
    quota: BacklogQuotaBody = Body(...),
    quota_type: str | None = QUOTA_TYPE,
    dry_run: bool = DRY_RUN,
) -> Response:
    return await _set_quota(uow, target, quota, quota_type)


@router.delete(
    f"{TOPIC}/backlogQuota",
    status_code=204,
    summary="Remove a topic backlog quota",
    responses=DRY_RUN_ANSWER,
)
async def remove_topic_quota(
    target: TopicDep, uow: UowDep, quota_type: str | None = QUOTA_TYPE, dry_run: bool = DRY_RUN
) -> Response:
    return await _remove_quota(uow, target, quota_type)


# --- integer policies: max unacked, message TTL, abuse limits --------------------------------


def _applied_int(limits: FlowLimits, kind: str) -> int:
    abuse = limits.abuse
    return {
        MAX_UNACKED_PER_SUBSCRIPTION: limits.max_unacked_per_subscription,
        MAX_UNACKED_PER_CONSUMER: limits.max_unacked_per_consumer,
        MESSAGE_TTL: limits.message_ttl,
        MAX_TOPICS_PER_NAMESPACE: abuse.max_topics_per_namespace,
        MAX_SUBSCRIPTIONS_PER_TOPIC: abuse.max_subscriptions_per_topic,
        MAX_PRODUCERS_PER_TOPIC: abuse.max_producers_per_topic,
        MAX_CONSUMERS_PER_TOPIC: abuse.max_consumers_per_topic,
        MAX_CONSUMERS_PER_SUBSCRIPTION: abuse.max_consumers_per_subscription,
        MAX_MESSAGE_SIZE: abuse.max_message_size,
    }[kind].value


async def _check(uow: UnitOfWork, kind: str, name: str, level: str, value: Any) -> int:
    """The posted value, validated with Pulsar's rules and reasons for its path."""
    if kind == MESSAGE_TTL:
        return check_ttl(value)
    if kind == MAX_MESSAGE_SIZE:
        return check_message_size(value, await service.broker_setting(uow, MAX_MESSAGE_SIZE))
    if kind in COUNT_KINDS:
        return check_count(value, name, level)
    return check_max_unacked(value, kind)


def _add_int_routes(path: str, kind: str, level: str, target_dep) -> None:
    target_param = Depends(target_dep)
    name = path.rsplit("/", 1)[1]

    async def get_value(
        uow: UowDep, target: PolicyTarget = target_param, applied: bool = APPLIED
    ) -> Response:
        if applied and target.topic is not None:
            limits = await service.applied_limits(uow, target)
            return JsonResponse(_applied_int(limits, kind))
        return JsonResponse(await service.read_value(uow, target, kind))

    async def set_value(
        uow: UowDep,
        target: PolicyTarget = target_param,
        body: Any = RAW_BODY,
        dry_run: bool = DRY_RUN,
    ) -> Response:
        value = await _check(uow, kind, name, level, _required(body))
        await service.set_value(uow, target, kind, value)
        return await write_flow_answer(uow, target)

    async def set_ttl(
        uow: UowDep,
        target: PolicyTarget = target_param,
        body: Any = RAW_BODY,
        message_ttl: int | None = Query(None, alias="messageTTL"),
        dry_run: bool = DRY_RUN,
    ) -> Response:
        # pulsar-admin sends the topic TTL as ?messageTTL=N; a body works too, not both.
        if body is not None and message_ttl is not None:
            raise InvalidInput("Give the message TTL as the body or as messageTTL, not both")
        raw = body if body is not None else message_ttl
        value = await _check(uow, kind, name, level, _required(raw))
        await service.set_value(uow, target, kind, value)
        return await write_flow_answer(uow, target)

    async def remove_value(
        uow: UowDep, target: PolicyTarget = target_param, dry_run: bool = DRY_RUN
    ) -> Response:
        await service.remove_value(uow, target, kind)
        return await write_flow_answer(uow, target)

    router.add_api_route(
        path,
        get_value,
        methods=["GET"],
        name=f"get_{level}_{name}",
        summary=f"Get {name}",
        response_model=int | None,
    )
    router.add_api_route(
        path,
        set_ttl if kind == MESSAGE_TTL and level == "topic" else set_value,
        methods=["POST"],
        name=f"set_{level}_{name}",
        status_code=204,
        summary=f"Set {name}",
        responses=DRY_RUN_ANSWER,
        openapi_extra=INT_BODY,
    )
    router.add_api_route(
        path,
        remove_value,
        methods=["DELETE"],
        name=f"remove_{level}_{name}",
        status_code=204,
        summary=f"Remove {name}",
        responses=DRY_RUN_ANSWER,
    )


for _path, _kind in (
    ("maxUnackedMessagesPerSubscription", MAX_UNACKED_PER_SUBSCRIPTION),
    ("maxUnackedMessagesPerConsumer", MAX_UNACKED_PER_CONSUMER),
    ("messageTTL", MESSAGE_TTL),
    ("maxTopicsPerNamespace", MAX_TOPICS_PER_NAMESPACE),
    ("maxSubscriptionsPerTopic", MAX_SUBSCRIPTIONS_PER_TOPIC),
    ("maxProducersPerTopic", MAX_PRODUCERS_PER_TOPIC),
    ("maxConsumersPerTopic", MAX_CONSUMERS_PER_TOPIC),
    ("maxConsumersPerSubscription", MAX_CONSUMERS_PER_SUBSCRIPTION),
):
    _add_int_routes(f"{NS}/{_path}", _kind, "namespace", namespace_dep)
for _path, _kind in (
    ("maxUnackedMessagesOnSubscription", MAX_UNACKED_PER_SUBSCRIPTION),
    ("maxUnackedMessagesOnConsumer", MAX_UNACKED_PER_CONSUMER),
    ("messageTTL", MESSAGE_TTL),
    ("maxSubscriptionsPerTopic", MAX_SUBSCRIPTIONS_PER_TOPIC),
    ("maxProducers", MAX_PRODUCERS_PER_TOPIC),
    ("maxConsumers", MAX_CONSUMERS_PER_TOPIC),
    ("maxConsumersPerSubscription", MAX_CONSUMERS_PER_SUBSCRIPTION),
    ("maxMessageSize", MAX_MESSAGE_SIZE),
):
    _add_int_routes(f"{TOPIC}/{_path}", _kind, "topic", topic_dep)


@router.get(
    f"{TOPIC}/effectiveFlowControls",
    summary="Resolved flow limits and their sources",
    response_model=EffectiveFlowControls,
)
async def effective_flow_controls(target: TopicDep, uow: UowDep) -> dict:
    """Every flow-control limit of the topic, with the level (topic, namespace, broker) it
    came from."""
    return {
        "topic": target.entity,
        "appliesPer": "partition",
        "flowControl": service.limits_json(await service.applied_limits(uow, target)),
    }
