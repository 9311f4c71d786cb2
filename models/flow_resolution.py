"""Resolution of flow-control policies: pure functions the API and the workers share.

Each value is taken from the first level that sets it: topic > namespace > broker config.
Unlike dispatch rates there is no "unset" value inside a policy: a stored 0 (max unacked, TTL)
means "no limit" and wins over lower levels, as in Pulsar.  Backlog quotas resolve per
quota type; the broker default of ``destination_storage`` is ``backlogQuotaDefaultLimitBytes``
and of ``message_age`` ``backlogQuotaDefaultLimitSecond``, both with
``backlogQuotaDefaultRetentionPolicy``.

``quota_breach`` decides, from a partition's backlog (its slowest subscription), whether a
quota is reached; limits are inclusive (a backlog *at* the limit is over quota).

``resolve_abuse`` resolves the abuse limits (``models.abuse``) the same way; they travel with
the flow limits (``FlowLimits.abuse``) to the API's provenance and to the workers.

``durable_acks`` (``models.durable_acks``) is the topic's value, else the namespace's, else
the broker's ``durableAckReplicas`` (0: none asked for).

``delayed_delivery`` (``models.delayed_delivery``) is the topic's policy, else the namespace's,
else the broker's ``delayedDeliveryEnabled``, ``delayedDeliveryTickTimeMillis`` and
``delayedDeliveryMaxDelayInMillis`` (Pulsar's topic-policy resolution; a write sets all three
fields, so the policy resolves as a whole).

``resolve_client_rates`` resolves the publish and subscribe rates (``models.client_rates``):
topic > namespace > broker, where, as in Pulsar, a stored rate that limits nothing is unset and
falls through to the next level.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from models.abuse import (
    MAX_CONSUMERS_PER_SUBSCRIPTION,
    MAX_CONSUMERS_PER_TOPIC,
    MAX_MESSAGE_SIZE,
    MAX_PRODUCERS_PER_TOPIC,
    MAX_SUBSCRIPTIONS_PER_TOPIC,
    MAX_TOPICS_PER_NAMESPACE,
)
from models.advice import BACKLOG_DRAIN_TARGET, DEFAULT_DRAIN_TARGET_SECONDS
from models.broker_config import BrokerConfig
from models.client_rates import (
    BROKER_PUBLISH_BYTE,
    BROKER_PUBLISH_MSG,
    BROKER_SUBSCRIBE_PERIOD,
    BROKER_SUBSCRIBE_RATE,
    PUBLISH_RATE,
    SUBSCRIBE_RATE,
    PublishRateLimit,
    SubscribeRateLimit,
)
from models.delayed_delivery import (
    BROKER_ENABLED,
    BROKER_MAX_DELAY,
    BROKER_TICK,
    DELAYED_DELIVERY,
    DelayedDeliveryPolicies,
)
from models.durable_acks import (
    BROKER_DURABLE_REPLICAS,
    BROKER_DURABLE_TIMEOUT,
    DURABLE_ACKS,
    NO_DURABLE_ACKS,
    DurableAcks,
)
from models.flow import (
    MAX_UNACKED_PER_CONSUMER,
    MAX_UNACKED_PER_SUBSCRIPTION,
    MESSAGE_TTL,
    PRIORITY_OLDEST_EVERY,
    BacklogQuota,
    QuotaType,
    RetentionPolicy,
    quota_kind,
)
from models.resolution import Level

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class FlowInputs:
    """Stored flow policies that bear on one topic, keyed by kind, per level."""

    broker: BrokerConfig = field(default_factory=BrokerConfig.from_overrides)
    namespace: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    topic: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class Resolved:
    """A resolved value and the level it came from."""

    value: Any
    source: Level


@dataclass(frozen=True, slots=True)
class AbuseLimits:
    """The abuse limits of one topic; every count but the first applies to each partition."""

    max_topics_per_namespace: Resolved  # topics (partitions) of the namespace, 0 = no limit
    max_subscriptions_per_topic: Resolved  # 0 = no limit
    max_producers_per_topic: Resolved  # 0 = no limit
    max_consumers_per_topic: Resolved  # 0 = no limit
    max_consumers_per_subscription: Resolved  # 0 = no limit
    max_message_size: Resolved  # bytes, always > 0


@dataclass(frozen=True, slots=True)
class ClientRates:
    """The publish and subscribe rates of one topic, enforced by each partition on its own."""

    publish_rate: Resolved  # PublishRateLimit: messages and bytes per second
    subscribe_rate: Resolved  # SubscribeRateLimit: subscribes per consumer name per period

    @property
    def publish_msg(self) -> int:
        """Messages per second the publish rate allows (0 = no limit)."""
        rate: PublishRateLimit = self.publish_rate.value
        return max(rate.msg, 0)

    @property
    def publish_byte(self) -> int:
        """Bytes per second the publish rate allows (0 = no limit)."""
        rate: PublishRateLimit = self.publish_rate.value
        return max(rate.byte, 0)

    @property
    def subscribes(self) -> tuple[int, int]:
        """(subscribes per consumer name, period in seconds); (0, period) = no limit."""
        rate: SubscribeRateLimit = self.subscribe_rate.value
        return max(rate.per_consumer, 0), rate.period


@dataclass(frozen=True, slots=True)
class FlowLimits:
    """Every flow-control limit of one topic (each partition enforces them on its own)."""

    max_unacked_per_subscription: Resolved  # int, 0 = no limit
    max_unacked_per_consumer: Resolved  # int, 0 = no limit
    message_ttl: Resolved  # seconds, 0 = no TTL
    quotas: Mapping[QuotaType, Resolved]  # BacklogQuota per type
    abuse: AbuseLimits
    rates: ClientRates
    # DurableAcks: how many replicas a send waits for (topic > namespace > broker)
    durable_acks: Resolved = Resolved(NO_DURABLE_ACKS, Level.BROKER)
    # DelayedDeliveryPolicies: delivery times honoured, tick, max delay (topic > ns > broker)
    delayed_delivery: Resolved = Resolved(
        DelayedDeliveryPolicies(active=True, tickTime=1000), Level.BROKER
    )
    # seconds the limit advisor plans to drain a backlog in (topic > namespace > default)
    backlog_drain_target: Resolved = Resolved(DEFAULT_DRAIN_TARGET_SECONDS, Level.BROKER)
    # int: every N-th message handed out is the oldest waiting (0 = strict priority)
    priority_oldest_every: Resolved = Resolved(0, Level.BROKER)
    # bool: a partition starts keeping each priority level in a stream of its own
    level_streams: bool = True

    @property
    def unacked_limited(self) -> bool:
        """True when dispatch must watch unacked counts."""
        return bool(
            self.max_unacked_per_subscription.value > 0 or self.max_unacked_per_consumer.value > 0
        )


@dataclass(frozen=True, slots=True)
class Backlog:
    """A partition's backlog: its slowest subscription, by messages, bytes and age."""

    messages: int = 0
    bytes: int = 0
    oldest_age_seconds: float | None = None  # age of the oldest unacknowledged entry


