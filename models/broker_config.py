"""Broker configuration keys, their defaults, and strict parsing of dynamic overrides.

The registry mirrors the dispatch-related part of Pulsar's ``ServiceConfiguration`` with the
same names and defaults; ``dynamic`` keys may be overridden at runtime through
``/admin/v2/brokers/configuration``.  Overrides are stored as strings (as Pulsar stores them in
its metadata store) and parsed here into typed values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from models.abuse import DEFAULT_MAX_MESSAGE_SIZE, MAX_MESSAGE_SIZE_CEILING
from models.errors import NotFound, PreconditionFailed
from models.json_body import INT32_MAX, INT64_MAX

# Partitions per partitioned topic: the default bound and the most any setting allows.  Every
# partition costs a dispatch task in its owning worker and keys in Redis, so, unlike Pulsar's
# 0 = unlimited, the bound is always finite.
DEFAULT_MAX_PARTITIONS = 1_000
PARTITIONS_HARD_MAX = 10_000


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One broker setting: name, Python type, default, whether it is dynamic, and bounds."""

    name: str
    type: type
    default: Any
    dynamic: bool
    doc: str
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] | None = None

    def parse(self, text: str) -> Any:
        """Parse an override given as text; raise ``PreconditionFailed`` when invalid."""
        if self.type is bool:
            lowered = text.strip().lower()
            if lowered not in ("true", "false"):
                raise PreconditionFailed(" Invalid dynamic-config value")
            return lowered == "true"
        if self.type is int:
            stripped = text.strip()
            body = stripped[1:] if stripped.startswith("-") else stripped
            if not body.isdigit():
                raise PreconditionFailed(" Invalid dynamic-config value")
            value = int(stripped)
            low = self.minimum if self.minimum is not None else -INT64_MAX - 1
            high = self.maximum if self.maximum is not None else INT64_MAX
            if not low <= value <= high:
                raise PreconditionFailed(
                    f" Invalid dynamic-config value: {self.name} must be from {low} to {high}"
                )
            return value
        if self.choices is not None and text not in self.choices:
            raise PreconditionFailed(" Invalid dynamic-config value")
        return text

    def render(self, value: Any) -> str:
        """Text form used in the ``values`` and ``runtime`` maps (Java's ``toString``)."""
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)


def _rate(name: str, doc: str) -> ConfigKey:
    # Message rates are Java ints in Pulsar, byte rates longs.
    maximum = INT32_MAX if name.endswith("InMsg") else INT64_MAX
    return ConfigKey(name, int, 0, True, doc, minimum=-1, maximum=maximum)


def _count(name: str, doc: str) -> ConfigKey:
    # Abuse limits: Java ints in Pulsar, 0 = no limit.
    return ConfigKey(name, int, 0, True, doc, minimum=0, maximum=INT32_MAX)


