"""Hot reads of topic and subscription rates: from the policy cache when fresh, else the DB.

Both paths validate names and answer 404 in the same order and with the same reasons.
"""

from __future__ import annotations

from api.policies import service
from api.policy_store.target import namespace_target, topic_target
from api.state import AppState
from api.unit_of_work import Caller, UnitOfWork
from models.dispatch_rate import DispatchRate
from models.errors import NotFound
from models.orm import DISPATCH_RATE
from sluice.protocol.names import TopicName, check_namespace, check_subscription


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
            raise NotFound("Topic not found")
        if subscription is not None:
            check_subscription(subscription)
        if applied:
            return cache.applied(topic, kind, subscription)
        return cache.rate(topic, kind, subscription)
    cache.misses += 1
    async with state.sessions() as session:
        uow = UnitOfWork(session, caller)
        target = await topic_target(uow, topic, subscription)
        if applied:
            return await service.applied_rate(uow, target, kind)
        return await service.read_rate(uow, target, kind)


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
        target = await namespace_target(uow, tenant, namespace)
        return await service.read_rate(uow, target, kind)