@dataclass(frozen=True, slots=True)
class Breach:
    """A backlog quota that is reached: which type, which dimension, and the action."""

    quota_type: QuotaType
    dimension: str  # "size", "messages" or "time"
    policy: RetentionPolicy
    limit: int
    actual: float

    def describe(self, topic: str) -> str:
        """Text for producers and logs."""
        unit = {"size": "bytes", "messages": "messages", "time": "s"}[self.dimension]
        return (
            f"backlog quota exceeded for {topic}: {self.quota_type.value} {self.dimension} "
            f"{int(self.actual)} >= {self.limit} {unit}"
        )


def _first(inputs: FlowInputs, kind: str, broker_default: Any) -> Resolved:
    for level, values in ((Level.TOPIC, inputs.topic), (Level.NAMESPACE, inputs.namespace)):
        if kind in values:
            return Resolved(values[kind], level)
    return Resolved(broker_default, Level.BROKER)


def broker_durable_acks(broker: BrokerConfig) -> DurableAcks:
    """What a topic whose namespace and topic set no ``durableAcks`` gets from the broker."""
    replicas = broker.get(BROKER_DURABLE_REPLICAS)
    if replicas <= 0:
        return NO_DURABLE_ACKS
    return DurableAcks(replicas=replicas, timeoutMs=broker.get(BROKER_DURABLE_TIMEOUT))


