"""What the admin service builds at start-up and shares with every request."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from api.dataplane import DataPlane
from api.enforcement import Enforcement
from api.outbox import OutboxRelay
from api.policy_cache import PolicyCache
from api.reports.queue import ReportQueue
from models.settings import Settings


@dataclass
class AppState:
    """Engine, sessions, Redis client, outbox relay, data-plane access, policy cache, the
    workers' confirmations and the report-run queue."""

    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    redis: Redis
    relay: OutboxRelay
    data_plane: DataPlane
    cache: PolicyCache
    enforcement: Enforcement
    reports: ReportQueue

    @property
    def cluster(self) -> str:
        """Name of the local cluster."""
        return self.settings.cluster_name
