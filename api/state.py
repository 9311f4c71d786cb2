"""What the admin service builds at start-up and shares with every request."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from api.auth import AccessControl
from api.dataplane import DataPlane
from api.enforcement import Enforcement
from api.metrics import AdminMetrics
from api.outbox import OutboxRelay
from api.policy_cache import PolicyCache
from api.reports.queue import ReportQueue
from api.websocket.grants import GrantedSockets
from dataplane.sessions import Sessions
from models.settings import Settings

if TYPE_CHECKING:
    from sluice import Client


@dataclass
class SharedClient:
    """The process's ``sluice.Client`` for WebSocket connections, made on first use, and the
    connections admitted by a grant (closed when it is revoked)."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    client: Client | None = None
    granted: GrantedSockets = field(default_factory=GrantedSockets)


@dataclass
class AppState:
    """Engine, sessions, Redis client, outbox relay, data-plane access, policy cache, the
    workers' confirmations, the report-run queue, access control, the data plane's
    credential manager (authentication on) and the WebSocket connections' client."""

    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    redis: Redis
    relay: OutboxRelay
    data_plane: DataPlane
    cache: PolicyCache
    enforcement: Enforcement
    reports: ReportQueue
    access_control: AccessControl
    # Gives clients Redis users of their own and refreshes their grants (api.sessions).
    dataplane_acl: Sessions | Any | None = None
    websocket: SharedClient = field(default_factory=SharedClient)
    metrics: AdminMetrics = field(default_factory=AdminMetrics.create)

    @property
    def cluster(self) -> str:
        """Name of the local cluster."""
        return self.settings.cluster_name
