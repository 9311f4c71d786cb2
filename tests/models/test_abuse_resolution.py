"""Abuse limits as pure functions: validation, broker keys, and precedence with provenance.

Mirrors Pulsar's rules: counts resolve topic > namespace > broker with a stored 0 winning as
"no limit" (``AbstractTopic#isProducersExceeded`` and friends, ``TopicPoliciesTest``),
``maxTopicsPerNamespace`` resolves namespace > broker (``AdminApi2Test
#testMaxTopicsPerNamespace``), and a topic ``maxMessageSize`` counts only when it is set and
not above the broker's (``MaxMessageSizeTest``).
"""

from __future__ import annotations

import pytest

from models.abuse import (
    MAX_CONSUMERS_PER_SUBSCRIPTION,
    MAX_CONSUMERS_PER_TOPIC,
    MAX_MESSAGE_SIZE,
    MAX_PRODUCERS_PER_TOPIC,
    MAX_SUBSCRIPTIONS_PER_TOPIC,
    MAX_TOPICS_PER_NAMESPACE,
    check_count,
    check_message_size,
)
from models.broker_config import DYNAMIC_KEYS, BrokerConfig
from models.errors import InvalidInput, PreconditionFailed
from models.flow_resolution import FlowInputs, resolve_abuse, resolve_flow
from models.resolution import Level

COUNTS = {
    MAX_SUBSCRIPTIONS_PER_TOPIC: "max_subscriptions_per_topic",
    MAX_PRODUCERS_PER_TOPIC: "max_producers_per_topic",
    MAX_CONSUMERS_PER_TOPIC: "max_consumers_per_topic",
    MAX_CONSUMERS_PER_SUBSCRIPTION: "max_consumers_per_subscription",
}


def test_broker_keys_have_pulsars_names_and_defaults_and_are_dynamic():
    config = BrokerConfig.from_overrides()
    for name in (*COUNTS, MAX_TOPICS_PER_NAMESPACE):
        assert config.get(name) == 0
        assert name in DYNAMIC_KEYS
    assert config.get(MAX_MESSAGE_SIZE) == 5_242_880
    assert MAX_MESSAGE_SIZE in DYNAMIC_KEYS
    # A value the registry refuses (negative count, empty size) falls back to the default.
    bad = BrokerConfig.from_overrides({MAX_PRODUCERS_PER_TOPIC: "-1", MAX_MESSAGE_SIZE: "0"})
    assert (bad.get(MAX_PRODUCERS_PER_TOPIC), bad.get(MAX_MESSAGE_SIZE)) == (0, 5_242_880)


def test_defaults_resolve_to_no_limits_and_five_megabytes():
    abuse = resolve_abuse(FlowInputs())
    for field in COUNTS.values():
        assert getattr(abuse, field).value == 0
        assert getattr(abuse, field).source is Level.BROKER
    assert abuse.max_topics_per_namespace.value == 0
    assert (abuse.max_message_size.value, abuse.max_message_size.source) == (
        5_242_880,
        Level.BROKER,
    )
    # The flow limits carry them to the API's provenance and to the workers.
    assert resolve_flow(FlowInputs()).abuse == abuse


@pytest.mark.parametrize("kind", list(COUNTS))
def test_counts_resolve_topic_over_namespace_over_broker(kind):
    field = COUNTS[kind]
    broker = BrokerConfig.from_overrides({kind: "7"})

    def resolved(**levels):
        return getattr(resolve_abuse(FlowInputs(broker=broker, **levels)), field)

    assert (resolved().value, resolved().source) == (7, Level.BROKER)
    ns = resolved(namespace={kind: 5})
    assert (ns.value, ns.source) == (5, Level.NAMESPACE)
    topic = resolved(namespace={kind: 5}, topic={kind: 3})
    assert (topic.value, topic.source) == (3, Level.TOPIC)
    # A stored 0 means "no limit" and wins over the levels below it.
    off = resolved(namespace={kind: 5}, topic={kind: 0})
    assert (off.value, off.source) == (0, Level.TOPIC)
    off = resolved(namespace={kind: 0})
    assert (off.value, off.source) == (0, Level.NAMESPACE)
    # The other kinds are not touched.
    others = resolve_abuse(FlowInputs(broker=broker, topic={kind: 3}))
    for other, other_field in COUNTS.items():
        if other != kind:
            assert getattr(others, other_field).value == 0


