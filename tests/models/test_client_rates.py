"""Publish and subscribe rates as pure functions: parsing, broker keys, precedence.

Mirrors Pulsar's rules: a topic policy wins over the namespace's, which wins over the broker's
``maxPublishRatePerTopicIn*`` / ``subscribeThrottlingRatePerConsumer``; a stored rate that
limits nothing is dropped (``PublishRate.normalize``, ``SubscribeRate.normalize`` in
``AbstractTopic#updateTopicPolicy`` / ``updateNamespacePublishRate``) and the next level
applies; the broker's value is used as it is (``publishRateInBroker``, ``subscribeRateInBroker``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from models.broker_config import DYNAMIC_KEYS, BrokerConfig
from models.client_rates import (
    PUBLISH_RATE,
    SUBSCRIBE_RATE,
    PublishRateLimit,
    SubscribeRateLimit,
)
from models.errors import InvalidInput
from models.flow import value_from_json, value_to_json
from models.flow_resolution import FlowInputs, resolve_client_rates, resolve_flow
from models.resolution import Level

BROKER_KEYS = {
    "maxPublishRatePerTopicInMessages": 0,
    "maxPublishRatePerTopicInBytes": 0,
    "subscribeThrottlingRatePerConsumer": 0,
    "subscribeRatePeriodPerConsumerInSecond": 30,
}


def levels(broker: dict, kind: str, make: Callable[..., Any], namespace, topic) -> FlowInputs:
    """Inputs with the broker settings ``broker`` and, where given, a ``kind`` policy:
    ``make(*namespace)`` on the namespace, ``make(*topic)`` on the topic."""
    return FlowInputs(
        broker=BrokerConfig.from_overrides(broker),
        namespace={kind: make(*namespace)} if namespace else {},
        topic={kind: make(*topic)} if topic else {},
    )


def publish(msg: int = -1, byte: int = -1) -> PublishRateLimit:
    return PublishRateLimit.from_json(
        {"publishThrottlingRateInMsg": msg, "publishThrottlingRateInByte": byte}
    )


def subscribe(rate: int = -1, period: int = 30) -> SubscribeRateLimit:
    return SubscribeRateLimit.from_json(
        {"subscribeThrottlingRatePerConsumer": rate, "ratePeriodInSecond": period}
    )


def test_broker_keys_have_pulsars_names_and_defaults_and_are_dynamic():
    config = BrokerConfig.from_overrides()
    for name, default in BROKER_KEYS.items():
        assert config.get(name) == default
        assert name in DYNAMIC_KEYS
    # Pulsar's minValue = 1 for the period: a 0 override falls back to the default.
    assert (
        BrokerConfig.from_overrides({"subscribeRatePeriodPerConsumerInSecond": "0"}).get(
            "subscribeRatePeriodPerConsumerInSecond"
        )
        == 30
    )


def test_bodies_take_pulsars_defaults_and_round_trip():
    assert PublishRateLimit.from_json({"publishThrottlingRateInMsg": 7}).to_json() == {
        "publishThrottlingRateInMsg": 7,
        "publishThrottlingRateInByte": -1,
    }
    assert SubscribeRateLimit.from_json({"subscribeThrottlingRatePerConsumer": 5}).to_json() == {
        "subscribeThrottlingRatePerConsumer": 5,
        "ratePeriodInSecond": 30,
    }
    nulls = {"publishThrottlingRateInMsg": None, "publishThrottlingRateInByte": 10}
    assert PublishRateLimit.from_json(nulls) == publish(-1, 10)
    # Strict bodies: an unknown field or a body that sets nothing is refused, not stored.
    for body in ({}, {"publishThrottlingRateInMsgs": 5}, {**nulls, "other": 1}):
        with pytest.raises(InvalidInput):
            PublishRateLimit.from_json(body)
    with pytest.raises(InvalidInput, match="subscribeThrottlingRatePerConsumers"):
        SubscribeRateLimit.from_json({"subscribeThrottlingRatePerConsumers": 5})
    for value in (publish(100, 2048), subscribe(3, 10)):
        kind = PUBLISH_RATE if isinstance(value, PublishRateLimit) else SUBSCRIBE_RATE
        assert value_from_json(kind, value_to_json(value)) == value


@pytest.mark.parametrize(
    ("model", "body", "reason"),
    [
        (PublishRateLimit, [1, 2], "PublishRate body must be a JSON object"),
        (PublishRateLimit, {"publishThrottlingRateInMsg": "10"}, "publishThrottlingRateInMsg"),
        (PublishRateLimit, {"publishThrottlingRateInMsg": 1.5}, "publishThrottlingRateInMsg"),
        (PublishRateLimit, {"publishThrottlingRateInByte": -2}, "publishThrottlingRateInByte"),
        (PublishRateLimit, {"publishThrottlingRateInMsg": 2**31}, "publishThrottlingRateInMsg"),
        (SubscribeRateLimit, "3", "SubscribeRate body must be a JSON object"),
        (SubscribeRateLimit, {"subscribeThrottlingRatePerConsumer": True}, "PerConsumer"),
        (SubscribeRateLimit, {"ratePeriodInSecond": 0}, "ratePeriodInSecond"),
    ],
)
def test_bad_bodies_are_refused_with_the_field_named(model, body, reason):
    with pytest.raises(InvalidInput) as refused:
        model.from_json(body)
    assert reason in str(refused.value)


def test_defaults_limit_nothing_and_come_from_the_broker():
    rates = resolve_flow(FlowInputs()).rates
    assert (rates.publish_msg, rates.publish_byte) == (0, 0)
    assert rates.subscribes == (0, 30)
    assert rates.publish_rate.source is Level.BROKER
    assert rates.subscribe_rate.source is Level.BROKER


@pytest.mark.parametrize(
    ("broker", "namespace", "topic", "expected", "source"),
    [
        # Each level wins over the ones below it.
        ({}, None, None, (0, 0), Level.BROKER),
        ({"maxPublishRatePerTopicInMessages": "50"}, None, None, (50, 0), Level.BROKER),
        ({"maxPublishRatePerTopicInMessages": "50"}, (20, -1), None, (20, 0), Level.NAMESPACE),
        ({}, (20, -1), (-1, 4096), (0, 4096), Level.TOPIC),
        # A rate that limits nothing is unset: the level below applies (Pulsar's normalize).
        ({}, (20, -1), (-1, -1), (20, 0), Level.NAMESPACE),
        ({"maxPublishRatePerTopicInBytes": "999"}, (0, 0), (-1, 0), (0, 999), Level.BROKER),
        # The broker's own value is taken as it is; -1 there also means no limit.
        ({"maxPublishRatePerTopicInMessages": "-1"}, None, None, (0, 0), Level.BROKER),
    ],
)
def test_publish_rate_precedence(broker, namespace, topic, expected, source):
    rates = resolve_client_rates(levels(broker, PUBLISH_RATE, publish, namespace, topic))
    assert (rates.publish_msg, rates.publish_byte) == expected
    assert rates.publish_rate.source is source


@pytest.mark.parametrize(
    ("broker", "namespace", "topic", "expected", "source"),
    [
        ({"subscribeThrottlingRatePerConsumer": "4"}, None, None, (4, 30), Level.BROKER),
        (
            {
                "subscribeThrottlingRatePerConsumer": "4",
                "subscribeRatePeriodPerConsumerInSecond": "10",
            },
            None,
            None,
            (4, 10),
            Level.BROKER,
        ),
        ({"subscribeThrottlingRatePerConsumer": "4"}, (2, 5), None, (2, 5), Level.NAMESPACE),
        ({}, (2, 5), (7, 60), (7, 60), Level.TOPIC),
        # Unset (rate <= 0) falls through, whatever its period.
        ({}, (2, 5), (0, 60), (2, 5), Level.NAMESPACE),
        ({"subscribeThrottlingRatePerConsumer": "4"}, (-1, 5), (-1, 9), (4, 30), Level.BROKER),
    ],
)
def test_subscribe_rate_precedence(broker, namespace, topic, expected, source):
    rates = resolve_client_rates(levels(broker, SUBSCRIBE_RATE, subscribe, namespace, topic))
    assert rates.subscribes == expected
    assert rates.subscribe_rate.source is source