def broker_delayed_delivery(broker: BrokerConfig) -> DelayedDeliveryPolicies:
    """What a topic whose namespace and topic set no ``delayedDelivery`` gets from the broker."""
    return DelayedDeliveryPolicies(
        active=broker.get(BROKER_ENABLED),
        tickTime=broker.get(BROKER_TICK),
        maxDeliveryDelayInMillis=broker.get(BROKER_MAX_DELAY),
    )


def broker_quota(broker: BrokerConfig, quota_type: QuotaType) -> BacklogQuota:
    """The backlog quota a topic gets from the broker configuration."""
    policy = RetentionPolicy(broker.get("backlogQuotaDefaultRetentionPolicy"))
    if quota_type is QuotaType.MESSAGE_AGE:
        return BacklogQuota(limit_time=broker.get("backlogQuotaDefaultLimitSecond"), policy=policy)
    return BacklogQuota(limit_size=broker.get("backlogQuotaDefaultLimitBytes"), policy=policy)


def resolve_quota(inputs: FlowInputs, quota_type: QuotaType) -> Resolved:
    """The backlog quota of one type: topic > namespace > broker default."""
    return _first(inputs, quota_kind(quota_type), broker_quota(inputs.broker, quota_type))


def resolve_kind(inputs: FlowInputs, kind: str) -> Resolved:
    """One integer policy (max unacked or TTL): topic > namespace > broker."""
    defaults = {
        MAX_UNACKED_PER_SUBSCRIPTION: "maxUnackedMessagesPerSubscription",
        MAX_UNACKED_PER_CONSUMER: "maxUnackedMessagesPerConsumer",
        MESSAGE_TTL: "ttlDurationDefaultInSeconds",
    }
    return _first(inputs, kind, inputs.broker.get(defaults[kind]))


def resolve_abuse(inputs: FlowInputs) -> AbuseLimits:
    """The abuse limits of a topic.

    Counts: topic > namespace > broker (``maxTopicsPerNamespace``: namespace > broker), a
    stored 0 winning as "no limit".  ``maxMessageSize``: a topic value above 0 and not above
    the broker's, else the broker's.
    """
    broker = inputs.broker

    def count(kind: str) -> Resolved:
        return _first(inputs, kind, broker.get(kind))

    namespace_topics = inputs.namespace.get(MAX_TOPICS_PER_NAMESPACE)
    topics = (
        Resolved(namespace_topics, Level.NAMESPACE)
        if namespace_topics is not None
        else Resolved(broker.get(MAX_TOPICS_PER_NAMESPACE), Level.BROKER)
    )
    # The broker's limit always applies too (Pulsar checks it on every frame): a topic value
    # counts when it is stricter.
    topic_size, broker_size = inputs.topic.get(MAX_MESSAGE_SIZE, 0), broker.get(MAX_MESSAGE_SIZE)
    size = (
        Resolved(topic_size, Level.TOPIC)
        if 0 < topic_size <= broker_size
        else Resolved(broker_size, Level.BROKER)
    )
    return AbuseLimits(
        max_topics_per_namespace=topics,
        max_subscriptions_per_topic=count(MAX_SUBSCRIPTIONS_PER_TOPIC),
        max_producers_per_topic=count(MAX_PRODUCERS_PER_TOPIC),
        max_consumers_per_topic=count(MAX_CONSUMERS_PER_TOPIC),
        max_consumers_per_subscription=count(MAX_CONSUMERS_PER_SUBSCRIPTION),
        max_message_size=size,
    )


def resolve_client_rates(inputs: FlowInputs) -> ClientRates:
    """The publish and subscribe rates of a topic.

    Topic > namespace > broker; a stored rate counts only when it limits something (Pulsar's
    ``PublishRate.normalize`` / ``SubscribeRate.normalize``), so ``-1`` at the topic does not
    lift a namespace rate.  The broker's rate is taken as it is, limiting or not.
    """
    broker = inputs.broker

    def first(kind: str, broker_value: PublishRateLimit | SubscribeRateLimit) -> Resolved:
        for level, values in ((Level.TOPIC, inputs.topic), (Level.NAMESPACE, inputs.namespace)):
            value = values.get(kind)
            if value is not None and value.enabled:
                return Resolved(value, level)
        return Resolved(broker_value, Level.BROKER)

    publish = PublishRateLimit(
        msg=max(broker.get(BROKER_PUBLISH_MSG), -1), byte=max(broker.get(BROKER_PUBLISH_BYTE), -1)
    )
    subscribe = SubscribeRateLimit(
        per_consumer=max(broker.get(BROKER_SUBSCRIBE_RATE), -1),
        period=broker.get(BROKER_SUBSCRIBE_PERIOD),
    )
    return ClientRates(
        publish_rate=first(PUBLISH_RATE, publish), subscribe_rate=first(SUBSCRIBE_RATE, subscribe)
    )


