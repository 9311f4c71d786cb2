"""The reads of the policy kinds: what a GET answers.

Dispatch rates come from the policy cache when fresh, else from the database; both paths
validate names and answer 404 in the same order and with the same reasons.  Every other kind
is read from its row, or with ``applied`` resolved through the levels (``models.flow_resolution``,
the functions the workers use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from api.limits import store
from api.limits.levels import Address
from api.limits.provenance import applied_limits
from api.policy_store.target import PolicyTarget
from api.state import AppState
from api.unit_of_work import Caller, UnitOfWork
from models.dispatch_rate import DispatchRate
from models.errors import NotFound, topic_not_found
from models.flow import QuotaType, value_to_json
from models.orm import DISPATCH_RATE
from sluice.protocol.names import TopicName, check_namespace, check_subscription

if TYPE_CHECKING:
    from api.limits.kinds import PolicyKind


async def read_topic_rate(
    state: AppState,
    caller: Caller,
    topic: TopicName,
    kind: str,
    subscription: str | None,
    applied: bool,
) -> DispatchRate | None:
    """The rate stored at (or, with ``applied``, resolved for) a topic or subscription."""
    cache = state.cache
    if cache.fresh:
        cache.hits += 1
        if topic.namespace_name not in cache.namespaces:
            raise NotFound("Namespace does not exist")
        if cache.topic_partitions(topic) is None:
            raise topic_not_found(topic)
        if subscription is not None:
            check_subscription(subscription)
        if applied:
            return cache.applied(topic, kind, subscription)
        return cache.rate(topic, kind, subscription)
    cache.misses += 1
    async with state.sessions() as session:
        uow = UnitOfWork(session, caller)
        target = await Address(topic.tenant, topic.namespace, topic, subscription).target(uow)
        if applied:
            return await store.applied_rate(uow, target, kind)
        return await store.read_rate(uow, target, kind)


async def read_namespace_rate(
    state: AppState, caller: Caller, tenant: str, namespace: str, kind: str
) -> DispatchRate | None:
    """The rate stored at a namespace."""
    cache = state.cache
    full = check_namespace(tenant, namespace)
    if cache.fresh:
        cache.hits += 1
        if full not in cache.namespaces:
            raise NotFound("Namespace does not exist")
        rates = cache.snapshot.namespaces.get(full)
        if rates is None:
            return None
        return rates.dispatch_rate if kind == DISPATCH_RATE else rates.subscription_dispatch_rate
    cache.misses += 1
    async with state.sessions() as session:
        uow = UnitOfWork(session, caller)
        target = await Address(tenant, namespace).target(uow)
        return await store.read_rate(uow, target, kind)


async def read_dispatch_rate(
    state: AppState, caller: Caller, address: Address, kind: PolicyKind, applied: bool
) -> Any:
    """A dispatch rate as JSON (or null): stored, or with ``applied`` resolved."""
    if address.topic is None:
        rate = await read_namespace_rate(
            state, caller, address.tenant, address.namespace, kind.name
        )
    else:
        rate = await read_topic_rate(
            state, caller, address.topic, kind.name, address.subscription, applied
        )
    return rate.to_json() if rate is not None else None


async def read_flow_policy(
    state: AppState, caller: Caller, address: Address, kind: PolicyKind, applied: bool
) -> Any:
    """A flow policy as JSON (or null): stored, or on a topic with ``applied`` resolved."""
    async with state.sessions() as session:
        uow = UnitOfWork(session, caller)
        target = await address.target(uow)
        return await kind.read(uow, target, kind, applied and target.topic is not None)


async def stored_or_applied(
    uow: UnitOfWork, target: PolicyTarget, kind: PolicyKind, applied: bool
) -> Any:
    """The value stored at the target, or the one its topic resolves to."""
    if applied:
        assert kind.resolved is not None
        return value_to_json(kind.resolved(await applied_limits(uow, target)).value)
    return await store.read_value(uow, target, kind.name)


async def quota_map(uow: UnitOfWork, target: PolicyTarget, _kind: PolicyKind, applied: bool) -> Any:
    """Stored quotas by type; with ``applied`` every type resolved through the levels."""
    if not applied:
        return await store.read_quota_map(uow, target)
    limits = await applied_limits(uow, target)
    return {t.value: limits.quotas[t].value.to_json() for t in QuotaType}
