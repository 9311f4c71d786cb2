"""The levels a policy kind exists at, and the one target dependency of each.

A level is a path prefix and a dependency that resolves the ``PolicyTarget`` under it before
any work (412 on a bad name, 404 when it does not exist).  Reads take an ``Address`` instead:
the names only, checked the same way, so that a read the policy cache can answer touches no
database.  Also here: the query parameters every write (``dryRun``) and every topic read
(``applied``) takes, as dependencies, so that a route's own parameters come first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query

from api.deps import UowDep
from api.policy_store.target import PolicyTarget, namespace_target, topic_target
from api.unit_of_work import UnitOfWork
from sluice.protocol.names import TopicName, check_namespace

NAMESPACE = "namespace"
TOPIC = "topic"
SUBSCRIPTION = "subscription"

NS_PATH = "/admin/v2/namespaces/{tenant}/{namespace}"
TOPIC_PATH = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"

DRY_RUN = Query(False, alias="dryRun", description="validate and report, change nothing")
APPLIED = Query(False, description="resolve through namespace and broker levels")


@dataclass(frozen=True, slots=True)
class Address:
    """The names a request's path gives: a namespace, a topic, or one of its subscriptions."""

    tenant: str
    namespace: str
    topic: TopicName | None = None
    subscription: str | None = None

    async def target(self, uow: UnitOfWork) -> PolicyTarget:
        """Where the policy lives (404 when it does not exist)."""
        if self.topic is None:
            return await namespace_target(uow, self.tenant, self.namespace)
        return await topic_target(uow, self.topic, self.subscription)


async def namespace_address(tenant: str, namespace: str) -> Address:
    check_namespace(tenant, namespace)
    return Address(tenant, namespace)


async def topic_address(tenant: str, namespace: str, topic: str) -> Address:
    return Address(tenant, namespace, TopicName.parse(tenant, namespace, topic))


async def subscription_address(tenant: str, namespace: str, topic: str, subName: str) -> Address:
    return Address(tenant, namespace, TopicName.parse(tenant, namespace, topic), subName)


async def namespace_dep(tenant: str, namespace: str, uow: UowDep) -> PolicyTarget:
    return await namespace_target(uow, tenant, namespace)


async def topic_dep(tenant: str, namespace: str, topic: str, uow: UowDep) -> PolicyTarget:
    return await topic_target(uow, TopicName.parse(tenant, namespace, topic))


async def subscription_dep(
    tenant: str, namespace: str, topic: str, subName: str, uow: UowDep
) -> PolicyTarget:
    return await topic_target(uow, TopicName.parse(tenant, namespace, topic), subName)


@dataclass(frozen=True, slots=True)
class Level:
    """A level policies exist at: its path prefix, its target and its address dependency."""

    name: str
    prefix: str
    target: Callable
    address: Callable


LEVELS = {
    NAMESPACE: Level(NAMESPACE, NS_PATH, namespace_dep, namespace_address),
    TOPIC: Level(TOPIC, TOPIC_PATH, topic_dep, topic_address),
    SUBSCRIPTION: Level(
        SUBSCRIPTION, TOPIC_PATH + "/{subName}", subscription_dep, subscription_address
    ),
}
TopicDep = Annotated[PolicyTarget, Depends(topic_dep)]


async def dry_run_query(dry_run: bool = DRY_RUN) -> bool:
    """``dryRun``: the unit of work reads it; declared here for validation and the schema."""
    return dry_run


async def applied_query(applied: bool = APPLIED) -> bool:
    """``applied``: resolve through the levels instead of reading the stored value."""
    return applied


async def stored_only() -> bool:
    """A read that takes no ``applied`` (a namespace dispatch rate)."""
    return False
