"""Which partitions this worker owns.

``Ownership`` is the seam where partition leases plug in: the worker asks it whether it owns
a partition and which fencing token to present to Redis.  ``LocalOwnership`` owns every
partition (a single worker) and presents no token; ``workers.leases.LeaseOwnership`` shares
the partitions among a fleet of workers.  Ownership is given the worker's context and the
``OwnershipHooks`` it calls back through when it joins.
"""

from __future__ import annotations

from typing import Protocol

from models.settings import Settings
from sluice.protocol.names import TopicName
from workers.context import OwnershipHooks, WorkerContext
from workers.leases import LeaseOwnership


class Ownership(Protocol):
    """Decides and proves which partitions a worker may dispatch."""

    async def join(self, context: WorkerContext, hooks: OwnershipHooks) -> None:
        """Register in the fleet without taking partitions yet."""

    async def start(self) -> None:
        """Begin taking partitions (acquire leases, ...)."""

    async def stop(self) -> None:
        """Give everything up (release leases) before the worker exits."""

    def owns(self, partition: TopicName) -> bool:
        """True when this worker should dispatch ``partition``."""

    def token(self, partition: TopicName) -> str:
        """Fencing token that ``dispatch.lua`` checks ("" = no check)."""

    def lost(self, partition: TopicName) -> None:
        """Redis refused the token: the partition is no longer this worker's."""


class LocalOwnership:
    """One worker owns everything (it does not join the fleet: writes do not wait for it)."""

    async def join(self, context: WorkerContext, hooks: OwnershipHooks) -> None:
        """Nothing to register."""

    async def start(self) -> None:
        """Nothing to acquire."""

    async def stop(self) -> None:
        """Nothing to release."""

    def owns(self, partition: TopicName) -> bool:
        """Every partition."""
        return True

    def token(self, partition: TopicName) -> str:
        """No fencing."""
        return ""

    def lost(self, partition: TopicName) -> None:
        """Never happens without a token."""


def default_ownership(settings: Settings) -> Ownership:
    """The ownership the settings ask for: leases (default) or local."""
    if settings.worker_ownership == "local":
        return LocalOwnership()
    if settings.worker_ownership != "lease":
        raise ValueError(
            f"SLUICE_WORKER_OWNERSHIP must be 'lease' or 'local', not {settings.worker_ownership!r}"
        )
    return LeaseOwnership(settings.worker_lease_ttl_seconds, settings.effective_redis_url)
