"""Where a namespace, topic or subscription policy lives, looked up once per request.

A lookup answers 412 on a bad name and 404 when the namespace, topic or subscription's topic
does not exist, before any write.  Policies of a partition are stored under its base topic.
"""

from __future__ import annotations

from dataclasses import dataclass

from api.topic_rows import get_topic
from api.unit_of_work import UnitOfWork
from models.orm import Namespace, Topic
from models.repository import get_namespace
from sluice.protocol.names import TopicName, check_namespace, check_subscription


@dataclass(frozen=True, slots=True)
class PolicyTarget:
    """A namespace, a (base) topic, or one subscription of a topic."""

    namespace: Namespace
    namespace_name: str
    topic: Topic | None = None
    topic_name: TopicName | None = None
    subscription: str | None = None

    @property
    def level(self) -> str:
        """namespace, topic or subscription."""
        if self.subscription is not None:
            return "subscription"
        return "topic" if self.topic is not None else "namespace"

    @property
    def topic_id(self) -> int | None:
        """Id of the topic row, None for a namespace."""
        return self.topic.id if self.topic is not None else None

    @property
    def entity(self) -> str:
        """Name of the target in the audit log and events."""
        if self.topic_name is None:
            return self.namespace_name
        if self.subscription is not None:
            return f"{self.topic_name.full}#{self.subscription}"
        return self.topic_name.full

    def event_payload(self, policy: str) -> dict[str, object]:
        """The fields of a ``policy`` change event that say where it applies."""
        return {
            "level": self.level,
            "policy": policy,
            "namespace": self.namespace_name,
            "topic": self.topic_name.full if self.topic_name else None,
        }


async def namespace_target(uow: UnitOfWork, tenant: str, namespace: str) -> PolicyTarget:
    """Target a namespace; 412 on a bad name, 404 when it does not exist."""
    check_namespace(tenant, namespace)
    row = await get_namespace(uow.session, tenant, namespace)
    return PolicyTarget(row, f"{tenant}/{namespace}")


async def topic_target(
    uow: UnitOfWork, topic: TopicName, subscription: str | None = None
) -> PolicyTarget:
    """Target a topic (or one of its subscriptions), stored under the base topic name."""
    namespace, row = await get_topic(uow, topic)
    if subscription is not None:
        check_subscription(subscription)
    base = TopicName(topic.tenant, topic.namespace, row.name)
    return PolicyTarget(namespace, base.namespace_name, row, base, subscription)
