"""Response documents of the dispatch-rate routes: provenance and dry-run answers."""

from __future__ import annotations

from api.schemas import DispatchRateDocument, Document


class LevelOffer(Document):
    """What one level offers a limiter; ``set`` False means it falls through."""

    level: str
    value: DispatchRateDocument | None
    set: bool


class LimiterDocument(Document):
    """One limiter: its value, the level it came from, its permits, every level's offer."""

    source: str
    value: DispatchRateDocument
    enabled: bool
    permitsPerPeriodInMsg: int
    permitsPerPeriodInByte: int
    levels: list[LevelOffer]


class EffectiveDocument(Document):
    """The binding rate per dimension (None: unlimited) and the limiter that sets it."""

    msgPerSecond: float | None
    bytePerSecond: float | None
    msgLimiter: str | None
    byteLimiter: str | None


class Limiters(Document):
    """The topic-wide limiters of a partition."""

    broker: LimiterDocument
    topic: LimiterDocument
    subscriptionDefault: LimiterDocument


class SubscriptionProvenance(Document):
    """A subscription's own limiter and the combined limit it dispatches under."""

    subscription: LimiterDocument
    effective: EffectiveDocument


class TopicProvenance(Document):
    """Every limiter of a topic and its subscriptions (``effectiveDispatchRates``)."""

    topic: str
    partitions: int
    appliesPer: str
    limiters: Limiters
    effective: EffectiveDocument
    subscriptions: dict[str, SubscriptionProvenance]


class RateDryRun(Document):
    """The answer to ``dryRun=true``: what changed and the would-be limits of each topic."""

    dryRun: bool
    changed: str
    topics: list[TopicProvenance]


class BrokerDryRun(Document):
    """The answer to a broker-config ``dryRun=true``: the would-be limits of every topic."""

    dryRun: bool
    topics: list[TopicProvenance]