def test_topics_per_namespace_resolves_namespace_over_broker():
    broker = BrokerConfig.from_overrides({MAX_TOPICS_PER_NAMESPACE: "10"})
    limit = resolve_abuse(FlowInputs(broker=broker)).max_topics_per_namespace
    assert (limit.value, limit.source) == (10, Level.BROKER)
    limit = resolve_abuse(
        FlowInputs(broker=broker, namespace={MAX_TOPICS_PER_NAMESPACE: 3})
    ).max_topics_per_namespace
    assert (limit.value, limit.source) == (3, Level.NAMESPACE)
    limit = resolve_abuse(
        FlowInputs(broker=broker, namespace={MAX_TOPICS_PER_NAMESPACE: 0})
    ).max_topics_per_namespace
    assert (limit.value, limit.source) == (0, Level.NAMESPACE)


def test_message_size_topic_value_counts_when_set_and_not_above_the_brokers():
    broker = BrokerConfig.from_overrides({MAX_MESSAGE_SIZE: "1000"})

    def size(topic_value):
        resolved = resolve_abuse(
            FlowInputs(broker=broker, topic={MAX_MESSAGE_SIZE: topic_value})
        ).max_message_size
        return resolved.value, resolved.source

    assert size(100) == (100, Level.TOPIC)
    assert size(1000) == (1000, Level.TOPIC)
    assert size(0) == (1000, Level.BROKER)  # 0: the broker's
    # The broker lowered its limit below the topic's: the broker's applies (Pulsar checks
    # every frame against it).
    assert size(5000) == (1000, Level.BROKER)
    # A namespace value is not a level of maxMessageSize in Pulsar.
    ns_only = resolve_abuse(FlowInputs(broker=broker, namespace={MAX_MESSAGE_SIZE: 10}))
    assert ns_only.max_message_size.value == 1000


@pytest.mark.parametrize(
    ("path", "level", "reason"),
    [
        *(
            (path, level, f"{path} must be 0 or more")
            for path, level in (
                ("maxTopicsPerNamespace", "namespace"),
                ("maxProducersPerTopic", "namespace"),
                ("maxConsumersPerTopic", "namespace"),
                ("maxConsumersPerSubscription", "namespace"),
                ("maxSubscriptionsPerTopic", "namespace"),
                ("maxProducers", "topic"),
                ("maxConsumers", "topic"),
                ("maxSubscriptionsPerTopic", "topic"),
            )
        ),
        ("maxConsumersPerSubscription", "topic", "Invalid value for maxConsumersPerSubscription"),
    ],
)
def test_count_validation_uses_pulsars_reasons(path, level, reason):
    assert check_count(0, path, level) == 0
    assert check_count(12, path, level) == 12
    with pytest.raises(PreconditionFailed) as refused:
        check_count(-1, path, level)
    assert refused.value.reason == reason
    for bad in ("1", 1.5, True, None):
        with pytest.raises(InvalidInput):
            check_count(bad, path, level)


def test_message_size_validation():
    assert check_message_size(0, 1000) == 0
    assert check_message_size(1000, 1000) == 1000
    for bad in (-1, 1001):
        with pytest.raises(PreconditionFailed) as refused:
            check_message_size(bad, 1000)
        assert refused.value.reason == (
            "topic-level maxMessageSize must be greater than or equal to 0 "
            "and must be smaller than that in the broker-level"
        )
    with pytest.raises(InvalidInput):
        check_message_size("10", 1000)