_KEYS: tuple[ConfigKey, ...] = (
    _rate("dispatchThrottlingRateInMsg", "BROKER limiter: messages/s over all topics (0 = off)"),
    _rate("dispatchThrottlingRateInByte", "BROKER limiter: bytes/s over all topics (0 = off)"),
    _rate("dispatchThrottlingRatePerTopicInMsg", "default TOPIC limit, messages/s per partition"),
    _rate("dispatchThrottlingRatePerTopicInByte", "default TOPIC limit, bytes/s per partition"),
    _rate("dispatchThrottlingRatePerSubscriptionInMsg", "default SUBSCRIPTION limit, msg/s"),
    _rate("dispatchThrottlingRatePerSubscriptionInByte", "default SUBSCRIPTION limit, bytes/s"),
    _rate("dispatchThrottlingRatePerReplicatorInMsg", "default REPLICATOR limit, msg/s (unused)"),
    _rate("dispatchThrottlingRatePerReplicatorInByte", "default REPLICATOR limit, B/s (unused)"),
    ConfigKey(
        "dispatchThrottlingRateRelativeToPublishRate",
        bool,
        False,
        True,
        "broker-level relative flag (no effect on defaults, as in Pulsar 3.x)",
    ),
    ConfigKey(
        "dispatchThrottlingOnNonBacklogConsumerEnabled",
        bool,
        True,
        True,
        "false: a caught-up subscription is not throttled",
    ),
    ConfigKey(
        "dispatchThrottlingOnBatchMessageEnabled",
        bool,
        False,
        True,
        "count entries (batches) instead of messages against message limits",
    ),
    ConfigKey(
        "dispatchThrottlingForFilteredEntriesEnabled",
        bool,
        False,
        False,
        "filtered entries also use quota",
    ),
    ConfigKey(
        "dispatcherMaxReadBatchSize",
        int,
        100,
        True,
        "max entries per dispatch read",
        minimum=1,
        maximum=INT32_MAX,
    ),
    ConfigKey(
        "dispatcherMaxReadSizeBytes",
        int,
        5 * 1024 * 1024,
        True,
        "max bytes per dispatch read",
        minimum=1,
        maximum=INT32_MAX,
    ),
    ConfigKey(
        "dispatcherMinReadBatchSize",
        int,
        1,
        True,
        "read batch floor after read failures",
        minimum=1,
        maximum=INT32_MAX,
    ),
    ConfigKey(
        "dispatcherMaxRoundRobinBatchSize",
        int,
        20,
        True,
        "max entries given to one consumer per round (Shared)",
        minimum=1,
        maximum=INT32_MAX,
    ),
    ConfigKey(
        "durableAckReplicas",
        int,
        0,
        True,
        "replicas of a partition's Redis master that must confirm a send before it is "
        "acknowledged, for topics whose topic and namespace set no durableAcks (Sluice; 0: none)",
        minimum=0,
        maximum=100,
    ),
    ConfigKey(
        "durableAckTimeoutMs",
        int,
        1000,
        True,
        "how long such a send waits for the replicas before it fails (Sluice)",
        minimum=1,
        maximum=600_000,
    ),
    ConfigKey(
        "priorityLevelStreams",
        bool,
        True,
        True,
        "keep each priority level of a partition in a stream of its own, read in order "
        "(false: order one stream's entries through a priority index per subscription; "
        "docs/priority.md; Sluice): a partition starts using them with its first message of "
        "a priority other than 4, unless its stream already holds such messages",
    ),
    ConfigKey(
        "delayedDeliveryEnabled",
        bool,
        True,
        True,
        "honour deliver_at / deliver_after on Shared and Key_Shared subscriptions (false: "
        "deliver at once) on topics whose topic and namespace set no delayedDelivery policy; "
        "Pulsar's is static, Sluice's dynamic",
    ),
    ConfigKey(
        "delayedDeliveryTickTimeMillis",
        int,
        1000,
        True,
        "with isDelayedDeliveryDeliverAtTimeStrict=false, a delayed message may go up to this "
        "many ms before its time (topics without a delayedDelivery policy); Pulsar's is "
        "static, Sluice's dynamic",
        minimum=0,
        maximum=INT64_MAX,
    ),
    ConfigKey(
        "delayedDeliveryMaxDelayInMillis",
        int,
        0,
        True,
        "the longest delay a send may ask for (ms; 0: no limit) on topics whose topic and "
        "namespace set no delayedDelivery policy; a send asking more is refused; Pulsar's is "
        "static, Sluice's dynamic",
        minimum=0,
        maximum=INT64_MAX,
    ),
    ConfigKey(
        "isDelayedDeliveryDeliverAtTimeStrict",
        bool,
        True,
        True,
        "true: a delayed message never goes before its time; false: up to a tick early. "
        "Pulsar's default is false and static; Sluice's is true and dynamic",
    ),
    ConfigKey(
        "dispatcherDispatchMessagesInSubscriptionThread",
        bool,
        True,
        True,
        "kept for compatibility; every subscription has its own task",
    ),
    ConfigKey(
        "preciseDispatcherFlowControl",
        bool,
        False,
        True,
        "size reads by consumer permits / average messages per entry",
    ),
    ConfigKey(
        "dispatchRateLimiterFactoryClassName",
        str,
        "",
        True,
        "kept for compatibility; Sluice has one exact limiter",
    ),
    ConfigKey(
        "allowAutoTopicCreation",
        bool,
        True,
        True,
        "create topics on first produce or subscribe",
    ),
    ConfigKey(
        "allowAutoTopicCreationType",
        str,
        "non-partitioned",
        True,
        "non-partitioned or partitioned",
    ),
    ConfigKey(
        "defaultNumPartitions",
        int,
        1,
        True,
        "partitions of auto-created partitioned topics",
        minimum=1,
        maximum=PARTITIONS_HARD_MAX,
    ),
    ConfigKey(
        "maxNumPartitionsPerPartitionedTopic",
        int,
        DEFAULT_MAX_PARTITIONS,
        True,
        f"upper bound on partitions per topic (at most {PARTITIONS_HARD_MAX:,}; unlike Pulsar, "
        "0 is not unlimited: it is refused)",
        minimum=1,
        maximum=PARTITIONS_HARD_MAX,
    ),
    ConfigKey(
        "forceDeleteNamespaceAllowed",
        bool,
        True,
        True,
        "allow DELETE namespace with force=true",
    ),
    ConfigKey(
        "forceDeleteTenantAllowed",
        bool,
        True,
        True,
        "allow DELETE tenant with force=true",
    ),
    ConfigKey(
        "maxUnackedMessagesPerConsumer",
        int,
        50000,
        True,
        "stop dispatch to a consumer at this many unacked messages (0 = off)",
        minimum=0,
        maximum=INT32_MAX,
    ),
    ConfigKey(
        "maxUnackedMessagesPerSubscription",
        int,
        200000,
        True,
        "stop dispatch to a subscription at this many unacked messages (0 = off)",
        minimum=0,
        maximum=INT32_MAX,
    ),
    ConfigKey(
        "backlogQuotaCheckEnabled",
        bool,
        True,
        False,
        "check backlog quotas (every worker tick, about once a second)",
    ),
    ConfigKey(
        "backlogQuotaDefaultLimitBytes",
        int,
        -1,
        True,
        "default destination_storage quota in bytes per partition (-1 = none)",
        minimum=-1,
        maximum=INT64_MAX,
    ),
    ConfigKey(
        "backlogQuotaDefaultLimitSecond",
        int,
        -1,
        True,
        "default message_age quota in seconds (-1 = none)",
        minimum=-1,
        maximum=INT32_MAX,
    ),
    ConfigKey(
        "backlogQuotaDefaultRetentionPolicy",
        str,
        "producer_request_hold",
        True,
        "default action at the quota: producer_request_hold, producer_exception or "
        "consumer_backlog_eviction",
        choices=("producer_request_hold", "producer_exception", "consumer_backlog_eviction"),
    ),
    ConfigKey(
        "ttlDurationDefaultInSeconds",
        int,
        0,
        True,
        "default message TTL in seconds (0 = messages never expire)",
        minimum=0,
        maximum=INT32_MAX,
    ),
    _count("maxTopicsPerNamespace", "topics (partitions) a namespace may hold (0 = no limit)"),
    _count("maxSubscriptionsPerTopic", "subscriptions per partition (0 = no limit)"),
    _count("maxProducersPerTopic", "producers per partition (0 = no limit)"),
    _count("maxConsumersPerTopic", "consumers per partition (0 = no limit)"),
    _count("maxConsumersPerSubscription", "consumers per subscription per partition (0 = none)"),
    ConfigKey(
        "maxMessageSize",
        int,
        DEFAULT_MAX_MESSAGE_SIZE,
        True,
        "largest entry (a message, or a batch) in bytes; Pulsar's is static, Sluice's dynamic",
        minimum=1,
        maximum=MAX_MESSAGE_SIZE_CEILING,
    ),
    ConfigKey(
        "maxPublishRatePerTopicInMessages",
        int,
        0,
        True,
        "default publish rate, messages/s per partition (<= 0 = off)",
        minimum=-1,
        maximum=INT32_MAX,
    ),
    ConfigKey(
        "maxPublishRatePerTopicInBytes",
        int,
        0,
        True,
        "default publish rate, bytes/s per partition (<= 0 = off)",
        minimum=-1,
        maximum=INT64_MAX,
    ),
    ConfigKey(
        "subscribeThrottlingRatePerConsumer",
        int,
        0,
        True,
        "default subscribe requests one consumer name from one client host may make per "
        "period and partition "
        "(<= 0 = off)",
        minimum=-1,
        maximum=INT32_MAX,
    ),
    ConfigKey(
        "subscribeRatePeriodPerConsumerInSecond",
        int,
        30,
        True,
        "period of subscribeThrottlingRatePerConsumer in seconds",
        minimum=1,
        maximum=INT32_MAX,
    ),
    ConfigKey(
        "systemTopicEnabled",
        bool,
        True,
        False,
        "kept for compatibility",
    ),
    ConfigKey(
        "topicLevelPoliciesEnabled",
        bool,
        True,
        False,
        "kept for compatibility",
    ),
    ConfigKey(
        "statsUpdateFrequencyInSecs",
        int,
        60,
        False,
        "interval of rate statistics (Sluice's workers update every second)",
    ),
)

