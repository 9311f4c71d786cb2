"""The worker's view of every stored policy, and the limits it resolves for each limiter.

Loaded in full from the database at start, on every change event and periodically (so a
missed event heals); resolution itself is ``models.resolution.resolve_limits`` (dispatch
rates) and ``models.flow_resolution.resolve_flow`` (flow controls), the same pure functions
the admin service uses for ``applied=true``.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from models.broker_config import BrokerConfig
from models.flow_resolution import FlowLimits, resolve_flow
from models.names import TopicName
from models.repository import load_snapshot
from models.resolution import EffectiveLimits, PublishRate, resolve_limits
from models.snapshot import PolicySnapshot


class PolicyState:
    """The current policy snapshot; ``version`` grows on every reload."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions
        self.snapshot = PolicySnapshot()
        self.version = 0
        self._flow: dict[str, FlowLimits] = {}

    @property
    def broker(self) -> BrokerConfig:
        """Broker configuration in force."""
        return self.snapshot.broker

    async def reload(self) -> None:
        """Read every policy and the broker configuration again."""
        async with self.sessions() as session:
            self.snapshot = await load_snapshot(session)
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

    def setting(self, name: str):
        """A typed broker setting."""
        return self.snapshot.broker.get(name)
