"""Building one part of a worker without the worker: its context on a real Redis."""

from __future__ import annotations

import time

from redis.asyncio import Redis

from dataplane.scripts import register_scripts
from models.resolution import Limiter
from models.settings import Settings
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import DISPATCH, DISPATCH_MANY
from workers.alarms import AlarmClock
from workers.context import DispatchSettings, SharedDispatch, WorkerContext
from workers.gate import DispatchGate
from workers.limiter import RateLimiter
from workers.policy import PolicyState
from workers.renewal import RenewalClock
from workers.scriptcall import PackedScript

ANY_PARTITION = TopicName("_", "_", "_")  # the BROKER limiter does not depend on it


def make_context(
    settings: Settings, redis: Redis, worker_id: str = "unit", sessions=None
) -> WorkerContext:
    """A context whose policy view holds the defaults (nothing loaded)."""
    return WorkerContext(
        worker_id, settings, redis, redis, register_scripts(redis), PolicyState(sessions)
    )


def make_shared(context: WorkerContext) -> SharedDispatch:
    """What the dispatchers of one process share, with the broker limits in force."""
    policy = context.policy
    assert isinstance(policy, PolicyState)
    limiter = RateLimiter(Limiter.BROKER, time.monotonic())
    limiter.apply(policy.limits(ANY_PARTITION).broker, time.monotonic())
    return SharedDispatch(
        broker_limiter=limiter,
        gate=DispatchGate(),
        alarms=AlarmClock(),
        renewals=RenewalClock(),
        script=PackedScript(context.redis, DISPATCH.source, DISPATCH_MANY.source),
        settings=DispatchSettings.of(policy, context.settings),
    )