KEYS: Mapping[str, ConfigKey] = MappingProxyType({k.name: k for k in _KEYS})
DYNAMIC_KEYS: tuple[str, ...] = tuple(sorted(k.name for k in _KEYS if k.dynamic))


def dynamic_key(name: str) -> ConfigKey:
    """The registry entry for a key an operator wants to change at runtime.

    An unknown name is 404 ("configuration not found"), a static one 412, as in Pulsar.
    """
    key = KEYS.get(name)
    if key is None:
        raise NotFound(f"Configuration {name} not found")
    if not key.dynamic:
        raise PreconditionFailed(" Can't update non-dynamic configuration")
    return key


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Typed view of defaults plus stored overrides; immutable, cheap to share."""

    overrides: Mapping[str, str]

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, str] | None = None) -> BrokerConfig:
        """Build from stored overrides, dropping names the registry no longer knows."""
        kept = {k: v for k, v in (overrides or {}).items() if k in KEYS}
        return cls(overrides=MappingProxyType(kept))

    def get(self, name: str) -> Any:
        """Typed value of ``name``: the override if stored and valid, else the default."""
        key = KEYS[name]
        text = self.overrides.get(name)
        if text is None:
            return key.default
        try:
            return key.parse(text)
        except PreconditionFailed:
            return key.default

    def runtime(self) -> dict[str, str]:
        """Every key with its effective value as text (Pulsar's ``runtime`` map)."""
        return {name: key.render(self.get(name)) for name, key in sorted(KEYS.items())}
