"""Response documents of the policy-kind routes: Pulsar's rate objects, provenance of the
dispatch rates and of the flow limits, and the dry-run answers of both families."""

from __future__ import annotations

from api.schemas import BacklogQuotaDocument, DispatchRateDocument, Document


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


class AppliedResourceGroup(Document):
    """The resource group that applies to a topic: one budget for the whole group."""

    name: str
    level: str
    member: str
    weight: int
    dispatchRateInMsgs: int
    dispatchRateInBytes: int
    appliesPer: str


class TopicProvenance(Document):
    """Every limiter of a topic and its subscriptions (``effectiveDispatchRates``)."""

    topic: str
    partitions: int
    appliesPer: str
    limiters: Limiters
    effective: EffectiveDocument
    subscriptions: dict[str, SubscriptionProvenance]
    resourceGroup: AppliedResourceGroup | None = None


class RateDryRun(Document):
    """The answer to ``dryRun=true``: what changed and the would-be limits of each topic."""

    dryRun: bool
    changed: str
    topics: list[TopicProvenance]


class BrokerDryRun(Document):
    """The answer to a broker-config ``dryRun=true``: the would-be limits of every topic."""

    dryRun: bool
    topics: list[TopicProvenance]


class PublishRateDocument(Document):
    """Pulsar's ``PublishRate``: messages and bytes per second on each partition."""

    publishThrottlingRateInMsg: int
    publishThrottlingRateInByte: int


class SubscribeRateDocument(Document):
    """Pulsar's ``SubscribeRate``: subscribe requests per consumer name per period."""

    subscribeThrottlingRatePerConsumer: int
    ratePeriodInSecond: int


class DurableAcksDocument(Document):
    """``durableAcks`` (a Sluice extension): replicas that must confirm a send, and how long
    a send waits for them before it fails."""

    replicas: int
    timeoutMs: int


class ResolvedDurableAcks(Document):
    """Durable acknowledgements and the level they came from."""

    value: DurableAcksDocument
    source: str


class DelayedDeliveryDocument(Document):
    """Pulsar's ``DelayedDeliveryPolicies``: whether delivery times are honoured, the tick (ms
    a delayed message may go early when not strict), the longest delay a send may ask (ms, 0:
    no limit)."""

    tickTime: int
    active: bool
    maxDeliveryDelayInMillis: int


class ResolvedDelayedDelivery(Document):
    """Delayed delivery policies and the level they came from."""

    value: DelayedDeliveryDocument
    source: str


class ResolvedPublishRate(Document):
    """A publish rate and the level it came from."""

    value: PublishRateDocument
    source: str


class ResolvedSubscribeRate(Document):
    """A subscribe rate and the level it came from."""

    value: SubscribeRateDocument
    source: str


class ResolvedQuota(Document):
    """A backlog quota and the level it came from."""

    value: BacklogQuotaDocument
    source: str


class ResolvedInt(Document):
    """A max-unacked limit, TTL or abuse limit (0: none; maxMessageSize in bytes) and the
    level it came from."""

    value: int
    source: str


class FlowControls(Document):
    """Every resolved flow-control limit of a topic."""

    backlogQuota: dict[str, ResolvedQuota]
    maxUnackedMessagesPerSubscription: ResolvedInt
    maxUnackedMessagesPerConsumer: ResolvedInt
    messageTTL: ResolvedInt
    priorityOldestEvery: ResolvedInt
    maxTopicsPerNamespace: ResolvedInt
    maxSubscriptionsPerTopic: ResolvedInt
    maxProducersPerTopic: ResolvedInt
    maxConsumersPerTopic: ResolvedInt
    maxConsumersPerSubscription: ResolvedInt
    maxMessageSize: ResolvedInt
    backlogDrainTargetSeconds: ResolvedInt
    publishRate: ResolvedPublishRate
    subscribeRate: ResolvedSubscribeRate
    durableAcks: ResolvedDurableAcks
    delayedDelivery: ResolvedDelayedDelivery


class EffectiveFlowControls(Document):
    """``effectiveFlowControls``: the limits each partition of the topic enforces."""

    topic: str
    appliesPer: str
    flowControl: FlowControls


class TopicFlowControls(Document):
    """One topic's limits in a dry-run answer."""

    topic: str
    flowControl: FlowControls


class FlowDryRun(Document):
    """The answer to ``dryRun=true``: what changed and the would-be limits of each topic."""

    dryRun: bool
    changed: str
    topics: list[TopicFlowControls]
