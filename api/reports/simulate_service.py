"""The limit simulator's answer: recorded traffic of a window (``api.reports.recorded``)
replayed under a proposed limit (``models.simulation``), per subscription in the scope of the
limit's level."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from redis.asyncio import Redis

from api.reports.advice_schemas import SimulateRequest
from api.reports.recorded import recorded_intervals
from api.reports.service import since_moment
from api.unit_of_work import UnitOfWork
from models.errors import InvalidInput
from models.repository import get_namespace
from models.simulation import RecordedInterval, Simulation, observed_capacity, simulate
from sluice.protocol.names import TopicName, check_subscription


def _scope(body: SimulateRequest) -> tuple[str | None, str | None]:
    """The topic (full name) and subscription a level's limit covers (None: all)."""
    if body.level == "namespace":
        return None, None
    if not body.topic:
        raise InvalidInput(f"A {body.level} limit needs a topic")
    topic = (
        TopicName.from_full(body.topic).full
        if "://" in body.topic
        else TopicName.parse(body.tenant, body.namespace, body.topic).full
    )
    if body.level == "topic":
        return topic, None
    if body.subscription is None:
        raise InvalidInput("A subscription limit needs a subscription")
    return topic, check_subscription(body.subscription)


def _figures(delivered: int, seconds: float, throttled: float, backlog: int) -> dict[str, Any]:
    return {
        "delivered": delivered,
        "deliveredRate": delivered / seconds if seconds else 0.0,
        "throttledSeconds": throttled,
        "backlogEnd": backlog,
    }


def subscription_json(
    topic: str, subscription: str, recorded: list[RecordedInterval], run: Simulation, **extra
) -> dict[str, Any]:
    """One subscription's simulation as JSON."""
    seconds = sum(i.seconds for i in recorded)
    last = run.intervals[-1]
    throttled = sum(i.seconds for i in recorded if i.throttled)
    return {
        "topic": topic,
        "subscription": subscription,
        **extra,
        "initialBacklog": run.initial_backlog,
        "published": sum(i.published for i in recorded),
        "seconds": seconds,
        "actual": _figures(run.delivered, seconds, throttled, last.backlog),
        "simulated": _figures(
            run.simulated_delivered,
            seconds,
            run.simulated_throttled_seconds,
            last.simulated_backlog,
        ),
        "intervals": [
            {
                "end": datetime.fromtimestamp(i.end, UTC).isoformat(),
                "seconds": i.seconds,
                "published": i.published,
                "delivered": i.delivered,
                "backlog": i.backlog,
                "simulatedDelivered": i.simulated_delivered,
                "simulatedBacklog": i.simulated_backlog,
                "simulatedThrottledSeconds": i.simulated_throttled_seconds,
            }
            for i in run.intervals
        ],
    }


async def simulation(
    uow: UnitOfWork, redis: Redis, lake: str, body: SimulateRequest
) -> dict[str, Any]:
    """Replay the window under the proposed limit, every subscription in the level's scope."""
    await get_namespace(uow.session, body.tenant, body.namespace)
    topic, subscription = _scope(body)
    since = since_moment(body.since)
    until = since_moment(body.until) if body.until else datetime.now(UTC)
    if until <= since:
        raise InvalidInput("Invalid window: until must be after since")
    recorded = await recorded_intervals(lake, redis, body.tenant, body.namespace, since, until)
    subscriptions = []
    for (name, sub), intervals in sorted(recorded.items()):
        if (topic and name != topic) or (subscription and sub != subscription):
            continue
        partitions = max(i.partitions for i in intervals)
        capacity = body.capacity if body.capacity is not None else observed_capacity(intervals)
        run = simulate(
            intervals,
            permits=body.dispatchThrottlingRateInMsg,
            period=float(body.ratePeriodInSecond),
            partitions=partitions,
            capacity=capacity,
        )
        subscriptions.append(
            subscription_json(
                name,
                sub,
                intervals,
                run,
                partitions=partitions,
                permitsPerPartition=body.dispatchThrottlingRateInMsg,
                capacity=capacity,
            )
        )
    return {
        "tenant": body.tenant,
        "namespace": body.namespace,
        "level": body.level,
        "since": since.isoformat(),
        "until": until.isoformat(),
        "dispatchThrottlingRateInMsg": body.dispatchThrottlingRateInMsg,
        "ratePeriodInSecond": body.ratePeriodInSecond,
        "subscriptions": subscriptions,
    }
