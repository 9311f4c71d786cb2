"""Flow-control values and their resolution: topic > namespace > broker, quota breaches."""

from __future__ import annotations

import pytest

from models.broker_config import BrokerConfig
from models.errors import InvalidInput, PreconditionFailed
from models.flow import (
    MAX_UNACKED_PER_CONSUMER,
    MAX_UNACKED_PER_SUBSCRIPTION,
    MESSAGE_TTL,
    BacklogQuota,
    QuotaType,
    RetentionPolicy,
    check_max_unacked,
    check_ttl,
    parse_quota_type,
    quota_kind,
)
from models.flow_resolution import (
    Backlog,
    FlowInputs,
    eviction_target,
    quota_breach,
    resolve_flow,
)
from models.resolution import Level

STORAGE = quota_kind(QuotaType.DESTINATION_STORAGE)
AGE = quota_kind(QuotaType.MESSAGE_AGE)


def test_quota_parsing():
    quota = BacklogQuota.from_json({"limitSize": 10, "policy": "producer_exception"})
    assert (quota.limit_size, quota.limit_time, quota.limit_messages) == (10, -1, -1)
    assert quota.policy is RetentionPolicy.PRODUCER_EXCEPTION
    # Pulsar's deprecated "limit" stands in for a missing limitSize.
    assert BacklogQuota.from_json({"limit": 7}).limit_size == 7
    # What Pulsar's BacklogQuotaImpl serializes: limit repeats limitSize.
    pulsar = {"limit": 9, "limitSize": 9, "limitTime": -1, "policy": "producer_request_hold"}
    assert BacklogQuota.from_json(pulsar) == BacklogQuota(limit_size=9)
    assert BacklogQuota.from_json({"limitTime": 5}).policy is RetentionPolicy.PRODUCER_REQUEST_HOLD
    for bad in (
        {"limitSize": "1"},
        {"limitTime": -2},
        {"policy": "drop"},
        {"policy": {"a": 1}},
        {"policy": []},
        {"limitSize": True},
        {},
        {"limitSize": None},
        {"limitSize": 1, "limitSzie": 2},
        {"limit_size": 1},
    ):
        with pytest.raises(InvalidInput):
            BacklogQuota.from_json(bad)
    assert parse_quota_type(None) is QuotaType.DESTINATION_STORAGE
    with pytest.raises(PreconditionFailed):
        parse_quota_type("size")


def test_integer_checks():
    assert check_ttl(0) == 0 and check_max_unacked(5, "x") == 5
    with pytest.raises(PreconditionFailed):
        check_ttl(-1)
    with pytest.raises(PreconditionFailed):
        check_max_unacked(-1, "x")
    for bad in ("1", 1.0, True, None):
        with pytest.raises(InvalidInput):
            check_ttl(bad)


def test_precedence_topic_namespace_broker():
    broker = BrokerConfig.from_overrides(
        {"maxUnackedMessagesPerConsumer": "7", "ttlDurationDefaultInSeconds": "30"}
    )
    limits = resolve_flow(FlowInputs(broker=broker))
    assert limits.max_unacked_per_consumer.value == 7
    assert limits.max_unacked_per_consumer.source is Level.BROKER
    assert limits.max_unacked_per_subscription.value == 200000
    assert limits.message_ttl.value == 30
    limits = resolve_flow(
        FlowInputs(
            broker=broker,
            namespace={MESSAGE_TTL: 60, MAX_UNACKED_PER_SUBSCRIPTION: 100},
            topic={MESSAGE_TTL: 0},
        )
    )
    # A stored 0 means "no TTL" and wins over lower levels.
    assert (limits.message_ttl.value, limits.message_ttl.source) == (0, Level.TOPIC)
    assert limits.max_unacked_per_subscription.source is Level.NAMESPACE
    assert limits.unacked_limited
    off = resolve_flow(
        FlowInputs(topic={MAX_UNACKED_PER_SUBSCRIPTION: 0, MAX_UNACKED_PER_CONSUMER: 0})
    )
    assert not off.unacked_limited


def test_quota_resolution_per_type():
    broker = BrokerConfig.from_overrides(
        {
            "backlogQuotaDefaultLimitBytes": "1000",
            "backlogQuotaDefaultRetentionPolicy": "producer_exception",
        }
    )
    namespace_quota = BacklogQuota(limit_messages=10)
    limits = resolve_flow(FlowInputs(broker=broker, namespace={STORAGE: namespace_quota}))
    assert limits.quotas[QuotaType.DESTINATION_STORAGE].value == namespace_quota
    assert limits.quotas[QuotaType.DESTINATION_STORAGE].source is Level.NAMESPACE
    age = limits.quotas[QuotaType.MESSAGE_AGE]
    assert age.source is Level.BROKER
    assert (age.value.limit_time, age.value.policy) == (-1, RetentionPolicy.PRODUCER_EXCEPTION)
    broker_only = resolve_flow(FlowInputs(broker=broker))
    assert broker_only.quotas[QuotaType.DESTINATION_STORAGE].value.limit_size == 1000


def test_quota_breach_is_inclusive_and_ignores_empty_backlogs():
    quota = BacklogQuota(limit_size=1000, limit_messages=10)
    limits = resolve_flow(FlowInputs(topic={STORAGE: quota}))
    assert quota_breach(limits, Backlog(messages=9, bytes=999)) is None
    breach = quota_breach(limits, Backlog(messages=10, bytes=10))
    assert breach is not None and breach.dimension == "messages"
    assert breach.describe("persistent://a/b/c") == (
        "backlog quota exceeded for persistent://a/b/c: destination_storage messages 10 >= 10 "
        "messages"
    )
    assert quota_breach(limits, Backlog(messages=2, bytes=1000)).dimension == "size"
    zero = resolve_flow(FlowInputs(topic={STORAGE: BacklogQuota(limit_size=0)}))
    assert quota_breach(zero, Backlog()) is None


def test_time_quota_needs_an_age():
    limits = resolve_flow(
        FlowInputs(topic={AGE: BacklogQuota(limit_time=60, policy="producer_exception")})
    )
    assert quota_breach(limits, Backlog(messages=5, oldest_age_seconds=None)) is None
    assert quota_breach(limits, Backlog(messages=5, oldest_age_seconds=59.9)) is None
    breach = quota_breach(limits, Backlog(messages=5, oldest_age_seconds=60))
    assert breach.quota_type is QuotaType.MESSAGE_AGE
    assert breach.policy is RetentionPolicy.PRODUCER_EXCEPTION


def test_eviction_target_is_ninety_percent():
    assert eviction_target(10) == 9
    assert eviction_target(1000) == 900
    assert eviction_target(0) == 0
