"""A point-in-time view of every stored dispatch and flow policy, queried by topic name.

The workers keep one of these in memory (rebuilt on resync, patched by change events) and the
admin service builds one per dry run; both turn it into ``PolicyInputs`` for the resolution
function.  Pure data: no database or Redis access here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from models.broker_config import BrokerConfig
from models.dispatch_rate import DispatchRate
from models.flow_resolution import FlowInputs
from models.resolution import PolicyInputs
from sluice.protocol.names import TopicName


@dataclass(frozen=True, slots=True)
class NamespaceRates:
    """The two namespace-level rates (None = not set)."""

    dispatch_rate: DispatchRate | None = None
    subscription_dispatch_rate: DispatchRate | None = None


@dataclass(frozen=True, slots=True)
class TopicRates:
    """The topic-level rates and the per-subscription (PIP-152) rates of one base topic."""

    dispatch_rate: DispatchRate | None = None
    subscription_dispatch_rate: DispatchRate | None = None
    subscriptions: Mapping[str, DispatchRate] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class PolicySnapshot:
    """Broker config plus rates keyed by ``tenant/namespace`` and by base topic full name.

    ``namespace_flow`` / ``topic_flow`` hold the flow-control policies (kind -> value) by the
    same keys.
    """

    broker: BrokerConfig = field(default_factory=BrokerConfig.from_overrides)
    namespaces: Mapping[str, NamespaceRates] = field(default_factory=dict)
    topics: Mapping[str, TopicRates] = field(default_factory=dict)
    namespace_flow: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    topic_flow: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def with_namespace(self, namespace: str, part: PolicySnapshot) -> PolicySnapshot:
        """This snapshot with every policy of ``tenant/namespace`` (the namespace's own and
        its topics') taken from ``part``, a snapshot of that namespace alone."""
        prefix = f"persistent://{namespace}/"

        def merged(
            mine: Mapping[str, Any], theirs: Mapping[str, Any], keep: Callable[[str], bool]
        ) -> dict[str, Any]:
            return {**{k: v for k, v in mine.items() if keep(k)}, **theirs}

        return replace(
            self,
            namespaces=merged(self.namespaces, part.namespaces, lambda k: k != namespace),
            topics=merged(self.topics, part.topics, lambda k: not k.startswith(prefix)),
            namespace_flow=merged(
                self.namespace_flow, part.namespace_flow, lambda k: k != namespace
            ),
            topic_flow=merged(self.topic_flow, part.topic_flow, lambda k: not k.startswith(prefix)),
        )

    def flow_inputs_for(self, topic: TopicName) -> FlowInputs:
        """Flow-control resolution inputs for a topic or any of its partitions."""
        base = topic.base
        return FlowInputs(
            broker=self.broker,
            namespace=self.namespace_flow.get(base.namespace_name, MappingProxyType({})),
            topic=self.topic_flow.get(base.full, MappingProxyType({})),
        )

    def inputs_for(self, topic: TopicName) -> PolicyInputs:
        """Resolution inputs for a topic or any of its partitions."""
        base = topic.base
        ns = self.namespaces.get(base.namespace_name, NamespaceRates())
        tp = self.topics.get(base.full, TopicRates())
        return PolicyInputs(
            broker=self.broker,
            namespace_dispatch_rate=ns.dispatch_rate,
            namespace_subscription_dispatch_rate=ns.subscription_dispatch_rate,
            topic_dispatch_rate=tp.dispatch_rate,
            topic_subscription_dispatch_rate=tp.subscription_dispatch_rate,
            subscription_dispatch_rates=tp.subscriptions,
        )
