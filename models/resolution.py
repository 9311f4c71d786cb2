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

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from models.broker_config import BrokerConfig
from models.dispatch_rate import DispatchRate


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


def follows_publish_rate(inputs: PolicyInputs) -> bool:
    """True when a stored rate among ``inputs`` is relative to the publish rate: only then
    does what ``resolve_limits`` resolves depend on the publish rate (the broker's rates
    never are)."""
    rates = [
        inputs.namespace_dispatch_rate,
        inputs.namespace_subscription_dispatch_rate,
        inputs.topic_dispatch_rate,
        inputs.topic_subscription_dispatch_rate,
        *inputs.subscription_dispatch_rates.values(),
    ]
    return any(rate is not None and rate.relative for rate in rates)


@dataclass(frozen=True, slots=True)
class PublishRate:
    """A partition's average publish rate, for ``relativeToPublishRate`` policies."""

    msg_per_second: float = 0.0
    byte_per_second: float = 0.0


@dataclass(frozen=True, slots=True)
class Candidate:
    """The value one level offers a limiter (None: nothing stored there).

    ``set`` is False when the level's value falls through to the next one: nothing stored,
    or both dimensions <= 0.  The broker level is the last resort and always set.
    """

    level: Level
    rate: DispatchRate | None

    @property
    def set(self) -> bool:
        """True when this level's value would be taken (if no higher level is set)."""
        return self.rate is not None and (self.level is Level.BROKER or self.rate.enabled)


@dataclass(frozen=True, slots=True)
class ResolvedRate:
    """The configured value a limiter got, where it came from, and its permits per period.

    ``permits_msg`` / ``permits_byte`` are what the limiter enforces each ``period`` seconds
    after the relative adjustment; -1 means no limit in that dimension.  ``candidates`` are
    every level's offer, highest precedence first (the first one set is ``source``); they
    do not take part in comparisons, so a limiter's value is equal whatever lower levels hold.
    """

    limiter: Limiter
    rate: DispatchRate
    source: Level
    permits_msg: int
    permits_byte: int
    candidates: tuple[Candidate, ...] = field(default=(), compare=False)

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
    broker = _resolve(inputs, Limiter.BROKER, PublishRate())
    topic = _resolve(inputs, Limiter.TOPIC, publish_rate)
    sub = (
        None
        if subscription is None
        else _resolve(inputs, Limiter.SUBSCRIPTION, publish_rate, subscription)
    )
    limiters = [r for r in (broker, topic, sub) if r is not None]
    msg, msg_by = _binding(limiters, lambda r: r.permits_msg)
    byte, byte_by = _binding(limiters, lambda r: r.permits_byte)
    return EffectiveLimits(broker, topic, sub, msg, byte, msg_by, byte_by)


def candidates(
    inputs: PolicyInputs, limiter: Limiter, subscription: str | None = None
) -> tuple[Candidate, ...]:
    """What each level offers ``limiter``, highest precedence first; the broker comes last.

    For the SUBSCRIPTION limiter, ``subscription`` names the subscription whose own rate
    comes first; ``""`` or None leaves that level empty (the topic-wide default chain).
    """
    broker = inputs.broker
    if limiter is Limiter.BROKER:
        return (Candidate(Level.BROKER, _broker_rate(broker, "dispatchThrottlingRate")),)
    if limiter is Limiter.TOPIC:
        return (
            Candidate(Level.TOPIC, inputs.topic_dispatch_rate),
            Candidate(Level.NAMESPACE, inputs.namespace_dispatch_rate),
            Candidate(Level.BROKER, _broker_rate(broker, "dispatchThrottlingRatePerTopic")),
        )
    own = inputs.subscription_dispatch_rates.get(subscription) if subscription else None
    return (
        Candidate(Level.SUBSCRIPTION, own),
        Candidate(Level.TOPIC, inputs.topic_subscription_dispatch_rate),
        Candidate(Level.NAMESPACE, inputs.namespace_subscription_dispatch_rate),
        Candidate(Level.BROKER, _broker_rate(broker, "dispatchThrottlingRatePerSubscription")),
    )


def _broker_rate(config: BrokerConfig, prefix: str) -> DispatchRate:
    return DispatchRate(msg=config.get(f"{prefix}InMsg"), byte=config.get(f"{prefix}InByte"))


def _resolve(
    inputs: PolicyInputs,
    limiter: Limiter,
    publish_rate: PublishRate,
    subscription: str | None = None,
) -> ResolvedRate:
    """The first level that is set wins, taken whole."""
    offers = candidates(inputs, limiter, subscription)
    winner = next(c for c in offers if c.set)
    assert winner.rate is not None
    return _resolved(limiter, winner.rate, winner.level, publish_rate, offers)


def _resolved(
    limiter: Limiter,
    rate: DispatchRate,
    source: Level,
    publish_rate: PublishRate,
    offers: tuple[Candidate, ...] = (),
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
    return ResolvedRate(limiter, rate, source, msg, byte, offers)


def _binding(
    limiters: Iterable[ResolvedRate], permits: Callable[[ResolvedRate], float]
) -> tuple[float | None, Limiter | None]:
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
