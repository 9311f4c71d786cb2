"""Resolution of effective dispatch limits: the one pure function the API and workers share.

Three limiters apply to every dispatch, and a dispatch must satisfy all of them:

* BROKER — per worker process: broker ``dispatchThrottlingRateInMsg/InByte``, period 1 s.
* TOPIC — per partition: topic ``dispatchRate`` > namespace ``dispatchRate`` > broker
  ``dispatchThrottlingRatePerTopicIn*``.
* SUBSCRIPTION — per subscription per partition: the subscription's own rate > topic
  ``subscriptionDispatchRate`` > namespace ``subscriptionDispatchRate`` > broker
  ``dispatchThrottlingRatePerSubscriptionIn*``.

A policy whose two dimensions are <= 0 is unset and falls through to the next level; the
winning object is taken whole (a dimension is never inherited from a lower level).  Broker
values of 0 mean "no limit".  Relative rates add the partition's average publish rate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from models.broker_config import BrokerConfig
from models.dispatch_rate import DispatchRate, normalize


class Level(StrEnum):
    """Where a limiter's value came from."""

    BROKER = "broker"
    NAMESPACE = "namespace"
    TOPIC = "topic"
    SUBSCRIPTION = "subscription"


class Limiter(StrEnum):
    """The three limiters a dispatch passes."""

    BROKER = "broker"
    TOPIC = "topic"
    SUBSCRIPTION = "subscription"


@dataclass(frozen=True, slots=True)
class PolicyInputs:
    """Stored policies that bear on one topic (all partitions share them)."""

    broker: BrokerConfig = field(default_factory=BrokerConfig.from_overrides)
    namespace_dispatch_rate: DispatchRate | None = None
    namespace_subscription_dispatch_rate: DispatchRate | None = None
    topic_dispatch_rate: DispatchRate | None = None
    topic_subscription_dispatch_rate: DispatchRate | None = None
    subscription_dispatch_rates: Mapping[str, DispatchRate] = field(
        default_factory=lambda: MappingProxyType({})
    )


@dataclass(frozen=True, slots=True)
class PublishRate:
    """A partition's average publish rate, for ``relativeToPublishRate`` policies."""

    msg_per_second: float = 0.0
    byte_per_second: float = 0.0


@dataclass(frozen=True, slots=True)
class ResolvedRate:
    """The configured value a limiter got, where it came from, and its permits per period.

    ``permits_msg`` / ``permits_byte`` are what the limiter enforces each ``period`` seconds
    after the relative adjustment; -1 means no limit in that dimension.
    """

    limiter: Limiter
    rate: DispatchRate
    source: Level
    permits_msg: int
    permits_byte: int

    @property
    def enabled(self) -> bool:
        """True when the limiter limits at least one dimension."""
        return self.permits_msg > 0 or self.permits_byte > 0

    @property
    def period(self) -> int:
        """Seconds per quota period."""
        return self.rate.period


@dataclass(frozen=True, slots=True)
class EffectiveLimits:
    """Every limiter for one partition (and optionally one subscription), plus the minimum.

    ``msg_per_second`` / ``byte_per_second`` are the binding (smallest) rates over the enabled
    limiters, None when nothing limits that dimension; ``msg_limiter`` / ``byte_limiter`` name
    the limiter that binds.
    """

    broker: ResolvedRate
    topic: ResolvedRate
    subscription: ResolvedRate | None
    msg_per_second: float | None
    byte_per_second: float | None
    msg_limiter: Limiter | None
    byte_limiter: Limiter | None


def resolve_limits(
    inputs: PolicyInputs,
    subscription: str | None = None,
    publish_rate: PublishRate = PublishRate(),
) -> EffectiveLimits:
    """Resolve the BROKER, TOPIC and SUBSCRIPTION limiters of a partition.

    ``subscription`` None leaves the SUBSCRIPTION limiter out; ``""`` resolves the value a
    subscription without a rate of its own gets (the topic-wide default chain).
    """
    broker = _resolve_broker(inputs.broker)
    topic = _resolve_topic(inputs, publish_rate)
    sub = (
        None if subscription is None else _resolve_subscription(inputs, subscription, publish_rate)
    )
    limiters = [r for r in (broker, topic, sub) if r is not None]
    msg, msg_by = _binding(limiters, lambda r: r.permits_msg)
    byte, byte_by = _binding(limiters, lambda r: r.permits_byte)
    return EffectiveLimits(broker, topic, sub, msg, byte, msg_by, byte_by)


def _resolve_broker(config: BrokerConfig) -> ResolvedRate:
    rate = DispatchRate(
        msg=config.get("dispatchThrottlingRateInMsg"),
        byte=config.get("dispatchThrottlingRateInByte"),
    )
    return _resolved(Limiter.BROKER, rate, Level.BROKER, PublishRate())


def _resolve_topic(inputs: PolicyInputs, publish_rate: PublishRate) -> ResolvedRate:
    for rate, level in (
        (inputs.topic_dispatch_rate, Level.TOPIC),
        (inputs.namespace_dispatch_rate, Level.NAMESPACE),
    ):
        if normalize(rate) is not None:
            return _resolved(Limiter.TOPIC, rate, level, publish_rate)
    default = DispatchRate(
        msg=inputs.broker.get("dispatchThrottlingRatePerTopicInMsg"),
        byte=inputs.broker.get("dispatchThrottlingRatePerTopicInByte"),
    )
    return _resolved(Limiter.TOPIC, default, Level.BROKER, publish_rate)


def _resolve_subscription(
    inputs: PolicyInputs, subscription: str, publish_rate: PublishRate
) -> ResolvedRate:
    for rate, level in (
        (
            inputs.subscription_dispatch_rates.get(subscription) if subscription else None,
            Level.SUBSCRIPTION,
        ),
        (inputs.topic_subscription_dispatch_rate, Level.TOPIC),
        (inputs.namespace_subscription_dispatch_rate, Level.NAMESPACE),
    ):
        if normalize(rate) is not None:
            return _resolved(Limiter.SUBSCRIPTION, rate, level, publish_rate)
    default = DispatchRate(
        msg=inputs.broker.get("dispatchThrottlingRatePerSubscriptionInMsg"),
        byte=inputs.broker.get("dispatchThrottlingRatePerSubscriptionInByte"),
    )
    return _resolved(Limiter.SUBSCRIPTION, default, Level.BROKER, publish_rate)


def _resolved(
    limiter: Limiter, rate: DispatchRate, source: Level, publish_rate: PublishRate
) -> ResolvedRate:
    msg = rate.msg if rate.msg > 0 else -1
    byte = rate.byte if rate.byte > 0 else -1
    if rate.relative:
        # Pulsar adds the average publish rate to the configured value; we scale it to the
        # period so that a relative policy with period N allows N seconds of publishing.
        if msg > 0:
            msg += int(publish_rate.msg_per_second * rate.period)
        if byte > 0:
            byte += int(publish_rate.byte_per_second * rate.period)
    return ResolvedRate(limiter, rate, source, msg, byte)


def _binding(limiters, permits) -> tuple[float | None, Limiter | None]:
    best: float | None = None
    best_limiter: Limiter | None = None
    for resolved in limiters:
        value = permits(resolved)
        if value <= 0:
            continue
        per_second = value / resolved.period
        if best is None or per_second < best:
            best, best_limiter = per_second, resolved.limiter
    return best, best_limiter
