"""What the parts of a worker are given, instead of the worker itself.

``WorkerContext`` holds what every part may use: the worker's id and settings, the dispatch
connection pool (``redis``) and the control connections (``control``: leases, heartbeats,
change events, so a busy pool never delays a heartbeat), the registered scripts, and a
read-only view of the policies.  ``SharedDispatch`` is what every dispatcher of the process
shares: the BROKER limiter, the dispatch gate, the alarm clock, the pipelined dispatch script
and the ``DispatchSettings`` in force (replaced, never changed, on each policy change).
``OwnershipHooks`` are the calls partition ownership makes back into the worker.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from redis.asyncio import Redis

from dataplane.scripts import Scripts
from models.settings import Settings
from sluice.protocol.names import TopicName
from workers.alarms import AlarmClock
from workers.gate import DispatchGate
from workers.limiter import RateLimiter
from workers.policy import PolicyView
from workers.scriptcall import PackedScript
from workers.tracing import DispatchTracer


@dataclass(frozen=True, slots=True)
class WorkerContext:
    """Connections, scripts, settings and the policy view of one worker."""

    worker_id: str
    settings: Settings
    redis: Redis
    control: Redis
    scripts: Scripts
    policy: PolicyView

    @property
    def consumer_timeout_ms(self) -> int:
        """How long a consumer may stay silent before it is released."""
        return int(self.settings.consumer_timeout_seconds * 1000)


@dataclass(frozen=True, slots=True)
class DispatchSettings:
    """The broker settings every dispatch step reads, taken once per policy change."""

    max_entries: int
    read_cap: int
    count_entries: bool
    round_robin_chunk: int
    skip_when_caught_up: bool
    reads_per_call: int
    delayed_strict: bool = True  # the tick of the topic's delayedDelivery applies when false

    @classmethod
    def of(cls, policy: PolicyView, settings: Settings) -> DispatchSettings:
        """The values in force now."""
        return cls(
            max_entries=policy.setting("dispatcherMaxReadBatchSize"),
            read_cap=policy.setting("dispatcherMaxReadSizeBytes"),
            count_entries=policy.setting("dispatchThrottlingOnBatchMessageEnabled"),
            round_robin_chunk=policy.setting("dispatcherMaxRoundRobinBatchSize"),
            skip_when_caught_up=not policy.setting("dispatchThrottlingOnNonBacklogConsumerEnabled"),
            reads_per_call=settings.worker_reads_per_call,
            delayed_strict=policy.setting("isDelayedDeliveryDeliverAtTimeStrict"),
        )


@dataclass(slots=True)
class SharedDispatch:
    """What every dispatcher of one process shares."""

    broker_limiter: RateLimiter
    gate: DispatchGate
    alarms: AlarmClock
    script: PackedScript  # dispatch.lua, calls of one loop turn pipelined
    settings: DispatchSettings
    # group_budget.lua, for the dispatchers of partitions in a resource group (None: none).
    group_script: PackedScript | None = None
    # The dispatch spans (workers.tracing), when SLUICE_WORKER_TRACING is on.
    tracer: DispatchTracer | None = None
    # Where dispatchers sleep for their SUBSCRIPTION quota's renewal: the worker's
    # ``workers.renewal.RenewalClock`` makes their calls for them; a plain alarm clock wakes
    # them for their own.
    renewals: AlarmClock = field(default_factory=AlarmClock)
    # Each owned partition's abuse limits as last written to Redis (awake or dormant), so a
    # runner that starts again or a policy change writes only what changed.
    limits_written: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OwnershipHooks:
    """How partition ownership reaches the rest of the worker."""

    partitions: Callable[[], list[TopicName]]  # every partition of every known topic
    rebalance: Callable[[], Awaitable[None]]  # run exactly the partitions owned now
    recover: Callable[[], Awaitable[bool]]  # re-read everything; True once caught up
    # Changes whenever ``partitions`` would answer differently (the catalog's version), so
    # the assignment is computed again only then; None: read ``partitions`` every cycle.
    partitions_version: Callable[[], int] | None = None