def resolve_flow(inputs: FlowInputs) -> FlowLimits:
    """Every flow-control limit of a topic."""
    return FlowLimits(
        max_unacked_per_subscription=resolve_kind(inputs, MAX_UNACKED_PER_SUBSCRIPTION),
        max_unacked_per_consumer=resolve_kind(inputs, MAX_UNACKED_PER_CONSUMER),
        message_ttl=resolve_kind(inputs, MESSAGE_TTL),
        quotas=MappingProxyType({t: resolve_quota(inputs, t) for t in QuotaType}),
        abuse=resolve_abuse(inputs),
        rates=resolve_client_rates(inputs),
        durable_acks=_first(inputs, DURABLE_ACKS, broker_durable_acks(inputs.broker)),
        delayed_delivery=_first(inputs, DELAYED_DELIVERY, broker_delayed_delivery(inputs.broker)),
        backlog_drain_target=_first(inputs, BACKLOG_DRAIN_TARGET, DEFAULT_DRAIN_TARGET_SECONDS),
        priority_oldest_every=_first(inputs, PRIORITY_OLDEST_EVERY, 0),
        level_streams=bool(inputs.broker.get("priorityLevelStreams")),
    )


def quota_breach(limits: FlowLimits, backlog: Backlog) -> Breach | None:
    """The first backlog quota the backlog reaches, or None.

    ``destination_storage`` checks ``limitSize`` (bytes) and ``limitMessages``;
    ``message_age`` checks ``limitTime`` against the oldest unacknowledged entry.  An empty
    backlog never breaches, whatever the limits.  ``limitMessages`` under
    ``lowest_priority_eviction`` is no breach here: ``produce.lua`` enforces it on every send
    (``priority_eviction_limit``).
    """
    if backlog.messages <= 0:
        return None
    storage: BacklogQuota = limits.quotas[QuotaType.DESTINATION_STORAGE].value
    if storage.limit_size >= 0 and backlog.bytes >= storage.limit_size:
        return Breach(
            QuotaType.DESTINATION_STORAGE, "size", storage.policy, storage.limit_size, backlog.bytes
        )
    if (
        storage.limit_messages >= 0
        and backlog.messages >= storage.limit_messages
        and storage.policy is not RetentionPolicy.LOWEST_PRIORITY_EVICTION
    ):
        return Breach(
            QuotaType.DESTINATION_STORAGE,
            "messages",
            storage.policy,
            storage.limit_messages,
            backlog.messages,
        )
    age: BacklogQuota = limits.quotas[QuotaType.MESSAGE_AGE].value
    if (
        age.limit_time >= 0
        and backlog.oldest_age_seconds is not None
        and backlog.oldest_age_seconds >= age.limit_time
    ):
        return Breach(
            QuotaType.MESSAGE_AGE, "time", age.policy, age.limit_time, backlog.oldest_age_seconds
        )
    return None


def needs_age(limits: FlowLimits) -> bool:
    """True when a time quota applies (only then is the oldest entry's age worth reading)."""
    return bool(limits.quotas[QuotaType.MESSAGE_AGE].value.limit_time >= 0)


def priority_eviction_limit(limits: FlowLimits) -> int:
    """``limitMessages`` + 1 of the destination_storage quota when its policy is
    ``lowest_priority_eviction`` (what ``produce.lua`` reads from ``sl:{P}:limits``), else 0."""
    storage: BacklogQuota = limits.quotas[QuotaType.DESTINATION_STORAGE].value
    if storage.policy is RetentionPolicy.LOWEST_PRIORITY_EVICTION and storage.limit_messages >= 0:
        return storage.limit_messages + 1
    return 0


def eviction_target(limit: int) -> int:
    """Where eviction brings a backlog that reached ``limit``: 90 % of it (as Pulsar)."""
    return int(limit * 0.9)
