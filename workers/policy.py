"""The worker's view of every stored policy, and the limits it resolves for each limiter.

Loaded in full from the database at start, on every change event and periodically (so a
missed event heals); resolution itself is ``models.resolution.resolve_limits`` (dispatch
rates) and ``models.flow_resolution.resolve_flow`` (flow controls), the same pure functions
the admin service uses for ``applied=true``.

Only the worker reloads it.  Its parts see it through ``PolicyView`` (read only), and a
partition runner does not read it at all: on every change the worker hands each runner a
``PartitionLimits``, the partition's own resolution inputs and flow limits, from which the
runner resolves its subscriptions' limits (they depend on its subscriptions and measured
publish rate, which only the runner knows).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from models.abuse import MAX_TOPICS_PER_NAMESPACE
from models.broker_config import BrokerConfig
from models.db import without_transaction
from models.flow_resolution import FlowLimits, resolve_flow
from models.repository import load_broker_config, load_snapshot
from models.resolution import EffectiveLimits, PolicyInputs, PublishRate, resolve_limits
from models.resource_groups import GroupBinding, GroupSnapshot, load_group_snapshot
from models.snapshot import PolicySnapshot
from sluice.protocol.names import TopicName


@dataclass(frozen=True, slots=True)
class PartitionLimits:
    """What a policy change hands down to one partition: its inputs and flow limits."""

    inputs: PolicyInputs
    flow: FlowLimits
    group: GroupBinding | None = None  # the resource group that applies, if any

    def resolve(
        self, subscription: str | None = None, publish_rate: PublishRate = PublishRate()
    ) -> EffectiveLimits:
        """Resolved BROKER, TOPIC and (if named) SUBSCRIPTION limiters."""
        return resolve_limits(self.inputs, subscription, publish_rate)


class PolicyView(Protocol):
    """What the parts of a worker may read of the policies (never reload)."""

    @property
    def version(self) -> int:
        """Grows on every reload."""
        ...

    @property
    def broker(self) -> BrokerConfig:
        """Broker configuration in force."""
        ...

    def setting(self, name: str) -> Any:
        """A typed broker setting."""
        ...

    def limits(
        self,
        partition: TopicName,
        subscription: str | None = None,
        publish_rate: PublishRate = PublishRate(),
    ) -> EffectiveLimits:
        """Resolved limiters of a partition."""
        ...

    def for_partition(self, partition: TopicName) -> PartitionLimits:
        """What a runner of ``partition`` is handed."""
        ...

    def namespace_topic_limits(self) -> dict[str, int]:
        """``maxTopicsPerNamespace`` of each namespace that sets its own (``tenant/ns``)."""
        ...

    def group(self, partition: TopicName) -> GroupBinding | None:
        """The resource group that applies to a topic or partition."""
        ...


class PolicyState:
    """The current policy snapshot; ``version`` grows on every reload."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions
        self.snapshot = PolicySnapshot()
        self.groups = GroupSnapshot()
        self.version = 0
        self._flow: dict[str, FlowLimits] = {}
        # Reads and swaps of the snapshot never overlap, so an older read can never replace
        # a newer one (a periodic full reload racing a change event).
        self._lock = asyncio.Lock()

    @property
    def broker(self) -> BrokerConfig:
        """Broker configuration in force."""
        return self.snapshot.broker

    async def reload(self) -> bool:
        """Read every policy and the broker configuration again; whether anything differed
        from what was in force (the same again keeps the snapshot, its version and the
        limits resolved from it)."""
        async with self._lock, self.sessions() as session:
            await without_transaction(session)
            snapshot = await load_snapshot(session)
            groups = await load_group_snapshot(session)
            if snapshot == self.snapshot and groups == self.groups:
                return False
            self.groups = groups
            self._swap(snapshot)
            return True

    async def reload_groups(self) -> None:
        """Read the resource groups and their attachments again (a ``resourcegroup`` event)."""
        async with self._lock, self.sessions() as session:
            await without_transaction(session)
            self.groups = await load_group_snapshot(session)
            self.version += 1

    async def reload_parts(self, namespaces: set[str], broker: bool) -> None:
        """Read again only the policies of some namespaces (``tenant/ns``) and, if asked, the
        broker configuration: what a change event names."""
        async with self._lock, self.sessions() as session:
            await without_transaction(session)
            snapshot = self.snapshot
            if broker:
                snapshot = replace(snapshot, broker=await load_broker_config(session))
            for namespace in sorted(namespaces):
                # A namespace that no longer exists has no rows: an empty part.
                part = await load_snapshot(
                    session, namespace_name=namespace, broker=snapshot.broker
                )
                snapshot = snapshot.with_namespace(namespace, part)
            self._swap(snapshot)

    def _swap(self, snapshot: PolicySnapshot) -> None:
        self.snapshot = snapshot
        self.version += 1
        self._flow = {}

    def limits(
        self,
        partition: TopicName,
        subscription: str | None = None,
        publish_rate: PublishRate = PublishRate(),
    ) -> EffectiveLimits:
        """Resolved BROKER, TOPIC and (if named) SUBSCRIPTION limiters of a partition."""
        return resolve_limits(self.snapshot.inputs_for(partition), subscription, publish_rate)

    def flow(self, partition: TopicName) -> FlowLimits:
        """Resolved flow-control limits (backlog quota, max unacked, TTL) of a partition."""
        base = partition.base.full
        limits = self._flow.get(base)
        if limits is None:
            limits = resolve_flow(self.snapshot.flow_inputs_for(partition))
            self._flow[base] = limits
        return limits

    def for_partition(self, partition: TopicName) -> PartitionLimits:
        """The inputs and flow limits of one partition, to hand to its runner."""
        return PartitionLimits(
            self.snapshot.inputs_for(partition),
            self.flow(partition),
            self.groups.binding_for(partition),
        )

    def namespace_topic_limits(self) -> dict[str, int]:
        """``maxTopicsPerNamespace`` of each namespace that sets its own (``tenant/ns``)."""
        return {
            namespace: int(values[MAX_TOPICS_PER_NAMESPACE])
            for namespace, values in self.snapshot.namespace_flow.items()
            if MAX_TOPICS_PER_NAMESPACE in values
        }

    def setting(self, name: str) -> Any:
        """A typed broker setting."""
        return self.snapshot.broker.get(name)

    def group(self, partition: TopicName) -> GroupBinding | None:
        """The resource group that applies to a topic or partition."""
        return self.groups.binding_for(partition)
